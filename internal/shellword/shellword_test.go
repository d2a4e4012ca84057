package shellword

import "testing"

func TestQuote(t *testing.T) {
	for in, want := range map[string]string{
		"/a/b.onnx":   "/a/b.onnx",
		"--x=1,2:@+%": "--x=1,2:@+%",
		"a b":         "'a b'",
		"it's":        `'it'\''s'`,
		"":            "''",
		"$HOME":       "'$HOME'",
		"ü":           "'ü'",
	} {
		if got := Quote(in); got != want {
			t.Errorf("Quote(%q) = %s, want %s", in, got, want)
		}
	}
}
