package bench

import (
	"os"
	goruntime "runtime"
	"runtime/debug"
	"sort"
	"strings"

	"github.com/qnnprep/qnnprep/gguf"
	"github.com/qnnprep/qnnprep/model"
	"github.com/qnnprep/qnnprep/qnnpack"
	"github.com/qnnprep/qnnprep/runtime"
)

// SchemaID is the value of Report.Schema; schema.json describes it.
const SchemaID = "https://qnnprep.dev/schema/bench-report-1.json"

// Report is the outcome of Run for one model (an element of
// Suite.Reports).
type Report struct {
	Model       ModelInfo    `json:"model"`
	Draft       *ModelInfo   `json:"draft,omitempty"`
	Machine     Machine      `json:"machine"`
	Settings    Settings     `json:"settings"`
	Results     []Result     `json:"results"`
	Speculative []SpecResult `json:"speculative"`
	// PeakRSS is the process's peak resident set during the run (mapped
	// model pages included).
	PeakRSS int64   `json:"peak_rss_bytes"`
	Seconds float64 `json:"seconds"` // wall time of the whole run
	// Sane is false when any checked run disagreed with its reference.
	Sane bool `json:"sane"`
	// Error says why the model's run stopped (its file did not open, a
	// run failed): what was measured before is kept, and every qnnprep
	// row not measured carries the error (Result.Error). "" when it ran
	// to the end.
	Error string `json:"error,omitempty"`
}

// fail records that the model's run stopped with err: Report.Error, and
// a row with the error for every qnnprep test of the settings that has
// none yet.
func (r *Report) fail(err error, opt *Options) {
	r.Error = err.Error()
	type key struct {
		kind           string
		depth, threads int
	}
	have := map[key]bool{}
	for _, x := range r.Results {
		if x.Engine == "qnnprep" {
			have[key{x.Kind, x.Depth, x.Threads}] = true
		}
	}
	for _, th := range opt.Threads {
		for _, d := range opt.Depths {
			for _, x := range opt.failedRows("qnnprep", "", d, th, r.Error, false) {
				if !have[key{x.Kind, d, th}] {
					r.Results = append(r.Results, x)
				}
			}
		}
	}
}

// ModelInfo describes a benchmarked model.
type ModelInfo struct {
	Path   string `json:"path"`
	Arch   string `json:"arch"`
	Params int64  `json:"params"`
	Bytes  int64  `json:"bytes"`  // file size (0 for a directory or an in-memory draft)
	Type   string `json:"type"`   // type holding most of the matrix bytes
	Layers int    `json:"layers"` // decoder layers
	// DecodeBytes is what one decoded token reads of the weights: every
	// tensor but the token-embedding table (one row of it per token),
	// unless that table is also the output head.
	DecodeBytes int64 `json:"decode_bytes,omitempty"`
}

// Machine is where the numbers were measured.
type Machine struct {
	GOOS      string `json:"goos"`
	GOARCH    string `json:"goarch"`
	CPUs      int    `json:"cpus"`
	GoVersion string `json:"go_version"`
	// CPU is the processor's model name ("" where the system does not
	// say); ratios against llama.cpp depend on it.
	CPU string `json:"cpu,omitempty"`
	// Kernels is the instruction set qnnprep's kernels ran on
	// (runtime.KernelSet: "avx2", "go"); "asm" and "purego" in reports
	// written before it was recorded.
	Kernels string `json:"kernels"`
	// CPUMask is the cpu.* part of GODEBUG the process ran with
	// ("cpu.avx512f=off"): instruction sets hidden from the kernels, so
	// Kernels can say avx2 on a CPU that has AVX-512. "" when none.
	CPUMask string `json:"cpu_mask,omitempty"`
	// ReadCeiling is the memory-read probe's result for each thread count
	// (ReadCeiling); none when it was skipped or in older reports.
	ReadCeiling []Ceiling  `json:"read_ceiling,omitempty"`
	LoadStart   [3]float64 `json:"load_start"` // load averages when the run began
	LoadEnd     [3]float64 `json:"load_end"`
}

// Settings are the resolved options.
type Settings struct {
	Prompt    int   `json:"prompt"`
	Gen       int   `json:"gen"`
	Depths    []int `json:"depths"`
	Reps      int   `json:"reps"`
	Threads   []int `json:"threads"`
	Batch     int   `json:"batch"`
	KVF16     bool  `json:"kv_f16"`
	K         []int `json:"k,omitempty"`
	SpecDepth int   `json:"spec_depth"`
	// SpecPrompt is what the speculative runs continue: "text: …" or
	// "N random ids".
	SpecPrompt string  `json:"spec_prompt,omitempty"`
	Sanity     bool    `json:"sanity"`
	RefThreads int     `json:"ref_threads"`
	Tolerance  float64 `json:"tolerance"`
	Fault      string  `json:"fault,omitempty"`
	Seed       uint64  `json:"seed"`

	// Plans are the plans whose speculative dialogs were measured
	// (spec.go); Device is the profile of the device column.
	Plans  []string        `json:"plans,omitempty"`
	Device *qnnpack.Device `json:"device,omitempty"`
}

// Result is one test (pp or tg) at one depth and thread count.
type Result struct {
	Engine       string    `json:"engine"`            // "qnnprep" or "llama.cpp"
	Peer         string    `json:"peer,omitempty"`    // what timed a llama.cpp row: "llama-bench" or "node-llama-cpp" (none in older reports: node-llama-cpp)
	Backend      string    `json:"backend,omitempty"` // llama.cpp's backend as its peer reports it ("CPU zen4"); none for qnnprep rows
	Test         string    `json:"test"`              // "pp512", "tg128" (llama-bench's names)
	Kind         string    `json:"kind"`              // "pp" or "tg"
	Tokens       int       `json:"tokens"`
	Depth        int       `json:"depth"`
	Threads      int       `json:"threads"`
	TokensPerSec float64   `json:"tokens_per_s"` // mean over the repetitions
	Stddev       float64   `json:"stddev"`       // sample standard deviation of the per-repetition tokens/s
	Samples      []float64 `json:"samples"`      // tokens/s of each timed repetition
	Load         float64   `json:"load"`         // 1-minute load average, mean of before and after
	// Sane is nil when not checked (llama.cpp rows, NoSanity), else
	// whether every repetition matched the reference.
	Sane       *bool   `json:"sane"`
	SanityNote string  `json:"sanity_note,omitempty"` // what differed
	MaxAbsDiff float64 `json:"max_abs_diff"`          // largest |Δlogit| against the reference
	// VsLlama is this row's tokens/s over llama.cpp's for the same test,
	// depth and threads (0 when llama.cpp was not measured).
	VsLlama float64 `json:"vs_llama_cpp,omitempty"`
	// ReadGBPerSec is the weight stream of a tg row: ModelInfo.DecodeBytes
	// × tokens/s, in 1e9 bytes/s; ReadFraction is that over the read
	// ceiling with the same threads (both 0 for pp rows, or when the model
	// or the ceiling was not measured). The KV cache read at depth is not
	// counted.
	ReadGBPerSec float64 `json:"read_gb_per_s,omitempty"`
	ReadFraction float64 `json:"read_fraction,omitempty"`
	PeakRSS      int64   `json:"peak_rss_bytes"` // peak resident set of the process measuring it (so far)
	// Error says why a llama.cpp row has no timings (its peer failed,
	// timed out, or was not run after an earlier timeout); TimedOut is
	// set when this run itself hit Options.LlamaTimeout.
	Error    string `json:"error,omitempty"`
	TimedOut bool   `json:"timed_out,omitempty"`
}

// SpecResult is speculative decoding with one window size against plain
// greedy decoding of the same prompt on the same engine (spec.go).
type SpecResult struct {
	K                   int     `json:"k"`
	Threads             int     `json:"threads"`
	Depth               int     `json:"depth"`  // prompt length before decoding
	Tokens              int     `json:"tokens"` // tokens generated (timed: all but the first)
	GreedyTokensPerSec  float64 `json:"greedy_tokens_per_s"`
	SpecTokensPerSec    float64 `json:"spec_tokens_per_s"`
	Speedup             float64 `json:"speedup"`           // greedy time / speculative time
	SpeedupStddev       float64 `json:"speedup_stddev"`    // over repetitions
	WindowSeconds       float64 `json:"window_seconds"`    // mean time of one draft+verify window
	AcceptanceLength    float64 `json:"acceptance_length"` // draft tokens accepted per window
	AcceptanceRate      float64 `json:"acceptance_rate"`
	TargetCallsPerToken float64 `json:"target_calls_per_token"`
	Load                float64 `json:"load"`
	Sane                bool    `json:"sane"` // speculative tokens equal greedy tokens

	// Dialog is the plan's dialog decoded through the staged runtime
	// (spd, ssd-q1, eaglet), "" for the whole-model engine; Plan is its
	// file.
	Dialog  string `json:"dialog,omitempty"`
	Plan    string `json:"plan,omitempty"`
	Drafter string `json:"drafter,omitempty"` // what proposed the drafts
	// TokensPerWindow is the accepted drafts plus the target's own token.
	TokensPerWindow float64 `json:"tokens_per_window,omitempty"`
	// Device is the device speed estimated from this row's acceptance
	// (Options.Device), nil without a device profile.
	Device *DeviceEstimate `json:"device,omitempty"`
	// SanityNote says what differed: the speculative tokens from this
	// path's greedy ones, or those from the reference engine's.
	SanityNote string `json:"sanity_note,omitempty"`
}

func modelInfo(m *model.Model, p string) ModelInfo {
	mi := ModelInfo{Path: p, Arch: string(m.Config.Arch), Layers: m.Config.Layers}
	if fi, err := os.Stat(p); err == nil && !fi.IsDir() {
		mi.Bytes = fi.Size()
	}
	byType := map[gguf.Type]int64{}
	for _, t := range m.Tensors {
		mi.Params += t.Elements()
		if len(t.Dims) == 2 {
			byType[t.Type] += t.Bytes()
		}
	}
	var types []gguf.Type
	for t := range byType {
		types = append(types, t)
	}
	sort.Slice(types, func(i, j int) bool {
		if byType[types[i]] != byType[types[j]] {
			return byType[types[i]] > byType[types[j]]
		}
		return types[i] < types[j]
	})
	if len(types) > 0 {
		mi.Type = types[0].String()
	}
	for _, t := range m.Tensors {
		if t.Name != "token_embd.weight" || m.Tensor("output.weight") == nil {
			mi.DecodeBytes += t.Bytes()
		}
	}
	return mi
}

// readRates fills ReadGBPerSec and ReadFraction of every tg row.
func readRates(rs []Result, decodeBytes int64, cs []Ceiling) {
	for i := range rs {
		if rs[i].Kind != "tg" || decodeBytes <= 0 {
			continue
		}
		rs[i].ReadGBPerSec = float64(decodeBytes) * rs[i].TokensPerSec / 1e9
		if c := ceilingFor(cs, rs[i].Threads); c > 0 {
			rs[i].ReadFraction = rs[i].ReadGBPerSec / c
		}
	}
}

func machine() Machine {
	m := Machine{GOOS: goruntime.GOOS, GOARCH: goruntime.GOARCH, CPUs: goruntime.NumCPU(), GoVersion: goruntime.Version(), CPU: cpuModel(),
		Kernels: runtime.KernelSet(), CPUMask: cpuMask(os.Getenv("GODEBUG")), LoadStart: LoadAvg()}
	if bi, ok := debug.ReadBuildInfo(); ok && bi.GoVersion != "" {
		m.GoVersion = bi.GoVersion
	}
	return m
}

// cpuMask is the cpu.* settings of a GODEBUG value, which
// golang.org/x/sys/cpu and the Go runtime honour ("cpu.avx512f=off").
func cpuMask(godebug string) string {
	var mask []string
	for _, kv := range strings.Split(godebug, ",") {
		if kv = strings.TrimSpace(kv); strings.HasPrefix(kv, "cpu.") {
			mask = append(mask, kv)
		}
	}
	return strings.Join(mask, ",")
}

// kernelsLabel is the kernel set with the mask that chose it: "avx2
// (GODEBUG cpu.avx512f=off)".
func kernelsLabel(m Machine) string {
	if m.CPUMask == "" {
		return m.Kernels
	}
	return m.Kernels + " (GODEBUG " + m.CPUMask + ")"
}
