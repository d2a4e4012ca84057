package sparse

import (
	"fmt"
	"math"
	"path"
	"strconv"
	"strings"
)

// Kind is the family of a sparsity pattern.
type Kind uint8

const (
	NM      Kind = iota // N of every M consecutive inputs kept, per row
	Block               // B×B tiles
	Channel             // hidden channels, model-wide
	Head                // attention query heads
	Neuron              // FFN intermediate units
	Layer               // whole decoder layers
)

var kindNames = [...]string{NM: "N:M", Block: "block", Channel: "channel", Head: "head", Neuron: "neuron", Layer: "layer"}

func (k Kind) String() string {
	if int(k) < len(kindNames) {
		return kindNames[k]
	}
	return fmt.Sprintf("Kind(%d)", k)
}

// Pattern is a parsed --pattern.
type Pattern struct {
	Kind Kind
	N, M int // NM
	B    int // Block
}

// Limits on pattern parameters: far above anything useful, small enough
// that a group or tile never overflows.
const (
	maxM     = 1 << 10
	maxBlock = 1 << 12
)

// ParsePattern parses "N:M" (e.g. 2:4), "blockB" (e.g. block32), "channel",
// "head", "neuron" or "layer".
func ParsePattern(s string) (Pattern, error) {
	switch s {
	case "channel":
		return Pattern{Kind: Channel}, nil
	case "head":
		return Pattern{Kind: Head}, nil
	case "neuron":
		return Pattern{Kind: Neuron}, nil
	case "layer":
		return Pattern{Kind: Layer}, nil
	}
	if n, m, ok := strings.Cut(s, ":"); ok {
		N, err1 := strconv.Atoi(n)
		M, err2 := strconv.Atoi(m)
		if err1 != nil || err2 != nil || N < 1 || M < 2 || N >= M || M > maxM {
			return Pattern{}, fmt.Errorf("pattern %q: want N:M with 1 ≤ N < M ≤ %d, e.g. 2:4", s, maxM)
		}
		return Pattern{Kind: NM, N: N, M: M}, nil
	}
	if b, ok := strings.CutPrefix(s, "block"); ok {
		B, err := strconv.Atoi(b)
		if err != nil || B < 1 || B > maxBlock {
			return Pattern{}, fmt.Errorf("pattern %q: want blockB with 1 ≤ B ≤ %d, e.g. block32", s, maxBlock)
		}
		return Pattern{Kind: Block, B: B}, nil
	}
	return Pattern{}, fmt.Errorf("unknown pattern %q (want N:M such as 2:4, blockB such as block32, channel, head, neuron or layer)", s)
}

func (p Pattern) String() string {
	switch p.Kind {
	case NM:
		return fmt.Sprintf("%d:%d", p.N, p.M)
	case Block:
		return fmt.Sprintf("block%d", p.B)
	}
	return p.Kind.String()
}

// Structural reports whether the pattern removes whole structures that
// Prune can take out physically.
func (p Pattern) Structural() bool { return p.Kind >= Channel }

// Method is how weights are scored.
type Method uint8

const (
	Magnitude Method = iota // |W_ij|
	Wanda                   // |W_ij|·‖X_j‖
)

func (m Method) String() string {
	if m == Wanda {
		return "wanda"
	}
	return "magnitude"
}

// ParseMethod parses "magnitude" or "wanda".
func ParseMethod(s string) (Method, error) {
	switch s {
	case "magnitude":
		return Magnitude, nil
	case "wanda":
		return Wanda, nil
	}
	return 0, fmt.Errorf("unknown selection %q (want magnitude or wanda)", s)
}

// Target sets the sparsity of the tensors whose canonical name matches
// Pattern (a path.Match glob; '*' also matches dots).
type Target struct {
	Pattern  string
	Sparsity float64
}

// ParseTarget parses "PATTERN=S", e.g. "blk.*.ffn_*=0.5".
func ParseTarget(s string) (Target, error) {
	pat, v, ok := strings.Cut(s, "=")
	if !ok || pat == "" || v == "" {
		return Target{}, fmt.Errorf("target %q: want PATTERN=S, e.g. 'blk.*.ffn_*=0.5'", s)
	}
	if _, err := path.Match(pat, ""); err != nil {
		return Target{}, fmt.Errorf("target %q: bad pattern: %w", s, err)
	}
	f, err := strconv.ParseFloat(v, 64)
	if err != nil || !validSparsity(f) {
		return Target{}, fmt.Errorf("target %q: sparsity %q, want a number in [0, 1)", s, v)
	}
	return Target{Pattern: pat, Sparsity: f}, nil
}

func validSparsity(f float64) bool { return f >= 0 && f < 1 && !math.IsNaN(f) }
