package safetensors

import (
	"bufio"
	"bytes"
	"encoding/binary"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"
)

// zeros is a stand-in WriterTo; the benchmark file's data is a hole.
type zeros int64

func (z zeros) WriteTo(w io.Writer) (int64, error) { return 0, io.ErrUnexpectedEOF }

// llamaLike describes a 2 GiB BF16 Llama-style model: 32 layers of 9
// tensors plus embedding, final norm and head (291 tensors, 2.01 GiB).
func llamaLike() *Writer {
	const hidden, inter, kv, vocab, layers = 2048, 3104, 512, 32000, 32
	w := &Writer{Metadata: map[string]string{"format": "pt"}}
	add := func(name string, shape ...int64) {
		w.Tensors = append(w.Tensors, WriterTensor{Name: name, Dtype: BF16, Shape: shape, Data: zeros(0)})
	}
	add("model.embed_tokens.weight", vocab, hidden)
	for l := range layers {
		p := fmt.Sprintf("model.layers.%d.", l)
		add(p+"input_layernorm.weight", hidden)
		add(p+"self_attn.q_proj.weight", hidden, hidden)
		add(p+"self_attn.k_proj.weight", kv, hidden)
		add(p+"self_attn.v_proj.weight", kv, hidden)
		add(p+"self_attn.o_proj.weight", hidden, hidden)
		add(p+"post_attention_layernorm.weight", hidden)
		add(p+"mlp.gate_proj.weight", inter, hidden)
		add(p+"mlp.up_proj.weight", inter, hidden)
		add(p+"mlp.down_proj.weight", hidden, inter)
	}
	add("model.norm.weight", hidden)
	add("lm_head.weight", vocab, hidden)
	return w
}

// writeSparse writes w's real header and leaves the data as a hole.
func writeSparse(tb testing.TB, path string, w *Writer) int64 {
	hdr, ts, err := w.plan()
	if err != nil {
		tb.Fatal(err)
	}
	size := 8 + int64(len(hdr)) + ts[len(ts)-1].end
	f, err := os.Create(path)
	if err != nil {
		tb.Fatal(err)
	}
	defer f.Close()
	f.Write(binary.LittleEndian.AppendUint64(nil, uint64(len(hdr))))
	f.Write(hdr)
	if err := f.Truncate(size); err != nil {
		tb.Fatal(err)
	}
	return size
}

// openAndList is what `qnnprep inspect` does: open and print every
// tensor's name, dtype, shape and size.
func openAndList(path string, out io.Writer) (int, error) {
	m, err := Open(path)
	if err != nil {
		return 0, err
	}
	defer m.Close()
	bw := bufio.NewWriter(out)
	for _, t := range m.Tensors {
		fmt.Fprintf(bw, "%-60s %-5s %v %d\n", t.Name, t.Dtype, t.Shape, t.Bytes())
	}
	return len(m.Tensors), bw.Flush()
}

// BenchmarkOpen2GiB measures opening and listing a 2 GiB, 291-tensor
// file, and reports the peak RSS of a child process that does it once.
func BenchmarkOpen2GiB(b *testing.B) {
	path := filepath.Join(b.TempDir(), "model.safetensors")
	size := writeSparse(b, path, llamaLike())
	if size < 2<<30 {
		b.Fatalf("file is only %d bytes", size)
	}
	for b.Loop() {
		if n, err := openAndList(path, io.Discard); err != nil || n != 291 {
			b.Fatal(n, err)
		}
	}

	cmd := exec.Command(os.Args[0], "-test.run=^TestOpenRSSChild$", "-test.count=1")
	cmd.Env = append(os.Environ(), "QNNPREP_ST_RSS_FILE="+path)
	out, err := cmd.CombinedOutput()
	if err != nil {
		b.Fatalf("child: %v\n%s", err, out)
	}
	var before, after, ns int64
	for line := range strings.Lines(string(out)) {
		if f := strings.Fields(line); len(f) == 4 && f[0] == "RSS-RESULT" {
			before, _ = strconv.ParseInt(f[1], 10, 64)
			after, _ = strconv.ParseInt(f[2], 10, 64)
			ns, _ = strconv.ParseInt(f[3], 10, 64)
		}
	}
	if after == 0 {
		b.Fatalf("child printed no result:\n%s", out)
	}
	b.ReportMetric(float64(after)/1024, "peakRSS-MiB")
	b.ReportMetric(float64(after-before)/1024, "ΔRSS-MiB")
	b.ReportMetric(float64(ns)/1e6, "child-ms")
	b.ReportMetric(float64(size)/(1<<30), "file-GiB")
}

// TestOpenRSSChild is BenchmarkOpen2GiB's child process; it does nothing
// in a normal test run.
func TestOpenRSSChild(t *testing.T) {
	path := os.Getenv("QNNPREP_ST_RSS_FILE")
	if path == "" {
		t.Skip("helper process for BenchmarkOpen2GiB")
	}
	before := vmHWM(t)
	start := time.Now()
	if _, err := openAndList(path, io.Discard); err != nil {
		t.Fatal(err)
	}
	el := time.Since(start)
	fmt.Printf("RSS-RESULT %d %d %d\n", before, vmHWM(t), el.Nanoseconds())
}

// vmHWM returns the process's peak resident set size in KiB.
func vmHWM(t *testing.T) int64 {
	st, err := os.ReadFile("/proc/self/status")
	if err != nil {
		t.Skip("no /proc/self/status")
	}
	for line := range bytes.Lines(st) {
		if v, ok := bytes.CutPrefix(line, []byte("VmHWM:")); ok {
			n, _ := strconv.ParseInt(string(bytes.Fields(v)[0]), 10, 64)
			return n
		}
	}
	t.Skip("no VmHWM")
	return 0
}
