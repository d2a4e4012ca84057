//go:build linux

// The 9B export test reads /proc and statfs; it is an opt-in Linux run.

package main

import (
	"bufio"
	"encoding/json"
	"fmt"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/qnnprep/qnnprep/gguf"
	"github.com/qnnprep/qnnprep/internal/atomicfile"
	"github.com/qnnprep/qnnprep/internal/peers"
	"github.com/qnnprep/qnnprep/model"
	"github.com/qnnprep/qnnprep/onnx"
	"github.com/qnnprep/qnnprep/pipeline"
	"github.com/qnnprep/qnnprep/shard"
	"github.com/qnnprep/qnnprep/synth"
)

// qwen35At9B is a Qwen3.5-9B-shaped configuration: hidden 4096, 32 layers
// (3 Gated DeltaNet : 1 gated attention), FFN 12288, 16 query and 4 KV
// heads of 256 (a quarter rotated), Hk 16 / Hv 32 DeltaNet heads of 128,
// vocabulary 248320, untied head.
func qwen35At9B() model.Config {
	c := synth.Config(model.Qwen35, false)
	c.Hidden, c.Layers, c.FFN, c.VocabSize = 4096, 32, 12288, 248320
	c.Heads, c.KVHeads, c.HeadDim, c.RopeDim = 16, 4, 256, 64
	c.SSMKeyHeads, c.SSMValueHeads, c.SSMKeyDim, c.SSMValueDim = 16, 32, 128, 128
	c.ContextLength, c.TiedEmbeddings = 8192, false
	c.MRopeSections = []int{11, 11, 10, 0}
	c.LayerKinds = make([]model.LayerKind, c.Layers)
	for i := range c.LayerKinds {
		if (i+1)%4 != 0 {
			c.LayerKinds[i] = model.DeltaNet
		}
	}
	return c
}

// TestBuild9BDryRun is the export at real scale, opt-in with
// QNNPREP_TEST_9B=1 (it writes about 18 GB, then holds 45 GB at once, and
// takes tens of minutes): it writes a Qwen3.5-9B-shaped BF16 checkpoint with
// synth (GGUF, streamed one tensor at a time) into QNNPREP_9B_DIR, runs
// 'build --dry-run --recipe int8 --stages 8 --ar 128,1 --cl 4096' on it in
// a child process and deletes the checkpoint once the qmodel exists. The
// build skips
// verify and calibration (--no-verify --calibrate 0): both decode the
// whole model on the CPU, which holds every weight in memory at once and
// measures the runtime, not the export. It prints, per
// step, the time, the peak resident set (sampled every 100 ms; the exact
// peak of each process from rusage) and the disk written, and requires
//
//   - the two-variant export to take at most 1.1× the disk of a
//     single-variant one (shared stage weights), and
//   - the export's peak RSS to stay within 2 × the largest tensor's
//     float32 size + 256 MiB.
//
// QNNPREP_9B_KEEP, if set, names a path the qmodel is linked to (by
// rename) as soon as it exists, for other measurements.
func TestBuild9BDryRun(t *testing.T) {
	if os.Getenv("QNNPREP_TEST_9B") != "1" {
		t.Skip("set QNNPREP_TEST_9B=1 (and QNNPREP_9B_DIR) to build a 9B-shaped model; needs ~58 GB free")
	}
	dir := os.Getenv("QNNPREP_9B_DIR")
	if dir == "" {
		dir = t.TempDir()
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	cfg := qwen35At9B()
	var params, largest int64
	for _, s := range model.ExpectedTensors(cfg) {
		n := int64(1)
		for _, d := range s.Dims {
			n *= d
		}
		params += n
		largest = max(largest, n)
	}
	bound := 2*4*largest + 256<<20
	bf16, q8, f32 := 2*params, params*34/32, 4*params
	const reserve = 12 << 30 // left for everyone else on the disk
	src := filepath.Join(dir, "qwen35-9b-bf16.gguf")
	if need, free := max(bf16+q8, q8+f32)+reserve, freeBytes(t, dir)+fileSize(src); free < need {
		t.Skipf("%s: %s free (counting a checkpoint already there), the run needs %s (with %s left for others)", dir, gb(free), gb(need), gb(reserve))
	}
	t.Logf("%.2fB parameters: BF16 %s, int8 qmodel ≈ %s, float32 ONNX weights ≈ %s; largest tensor %d float32 bytes, export RSS bound %s",
		float64(params)/1e9, gb(bf16), gb(q8), gb(f32), 4*largest, gb(bound))

	// A checkpoint left by an interrupted run is complete (written under a
	// temporary name, then renamed) and is used as it is.
	start := time.Now()
	if _, err := os.Stat(src); err != nil {
		if err := synth.WriteGGUF(src, cfg, 1, gguf.BF16); err != nil {
			t.Fatal(err)
		}
	}
	defer os.Remove(src)
	report := []string{fmt.Sprintf("| synth BF16 checkpoint | %.0f s | %s | (test process) |", time.Since(start).Seconds(), gb(fileSize(src)))}

	out := filepath.Join(dir, "build")
	defer os.RemoveAll(out)
	qmodel := filepath.Join(out, pipeline.WorkDir, pipeline.QModelName)
	onnxDir := filepath.Join(out, pipeline.WorkDir, pipeline.ONNXDir)
	keep := os.Getenv("QNNPREP_9B_KEEP")
	res := runMeasured(t, []string{"build", src, out, "--recipe", "int8", "--stages", "8", "--ar", "128,1", "--cl", "4096",
		"--dry-run", "--no-verify", "--allow-recurrent-state", "--calibrate", "0"},
		func(step string) {
			// The quantize step has finished: its qmodel is complete.
			if step != pipeline.StepPlan {
				return
			}
			if keep != "" {
				tmp := keep + ".tmp-link"
				os.Remove(tmp)
				if err := os.Link(qmodel, tmp); err != nil {
					t.Errorf("keep qmodel: %v", err)
				} else if err := os.Rename(tmp, keep); err != nil {
					t.Errorf("keep qmodel: %v", err)
				}
			}
			if err := os.Remove(src); err != nil {
				t.Errorf("remove the checkpoint: %v", err)
			}
		})
	var sum pipeline.Result
	b, err := os.ReadFile(filepath.Join(out, pipeline.SummaryName))
	if err != nil {
		t.Fatalf("%v\nstderr:\n%s", err, res.stderr)
	}
	if err := json.Unmarshal(b, &sum); err != nil {
		t.Fatal(err)
	}
	if res.code != 0 {
		t.Fatalf("build: exit %d\n%s\n%s", res.code, res.stderr, b)
	}
	for _, s := range sum.Steps {
		disk := "–"
		switch s.Name {
		case pipeline.StepQuantize:
			disk = gb(fileSize(qmodel))
		case pipeline.StepExport:
			disk = gb(dirSize(t, onnxDir))
		case pipeline.StepSDK, pipeline.StepBundle:
			disk = gb(dirSize(t, filepath.Join(out, pipeline.WorkDir, pipeline.SDKDir)) + dirSize(t, filepath.Join(out, pipeline.BundleDir)))
		}
		report = append(report, fmt.Sprintf("| build: %s (%s) | %.1f s | %s | %s |", s.Name, s.Status, s.Seconds, disk, gb(res.stepRSS[s.Name])))
	}
	report = append(report, fmt.Sprintf("| build, whole process | %.0f s | %s | %s peak (rusage) |", res.seconds, gb(dirSize(t, out)), gb(res.maxRSS)))
	// The build's peak (rusage) is its export's or its quantize's, the
	// only steps that touch the weights (no calibration, no verify).
	if exp := res.stepRSS[pipeline.StepExport]; exp > bound || res.maxRSS > bound {
		t.Errorf("build's export step peaked at %s RSS (whole build %s), over the bound %s", gb(exp), gb(res.maxRSS), gb(bound))
	}
	// A single-variant (AR 1) export writes the same weights file but for
	// the AR 128 graphs' own constants, and only the AR 1 models: its
	// size is laid out here from what the AR 1 models reference, as the
	// writer lays it out (page-aligned, in first-use order). The real
	// comparison on a small model is TestExportSharesStageWeights.
	p, err := shard.ReadPlan(filepath.Join(out, pipeline.WorkDir, pipeline.PlanName))
	if err != nil {
		t.Fatal(err)
	}
	var oneVariant, weights int64
	for _, g := range p.Graphs {
		base := filepath.Join(onnxDir, g.Name)
		if g.AR != 1 {
			continue
		}
		oneVariant += fileSize(base+".onnx") + fileSize(base+".encodings.json")
		m, err := onnx.Read(base + ".onnx")
		if err != nil {
			t.Fatal(err)
		}
		var off int64
		seen := map[string]bool{}
		for _, in := range m.Graph.Initializer {
			var key string
			var n int64
			for _, kv := range in.ExternalData {
				key += kv.Value + " "
				if kv.Key == "length" {
					n, _ = strconv.ParseInt(kv.Value, 10, 64)
				}
			}
			if n == 0 || seen[key] {
				continue
			}
			seen[key] = true
			off = (off+4095)&^4095 + n
		}
		oneVariant += off
	}
	var twoVariants int64
	ents, _ := os.ReadDir(onnxDir)
	for _, e := range ents {
		if atomicfile.IsTemp(e.Name()) || e.Name() == atomicfile.MarkerName {
			continue
		}
		twoVariants += fileSize(filepath.Join(onnxDir, e.Name()))
		if strings.HasSuffix(e.Name(), ".data") {
			weights += fileSize(filepath.Join(onnxDir, e.Name()))
		}
	}
	if s := sum.Step(pipeline.StepExport); s != nil && s.Seconds > 0 {
		report = append(report, fmt.Sprintf("\nexport: %s of ONNX weights in %.0f s, %.3f GB/s", gb(weights), s.Seconds, float64(weights)/s.Seconds/1e9))
	}
	ratio := float64(twoVariants) / float64(oneVariant)
	if ratio > 1.1 {
		t.Errorf("AR 128 and 1 take %s, AR 1 alone %s: %.3f×, want at most 1.1×", gb(twoVariants), gb(oneVariant), ratio)
	}
	report = append(report, fmt.Sprintf("ONNX disk, AR 128 + 1 vs AR 1 alone: %s / %s = %.3f×; export RSS bound (2 × %s + 256 MiB) %s",
		gb(twoVariants), gb(oneVariant), ratio, gb(4*largest), gb(bound)))
	fmt.Printf("| step | time | disk | peak RSS |\n|---|---|---|---|\n%s\n", strings.Join(report, "\n"))
}

// measured is one child qnnprep run.
type measured struct {
	code    int
	seconds float64
	maxRSS  int64            // the process's peak resident set (rusage)
	stepRSS map[string]int64 // build: the largest sampled RSS while each step ran
	stderr  string
}

// runMeasured runs qnnprep with args in a child process, sampling its
// resident set every 100 ms; for build it attributes the samples to the
// step announced last on stderr and calls onStep as each step starts.
func runMeasured(t *testing.T, args []string, onStep func(step string)) measured {
	t.Helper()
	cmd := exec.Command(os.Args[0], "-test.run=^TestHelperQnnprep$")
	argsJSON, _ := json.Marshal(args)
	cmd.Env = append(os.Environ(), "QNNPREP_HELPER_ARGS="+string(argsJSON))
	stderr, err := cmd.StderrPipe()
	if err != nil {
		t.Fatal(err)
	}
	start := time.Now()
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	var mu sync.Mutex
	res := measured{stepRSS: map[string]int64{}}
	step := ""
	done := make(chan struct{})
	go func() {
		tick := time.NewTicker(100 * time.Millisecond)
		defer tick.Stop()
		for {
			select {
			case <-done:
				return
			case <-tick.C:
			}
			rss := vmRSS(cmd.Process.Pid)
			mu.Lock()
			res.stepRSS[step] = max(res.stepRSS[step], rss)
			mu.Unlock()
		}
	}()
	var text strings.Builder
	sc := bufio.NewScanner(stderr)
	for sc.Scan() {
		line := sc.Text()
		text.WriteString(line + "\n")
		if s, ok := strings.CutPrefix(line, "qnnprep build: "); ok && strings.HasSuffix(s, " …") {
			s = strings.TrimSuffix(s, " …")
			mu.Lock()
			step = s
			mu.Unlock()
			if onStep != nil {
				onStep(s)
			}
		}
	}
	cmd.Wait()
	close(done)
	res.seconds = time.Since(start).Seconds()
	res.code = cmd.ProcessState.ExitCode()
	res.maxRSS = peers.MaxRSS(cmd.ProcessState)
	res.stderr = text.String()
	return res
}

// vmRSS is process pid's resident set in bytes (0 once it is gone).
func vmRSS(pid int) int64 {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/status")
	if err != nil {
		return 0
	}
	for _, line := range strings.Split(string(b), "\n") {
		if v, ok := strings.CutPrefix(line, "VmRSS:"); ok {
			n, _ := strconv.ParseInt(strings.TrimSuffix(strings.TrimSpace(v), " kB"), 10, 64)
			return n << 10
		}
	}
	return 0
}

func freeBytes(t *testing.T, dir string) int64 {
	var st syscall.Statfs_t
	if err := syscall.Statfs(dir, &st); err != nil {
		t.Fatal(err)
	}
	return int64(st.Bavail) * st.Bsize
}

func fileSize(path string) int64 {
	fi, err := os.Stat(path)
	if err != nil {
		return 0
	}
	return fi.Size()
}

// dirSize is the disk the files under dir occupy (allocated blocks).
func dirSize(t *testing.T, dir string) int64 {
	var n int64
	filepath.WalkDir(dir, func(_ string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return nil
		}
		if fi, err := d.Info(); err == nil {
			if st, ok := fi.Sys().(*syscall.Stat_t); ok {
				n += st.Blocks * 512
			}
		}
		return nil
	})
	return n
}

func gb(n int64) string { return fmt.Sprintf("%.2f GB", float64(n)/1e9) }
