package shard

import (
	"bytes"
	"encoding/json"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"

	"github.com/qnnprep/qnnprep/gguf"
)

func samplePlans(t testing.TB) map[string]*Plan {
	ssd := Dialog{Type: SSD, ForecastTokenCount: 4, Branches: []int{3, 2}, ForecastPrefix: 16, ForecastPrefixName: "forecast-prefix"}
	build := func(name string, err error, p *Plan) *Plan {
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		return p
	}
	out := map[string]*Plan{}
	p, err := NewPlan(llamaConfig(), Sizes{Layers: uniform(32, 100*mib), Head: 500 * mib, Embed: 500 * mib}, "Llama-3-8B",
		Options{LayersPerStage: 4, AR: []int{128, 32}, CL: []int{2048, 4096}, Dialog: ssd,
			LayerTypes: []gguf.Type{gguf.Q1_0}, ContextSize: 4000})
	out["llama-ssd"] = build("llama-ssd", err, p)
	p, err = NewPlan(qwen35Config(), Sizes{Layers: uniform(24, 10*mib), Head: 100 * mib, Embed: 100 * mib}, "qwen3.5-0.8b", Options{})
	out["qwen35"] = build("qwen35", err, p)
	p, err = NewPlan(llamaConfig(), Sizes{Layers: uniform(32, 100*mib), Head: 500 * mib, Embed: 500 * mib}, "Llama-3-8B",
		Options{LayersPerStage: 8, AR: []int{128, 32}, CL: []int{4096}, Dialog: eagletDialog, EagletHead: eagletHead()})
	out["llama-eaglet"] = build("llama-eaglet", err, p)
	return out
}

func TestEncodeRoundTrip(t *testing.T) {
	dir := t.TempDir()
	for name, p := range samplePlans(t) {
		path := filepath.Join(dir, name+".json")
		if err := WritePlan(path, p); err != nil {
			t.Fatal(err)
		}
		first, _ := os.ReadFile(path)
		q, err := ReadPlan(path)
		if err != nil {
			t.Fatalf("%s: ReadPlan: %v", name, err)
		}
		if !reflect.DeepEqual(p, q) {
			t.Errorf("%s: read plan differs from written plan", name)
		}
		again, err := Encode(q)
		if err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(first, again) {
			t.Errorf("%s: read → write is not byte-identical", name)
		}
		// The pretty-printer only adds whitespace: the compact forms agree.
		var a, b bytes.Buffer
		plain, _ := json.Marshal(p)
		json.Compact(&a, plain)
		json.Compact(&b, first)
		if !bytes.Equal(a.Bytes(), b.Bytes()) {
			t.Errorf("%s: formatted JSON differs from encoding/json's", name)
		}
		if !strings.Contains(string(first), "\n        {\"name\":\"attention_mask\",\"shape\":[1,1,128,") {
			t.Errorf("%s: tensors are not one per line", name)
		}
	}
	// Building twice gives the same bytes.
	a, _ := Encode(samplePlans(t)["llama-ssd"])
	b, _ := Encode(samplePlans(t)["llama-ssd"])
	if !bytes.Equal(a, b) {
		t.Error("same inputs, different plan.json")
	}
}

func TestDecodeErrors(t *testing.T) {
	good, err := Encode(samplePlans(t)["qwen35"])
	if err != nil {
		t.Fatal(err)
	}
	ssdData, err := Encode(samplePlans(t)["llama-ssd"])
	if err != nil {
		t.Fatal(err)
	}
	ssd := string(ssdData)
	tests := []struct {
		name, data, want string
	}{
		{"not json", "plan", "not a plan"},
		{"no version", `{"model":{}}`, `no "version" field`},
		{"future version", `{"version": 3}`, "plan version 3, but this qnnprep reads version 2"},
		{"old version", `{"version": 1}`, "plan version 1, but this qnnprep reads version 2"},
		{"bad container", strings.Replace(string(good), `"container": "4bit"`, `"container": "2bit"`, 1), `container "2bit", want 4bit or 8bit`},
		{"unknown field", strings.Replace(string(good), `"split"`, `"splitt"`, 1), `unknown field "splitt"`},
		{"trailing data", string(good) + "{}", "after top-level value"},
		{"bad stage", strings.Replace(string(good), `"first_layer": 0`, `"first_layer": 1`, 1), "do not continue from layer 0"},
		{"bad dialog", strings.Replace(string(good), `"type":"basic"`, `"type":"beam"`, 1), `unknown dialog type "beam"`},
		{"stale derived", strings.Replace(string(good), `"step_tokens":1`, `"step_tokens":4`, 1), "step_tokens 4"},
		{"stale variant", strings.Replace(string(good), `"n_process":1,`, `"n_process":2,`, 1), "n_process 2, token_history 0, but the dialog gives 0, 1, 0"},
		{"zero dim", strings.Replace(string(good), `"shape":[1,128]`, `"shape":[1,0]`, 1), "dimension 0"},
		{"head parallel", strings.Replace(string(good), `"first_layer": 0`, `"head_parallel": true, "first_layer": 0`, 1), "stage 0: head_parallel is true, but head-parallel stages were removed"},
		{"graph name leaves the directory", strings.ReplaceAll(ssd, `"Llama_3_8B_ar128_cl2048_01_of_08"`, `"../../evil"`), `graph name "../../evil": character '.'`},
		{"graph name with a slash", strings.ReplaceAll(ssd, `"Llama_3_8B_ar128_cl2048_01_of_08"`, `"a/b"`), `graph name "a/b": character '/'`},
		{"empty graph name", strings.ReplaceAll(ssd, `"Llama_3_8B_ar128_cl2048_01_of_08"`, `""`), `graph name "": want 1…200`},
		{"long graph name", strings.ReplaceAll(ssd, `"Llama_3_8B_ar128_cl2048_01_of_08"`, `"`+strings.Repeat("g", 201)+`"`), "want 1…200"},
		{"model name", strings.Replace(ssd, `"name": "Llama_3_8B"`, `"name": "../m"`, 1), `model name "../m"`},
		{"forecast prefix directory", strings.Replace(ssd, `"forecast-prefix-name": "forecast-prefix"`, `"forecast-prefix-name": "../up"`, 1), `forecast-prefix-name name "../up"`},
		{"duplicate graph", strings.ReplaceAll(ssd, `"Llama_3_8B_ar128_cl2048_02_of_08"`, `"Llama_3_8B_ar128_cl2048_01_of_08"`), "listed twice"},
		{"graph of no variant", strings.Replace(ssd, `"ar": 128,
      "cl": 2048,`, `"ar": 64,
      "cl": 2048,`, 1), "AR 64, CL 2048 is not one of the plan's variants"},
		{"two graphs of one stage and variant", strings.Replace(ssd, `"ar": 128,
      "cl": 4096,`, `"ar": 128,
      "cl": 2048,`, 1), "both stage 0 with AR 128, CL 2048"},
		{"unknown rope scaling", strings.Replace(ssd, `"context_length": 8192`, `"context_length": 8192, "rope_scaling": "dynamic"`, 1), `unknown rope_scaling "dynamic"`},
		{"2^40 context", strings.Replace(ssd, `"context_length": 8192`, `"context_length": 1099511627776`, 1), "context_length 1099511627776: want 0…16777216"},
		{"2^40 CL", strings.Replace(ssd, `{"ar":128,"cl":2048,`, `{"ar":128,"cl":1099511627776,`, 1), "CL 1099511627776: want 1…16777216"},
		{"CL above the model's context", strings.Replace(ssd, `"context_length": 8192`, `"context_length": 3000`, 1), "CL 4096: CL above the model's context length 3000"},
		{"negative context size", strings.Replace(ssd, `"context_size": 4000`, `"context_size": -1`, 1), "context_size -1"},
		{"stage lists another stage's graph", strings.Replace(ssd, `"graphs": ["Llama_3_8B_ar128_cl2048_02_of_08"`, `"graphs": ["Llama_3_8B_ar128_cl2048_01_of_08"`, 1), `stage 1 lists graph "Llama_3_8B_ar128_cl2048_01_of_08"`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if tt.data == string(good) || tt.data == ssd {
				t.Fatal("replacement did not apply")
			}
			_, err := Decode([]byte(tt.data), "plan.json")
			if err == nil || !strings.Contains(err.Error(), tt.want) || !strings.Contains(err.Error(), "plan.json") {
				t.Fatalf("err = %v, want it to name plan.json and contain %q", err, tt.want)
			}
		})
	}
}

// TestDecodeLegacyHeadParallel: plans written before head-parallel was
// removed carry "head_parallel": false on every stage; they still read,
// to the same plan as without the field.
func TestDecodeLegacyHeadParallel(t *testing.T) {
	good, err := Encode(samplePlans(t)["llama-ssd"])
	if err != nil {
		t.Fatal(err)
	}
	old := strings.ReplaceAll(string(good), `"first_layer": `, `"head_parallel": false, "first_layer": `)
	if strings.Count(old, "head_parallel") < 2 {
		t.Fatal("replacement did not apply")
	}
	p, err := Decode([]byte(old), "plan.json")
	if err != nil {
		t.Fatal(err)
	}
	again, err := Encode(p)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(again, good) {
		t.Error("a plan with head_parallel false decodes to another plan than without it")
	}
}

// FuzzDecode: any input either fails to decode with an error, or decodes
// to a plan that Check handles and that re-encodes stably.
func FuzzDecode(f *testing.F) {
	for _, p := range samplePlans(f) {
		data, err := Encode(p)
		if err != nil {
			f.Fatal(err)
		}
		f.Add(data)
	}
	f.Add([]byte(`{"version":1}`))
	f.Add([]byte(`{"version":1,"stages":[{"index":0}],"graphs":[{"name":"x","stage":0}]}`))
	f.Fuzz(func(t *testing.T, data []byte) {
		p, err := Decode(data, "fuzz.json")
		if err != nil {
			return
		}
		Check(p, CheckEnv{})
		a, err := Encode(p)
		if err != nil {
			t.Fatal(err)
		}
		q, err := Decode(a, "again.json")
		if err != nil {
			t.Fatalf("re-encoded plan does not decode: %v", err)
		}
		b, _ := Encode(q)
		if !bytes.Equal(a, b) {
			t.Fatal("encode → decode → encode is not stable")
		}
	})
}

func BenchmarkDecodeCheck(b *testing.B) {
	data, _ := Encode(samplePlans(b)["llama-ssd"])
	for b.Loop() {
		p, err := Decode(data, "plan.json")
		if err != nil {
			b.Fatal(err)
		}
		Check(p, CheckEnv{})
	}
}
