package qnnpack

import (
	"fmt"
	"path/filepath"
	"slices"
	"strings"

	"github.com/qnnprep/qnnprep/internal/shellword"
	"github.com/qnnprep/qnnprep/onnx"
	"github.com/qnnprep/qnnprep/shard"
)

// GraphFiles are the exported files of one stage graph (one stage, one
// (AR, CL) variant).
type GraphFiles struct {
	ONNX      string // the graph
	Encodings string // QNN encodings JSON, passed as --quantization_overrides
	// Data are the external data files the graph references (the stage's
	// shared weights file, which every AR/CL variant of the stage reads);
	// nil means those the ONNX file names (onnx.ExternalData), if it exists.
	Data []string
}

// Job is one SDK tool invocation. The tool writes its outputs into TempDir
// under their base names; the runner renames them to Outputs only when the
// tool succeeds, so an output path never holds a half-written file.
type Job struct {
	Stage  int    // 0-based stage index
	Graph  string // the graph a converter job converts ("" for the context job)
	Tool   string // ToolConverter or ToolCtxGen
	Path   string // the executable
	Args   []string
	Inputs []string // files whose contents (with Args and the SDK version) key the cache
	// Configs are the Inputs written by qnnprep that only name other
	// files: keyed with those paths replaced (see RunJobs).
	Configs []string
	Outputs []string // final paths
	TempDir string   // the tool's output directory while it runs
	Log     string   // stdout and stderr of the run
	Deps    []int    // indices of jobs whose outputs this job reads
}

// Name identifies the job in messages and cache files.
func (j *Job) Name() string {
	if j.Graph != "" {
		return j.Tool + " " + j.Graph
	}
	return fmt.Sprintf("%s stage %d", j.Tool, j.Stage+1)
}

// Command is the job as one shell command line.
func (j *Job) Command() string {
	parts := []string{shellQuote(j.Path)}
	for _, a := range j.Args {
		parts = append(parts, shellQuote(a))
	}
	return strings.Join(parts, " ")
}

// shellQuote quotes s for a POSIX shell, leaving a leading ${QNN_SDK_ROOT}
// (dry runs without an SDK) to be expanded.
func shellQuote(s string) string {
	const sdkVar = "${QNN_SDK_ROOT}"
	if rest, ok := strings.CutPrefix(s, sdkVar); ok {
		if rest == "" {
			return `"` + sdkVar + `"`
		}
		return `"` + sdkVar + `"` + shellQuote(rest)
	}
	return shellword.Quote(s)
}

// StagePaths are the work-directory files of one stage.
type StagePaths struct {
	Dir        string // <work>/stage_NN
	HTPConfig  string // inner HTP backend-extension JSON for compiling
	CtxConfig  string // outer --config_file
	BinaryName string // --binary_file (no extension)
	Binary     string // the context binary
}

// ContextBinaryName is the context binary of stage index (0-based):
// {model}_{NN}_of_{MM}, zero-padded like the graph names so that file
// order is stage order.
func ContextBinaryName(p *shard.Plan, index int) string {
	g := shard.GraphName(p.Model.Name, 1, 1, index, len(p.Stages))
	return p.Model.Name + strings.TrimPrefix(g, p.Model.Name+"_ar1_cl1")
}

func stagePaths(p *shard.Plan, work string, index int) StagePaths {
	name := ContextBinaryName(p, index)
	dir := filepath.Join(work, fmt.Sprintf("stage_%0*d", max(2, len(fmt.Sprint(len(p.Stages)))), index+1))
	return StagePaths{
		Dir:        dir,
		HTPConfig:  filepath.Join(dir, "htp_backend_ext.json"),
		CtxConfig:  filepath.Join(dir, "ctxgen_config.json"),
		BinaryName: name,
		Binary:     filepath.Join(dir, name+".bin"),
	}
}

// PlanJobs lists the SDK jobs that build every stage of p in work: per
// graph a qairt-converter job (ONNX + encodings → DLC), then per stage one
// qnn-context-binary-generator job that puts all the stage's graphs in one
// weight-shared context. graphs maps each graph name to its files. Paths in
// the jobs are absolute.
//
// qairt-converter gets --input_network, --output_path and
// --quantization_overrides; --preserve_io_datatype lists the graph I/O
// that keeps its dtype on the device (tensors without an encoding group in
// the plan: input_ids, position_ids, past_ssm_*). The DLC is named after
// the graph, because that is the graph's name in the context binary and
// Genie orders stages by graph name.
//
// qnn-context-binary-generator gets --backend libQnnHtp.so, --model
// libQnnModelDlc.so (when the SDK has it), --dlc_path with the stage's DLCs
// comma-separated (one context, shared weights), --binary_file,
// --output_dir and --config_file (outer JSON → HTP backend-extension JSON).
//
// converterArgs are passed to every qairt-converter run after the
// overrides (for example --float_bitwidth 16 --target_backend HTP, which
// public LLM build scripts use); they may not repeat the flags set here.
//
// That the DLC's file name becomes the graph's name follows a public QAIRT
// build script ("graph names derive from DLC filenames"), not Qualcomm's
// documentation.
func PlanJobs(sdk *SDK, p *shard.Plan, graphs map[string]GraphFiles, work string, converterArgs ...string) ([]Job, []StagePaths, error) {
	work, err := filepath.Abs(work)
	if err != nil {
		return nil, nil, err
	}
	for _, a := range converterArgs {
		name, _, _ := strings.Cut(a, "=")
		switch name {
		case "--input_network", "-i", "--output_path", "-o", "--quantization_overrides", "--preserve_io_datatype":
			return nil, nil, fmt.Errorf("qnnpack: extra converter argument %s: qnnprep sets it itself", a)
		}
	}
	for name := range graphs {
		if graphByName(p, name) == nil {
			return nil, nil, fmt.Errorf("qnnpack: files given for graph %q, which the plan does not have", name)
		}
	}
	var jobs []Job
	var stages []StagePaths
	for si := range p.Stages {
		st := &p.Stages[si]
		sp := stagePaths(p, work, si)
		stages = append(stages, sp)
		var dlcs []string
		var deps []int
		var inputs []string
		for _, gname := range st.Graphs {
			g := graphByName(p, gname)
			f, ok := graphs[gname]
			if !ok || f.ONNX == "" || f.Encodings == "" {
				return nil, nil, fmt.Errorf("qnnpack: stage %d: no ONNX and encodings file for graph %s", si+1, gname)
			}
			onnxPath, err := filepath.Abs(f.ONNX)
			if err != nil {
				return nil, nil, err
			}
			encPath, err := filepath.Abs(f.Encodings)
			if err != nil {
				return nil, nil, err
			}
			dlc := filepath.Join(sp.Dir, gname+".dlc")
			if strings.Contains(dlc, ",") {
				return nil, nil, fmt.Errorf("qnnpack: work directory %s contains a comma, which --dlc_path uses as a separator", work)
			}
			tmp := filepath.Join(sp.Dir, "."+gname+".tmp-run")
			args := []string{
				"--input_network", onnxPath,
				"--output_path", filepath.Join(tmp, gname+".dlc"),
				"--quantization_overrides", encPath,
			}
			args = append(args, converterArgs...)
			if keep := preservedIO(g); len(keep) > 0 {
				// nargs list: must come last.
				args = append(args, "--preserve_io_datatype")
				args = append(args, keep...)
			}
			// The converter reads the external data too: it is part of
			// the cache key (hashed once per run however many variants
			// share it).
			in := []string{onnxPath, encPath}
			data := f.Data
			if data == nil && fileExists(onnxPath) {
				if data, err = onnx.ExternalData(onnxPath); err != nil {
					return nil, nil, fmt.Errorf("qnnpack: stage %d: %w", si+1, err)
				}
			}
			for _, d := range data {
				d, err := filepath.Abs(d)
				if err != nil {
					return nil, nil, err
				}
				in = append(in, d)
			}
			prog, lead := sdk.ConverterCommand()
			jobs = append(jobs, Job{
				Stage: si, Graph: gname, Tool: ToolConverter, Path: prog,
				Args: append(lead, args...), Inputs: in, Outputs: []string{dlc}, TempDir: tmp,
				Log: filepath.Join(sp.Dir, "logs", gname+".convert.log"),
			})
			deps = append(deps, len(jobs)-1)
			dlcs = append(dlcs, dlc)
			inputs = append(inputs, dlc)
		}
		tmp := filepath.Join(sp.Dir, "."+sp.BinaryName+".tmp-run")
		args := []string{"--backend", sdk.HtpLib}
		if sdk.ModelDlcLib != "" {
			args = append(args, "--model", sdk.ModelDlcLib)
		}
		args = append(args,
			"--dlc_path", strings.Join(dlcs, ","),
			"--binary_file", sp.BinaryName,
			"--output_dir", tmp,
			"--config_file", sp.CtxConfig,
		)
		inputs = append(inputs, sp.CtxConfig, sp.HTPConfig)
		jobs = append(jobs, Job{
			Stage: si, Tool: ToolCtxGen, Path: sdk.CtxGen, Args: args,
			Inputs: inputs, Configs: []string{sp.CtxConfig}, Outputs: []string{sp.Binary}, TempDir: tmp,
			Log:  filepath.Join(sp.Dir, "logs", sp.BinaryName+".ctxgen.log"),
			Deps: deps,
		})
	}
	return jobs, stages, nil
}

// preservedIO lists the graph's inputs and outputs that carry no
// activation encoding and so keep their ONNX dtype on the device.
func preservedIO(g *shard.Graph) []string {
	if g == nil {
		return nil
	}
	var names []string
	for _, list := range [][]shard.Tensor{g.Inputs, g.Outputs} {
		for _, t := range list {
			if t.Encoding == "" {
				names = append(names, t.Name)
			}
		}
	}
	return names
}

func graphByName(p *shard.Plan, name string) *shard.Graph {
	for i := range p.Graphs {
		if p.Graphs[i].Name == name {
			return &p.Graphs[i]
		}
	}
	return nil
}

// GraphFileSuffixes are the names FindGraphFiles looks for beside
// <graph>.onnx, in order.
var GraphFileSuffixes = []string{".encodings", ".encodings.json"}

// FindGraphFiles finds every graph of p in dir as <graph>.onnx with its
// encodings <graph>.encodings (or <graph>.encodings.json) and the external
// data files it references, and lists every graph whose files are missing.
func FindGraphFiles(p *shard.Plan, dir string) (map[string]GraphFiles, error) {
	files := map[string]GraphFiles{}
	var missing []string
	for _, g := range p.Graphs {
		f := GraphFiles{ONNX: filepath.Join(dir, g.Name+".onnx")}
		for _, s := range GraphFileSuffixes {
			if p := filepath.Join(dir, g.Name+s); fileExists(p) {
				f.Encodings = p
				break
			}
		}
		switch {
		case !fileExists(f.ONNX):
			missing = append(missing, f.ONNX)
			continue
		case f.Encodings == "":
			missing = append(missing, filepath.Join(dir, g.Name+GraphFileSuffixes[0]))
			continue
		}
		data, err := onnx.ExternalData(f.ONNX)
		if err != nil {
			return files, fmt.Errorf("qnnpack: %w", err)
		}
		f.Data = []string{}
		for _, d := range data {
			if !fileExists(d) && !slices.Contains(missing, d) {
				missing = append(missing, d)
			}
			f.Data = append(f.Data, d)
		}
		files[g.Name] = f
	}
	if len(missing) > 0 {
		return files, fmt.Errorf("qnnpack: %d exported graph file(s) missing in %s:\n  %s", len(missing), dir, strings.Join(missing, "\n  "))
	}
	return files, nil
}
