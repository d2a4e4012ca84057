package tokenizer

import (
	"encoding/binary"
	"fmt"
	"math"
	"os"
	"strings"
)

// FromLlama2c reads a llama2.c tokenizer (tokenizer.bin, tok512.bin): a
// uint32 max_token_length, then per token a float32 score, an int32 length
// and the bytes. The file does not store the token count; vocabSize comes
// from the model header (0 reads tokens until the end of the file).
//
// llama2.c's exporter wrote the pieces for printing: ▁ turned into a space,
// BOS/EOS as "\n<s>\n" and "\n</s>\n". This undoes that the way llama.cpp's
// llama2.c converter does: id 0 is <unk> (unknown), 1 <s> and 2 </s>
// (control), empty pieces are control, <0xXX> pieces are byte tokens, the
// rest normal, and every space becomes ▁. The result is an SPM vocab with
// BOS 1, EOS 2, UNK 0 that adds BOS and a space prefix.
func FromLlama2c(path string, vocabSize int) (*Vocab, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("tokenizer: %w", err)
	}
	v, err := parseLlama2c(data, vocabSize)
	if err != nil {
		return nil, fmt.Errorf("tokenizer: %s: %w", path, err)
	}
	return v, nil
}

func parseLlama2c(data []byte, vocabSize int) (*Vocab, error) {
	if vocabSize < 0 {
		return nil, fmt.Errorf("negative vocab size %d", vocabSize)
	}
	if len(data) < 4 {
		return nil, fmt.Errorf("%d bytes: too short for the max_token_length header", len(data))
	}
	maxLen := binary.LittleEndian.Uint32(data)
	off := 4
	// Each token takes at least 8 bytes, which bounds the allocation.
	if vocabSize > (len(data)-off)/8 {
		return nil, fmt.Errorf("%d tokens expected but the file has room for at most %d", vocabSize, (len(data)-off)/8)
	}
	v := &Vocab{
		Model: ModelSPM, Pre: "default",
		BOS: 1, EOS: 2, UNK: 0, PAD: -1,
		AddBOS: true, AddSpacePrefix: true,
	}
	if vocabSize > 0 {
		v.Tokens = make([]string, 0, vocabSize)
		v.Scores = make([]float32, 0, vocabSize)
		v.Types = make([]int32, 0, vocabSize)
	}
	for i := 0; vocabSize == 0 && off < len(data) || i < vocabSize; i++ {
		if len(data)-off < 8 {
			return nil, fmt.Errorf("token %d at offset %d: truncated (score and length need 8 bytes, %d left)", i, off, len(data)-off)
		}
		score := math.Float32frombits(binary.LittleEndian.Uint32(data[off:]))
		n := int32(binary.LittleEndian.Uint32(data[off+4:]))
		off += 8
		if n < 0 || uint32(n) > maxLen && maxLen > 0 || int(n) > len(data)-off {
			return nil, fmt.Errorf("token %d at offset %d: length %d invalid (max_token_length %d, %d bytes left)", i, off-4, n, maxLen, len(data)-off)
		}
		text := string(data[off : off+int(n)])
		off += int(n)
		typ := TypeNormal
		switch {
		case i == 0:
			text, typ = "<unk>", TypeUnknown
		case i == 1:
			text, typ = "<s>", TypeControl
		case i == 2:
			text, typ = "</s>", TypeControl
		case text == "":
			typ = TypeControl
		default:
			if _, ok := parseByteToken(text); ok {
				typ = TypeByte
			}
		}
		v.Tokens = append(v.Tokens, strings.ReplaceAll(text, " ", "▁"))
		v.Scores = append(v.Scores, score)
		v.Types = append(v.Types, typ)
	}
	if len(v.Tokens) < 3 {
		return nil, fmt.Errorf("%d tokens: a llama2.c vocab needs at least <unk>, <s> and </s>", len(v.Tokens))
	}
	if err := v.validate(); err != nil {
		return nil, err
	}
	return v, nil
}
