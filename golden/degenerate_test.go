package golden

import (
	"reflect"
	"testing"
)

func seq(parts ...[]int32) []int32 {
	var out []int32
	for _, p := range parts {
		out = append(out, p...)
	}
	return out
}

func rep(unit []int32, n int) []int32 {
	var out []int32
	for i := 0; i < n; i++ {
		out = append(out, unit...)
	}
	return out
}

func TestDetectRepetition(t *testing.T) {
	natural := []int32{5, 9, 12, 5, 7, 30, 12, 5, 9, 44, 2, 8, 5, 9, 12, 61}
	cases := []struct {
		name string
		ids  []int32
		want *Degeneration
	}{
		{"natural text", natural, nil},
		{"128 slashes after text", seq(natural, rep([]int32{47}, 128)), &Degeneration{"repeat", []int32{47}, 16, 128}},
		{"15 repeats is below the threshold", seq(natural, rep([]int32{47}, 15)), nil},
		{"cycle of three", seq(natural, rep([]int32{3, 4, 5}, 12)), &Degeneration{"cycle", []int32{3, 4, 5}, 16, 12}},
		{"short cycle too short", seq(natural, rep([]int32{3, 4}, 10)), nil},
		{"cycle reported by its minimal unit", rep([]int32{7, 8}, 40), &Degeneration{"cycle", []int32{7, 8}, 0, 40}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			got := DetectRepetition(c.ids, DefaultThresholds)
			if !reflect.DeepEqual(got, c.want) {
				t.Errorf("got %v, want %v", got, c.want)
			}
		})
	}
}

func TestCollapsedIgnoresLoopsTheGoldenHasToo(t *testing.T) {
	loop := rep([]int32{1, 2, 3, 4}, 10)
	if d := Collapsed(loop, loop, DefaultThresholds); d != nil {
		t.Errorf("same loop as golden flagged: %v", d)
	}
	natural := []int32{5, 9, 12, 5, 7, 30, 12, 5, 9, 44, 2, 8}
	if d := Collapsed(seq(natural, rep([]int32{47}, 40)), natural, DefaultThresholds); d == nil {
		t.Error("collapse not flagged")
	}
}

func TestTopKAndArgmax(t *testing.T) {
	logits := []float32{0.5, 3, -1, 3, 2}
	got := TopK(logits, 3)
	want := []Logit{{1, 3}, {3, 3}, {4, 2}}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("TopK = %v, want %v", got, want)
	}
	if a := Argmax(logits); a != 1 {
		t.Errorf("Argmax = %d, want 1 (lowest index on ties)", a)
	}
}
