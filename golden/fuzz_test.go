package golden

import (
	"errors"
	"strings"
	"testing"
)

// FuzzParse: any bytes either parse into a file that passes validation
// again after a write-and-read, or give an error naming the file.
func FuzzParse(f *testing.F) {
	f.Add([]byte(`{"version":1,"model":{"path":"m","arch":"llama","sha256":"ab"},"settings":{"decoding":"greedy","steps":2,"top_k":1,"producer":"x"},"prompts":[{"name":"a","ids":[1,2],"expected":[3,4],"top_k":[[{"id":3,"logit":1.5}],[{"id":4,"logit":-2}]]}]}`))
	f.Add([]byte(`{"version":2}`))
	f.Add([]byte(`{"version":1,"model":{"sha256":"x"},"prompts":[{"ids":[]}]}`))
	f.Add([]byte(`{"version":1,"model":{"sha256":"x"},"prompts":[{"ids":[-1],"expected":[1]}]}`))
	f.Add([]byte(`{"version":1,"extra":1}`))
	f.Fuzz(func(t *testing.T, b []byte) {
		g, err := Parse(b, "fuzz.json")
		if err != nil {
			if !strings.Contains(err.Error(), "fuzz.json") {
				t.Fatalf("error does not name the file: %v", err)
			}
			return
		}
		if len(g.Prompts) == 0 {
			t.Fatal("a file without prompts accepted")
		}
		for _, p := range g.Prompts {
			if len(p.IDs) == 0 || len(p.Expected) == 0 || (len(p.TopK) != 0 && len(p.TopK) != len(p.Expected)) ||
				(g.Settings.TopK > 0 && len(p.TopK) != len(p.Expected)) {
				t.Fatalf("invalid prompt accepted: %+v", p)
			}
			for _, top := range p.TopK {
				if len(top) < g.Settings.TopK {
					t.Fatalf("top-k list of %d accepted, %d declared", len(top), g.Settings.TopK)
				}
			}
		}
	})
}

// FuzzParsePrompts: prompt files parse into non-empty prompts with
// non-negative ids, or give an error naming the file.
func FuzzParsePrompts(f *testing.F) {
	f.Add([]byte("ids: 1 2 3\nhello world\n# comment\n\nids: 4,5\n"))
	f.Add([]byte("ids: -1\n"))
	f.Add([]byte("ids:\n"))
	f.Add([]byte("ids: 99999999999\n"))
	f.Add([]byte("\n\n"))
	f.Add([]byte("text\r\n"))
	enc := func(s string) ([]int32, error) {
		if strings.Contains(s, "!") {
			return nil, errors.New("cannot encode")
		}
		ids := make([]int32, len(s))
		for i := range s {
			ids[i] = int32(s[i])
		}
		return ids, nil
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		for _, e := range []func(string) ([]int32, error){enc, nil} {
			ps, err := ParsePrompts(b, "p.txt", e)
			if err != nil {
				if !strings.Contains(err.Error(), "p.txt") {
					t.Fatalf("error does not name the file: %v", err)
				}
				continue
			}
			for _, p := range ps {
				if len(p.IDs) == 0 {
					t.Fatalf("empty prompt accepted")
				}
				for _, id := range p.IDs {
					if id < 0 {
						t.Fatalf("negative id accepted")
					}
				}
			}
		}
	})
}

func TestParsePrompts(t *testing.T) {
	enc := func(s string) ([]int32, error) { return []int32{int32(len(s))}, nil }
	ps, err := ParsePrompts([]byte("# header\nids: 1 2, 3\n\nOnce upon a time\n"), "p.txt", enc)
	if err != nil {
		t.Fatal(err)
	}
	if len(ps) != 2 || ps[0].Name != "line 2" || len(ps[0].IDs) != 3 || ps[0].IDs[2] != 3 || ps[1].Text != "Once upon a time" || ps[1].IDs[0] != 16 {
		t.Fatalf("%+v", ps)
	}
	for _, tc := range []struct{ in, want string }{
		{"hello\n", "no tokenizer"},
		{"ids: 1 x\n", `p.txt:1: "x" is not a token id`},
		{"# only\n", "no prompts"},
	} {
		if _, err := ParsePrompts([]byte(tc.in), "p.txt", nil); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%q: error %v, want %q", tc.in, err, tc.want)
		}
	}
}
