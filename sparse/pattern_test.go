package sparse

import (
	"strings"
	"testing"
)

func TestParsePattern(t *testing.T) {
	for _, tc := range []struct {
		in   string
		want Pattern
		err  string
	}{
		{"2:4", Pattern{Kind: NM, N: 2, M: 4}, ""},
		{"4:8", Pattern{Kind: NM, N: 4, M: 8}, ""},
		{"block32", Pattern{Kind: Block, B: 32}, ""},
		{"channel", Pattern{Kind: Channel}, ""},
		{"head", Pattern{Kind: Head}, ""},
		{"neuron", Pattern{Kind: Neuron}, ""},
		{"layer", Pattern{Kind: Layer}, ""},
		{"4:4", Pattern{}, "1 ≤ N < M"},
		{"0:4", Pattern{}, "1 ≤ N < M"},
		{"2:x", Pattern{}, "N:M"},
		{"2:99999", Pattern{}, "N:M"},
		{"block0", Pattern{}, "blockB"},
		{"block", Pattern{}, "blockB"},
		{"rows", Pattern{}, "unknown pattern"},
	} {
		got, err := ParsePattern(tc.in)
		if tc.err != "" {
			if err == nil || !strings.Contains(err.Error(), tc.err) {
				t.Errorf("%q: error %v, want %q", tc.in, err, tc.err)
			}
			continue
		}
		if err != nil || got != tc.want {
			t.Errorf("%q: %+v, %v", tc.in, got, err)
		}
		if got.String() != tc.in {
			t.Errorf("%q prints as %q", tc.in, got.String())
		}
	}
}

func TestParseTarget(t *testing.T) {
	tg, err := ParseTarget("blk.*.ffn_*=0.5")
	if err != nil || tg.Pattern != "blk.*.ffn_*" || tg.Sparsity != 0.5 {
		t.Fatalf("%+v %v", tg, err)
	}
	for _, bad := range []string{"blk.*", "=0.5", "x=", "x=1", "x=-0.1", "x=NaN", "[=0.5", "x=half"} {
		if _, err := ParseTarget(bad); err == nil {
			t.Errorf("%q accepted", bad)
		}
	}
	if _, err := ParseMethod("wanda"); err != nil {
		t.Error(err)
	}
	if _, err := ParseMethod("random"); err == nil {
		t.Error("random accepted")
	}
}
