package bench

import (
	"bytes"
	"encoding/json"
	"testing"
)

func FuzzParseFault(f *testing.F) {
	for _, s := range []string{"blk.0.ffn_down.weight=1.01", "*=0", "x", "=1", "[=2", "a=NaN", "a=1e40"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		ft, err := ParseFault(s)
		if err != nil {
			return
		}
		if g, err := ParseFault(ft.String()); err != nil || g.Tensor != ft.Tensor {
			t.Fatalf("%q → %v → %v, %v", s, ft, g, err)
		}
	})
}

// FuzzDecodeSuite: saved JSON is decoded strictly; whatever decodes can
// be rendered as a table, CSV and plot without a panic.
func FuzzDecodeSuite(f *testing.F) {
	var b bytes.Buffer
	NewSuite([]*Report{fakeReport()}, nil).WriteJSON(&b)
	f.Add(b.Bytes())
	conv, _ := json.Marshal(NewSuite(nil, []*ConvertReport{{Source: "a", Recipe: "q1", Stages: []Stage{{Name: "read"}}}}))
	f.Add(conv)
	f.Add([]byte(`{"schema":"` + SchemaID + `","reports":[null],"conversions":[]}`))
	f.Add([]byte(`{}`))
	f.Fuzz(func(t *testing.T, data []byte) {
		s, err := decodeSuite(data, "fuzz.json")
		if err != nil {
			return
		}
		var out bytes.Buffer
		if err := s.WriteTable(&out); err != nil {
			t.Fatal(err)
		}
		if err := s.WriteCSV(&out); err != nil {
			t.Fatal(err)
		}
		Plot(&out, "svg", s) // "nothing to plot" is fine
	})
}
