package onnx

import (
	"bytes"
	"context"
	_ "embed"
	"encoding/binary"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/santhosh-tekuri/jsonschema/v6"

	"github.com/qnnprep/qnnprep/gguf"
	"github.com/qnnprep/qnnprep/internal/half"
	"github.com/qnnprep/qnnprep/model"
	"github.com/qnnprep/qnnprep/shard"
	"github.com/qnnprep/qnnprep/synth"
	"github.com/qnnprep/qnnprep/testkit/quantized"
)

//go:embed encodings.schema.json
var encodingsSchema []byte

func compileSchema(t *testing.T) *jsonschema.Schema {
	t.Helper()
	doc, err := jsonschema.UnmarshalJSON(bytes.NewReader(encodingsSchema))
	if err != nil {
		t.Fatal(err)
	}
	c := jsonschema.NewCompiler()
	if err := c.AddResource("encodings.schema.json", doc); err != nil {
		t.Fatal(err)
	}
	s, err := c.Compile("encodings.schema.json")
	if err != nil {
		t.Fatal(err)
	}
	return s
}

func validateSchema(t *testing.T, s *jsonschema.Schema, data []byte) error {
	t.Helper()
	inst, err := jsonschema.UnmarshalJSON(bytes.NewReader(data))
	if err != nil {
		return err
	}
	return s.Validate(inst)
}

// qmodel quantizes a synthetic model of arch with recipe.
func qmodel(t *testing.T, arch model.Arch, recipe string) *model.Model {
	t.Helper()
	return quantized.Model(t, tinyModel(t, synth.Config(arch, true), 5), recipe)
}

// externalData reads the raw bytes of every external initializer of an
// exported model from the data file it names, by name.
func externalData(t *testing.T, path string) map[string][]byte {
	t.Helper()
	mp, err := Read(path)
	if err != nil {
		t.Fatal(err)
	}
	files := map[string][]byte{}
	out := map[string][]byte{}
	for _, in := range mp.Graph.Initializer {
		var off, n int64
		var loc string
		for _, kv := range in.ExternalData {
			v, _ := strconv.ParseInt(kv.Value, 10, 64)
			switch kv.Key {
			case "location":
				loc = kv.Value
			case "offset":
				off = v
			case "length":
				n = v
			}
		}
		if loc == "" {
			continue
		}
		if files[loc] == nil {
			b, err := os.ReadFile(filepath.Join(filepath.Dir(path), loc))
			if err != nil {
				t.Fatal(err)
			}
			files[loc] = b
		}
		out[in.Name] = files[loc][off : off+n]
	}
	return out
}

// TestEncodingsRoundTrip quantizes random llama and qwen35 models with
// the q1, int8 and q8_0 recipes, exports every stage with external data,
// reads the weights back from the .data files and the encodings back from
// the JSON (which must validate against encodings.schema.json), and
// re-quantizes every weight with its encoding: the integer codes must be
// the qmodel's, read from its bits (and those codes times the block scale
// must be ggml's dequantized values, so the bit reading is right too).
func TestEncodingsRoundTrip(t *testing.T) {
	schema := compileSchema(t)
	for _, tc := range []struct {
		arch      model.Arch
		recipe    string
		container Container
	}{
		{model.Llama, "q1", Container4Bit},
		{model.Llama, "q1", Container8Bit},
		{model.Llama, "int8", Container4Bit},
		{model.Llama, "q8_0", Container4Bit},
		{model.Qwen35, "q1", Container4Bit},
		{model.Qwen35, "int8", Container4Bit},
	} {
		t.Run(string(tc.arch)+"/"+tc.recipe+"/"+strconv.Itoa(int(tc.container)), func(t *testing.T) {
			m := qmodel(t, tc.arch, tc.recipe)
			p := testPlan(t, m, 2, []int{4}, 16)
			p.Container = tc.container // the exporter takes the plan's
			dir := t.TempDir()
			if _, err := Export(m, p, dir, ExportOptions{External: true}, nil); err != nil {
				t.Fatal(err)
			}
			counts := map[string]int{}
			for _, g := range p.Graphs {
				base := filepath.Join(dir, g.Name)
				raw, err := os.ReadFile(base + ".encodings.json")
				if err != nil {
					t.Fatal(err)
				}
				if err := validateSchema(t, schema, raw); err != nil {
					t.Fatalf("%s.encodings.json: %v", g.Name, err)
				}
				enc, err := DecodeEncodings(raw, g.Name)
				if err != nil {
					t.Fatal(err)
				}
				weights := externalData(t, base+".onnx")
				for _, e := range enc.ParamEncodings {
					src := e.Name
					if src == "output.weight" && m.Tensor(src) == nil {
						src = "token_embd.weight"
					}
					tt := m.Tensor(src)
					if tt == nil {
						t.Fatalf("encoding %s names no model tensor", e.Name)
					}
					checkTensorCodes(t, tt, &e, weights[e.Name], e.Name != "token_embd.weight")
					counts[tt.Type.String()+" "+e.EncType+" bw"+strconv.Itoa(e.BW)]++
				}
				// Every Q1_0/Q2_0/Q8_0 matrix the stage uses has an encoding.
				for name := range weights {
					src := name
					if name == "output.weight" && m.Tensor(name) == nil {
						src = "token_embd.weight"
					}
					if tt := m.Tensor(src); tt != nil && isCoded(tt.Type) && enc.Param(name) == nil {
						t.Errorf("%s: %s (%s) has no encoding", g.Name, name, tt.Type)
					}
				}
				// The attention stage's mask and rope tables are encoded.
				if g.Input(shard.AttentionMask) != nil {
					for _, n := range []string{shard.AttentionMask, shard.PositionIDsCos, shard.PositionIDsSin} {
						if enc.Activation(n) == nil {
							t.Errorf("%s: no activation encoding for %s", g.Name, n)
						}
					}
				}
			}
			t.Logf("encodings checked: %v", counts)
			want := map[string]string{
				"q1":   "Q1_0 PER_BLOCK bw" + strconv.Itoa(int(tc.container)),
				"int8": "Q8_0 PER_CHANNEL bw8",
				"q8_0": "Q8_0 PER_BLOCK bw8",
			}[tc.recipe]
			if counts[want] == 0 {
				t.Errorf("no %s encodings among %v", want, counts)
			}
			if tc.recipe == "q1" && counts["Q2_0 PER_BLOCK bw"+strconv.Itoa(int(tc.container))] == 0 {
				t.Errorf("no Q2_0 head encoding among %v", counts)
			}
		})
	}
}

func isCoded(t gguf.Type) bool { return t == gguf.Q1_0 || t == gguf.Q2_0 || t == gguf.Q8_0 }

// checkTensorCodes re-quantizes the exported float32 weights (MatMul
// layout [in, out] when transposed, else the stored [out, in]) with e and
// compares them with the codes in t's bits.
func checkTensorCodes(t *testing.T, tt *model.Tensor, e *Encoding, raw []byte, transposed bool) {
	t.Helper()
	in, out := int(tt.Dims[0]), int(tt.Rows())
	if len(raw) != 4*in*out {
		t.Fatalf("%s: %d bytes exported, want %d", e.Name, len(raw), 4*in*out)
	}
	data, err := tt.Data()
	if err != nil {
		t.Fatal(err)
	}
	rb, _ := tt.Type.RowBytes(int64(in))
	codes := make([]int8, in)
	deq := make([]float32, in)
	bs, bb := int(tt.Type.BlockSize()), int(tt.Type.BlockBytes())
	for r := 0; r < out; r++ {
		row := data[int64(r)*rb : int64(r+1)*rb]
		if err := Codes(tt, data, r, codes); err != nil {
			t.Fatal(err)
		}
		if err := gguf.Dequantize(tt.Type, row, deq); err != nil {
			t.Fatal(err)
		}
		for c := 0; c < in; c++ {
			d := float32(math.Abs(float64(half.F16ToF32(binary.LittleEndian.Uint16(row[(c/bs)*bb:])))))
			if float32(codes[c])*d != deq[c] {
				t.Fatalf("%s row %d col %d: code %d × scale %v ≠ ggml value %v", tt.Name, r, c, codes[c], d, deq[c])
			}
			lo, hi := int8(-127), int8(127)
			switch tt.Type {
			case gguf.Q1_0:
				lo, hi = -1, 1
			case gguf.Q2_0:
				lo, hi = -2, 2 // −1…2, negated in blocks with a negative scale
			}
			if codes[c] < lo || codes[c] > hi || (tt.Type == gguf.Q1_0 && codes[c] == 0 && d != 0) {
				t.Fatalf("%s row %d col %d: code %d outside %s's range", tt.Name, r, c, codes[c], tt.Type)
			}
			i := r*in + c
			if transposed {
				i = c*out + r
			}
			w := math.Float32frombits(binary.LittleEndian.Uint32(raw[4*i:]))
			si := r
			if e.EncType == PerBlock {
				si = r*(in/e.BlockSize) + c/e.BlockSize
			}
			if got := e.Code(w, si); got != int64(codes[c]) {
				t.Fatalf("%s row %d col %d: exported %v re-quantizes to %d, qmodel code %d", e.Name, r, c, w, got, codes[c])
			}
		}
	}
}

// TestRoundTripCatchesWrongScale: a scale off by a factor of two makes the
// export's own round trip fail, naming the tensor. (Doubling a Q1_0
// scale would not: ±0.5 rounds back to ±1.)
func TestRoundTripCatchesWrongScale(t *testing.T) {
	m := qmodel(t, model.Llama, "q1")
	tt := m.Tensor("blk.0.attn_q.weight")
	e, err := ParamEncoding(tt, Container4Bit)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := matrixBytes(tt, e, true); err != nil {
		t.Fatal(err)
	}
	e.Scale[3] /= 2 // codes ±1 would become ±2
	_, err = matrixBytes(tt, e, true)
	if err == nil || !strings.Contains(err.Error(), "blk.0.attn_q.weight") {
		t.Fatalf("doubled scale: err = %v, want a round-trip error naming the tensor", err)
	}
}

// TestEncodingsSchemaRejects: the schema and the strict reader refuse
// malformed entries.
func TestEncodingsSchemaRejects(t *testing.T) {
	schema := compileSchema(t)
	good := `{"version":"1.0.0","activation_encodings":[],"param_encodings":[` +
		`{"name":"w","dtype":"INT","enc_type":"PER_BLOCK","is_sym":true,"bw":4,"block_size":128,"scale":[0.5],"offset":[-8]}]}`
	if err := validateSchema(t, schema, []byte(good)); err != nil {
		t.Fatalf("good file: %v", err)
	}
	if _, err := DecodeEncodings([]byte(good), "good"); err != nil {
		t.Fatalf("good file: %v", err)
	}
	for name, bad := range map[string]string{
		"version":         `"version":"1.0.0"`,
		"unknown key":     `"is_sym":true`,
		"zero scale":      `"scale":[0.5]`,
		"no block size":   `"block_size":128,`,
		"sym offset":      `"offset":[-8]`,
		"enc type":        `"enc_type":"PER_BLOCK"`,
		"float dtype":     `"dtype":"INT"`,
		"scale as string": `"scale":[0.5]`,
	} {
		repl := map[string]string{
			"version":         `"version":"0.6.1"`,
			"unknown key":     `"is_sym":true,"axis":0`,
			"zero scale":      `"scale":[0]`,
			"no block size":   ``,
			"sym offset":      `"offset":[-7]`,
			"enc type":        `"enc_type":"VECTOR"`,
			"float dtype":     `"dtype":"FLOAT"`,
			"scale as string": `"scale":["0.5"]`,
		}[name]
		doc := strings.Replace(good, bad, repl, 1)
		if doc == good {
			t.Fatalf("%s: replacement did not apply", name)
		}
		if err := validateSchema(t, schema, []byte(doc)); err == nil {
			t.Errorf("%s: schema accepts %s", name, doc)
		}
		if _, err := DecodeEncodings([]byte(doc), name); err == nil {
			t.Errorf("%s: DecodeEncodings accepts %s", name, doc)
		}
	}
}

// FuzzDecodeEncodings: the strict reader never panics, and what it
// accepts writes back and reads again to the same entries.
func FuzzDecodeEncodings(f *testing.F) {
	f.Add([]byte(`{"version":"1.0.0","activation_encodings":[],"param_encodings":[]}`))
	f.Add([]byte(`{"version":"1.0.0","activation_encodings":[{"name":"attention_mask","dtype":"INT","enc_type":"PER_TENSOR","is_sym":false,"bw":16,"scale":[0.0007629510946571827],"offset":[-65535]}],` +
		`"param_encodings":[{"name":"w","dtype":"INT","enc_type":"PER_BLOCK","is_sym":true,"bw":4,"block_size":128,"scale":[0.5,0.25],"offset":[-8,-8]},` +
		`{"name":"v","dtype":"INT","enc_type":"PER_CHANNEL","is_sym":true,"bw":8,"scale":[1e-3],"offset":[-128]}]}`))
	f.Add([]byte(`{"version":"1.0.0","activation_encodings":[],"param_encodings":[{"name":"x","dtype":"INT","enc_type":"PER_TENSOR","is_sym":true,"bw":32,"scale":[3.4e38],"offset":[-2147483648]}]}`))
	f.Add([]byte(`{"version":"1.0.0","activation_encodings":null}`))
	f.Fuzz(func(t *testing.T, data []byte) {
		e, err := DecodeEncodings(data, "fuzz")
		if err != nil {
			return
		}
		var buf bytes.Buffer
		if err := e.Write(&buf); err != nil {
			t.Fatal(err)
		}
		again, err := DecodeEncodings(buf.Bytes(), "again")
		if err != nil {
			t.Fatalf("written encodings do not read back: %v\n%s", err, buf.Bytes())
		}
		var buf2 bytes.Buffer
		if err := again.Write(&buf2); err != nil || !bytes.Equal(buf.Bytes(), buf2.Bytes()) {
			t.Fatalf("write → read → write changed the bytes (%v)", err)
		}
	})
}

// The plan's stage sizes assume its container; exporting in another is
// refused rather than making graphs the plan mis-sized.
func TestExportRefusesOtherContainer(t *testing.T) {
	m := qmodel(t, model.Llama, "q1")
	p := testPlan(t, m, 1, []int{4}, 16)
	_, err := Export(m, p, t.TempDir(), ExportOptions{Options: Options{Container: Container8Bit}}, nil)
	if err == nil || !strings.Contains(err.Error(), "re-plan with --container 8bit") {
		t.Fatalf("err = %v, want a refusal naming --container 8bit", err)
	}
}

// matrixBytes is writeMatrix into memory.
func matrixBytes(t *model.Tensor, enc *Encoding, transpose bool) ([]byte, error) {
	var buf bytes.Buffer
	buf.Grow(int(4 * t.Elements()))
	if err := writeMatrix(context.Background(), &buf, t, enc, transpose); err != nil {
		return nil, err
	}
	return buf.Bytes(), nil
}

// Codes returns the signed integer codes of row r of a Q8_0, Q1_0 or
// Q2_0 tensor (see blockCodes).
func Codes(t *model.Tensor, data []byte, r int, dst []int8) error {
	cols := int(t.Dims[0])
	rb, err := t.Type.RowBytes(int64(cols))
	if err != nil {
		return fmt.Errorf("onnx: tensor %q: %w", t.Name, err)
	}
	return blockCodes(t, data[r*int(rb):(r+1)*int(rb)], dst[:cols])
}
