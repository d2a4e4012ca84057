package peers_test

import (
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/qnnprep/qnnprep/internal/peers"
	"github.com/qnnprep/qnnprep/testkit"
)

func stories260K(t *testing.T) string {
	return testkit.Stories(t, "stories260K-llamacpp.gguf")
}

// goldenIDs reads the llama2.c greedy ids that follow BOS in stories260K.
func goldenIDs(t *testing.T) []int32 {
	t.Helper()
	b, err := os.ReadFile(testkit.Stories(t, "greedy_ids_from_bos_first64.txt"))
	if err != nil {
		t.Fatal(err)
	}
	var ids []int32
	for _, f := range strings.Fields(string(b)) {
		v, err := strconv.Atoi(f)
		if err != nil {
			t.Fatal(err)
		}
		ids = append(ids, int32(v))
	}
	if len(ids) != 64 {
		t.Fatalf("golden ids: got %d, want 64", len(ids))
	}
	return ids
}

func TestLlamaGreedyStories260K(t *testing.T) {
	testkit.Need(t, peers.NodeLlamaCpp)
	want := goldenIDs(t)[:60]
	got, err := peers.LlamaGreedy(stories260K(t), []int32{1}, 60, 1)
	if err != nil {
		t.Fatal(err)
	}
	for i := range want {
		if got[i] != want[i] {
			t.Fatalf("greedy id %d: llama.cpp %d, llama2.c %d\nllama.cpp %v\nllama2.c  %v", i, got[i], want[i], got, want)
		}
	}
}

func TestLlamaGreedyFromPrompt(t *testing.T) {
	testkit.Need(t, peers.NodeLlamaCpp)
	// The fixture README: llama.cpp with BOS + "Once upon a time"
	// (1 403 407 261 378) continues with the same ids as llama2.c.
	golden := goldenIDs(t)
	got, err := peers.LlamaGreedy(stories260K(t), append([]int32{1}, golden[:4]...), 20, 1)
	if err != nil {
		t.Fatal(err)
	}
	for i, id := range got {
		if id != golden[4+i] {
			t.Fatalf("id %d after the prompt: got %d, want %d", i, id, golden[4+i])
		}
	}
}

func TestLlamaLogitsTeacherForced(t *testing.T) {
	testkit.Need(t, peers.NodeLlamaCpp)
	golden := goldenIDs(t)
	ids := append([]int32{1}, golden[:31]...)
	rows, err := peers.LlamaLogits(stories260K(t), ids)
	if err != nil {
		t.Fatal(err)
	}
	if len(rows) != len(ids) {
		t.Fatalf("got %d rows, want %d", len(rows), len(ids))
	}
	for i, row := range rows {
		if len(row) != 512 {
			t.Fatalf("row %d: %d logits, want 512 (the vocabulary)", i, len(row))
		}
		best := 0
		var spread float32
		for j, v := range row {
			if v > row[best] {
				best = j
			}
			if v < spread {
				spread = v
			}
		}
		// Greedy decoding from BOS is teacher forcing on its own output.
		if int32(best) != golden[i] {
			t.Errorf("position %d: argmax %d, want the greedy id %d", i, best, golden[i])
		}
		if row[best] != 0 {
			t.Errorf("position %d: max logit %g, want 0 (rows are shifted by their maximum)", i, row[best])
		}
		if spread > -1 {
			t.Errorf("position %d: all logits within %g of the maximum: not logits", i, spread)
		}
	}
}

func TestLlamaLoads(t *testing.T) {
	testkit.Need(t, peers.NodeLlamaCpp)
	if err := peers.LlamaLoads(stories260K(t)); err != nil {
		t.Fatal(err)
	}
	// A GGUF cut inside its data section. (A file cut inside its header
	// makes node-llama-cpp 3.21.1 wait forever, so that is not tried.)
	b, err := os.ReadFile(stories260K(t))
	if err != nil {
		t.Fatal(err)
	}
	bad := filepath.Join(t.TempDir(), "truncated.gguf")
	if err := os.WriteFile(bad, b[:20000], 0o644); err != nil {
		t.Fatal(err)
	}
	err = peers.LlamaLoads(bad)
	if err == nil {
		t.Fatal("llama.cpp loaded a truncated GGUF")
	}
	if !strings.Contains(err.Error(), bad) {
		t.Errorf("error does not name the file: %v", err)
	}
}

func TestGGUFTensorsStories260K(t *testing.T) {
	testkit.Need(t, peers.HFGGUF)
	ts, err := peers.GGUFTensors(stories260K(t))
	if err != nil {
		t.Fatal(err)
	}
	if len(ts) != 48 {
		t.Fatalf("got %d tensors, want 48", len(ts))
	}
	byName := map[string]peers.GGUFTensor{}
	for _, x := range ts {
		if x.Type != 0 {
			t.Errorf("%s: type %d, want 0 (F32)", x.Name, x.Type)
		}
		byName[x.Name] = x
	}
	for name, dims := range map[string][]int64{
		"token_embd.weight":      {64, 512},
		"output.weight":          {64, 512},
		"blk.0.attn_k.weight":    {64, 32},
		"blk.4.ffn_down.weight":  {172, 64},
		"blk.2.attn_norm.weight": {64},
	} {
		x, ok := byName[name]
		if !ok {
			t.Errorf("no tensor %s", name)
			continue
		}
		if len(x.Dims) != len(dims) || x.Dims[0] != dims[0] || (len(dims) > 1 && x.Dims[1] != dims[1]) {
			t.Errorf("%s: dims %v, want %v", name, x.Dims, dims)
		}
	}
}

func TestGGUFReadStories260K(t *testing.T) {
	testkit.Need(t, peers.HFGGUF)
	f, err := peers.GGUFRead(stories260K(t))
	if err != nil {
		t.Fatal(err)
	}
	// The fixture README: GGUF v3, 19 KV pairs, 48 tensors.
	if f.Version != 3 || len(f.Metadata) != 19 || len(f.Tensors) != 48 {
		t.Fatalf("version %d, %d KVs, %d tensors; want 3, 19, 48", f.Version, len(f.Metadata), len(f.Tensors))
	}
	kv := map[string]peers.GGUFKV{}
	for _, x := range f.Metadata {
		kv[x.Key] = x
	}
	if x := kv["llama.context_length"]; x.Type != 4 || x.Value != uint64(128) {
		t.Errorf("llama.context_length: %+v, want uint32 128", x)
	}
	if x := kv["tokenizer.ggml.seperator_token_id"]; x.Value != uint64(0xFFFFFFFF) {
		t.Errorf("tokenizer.ggml.seperator_token_id: %+v, want 0xFFFFFFFF", x)
	}
	if x := kv["llama.attention.layer_norm_rms_epsilon"]; x.Type != 6 || x.Value != float64(float32(1e-5)) {
		t.Errorf("layer_norm_rms_epsilon: %+v, want float32 1e-5", x)
	}
	if x := kv["general.architecture"]; x.Type != 8 || x.Value != "llama" {
		t.Errorf("general.architecture: %+v", x)
	}
	toks := kv["tokenizer.ggml.tokens"]
	list, _ := toks.Value.([]any)
	if toks.Type != 9 || toks.ElemType != 8 || len(list) != 512 || list[1] != "<s>" || list[3] != "<0x00>" {
		t.Errorf("tokenizer.ggml.tokens: type %d/%d, %d entries", toks.Type, toks.ElemType, len(list))
	}
	types, _ := kv["tokenizer.ggml.token_type"].Value.([]any)
	if len(types) != 512 || types[0] != int64(2) || types[3] != int64(6) {
		t.Errorf("tokenizer.ggml.token_type: %v…", types[:min(4, len(types))])
	}
}

// tinyONNX builds a MatMul+Add+Relu model with python3-onnx's helpers.
const tinyONNX = `
import sys, onnx
from onnx import helper, TensorProto
W = helper.make_tensor("W", TensorProto.FLOAT, [4, 3], [0.5] * 12)
B = helper.make_tensor("B", TensorProto.FLOAT, [3], [0.1, -0.2, 0.3])
nodes = [helper.make_node("MatMul", ["x", "W"], ["m"]),
         helper.make_node("Add", ["m", "B"], ["a"]),
         helper.make_node("Relu", ["a"], ["y"])]
g = helper.make_graph(nodes, "tiny",
    [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 4])],
    [helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, 3])], [W, B])
m = helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)])
m.ir_version = 8
if sys.argv[2] == "dangling":
    m.graph.node[1].input[0] = "nowhere"   # Add reads a tensor nothing produces
onnx.save(m, sys.argv[1])
`

func TestONNXCheck(t *testing.T) {
	testkit.Need(t, peers.PythonONNX)
	dir := t.TempDir()
	write := func(name, variant string) string {
		p := filepath.Join(dir, name)
		if out, err := exec.Command(peers.Python, "-c", tinyONNX, p, variant).CombinedOutput(); err != nil {
			t.Fatalf("python3-onnx could not build %s: %v\n%s", name, err, out)
		}
		return p
	}
	good := write("good.onnx", "good")
	if err := peers.ONNXCheck(good); err != nil {
		t.Fatalf("valid model rejected: %v", err)
	}

	dangling := write("dangling.onnx", "dangling")
	if err := peers.ONNXCheck(dangling); err == nil || !strings.Contains(err.Error(), "nowhere") {
		t.Errorf("model with a dangling input: got %v, want an error naming it", err)
	}

	b, err := os.ReadFile(good)
	if err != nil {
		t.Fatal(err)
	}
	truncated := filepath.Join(dir, "truncated.onnx")
	if err := os.WriteFile(truncated, b[:len(b)/2], 0o644); err != nil {
		t.Fatal(err)
	}
	if err := peers.ONNXCheck(truncated); err == nil {
		t.Error("truncated model accepted")
	}
	if err := peers.ONNXCheck(filepath.Join(dir, "absent.onnx")); err == nil {
		t.Error("missing file accepted")
	}
}

func TestORTLibrary(t *testing.T) {
	testkit.Need(t, peers.ONNXRuntimeNode)
	p, err := peers.ORTLibrary()
	if err != nil {
		t.Fatal(err)
	}
	st, err := os.Stat(p)
	if err != nil {
		t.Fatal(err)
	}
	if st.Size() < 10<<20 || filepath.Base(p) != "libonnxruntime.so.1" {
		t.Errorf("%s (%d bytes) does not look like the ONNX Runtime library", p, st.Size())
	}
}

func TestCheckMissing(t *testing.T) {
	t.Setenv(peers.EnvDir, t.TempDir())
	for _, w := range []string{peers.NodeLlamaCpp, peers.HFGGUF, peers.ONNXRuntimeNode, peers.HFTokenizers} {
		err := peers.Check(w)
		if err == nil || !strings.Contains(err.Error(), "peer "+w+" not installed") {
			t.Errorf("Check(%s) with an empty peers dir: %v", w, err)
		}
	}
	if err := peers.Check("no-such-peer"); err == nil {
		t.Error("unknown peer accepted")
	}
}
