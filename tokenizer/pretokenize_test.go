package tokenizer

import (
	"slices"
	"testing"
)

// Splits worked out by hand from the regexes (model-architectures.md §8.2
// and the HF pre-tokenizer definitions), leftmost-first with backtracking.
func TestPreTokenize(t *testing.T) {
	for _, c := range []struct {
		pre, text string
		want      []string
	}{
		{"qwen2", "a   b", []string{"a", "  ", " b"}}, // the reference's example for \s+(?!\S)
		{"qwen2", "Hello, world!", []string{"Hello", ",", " world", "!"}},
		{"qwen2", "x\n\n  y", []string{"x", "\n\n", " ", " y"}},
		{"qwen2", " !!!\n\nx", []string{" !!!\n\n", "x"}},
		{"qwen2", "123", []string{"1", "2", "3"}},
		{"qwen2", "I'VE it's", []string{"I", "'VE", " it", "'s"}},
		{"qwen2", "x\u0301y", []string{"x", "\u0301y"}}, // a mark is not \p{L}: it is the optional prefix
		{"qwen2", "e\u0301", []string{"\u00e9"}},        // NFC first
		{"qwen2", "\tfoo", []string{"\tfoo"}},
		{"qwen2", "a \n", []string{"a", " \n"}},
		{"qwen2", "a  ", []string{"a", "  "}},
		{"qwen2", "\xff\xfeab", []string{"\xff\xfe", "ab"}}, // invalid bytes: kept, classed as symbols
		{"qwen35", "e\u0301x re\u0301", []string{"e\u0301x", " re\u0301"}},
		{"qwen35", "\u0301\u0301!", []string{"\u0301\u0301", "!"}},
		{"llama-bpe", "12345", []string{"123", "45"}},
		{"llama-bpe", "x1234567", []string{"x", "123", "456", "7"}},
		{"gpt-2", "I'VE it's", []string{"I", "'", "VE", " it", "'s"}},
		{"gpt-2", "  hi", []string{" ", " hi"}},
		{"gpt-2", "a  \n", []string{"a", "  \n"}},
		{"gpt-2", " 123abc", []string{" 123", "abc"}},
		{"starcoder", "ab12 3", []string{"ab", "1", "2", " ", "3"}},
		{"falcon", "x=1234", []string{"x", "=", "123", "4"}},
		{"deepseek-coder", "ab\n12 cd", []string{"ab", "\n", "1", "2", " cd"}},
	} {
		got := preTokenizers[c.pre].split(c.text, new(state))
		if !slices.Equal(got, c.want) {
			t.Errorf("%s %q: got %q, want %q", c.pre, c.text, got, c.want)
		}
	}
}
