package onnx

import (
	"bytes"
	"encoding/json"
	"fmt"
	"math"
	"os"
	"slices"
	"strconv"
	"strings"

	"github.com/qnnprep/qnnprep/internal/atomicfile"
)

// CalibrationVersion is the version of the ranges file Calibration.Write
// writes.
const CalibrationVersion = 1

// Calibration is a ranges file: the activation range of every encoding
// group and where it came from (the text's SHA-256, the model's
// fingerprint, the settings), so that a file can be traced to the run that
// made it and the same run gives the same bytes.
//
// ReadCalibration also reads the older flat form, {"group": [min, max]},
// which carries ranges only.
type Calibration struct {
	Version  int              `json:"version"`
	Model    CalibModel       `json:"model"`
	Text     *CalibText       `json:"text,omitempty"` // nil: not calibrated from text
	Settings CalibSettings    `json:"settings"`
	Ranges   map[string]Range `json:"ranges"`
}

// CalibModel identifies the model calibrated.
type CalibModel struct {
	Arch string `json:"arch"`
	// SHA256 is the model's fingerprint (quantize.Fingerprint: its tensors,
	// not its file).
	SHA256 string `json:"sha256"`
}

// CalibText identifies the calibration text.
type CalibText struct {
	SHA256 string `json:"sha256"` // of the file's bytes
	Bytes  int64  `json:"bytes"`
}

// CalibSettings are the settings a Calibration was made with.
type CalibSettings struct {
	// Source is "text" (samples from a text file) or "greedy" (a greedy
	// decode from the given ids or BOS).
	Source string `json:"source"`
	// Split is how the text became samples: "lines" (one sample per
	// non-empty line) or "windows" (the whole file's tokens cut into
	// consecutive windows of Len tokens). Empty for greedy.
	Split   string `json:"split,omitempty"`
	Samples int    `json:"samples"` // samples used
	Len     int    `json:"len"`     // tokens per sample at most (greedy: tokens decoded)
	Tokens  int    `json:"tokens"`  // tokens run through the model in all
	// BOS says each sample starts with the model's BOS token.
	BOS  bool   `json:"bos"`
	Stat string `json:"stat"` // the Stat the ranges were taken by
}

// MarshalJSON writes a Range as [min, max], each the shortest decimal
// that reads back as the same float32.
func (r Range) MarshalJSON() ([]byte, error) {
	for _, v := range []float32{r.Min, r.Max} {
		if math.IsNaN(float64(v)) || math.IsInf(float64(v), 0) {
			return nil, fmt.Errorf("range bound %v is not finite", v)
		}
	}
	b := []byte{'['}
	b = strconv.AppendFloat(b, float64(r.Min), 'g', -1, 32)
	b = append(b, ", "...)
	b = strconv.AppendFloat(b, float64(r.Max), 'g', -1, 32)
	return append(b, ']'), nil
}

// UnmarshalJSON reads [min, max] with finite float32 bounds, min ≤ max.
func (r *Range) UnmarshalJSON(b []byte) error {
	var raw []json.Number
	if err := json.Unmarshal(b, &raw); err != nil {
		return err
	}
	if len(raw) != 2 {
		return fmt.Errorf("want [min, max], got %d numbers", len(raw))
	}
	var v [2]float32
	for i, n := range raw {
		x, err := strconv.ParseFloat(string(n), 32)
		if err != nil {
			return fmt.Errorf("bound %s out of float32 range", n)
		}
		v[i] = float32(x)
	}
	if !(v[0] <= v[1]) {
		return fmt.Errorf("want [min, max] with min ≤ max, got %v", v)
	}
	r.Min, r.Max = v[0], v[1]
	return nil
}

// Write writes c as indented JSON, one group a line in sorted order: the
// same Calibration gives the same bytes.
func (c *Calibration) Write(path string) error {
	b, err := c.marshal()
	if err != nil {
		return fmt.Errorf("onnx: ranges %s: %w", path, err)
	}
	return atomicfile.WriteFile(path, b)
}

func (c *Calibration) marshal() ([]byte, error) {
	head := *c
	head.Ranges = nil
	b, err := json.MarshalIndent(struct {
		*Calibration
		Ranges struct{} `json:"ranges"` // written below, one group a line
	}{Calibration: &head}, "", "  ")
	if err != nil {
		return nil, err
	}
	b = bytes.TrimSuffix(b, []byte("{}\n}"))
	names := make([]string, 0, len(c.Ranges))
	for k := range c.Ranges {
		names = append(names, k)
	}
	slices.Sort(names)
	b = append(b, '{')
	for i, k := range names {
		kb, _ := json.Marshal(k)
		rb, err := c.Ranges[k].MarshalJSON()
		if err != nil {
			return nil, fmt.Errorf("group %s: %w", k, err)
		}
		if i > 0 {
			b = append(b, ',')
		}
		b = append(append(append(append(b, "\n    "...), kb...), ": "...), rb...)
	}
	if len(names) > 0 {
		b = append(b, "\n  "...)
	}
	return append(b, "}\n}\n"...), nil
}

// ReadCalibration reads a ranges file (see Calibration).
func ReadCalibration(path string) (*Calibration, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	return DecodeCalibration(b, path)
}

// DecodeCalibration parses a ranges file; name is used in errors. A file
// with a "version" key is the full form, read strictly; otherwise it is
// the flat form {"group": [min, max], …}.
func DecodeCalibration(data []byte, name string) (*Calibration, error) {
	var top map[string]json.RawMessage
	if err := json.Unmarshal(data, &top); err != nil {
		return nil, fmt.Errorf("onnx: ranges %s: %w", name, err)
	}
	c := &Calibration{}
	if _, full := top["version"]; full {
		dec := json.NewDecoder(bytes.NewReader(data))
		dec.DisallowUnknownFields()
		if err := dec.Decode(c); err != nil {
			return nil, fmt.Errorf("onnx: ranges %s: %w", name, err)
		}
		if c.Version != CalibrationVersion {
			return nil, fmt.Errorf("onnx: ranges %s: version %d, want %d", name, c.Version, CalibrationVersion)
		}
		if c.Ranges == nil {
			return nil, fmt.Errorf("onnx: ranges %s: no \"ranges\" object", name)
		}
		if c.Settings.Stat != "" {
			if _, err := ParseStat(c.Settings.Stat); err != nil {
				return nil, fmt.Errorf("onnx: ranges %s: settings: %w", name, err)
			}
		}
	} else {
		c.Ranges = map[string]Range{}
		// Sorted, so that the error for a file with several bad groups
		// is always the same one.
		keys := make([]string, 0, len(top))
		for k := range top {
			keys = append(keys, k)
		}
		slices.Sort(keys)
		for _, k := range keys {
			var r Range
			if err := json.Unmarshal(top[k], &r); err != nil {
				return nil, fmt.Errorf("onnx: ranges %s: group %q: %w", name, k, err)
			}
			c.Ranges[k] = r
		}
	}
	for k := range c.Ranges {
		if strings.TrimSpace(k) == "" {
			return nil, fmt.Errorf("onnx: ranges %s: empty group name", name)
		}
	}
	return c, nil
}

// Stat is how a group's range is taken from the values it saw:
//
//   - "minmax": the smallest and largest value.
//   - "pNN.N" (50 < NN.N < 100, e.g. "p99.99"): each tail clipped on its
//     own, from the (100 − NN.N)th to the NN.Nth percentile of the
//     values. Percentiles are read from a histogram with one bucket per
//     bfloat16 value (the top 16 bits of the float32), rounded outward to
//     the bucket's edge (at most 2⁻⁷ of the value too wide) and kept
//     within [min, max], so memory stays 512 KiB per group whatever the
//     number of values, and the result does not depend on their order.
//
// Either way the encoding built from a range also covers 0 (activation).
type Stat struct {
	Percentile float64 // 0 for minmax
}

// String is the form ParseStat reads.
func (s Stat) String() string {
	if s.Percentile == 0 {
		return "minmax"
	}
	return "p" + strconv.FormatFloat(s.Percentile, 'f', -1, 64)
}

// ParseStat parses "minmax" or "pNN.N".
func ParseStat(s string) (Stat, error) {
	if s == "minmax" {
		return Stat{}, nil
	}
	if rest, ok := strings.CutPrefix(s, "p"); ok {
		p, err := strconv.ParseFloat(rest, 64)
		if err == nil && p > 50 && p < 100 && !strings.ContainsAny(rest, "eE+-") {
			return Stat{Percentile: p}, nil
		}
	}
	return Stat{}, fmt.Errorf("calibration statistic %q: want minmax or pNN.N with 50 < NN.N < 100 (e.g. p99.99)", s)
}

// RangeCollector gathers the values each encoding group takes and turns
// them into ranges by a Stat. It is not safe for concurrent use.
type RangeCollector struct {
	stat   Stat
	groups map[string]*groupStats
}

type groupStats struct {
	min, max float32
	n        uint64
	hist     []uint64 // by bucketOrder; nil for minmax
}

// NewRangeCollector returns an empty collector for stat.
func NewRangeCollector(stat Stat) *RangeCollector {
	return &RangeCollector{stat: stat, groups: map[string]*groupStats{}}
}

// Add records values v of group. A NaN or infinite value is an error
// naming the group: no encoding can cover it.
func (c *RangeCollector) Add(group string, v []float32) error {
	if len(v) == 0 {
		return nil
	}
	g := c.groups[group]
	if g == nil {
		g = &groupStats{min: float32(math.Inf(1)), max: float32(math.Inf(-1))}
		if c.stat.Percentile > 0 {
			g.hist = make([]uint64, 1<<16)
		}
		c.groups[group] = g
	}
	for i, x := range v {
		if math.IsNaN(float64(x)) || math.IsInf(float64(x), 0) {
			return fmt.Errorf("calibration: group %s: value %d is %v", group, i, x)
		}
		g.min, g.max = min(g.min, x), max(g.max, x)
		if g.hist != nil {
			g.hist[bucketOrder(x)]++
		}
	}
	g.n += uint64(len(v))
	return nil
}

// Ranges returns every group's range by the collector's Stat.
func (c *RangeCollector) Ranges() map[string]Range {
	out := make(map[string]Range, len(c.groups))
	for name, g := range c.groups {
		r := Range{g.min, g.max}
		if g.hist != nil {
			p := c.stat.Percentile / 100
			// The value of rank k (1-based, ascending) for each tail.
			lo := uint64(math.Floor((1-p)*float64(g.n))) + 1
			hi := uint64(math.Ceil(p * float64(g.n)))
			r.Min = max(g.min, bucketLow(rankBucket(g.hist, lo)))
			r.Max = min(g.max, bucketHigh(rankBucket(g.hist, max(hi, 1))))
			if r.Min > r.Max { // a one-bucket group
				r.Min, r.Max = g.min, g.max
			}
		}
		out[name] = r
	}
	return out
}

// bucketOrder maps x to its bfloat16 bucket, numbered in value order.
func bucketOrder(x float32) uint16 {
	k := uint16(math.Float32bits(x) >> 16)
	if k&0x8000 != 0 {
		return ^k
	}
	return k | 0x8000
}

// bucketKey inverts bucketOrder: the top 16 bits of the bucket's floats.
func bucketKey(o uint16) uint32 {
	if o&0x8000 != 0 {
		return uint32(o &^ 0x8000)
	}
	return uint32(^o)
}

// bucketLow and bucketHigh are the smallest and largest float32 of a
// bucket (an infinity for the buckets holding ±Inf and NaNs, which the
// caller's clamp to [min, max] removes).
func bucketLow(o uint16) float32 {
	k := bucketKey(o)
	if k&0x8000 != 0 { // negative: more magnitude bits, smaller value
		return edge(k<<16 | 0xffff)
	}
	return edge(k << 16)
}

func bucketHigh(o uint16) float32 {
	k := bucketKey(o)
	if k&0x8000 != 0 {
		return edge(k << 16)
	}
	return edge(k<<16 | 0xffff)
}

// edge is bits as a float32, a NaN read as the infinity of its sign.
func edge(bits uint32) float32 {
	f := math.Float32frombits(bits)
	if math.IsNaN(float64(f)) {
		return float32(math.Inf(1 - 2*int(bits>>31)))
	}
	return f
}

// rankBucket returns the bucket holding the value of rank k (1-based).
func rankBucket(hist []uint64, k uint64) uint16 {
	var seen uint64
	for o, n := range hist {
		seen += n
		if seen >= k {
			return uint16(o)
		}
	}
	return uint16(len(hist) - 1)
}
