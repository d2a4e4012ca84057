package model

import (
	"bytes"
	"encoding/json"
	"os"
	"reflect"
	"testing"

	"github.com/qnnprep/qnnprep/gguf"
	"github.com/qnnprep/qnnprep/testkit"
)

// FuzzHFConfig: any config.json either fails cleanly or gives a valid
// Config whose GGUF metadata reads back and which, written as config.json
// by its architecture (when it can be), reads back unchanged.
func FuzzHFConfig(f *testing.F) {
	for _, c := range []*hfCkpt{tinyQwen3(), tinyQwen2(), tinyQwen3Next(), tinyQwen35(), tinyLlama3()} {
		js, _ := json.Marshal(c.config)
		f.Add(js)
	}
	for _, rs := range []map[string]any{
		{"rope_type": "yarn", "factor": 4.0, "original_max_position_embeddings": 16, "beta_fast": 32.0},
		{"type": "linear", "factor": 2.0},
	} {
		c := tinyQwen3()
		c.config["rope_scaling"] = rs
		js, _ := json.Marshal(c.config)
		f.Add(js)
	}
	if b, err := os.ReadFile(testkit.Stories(f, "hf/config.json")); err == nil {
		f.Add(b)
	}
	f.Add([]byte(`{"model_type":"qwen3_next","hidden_size":8,"num_hidden_layers":3,"num_attention_heads":2,` +
		`"vocab_size":4,"intermediate_size":8,"num_experts":4,"mlp_only_layers":[0,1,2]}`))
	f.Add([]byte(`{"model_type":"llama","hidden_size":1e9,"num_hidden_layers":-1}`))
	f.Fuzz(func(t *testing.T, data []byte) {
		cfg, err := parseHFConfig(data)
		if err != nil {
			return
		}
		if err := cfg.Validate(); err != nil {
			t.Fatalf("parseHFConfig returned an invalid config: %v", err)
		}
		if ExpectedTensors(cfg) == nil {
			t.Fatal("no tensors for a valid config")
		}
		back, err := ConfigFromGGUF((&Model{Config: cfg}).GGUFMetadata())
		if err != nil {
			t.Fatalf("GGUFMetadata does not read back: %v", err)
		}
		if back.Hidden != cfg.Hidden || back.Layers != cfg.Layers || len(back.LayerKinds) != len(cfg.LayerKinds) {
			t.Fatalf("read back %+v from %+v", back, cfg)
		}
		js, err := HFConfigJSON(cfg)
		if err != nil {
			return // biases or a rope order the architecture cannot state
		}
		again, err := parseHFConfig(js)
		if err != nil {
			t.Fatalf("HFConfigJSON does not read back: %v\n%s", err, js)
		}
		if !reflect.DeepEqual(again, cfg) {
			t.Fatalf("config.json round trip:\n got %+v\nwant %+v", again, cfg)
		}
	})
}

// FuzzGGUFModel: any GGUF bytes either fail cleanly or give a model whose
// every tensor can be read.
func FuzzGGUFModel(f *testing.F) {
	yarn := tinyQwen3()
	yarn.config["rope_parameters"] = map[string]any{"rope_type": "yarn", "factor": 4.0, "original_max_position_embeddings": 16, "rope_theta": 1e6}
	for _, c := range []*hfCkpt{tinyQwen3(), tinyQwen3Next(), tinyQwen35(), tinyLlama3(), yarn} {
		m, err := Open(c.write(f))
		if err != nil {
			f.Fatal(err)
		}
		w := &gguf.Writer{Metadata: m.GGUFMetadata()}
		for _, x := range m.Tensors {
			w.Tensors = append(w.Tensors, gguf.WriterTensor{Name: x.Name, Dims: x.Dims, Type: x.Type, Data: x})
		}
		var buf bytes.Buffer
		if _, err := w.WriteTo(&buf); err != nil {
			f.Fatal(err)
		}
		m.Close()
		f.Add(buf.Bytes())
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		gf, err := gguf.Parse(bytes.NewReader(data), int64(len(data)), "fuzz.gguf")
		if err != nil {
			return
		}
		m, err := fromGGUF(gf)
		if err != nil {
			return
		}
		for _, x := range m.Tensors {
			if _, err := x.Data(); err != nil {
				t.Fatalf("%s: %v", x.Name, err)
			}
		}
	})
}
