package golden

import "fmt"

// Degeneration is a finding that an output stopped saying anything: one
// token or a short cycle of tokens repeating.
type Degeneration struct {
	Kind    string  `json:"kind"`    // "repeat" (period 1) or "cycle"
	Cycle   []int32 `json:"cycle"`   // the repeating unit
	Start   int     `json:"start"`   // index in the output where the run starts
	Repeats int     `json:"repeats"` // whole repetitions of the unit
}

func (d *Degeneration) String() string {
	if d == nil {
		return ""
	}
	return fmt.Sprintf("%s of %v × %d from step %d", d.Kind, d.Cycle, d.Repeats, d.Start)
}

// Thresholds say when a repetition counts as degeneration.
type Thresholds struct {
	MaxPeriod  int // longest cycle looked for
	MinRepeats int // a unit of period 1 must repeat this often …
	MinTokens  int // … and any cycle must cover at least this many tokens
}

// DefaultThresholds flag a token repeated 16 times or a cycle of up to 8
// tokens covering 32 tokens: far beyond what natural text does, far below
// the 128 × "/" seen on device.
var DefaultThresholds = Thresholds{MaxPeriod: 8, MinRepeats: 16, MinTokens: 32}

// DetectRepetition returns the longest run (in tokens) of a repeating unit
// of period ≤ MaxPeriod that passes the thresholds, or nil.
func DetectRepetition(ids []int32, th Thresholds) *Degeneration {
	var best *Degeneration
	bestLen := 0
	for p := 1; p <= th.MaxPeriod && p <= len(ids)/2; p++ {
		// run counts how many tokens in a row equal the token p earlier.
		run := 0
		for i := p; i <= len(ids); i++ {
			if i < len(ids) && ids[i] == ids[i-p] {
				run++
				continue
			}
			total := run + p // tokens covered by the periodic stretch
			reps := total / p
			if (p > 1 || reps >= th.MinRepeats) && total >= th.MinTokens && reps >= 2 && total > bestLen {
				start := i - total
				unit := minimalPeriod(ids[start : start+p])
				kind := "cycle"
				if len(unit) == 1 {
					kind = "repeat"
				}
				if len(unit) == p {
					best = &Degeneration{Kind: kind, Cycle: append([]int32(nil), unit...), Start: start, Repeats: reps}
					bestLen = total
				}
			}
			run = 0
		}
	}
	return best
}

// minimalPeriod returns the shortest unit u with unit = u repeated.
func minimalPeriod(unit []int32) []int32 {
	for q := 1; q < len(unit); q++ {
		if len(unit)%q != 0 {
			continue
		}
		ok := true
		for i := q; i < len(unit); i++ {
			if unit[i] != unit[i-q] {
				ok = false
				break
			}
		}
		if ok {
			return unit[:q]
		}
	}
	return unit
}

// Collapsed reports degeneration in got that expected does not share: got
// repeats (per th) and expected has no repetition at least as long.
func Collapsed(got, expected []int32, th Thresholds) *Degeneration {
	d := DetectRepetition(got, th)
	if d == nil {
		return nil
	}
	if e := DetectRepetition(expected, th); e != nil && e.Repeats*len(e.Cycle) >= d.Repeats*len(d.Cycle) {
		return nil // the reference itself loops this much: not a regression
	}
	return d
}
