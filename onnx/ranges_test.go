package onnx

import (
	"math"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestParseStat(t *testing.T) {
	for _, tc := range []struct {
		in   string
		want float64
		bad  bool
	}{
		{in: "minmax"},
		{in: "p99.99", want: 99.99},
		{in: "p50.5", want: 50.5},
		{in: "p50", bad: true},
		{in: "p0", bad: true},
		{in: "p100", bad: true},
		{in: "p1e1", bad: true},
		{in: "p-5", bad: true},
		{in: "pNaN", bad: true},
		{in: "max", bad: true},
		{in: "", bad: true},
	} {
		s, err := ParseStat(tc.in)
		if tc.bad {
			assert.Error(t, err, tc.in)
			continue
		}
		require.NoError(t, err, tc.in)
		assert.Equal(t, tc.want, s.Percentile, tc.in)
		assert.Equal(t, tc.in, s.String())
	}
}

func TestRangeCollector(t *testing.T) {
	// 10000 values −1…1 plus two outliers: minmax keeps the outliers,
	// p99.9 clips each tail to about the 10th value from its end.
	v := make([]float32, 10000)
	for i := range v {
		v[i] = -1 + 2*float32(i)/float32(len(v)-1)
	}
	v[17], v[9000] = -40, 55

	for _, tc := range []struct {
		stat     string
		min, max float32
		tol      float64 // relative, for percentiles (bucket resolution)
	}{
		{"minmax", -40, 55, 0},
		{"p99.9", -0.998, 0.998, 1.0 / 128},
	} {
		s, err := ParseStat(tc.stat)
		require.NoError(t, err)
		c := NewRangeCollector(s)
		// Two calls in a different order give the same range.
		require.NoError(t, c.Add("g", v[5000:]))
		require.NoError(t, c.Add("g", v[:5000]))
		r := c.Ranges()["g"]
		if tc.tol == 0 {
			assert.Equal(t, Range{tc.min, tc.max}, r, tc.stat)
			continue
		}
		assert.InEpsilon(t, tc.min, r.Min, tc.tol, tc.stat)
		assert.InEpsilon(t, tc.max, r.Max, tc.tol, tc.stat)
		// Rounded outward: the clipped range still holds the quantile.
		assert.LessOrEqual(t, r.Min, float32(-0.998), tc.stat)
		assert.GreaterOrEqual(t, r.Max, float32(0.998), tc.stat)
	}
}

func TestRangeCollectorEdges(t *testing.T) {
	s, _ := ParseStat("p99")
	c := NewRangeCollector(s)
	require.NoError(t, c.Add("one", []float32{3.25}))
	require.NoError(t, c.Add("neg", []float32{-7, -6, -5}))
	require.NoError(t, c.Add("big", []float32{-math.MaxFloat32, math.MaxFloat32}))
	r := c.Ranges()
	assert.Equal(t, Range{3.25, 3.25}, r["one"])
	assert.Equal(t, Range{-7, -5}, r["neg"])
	assert.Equal(t, Range{-math.MaxFloat32, math.MaxFloat32}, r["big"])

	err := c.Add("bad", []float32{1, float32(math.NaN())})
	require.Error(t, err)
	assert.Contains(t, err.Error(), "group bad")
}

func TestCalibrationFile(t *testing.T) {
	c := &Calibration{
		Version:  CalibrationVersion,
		Model:    CalibModel{Arch: "qwen35", SHA256: strings.Repeat("ab", 32)},
		Text:     &CalibText{SHA256: strings.Repeat("cd", 32), Bytes: 1234},
		Settings: CalibSettings{Source: "text", Split: "lines", Samples: 4, Len: 64, Tokens: 200, BOS: true, Stat: "p99.99"},
		Ranges: map[string]Range{
			"past_key_3":      {-8.5, 9.1},
			"hidden_states_0": {-0.1, 1e-7},
			"logits":          {-3.4028235e+38, 3.4028235e+38},
		},
	}
	dir := t.TempDir()
	a, b := filepath.Join(dir, "a.json"), filepath.Join(dir, "b.json")
	require.NoError(t, c.Write(a))
	require.NoError(t, c.Write(b))
	ab, _ := os.ReadFile(a)
	bb, _ := os.ReadFile(b)
	assert.Equal(t, ab, bb, "same calibration, same bytes")
	// Groups sorted; bounds the shortest float32 decimals.
	assert.Less(t, strings.Index(string(ab), "hidden_states_0"), strings.Index(string(ab), "past_key_3"))
	assert.Contains(t, string(ab), `"past_key_3": [-8.5, 9.1]`)

	back, err := ReadCalibration(a)
	require.NoError(t, err)
	assert.Equal(t, c, back, "exact round trip")

	flat, err := DecodeCalibration([]byte(`{"past_key_3": [-8.5, 9.1]}`), "flat.json")
	require.NoError(t, err)
	assert.Equal(t, map[string]Range{"past_key_3": {-8.5, 9.1}}, flat.Ranges)
	assert.Nil(t, flat.Text)
}

func TestDecodeCalibrationErrors(t *testing.T) {
	for _, tc := range []struct{ in, want string }{
		{`[1, 2]`, "cannot unmarshal"},
		{`{"g": [2, 1]}`, `group "g": want [min, max] with min ≤ max`},
		{`{"g": [1]}`, `group "g": want [min, max], got 1 numbers`},
		{`{"g": [0, 1e39]}`, "out of float32 range"},
		{`{" ": [0, 1]}`, "empty group name"},
		{`{"version": 2, "ranges": {}}`, "version 2, want 1"},
		{`{"version": 1}`, `no "ranges"`},
		{`{"version": 1, "ranges": {}, "extra": 1}`, `unknown field "extra"`},
		{`{"version": 1, "ranges": {}, "settings": {"stat": "p200"}}`, `statistic "p200"`},
	} {
		_, err := DecodeCalibration([]byte(tc.in), "r.json")
		if assert.Error(t, err, tc.in) {
			assert.Contains(t, err.Error(), "r.json", tc.in)
			assert.Contains(t, err.Error(), tc.want, tc.in)
		}
	}
}

func FuzzDecodeCalibration(f *testing.F) {
	f.Add([]byte(`{"past_key_3": [-8.5, 9.1]}`))
	f.Add([]byte(`{"version": 1, "model": {"arch": "llama", "sha256": ""}, "settings": {"source": "greedy", "samples": 1, "len": 16, "tokens": 16, "bos": true, "stat": "minmax"}, "ranges": {"logits": [-1, 2]}}`))
	f.Fuzz(func(t *testing.T, data []byte) {
		c, err := DecodeCalibration(data, "fuzz.json")
		if err != nil {
			return
		}
		for k, r := range c.Ranges {
			if !(r.Min <= r.Max) || strings.TrimSpace(k) == "" {
				t.Fatalf("accepted group %q range %v", k, r)
			}
		}
		if c.Version != 0 {
			// A full file writes and reads back the same.
			path := filepath.Join(t.TempDir(), "r.json")
			if err := c.Write(path); err != nil {
				t.Fatal(err)
			}
			back, err := ReadCalibration(path)
			if err != nil {
				t.Fatal(err)
			}
			if len(back.Ranges) != len(c.Ranges) {
				t.Fatalf("round trip: %d groups, want %d", len(back.Ranges), len(c.Ranges))
			}
		}
	})
}
