package golden

import (
	"bufio"
	"bytes"
	"fmt"
	"strconv"
	"strings"
)

// MaxPromptLine bounds one line of a prompts file (a long prompt given as
// ids or text fits easily).
const MaxPromptLine = 16 << 20

// ParsePrompts reads a prompts file: one prompt per line, either text,
// tokenized with encode, or "ids: 1 2 3" (ids separated by spaces or
// commas). Blank lines and lines starting with '#' are skipped. encode may
// be nil for a model without a tokenizer; a text line is then an error.
// Prompts are named after their line numbers ("line 3").
func ParsePrompts(data []byte, name string, encode func(string) ([]int32, error)) ([]Prompt, error) {
	sc := bufio.NewScanner(bytes.NewReader(data))
	sc.Buffer(nil, MaxPromptLine)
	var out []Prompt
	for ln := 1; sc.Scan(); ln++ {
		line := strings.TrimRight(sc.Text(), "\r")
		trim := strings.TrimSpace(line)
		if trim == "" || strings.HasPrefix(trim, "#") {
			continue
		}
		p := Prompt{Name: fmt.Sprintf("line %d", ln)}
		if rest, ok := strings.CutPrefix(trim, "ids:"); ok {
			ids, err := ParseIDs(rest)
			if err != nil {
				return nil, fmt.Errorf("golden: %s:%d: %w", name, ln, err)
			}
			p.IDs = ids
		} else {
			if encode == nil {
				return nil, fmt.Errorf("golden: %s:%d: a text prompt, but the model has no tokenizer (write the prompt as \"ids: 1 2 3\")", name, ln)
			}
			ids, err := encode(line)
			if err != nil {
				return nil, fmt.Errorf("golden: %s:%d: %w", name, ln, err)
			}
			p.Text, p.IDs = line, ids
		}
		if len(p.IDs) == 0 {
			return nil, fmt.Errorf("golden: %s:%d: prompt has no tokens", name, ln)
		}
		out = append(out, p)
	}
	if err := sc.Err(); err != nil {
		return nil, fmt.Errorf("golden: %s: %w", name, err)
	}
	if len(out) == 0 {
		return nil, fmt.Errorf("golden: %s: no prompts", name)
	}
	return out, nil
}

// ParseIDs parses token ids separated by spaces or commas.
func ParseIDs(s string) ([]int32, error) {
	fields := strings.FieldsFunc(s, func(r rune) bool { return r == ',' || r == ' ' || r == '\t' })
	ids := make([]int32, 0, len(fields))
	for _, f := range fields {
		v, err := strconv.ParseInt(f, 10, 32)
		if err != nil || v < 0 {
			return nil, fmt.Errorf("%q is not a token id", f)
		}
		ids = append(ids, int32(v))
	}
	if len(ids) == 0 {
		return nil, fmt.Errorf("no token ids")
	}
	return ids, nil
}
