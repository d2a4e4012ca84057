package golden

import (
	"strings"
	"testing"
)

// TestParseRejects: a golden file that could make a verdict pass on
// nothing is rejected when read, naming the file and the prompt.
func TestParseRejects(t *testing.T) {
	const head = `{"version":1,"model":{"path":"m","arch":"llama","sha256":"ab"},"settings":{"decoding":"greedy","steps":2,"top_k":2,"producer":"x"},`
	top := `"top_k":[[{"id":3,"logit":1.5},{"id":4,"logit":1}],[{"id":4,"logit":-2},{"id":3,"logit":-3}]]`
	for _, c := range []struct {
		name, body, want string
	}{
		{"valid", `"prompts":[{"name":"a","ids":[1],"expected":[3,4],` + top + `}]}`, ""},
		{"no prompts", `"prompts":[]}`, "no prompts"},
		{"prompts missing", `"version":1}`, "no prompts"},
		{"no expected tokens", `"prompts":[{"name":"a","ids":[1],"expected":[3,4],` + top + `},{"name":"b","ids":[1],"expected":[]}]}`, "prompt 1 (b) has no expected tokens"},
		{"top-k missing", `"prompts":[{"name":"a","ids":[1],"expected":[3,4]}]}`, "prompt 0 (a): 0 top-k steps for 2 expected tokens"},
		{"top-k short", `"prompts":[{"name":"a","ids":[1],"expected":[3,4],"top_k":[[{"id":3,"logit":1.5}],[{"id":4,"logit":-2},{"id":3,"logit":-3}]]}]}`, "prompt 0 (a), step 0: 1 top-k logits, settings.top_k declares 2"},
	} {
		t.Run(c.name, func(t *testing.T) {
			_, err := Parse([]byte(head+c.body), "g.json")
			if c.want == "" {
				if err != nil {
					t.Fatal(err)
				}
				return
			}
			if err == nil || !strings.Contains(err.Error(), "g.json") || !strings.Contains(err.Error(), c.want) {
				t.Fatalf("error %v, want one naming g.json and %q", err, c.want)
			}
		})
	}
}

// TestCheckContext: a prompt and its expected tokens that do not fit the
// model's context are rejected, naming the file and the prompt index.
func TestCheckContext(t *testing.T) {
	f, err := Parse([]byte(`{"version":1,"model":{"sha256":"ab"},"settings":{},"prompts":[{"name":"a","ids":[1,2],"expected":[3]},{"name":"b","ids":[1,2,3,4],"expected":[5,6,7]}]}`), "g.json")
	if err != nil {
		t.Fatal(err)
	}
	if err := f.CheckContext(6); err != nil {
		t.Fatal(err)
	}
	err = f.CheckContext(5)
	if err == nil || !strings.Contains(err.Error(), "g.json: prompt 1 (b)") {
		t.Fatalf("context 5: %v", err)
	}
}

// TestKVWarning: only a difference in --kv-f16 is warned about.
func TestKVWarning(t *testing.T) {
	for _, c := range []struct{ golden, artifact, warn bool }{{false, false, false}, {true, true, false}, {true, false, true}, {false, true, true}} {
		f := &File{Settings: Settings{KVF16: c.golden}}
		if w := KVWarning(f, c.artifact); (w != "") != c.warn {
			t.Errorf("golden kv_f16 %v, artifact %v: warning %q", c.golden, c.artifact, w)
		}
	}
}
