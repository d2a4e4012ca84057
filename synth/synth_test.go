package synth

import (
	"bytes"
	"fmt"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"

	"github.com/qnnprep/qnnprep/gguf"
	"github.com/qnnprep/qnnprep/model"
)

var allArchs = []model.Arch{model.Llama, model.Qwen2, model.Qwen3, model.Qwen3Next, model.Qwen35}

func TestPresetsValid(t *testing.T) {
	for _, arch := range allArchs {
		for _, q1 := range []bool{false, true} {
			cfg := Config(arch, q1)
			if err := cfg.Validate(); err != nil {
				t.Errorf("%s q1=%v: %v", arch, q1, err)
				continue
			}
			if !q1 {
				continue
			}
			// Q1_0 needs every matrix row to be whole blocks of 128.
			for _, s := range model.ExpectedTensors(cfg) {
				if len(s.Dims) == 2 && !strings.HasSuffix(s.Name, "ssm_conv1d.weight") && s.Dims[0]%128 != 0 {
					t.Errorf("%s q1: %s rows of %d", arch, s.Name, s.Dims[0])
				}
			}
		}
	}
	if c := Config(model.Qwen35, false); c.SSMKeyHeads == c.SSMValueHeads {
		t.Error("qwen35 preset has Hk = Hv: the value-head reorder is not exercised")
	}
}

func TestWeightsDeterministic(t *testing.T) {
	cfg := Config(model.Qwen35, false)
	a, err := Weights(cfg, 3)
	if err != nil {
		t.Fatal(err)
	}
	b, _ := Weights(cfg, 3)
	c, _ := Weights(cfg, 4)
	for i := range a {
		da, _ := a[i].Data()
		db, _ := b[i].Data()
		dc, _ := c[i].Data()
		if !bytes.Equal(da, db) {
			t.Errorf("%s differs between two calls with the same seed", a[i].Name)
		}
		if bytes.Equal(da, dc) {
			t.Errorf("%s is the same for seeds 3 and 4", a[i].Name)
		}
	}
}

func TestWriteGGUFDeterministic(t *testing.T) {
	dir := t.TempDir()
	cfg := Config(model.Llama, true)
	p1, p2 := filepath.Join(dir, "a.gguf"), filepath.Join(dir, "b.gguf")
	for _, p := range []string{p1, p2} {
		if err := WriteGGUF(p, cfg, 1, gguf.Q1_0); err != nil {
			t.Fatal(err)
		}
	}
	a, _ := os.ReadFile(p1)
	b, _ := os.ReadFile(p2)
	if !bytes.Equal(a, b) {
		t.Error("two writes of the same model differ")
	}
}

func TestWriteGGUFErrors(t *testing.T) {
	dir := t.TempDir()
	if err := WriteGGUF(filepath.Join(dir, "x.gguf"), Config(model.Llama, false), 1, gguf.Q1_0); err == nil {
		t.Error("Q1_0 accepted for rows of 64")
	}
	if err := WriteGGUF(filepath.Join(dir, "x.gguf"), Config(model.Llama, false), 1, gguf.Q4_K); err == nil {
		t.Error("Q4_K accepted")
	}
	small := Config(model.Llama, false)
	small.VocabSize = 100
	if err := WriteGGUF(filepath.Join(dir, "x.gguf"), small, 1, gguf.F32); err == nil {
		t.Error("vocabulary of 100 tokens accepted")
	}
	if _, err := os.Stat(filepath.Join(dir, "x.gguf")); err == nil {
		t.Error("a failed write left a file")
	}
}

// The GGUF and the Hugging Face checkpoint of the same synthetic model open
// to the same config and bit-identical canonical tensors: the HF writer's
// reverse transforms and model's forward ones agree.
func TestHFMatchesGGUF(t *testing.T) {
	for _, arch := range allArchs {
		for _, shards := range []int{1, 3} {
			t.Run(fmt.Sprintf("%s-%d", arch, shards), func(t *testing.T) {
				cfg := Config(arch, false)
				dir := t.TempDir()
				gp, hp := filepath.Join(dir, "m.gguf"), filepath.Join(dir, "hf")
				if err := WriteGGUF(gp, cfg, 11, gguf.F32); err != nil {
					t.Fatal(err)
				}
				if err := WriteHF(hp, cfg, 11, shards); err != nil {
					t.Fatal(err)
				}
				gm, err := model.Open(gp)
				if err != nil {
					t.Fatal(err)
				}
				defer gm.Close()
				hm, err := model.Open(hp)
				if err != nil {
					t.Fatal(err)
				}
				defer hm.Close()
				if !reflect.DeepEqual(gm.Config, cfg) {
					t.Errorf("GGUF config\n%+v\nwant\n%+v", gm.Config, cfg)
				}
				if !reflect.DeepEqual(hm.Config, cfg) {
					t.Errorf("HF config\n%+v\nwant\n%+v", hm.Config, cfg)
				}
				if len(gm.Tensors) != len(hm.Tensors) {
					t.Fatalf("%d GGUF tensors, %d HF tensors", len(gm.Tensors), len(hm.Tensors))
				}
				want, _ := Weights(cfg, 11)
				for i, g := range gm.Tensors {
					h := hm.Tensors[i]
					if g.Name != h.Name || g.Name != want[i].Name || !reflect.DeepEqual(g.Dims, h.Dims) {
						t.Errorf("tensor %d: GGUF %s %v, HF %s %v, want %s", i, g.Name, g.Dims, h.Name, h.Dims, want[i].Name)
						continue
					}
					gd, err := g.Data()
					if err != nil {
						t.Fatal(err)
					}
					hd, err := h.Data()
					if err != nil {
						t.Fatal(err)
					}
					wd, _ := want[i].Data()
					if h.Type != gguf.F32 || !bytes.Equal(gd, hd) || !bytes.Equal(gd, wd) {
						t.Errorf("%s: GGUF, HF (%v) and Weights differ", g.Name, h.Type)
					}
				}
			})
		}
	}
}
