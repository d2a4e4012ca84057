package safetensors

import (
	"fmt"
	"runtime"
	"strings"
	"testing"
)

// memoryHeaders builds headers of about n bytes of the shapes that cost
// the most per byte: many tiny tensors, tensors with the most dimensions,
// the most metadata entries, and one long string.
func memoryHeaders(n int) map[string]string {
	entries := func(one func(i int) string) string {
		var b strings.Builder
		b.WriteString("{")
		for i := 0; b.Len() < n; i++ {
			if i > 0 {
				b.WriteString(",")
			}
			b.WriteString(one(i))
		}
		return b.String() + "}"
	}
	dims := strings.Repeat(",1", MaxDims-1)
	meta := fmt.Sprintf(`"v%s"`, strings.Repeat("x", n/MaxMetadata))
	return map[string]string{
		"tiny tensors": entries(func(i int) string { return fmt.Sprintf(`"%d":{"dtype":"U8","shape":[0],"data_offsets":[0,0]}`, i) }),
		"most dims": entries(func(i int) string {
			return fmt.Sprintf(`"%d":{"dtype":"U8","shape":[0%s],"data_offsets":[0,0]}`, i, dims)
		}),
		"escaped names": entries(func(i int) string {
			return fmt.Sprintf(`"\u00e9%d":{"dtype":"U8","shape":[0],"data_offsets":[0,0]}`, i)
		}),
		"metadata": func() string {
			var b strings.Builder
			b.WriteString(`{"__metadata__":{`)
			for i := range MaxMetadata {
				if i > 0 {
					b.WriteString(",")
				}
				fmt.Fprintf(&b, `"k%d":%s`, i, meta)
			}
			return b.String() + "}}"
		}(),
		"one long string": `{"__metadata__":{"k":"` + strings.Repeat("x", n) + `"}}`,
	}
}

// TestHeaderMemory: parsing a header allocates at most 3 times its size
// (so reading one, with the header's own bytes, costs at most 4 times),
// for the headers that cost the most per byte. encoding/json's token API
// cost 19 to 88 times on the same shapes.
func TestHeaderMemory(t *testing.T) {
	if testing.Short() {
		t.Skip("builds 4 MB headers")
	}
	for name, h := range memoryHeaders(4 << 20) {
		t.Run(name, func(t *testing.T) {
			hdr := []byte(h)
			runtime.GC()
			var before, after runtime.MemStats
			runtime.ReadMemStats(&before)
			_, ts, err := parseHeader(hdr, 0)
			runtime.ReadMemStats(&after)
			if err != nil {
				t.Fatal(err)
			}
			alloc := after.TotalAlloc - before.TotalAlloc
			ratio := float64(alloc) / float64(len(hdr))
			t.Logf("%d-byte header, %d tensors: %d bytes allocated (%.2f× the header)", len(hdr), len(ts), alloc, ratio)
			if ratio > 3 {
				t.Errorf("parsing allocated %.2f× the header's size, want at most 3×", ratio)
			}
		})
	}
}
