package sparse

import (
	"strings"
	"testing"
)

// FuzzParsePattern: any input parses to a pattern that prints back to
// itself, or is refused with an error; never a panic.
func FuzzParsePattern(f *testing.F) {
	for _, s := range []string{"2:4", "4:8", "1:1024", "block32", "block4096", "channel", "head", "neuron", "layer", "3:2", ":", "block-1", "2:4:8", "99999999999999999999:2"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		p, err := ParsePattern(s)
		if err != nil {
			return
		}
		q, err := ParsePattern(p.String())
		if err != nil || q != p {
			t.Fatalf("%q → %+v → %q → %+v, %v", s, p, p.String(), q, err)
		}
		if p.Kind == NM && !(p.N >= 1 && p.N < p.M && p.M <= maxM) || p.Kind == Block && !(p.B >= 1 && p.B <= maxBlock) {
			t.Fatalf("%q accepted as %+v", s, p)
		}
	})
}

// FuzzParseTarget: an accepted target has a valid glob and a sparsity in
// [0, 1).
func FuzzParseTarget(f *testing.F) {
	for _, s := range []string{"blk.*.ffn_*=0.5", "x=0", "a=b=0.5", "[=0.1", "*=0.999", "x=1e-300", "x=Inf"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		tg, err := ParseTarget(s)
		if err != nil {
			return
		}
		if !validSparsity(tg.Sparsity) || tg.Pattern == "" || !strings.HasPrefix(s, tg.Pattern) {
			t.Fatalf("%q accepted as %+v", s, tg)
		}
	})
}
