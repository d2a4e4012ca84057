package qnnpack

import (
	"bufio"
	"context"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"github.com/qnnprep/qnnprep/internal/atomicfile"
	"github.com/qnnprep/qnnprep/model"
	"github.com/qnnprep/qnnprep/safetensors"
	"github.com/qnnprep/qnnprep/shard"
)

// Bundle file names.
const (
	GenieConfigName   = "genie_config.json"
	HTPExtConfigName  = "htp_backend_ext_config.json"
	TokenizerName     = "tokenizer.json"
	BundlePlanName    = "plan.json"
	BundleDraftSubdir = "draft"
	// BundleDraftPlanName is the spd draft model's plan in the bundle.
	BundleDraftPlanName = BundleDraftSubdir + "/plan.json"
)

// DraftModel is an already built draft model for the spd dialog, or the
// eaglet draft engine (shard.Plan.DraftEngine): its plan, hyper-parameters
// and context binaries in stage order.
type DraftModel struct {
	Plan            *shard.Plan
	Config          model.Config
	ContextBinaries []string
	// TokenMap is the eaglet draft-token-map: the target id of each draft
	// id, written to the bundle as EagletTokenMapName.
	TokenMap []int32
}

// Eaglet bundle files.
const (
	// EagletLUTName is the embedding LUT: float32 rows [vocab][hidden].
	EagletLUTName = "embedding_lut.bin"
	// EagletTokenMapName is the draft-token-map, a JSON list of target ids.
	EagletTokenMapName = BundleDraftSubdir + "/draft_token_map.json"
)

// EagletLUT writes the eaglet embedding LUT (Genie's embedding.lut-path):
// Rows float32 rows of Size values.
type EagletLUT struct {
	Rows, Size int
	Write      func(w io.Writer) error
}

// BuildOptions say what to build and where.
type BuildOptions struct {
	SDK    *SDK // nil only with DryRun (commands then use ${QNN_SDK_ROOT})
	Plan   *shard.Plan
	Config model.Config // BOS/EOS and rope theta for genie_config.json
	// Graphs holds the exported files of every graph in the plan, by graph
	// name.
	Graphs map[string]GraphFiles
	OutDir string // the bundle directory (replaced atomically)
	// WorkDir keeps DLCs, compile configs, context binaries, logs and the
	// cache between builds; "" means OutDir + ".work".
	WorkDir  string
	SoC      string // target chip (LookupSoC)
	OptLevel int    // HTP graph optimization "O"; 0 means 3
	// ConverterArgs are extra qairt-converter arguments for every graph,
	// e.g. --float_bitwidth 16 (see PlanJobs).
	ConverterArgs []string

	Tokenizer     string // HF tokenizer.json to copy into the bundle
	TokenizerJSON []byte // or the tokenizer.json to write (both empty leave it out)
	// EOG are the ids that end generation besides Config.EOS (a chat
	// model's <|im_end|>, <|eot_id|>, ...): genie_config.json's eos-token.
	EOG            []int32
	Recipe         json.RawMessage // quantization recipe, recorded in the manifest
	QnnprepVersion string
	// ForecastPrefix is a Genie KV cache file holding the ssd-q1 forecast
	// prefix; "" writes a zero placeholder of the right shape.
	ForecastPrefix string
	KVBits         int // KV cache bits for the placeholder prefix; 0 means 8
	// ForecastEmbeddings are the ssd-q1 forecast-token rows as the first
	// stage's embedding table holds them (onnx.ForecastRows), written to
	// the bundle as ForecastEmbeddingsName.
	ForecastEmbeddings []float32
	Draft              *DraftModel // spd and eaglet
	EagletLUT          *EagletLUT  // eaglet only
	// Incomplete, when set, writes the manifest marked incomplete with this
	// reason (MarkComplete clears it): a caller that checks the bundle
	// further (qnnprep build's verify step) completes it only when that
	// passes.
	Incomplete string

	// SkipCheck builds even if shard.Check finds the plan inconsistent with
	// Genie's contract (for experiments; such a bundle will not load).
	SkipCheck bool
	// AllowRecurrentState builds a plan whose graphs carry past_conv/past_ssm
	// state (GENIE-RECURRENT-STATE): the manifest then lists those tensors
	// and says the bundle needs a runtime that feeds them back.
	AllowRecurrentState bool

	// Cache shares job outputs with other processes and machines (see
	// RunOptions.Cache); nil keeps them in WorkDir only.
	Cache Cache
	// Stages, when not nil, builds only these stages (0-based) into
	// WorkDir and Cache and writes no bundle: one shard of a build that
	// a NoRun build assembles later. OutDir is not touched.
	Stages []int
	// NoRun runs no tool: every job must be up to date in WorkDir or in
	// Cache, else Build returns a *MissingError naming them.
	NoRun bool

	DryRun   bool          // print the commands, write every file the SDK does not produce
	Parallel int           // SDK jobs at once; 0 means 2
	Timeout  time.Duration // per SDK job; 0 means none
	Force    bool          // ignore the cache
	Log      io.Writer     // progress and, for dry runs, the commands; nil for none
}

// Result is what Build did.
type Result struct {
	Jobs     []Job
	Runs     []JobResult // nil for dry runs
	Stages   []StagePaths
	Bundle   string
	Manifest *Manifest
}

// Build compiles every stage of the plan with the SDK and writes the Genie
// bundle:
//
//  1. per stage, the compile configs (HTP backend-extension JSON with
//     soc_model, dsp_arch, vtcm_mb, O and weight sharing; the outer
//     --config_file) in the work directory;
//  2. the SDK jobs of PlanJobs, in parallel, cached by input hash;
//  3. the bundle, built in a temporary directory and renamed into place:
//     genie_config.json (validated), htp_backend_ext_config.json, plan.json,
//     tokenizer.json, the context binaries in stage order, the ssd-q1
//     forecast prefix, and manifest.json.
//
// Cancelling ctx kills every running tool and leaves neither a bundle nor
// a half-written output.
func Build(ctx context.Context, o BuildOptions) (*Result, error) {
	p := o.Plan
	if p == nil {
		return nil, errors.New("qnnpack: build: no plan")
	}
	shardOnly := o.Stages != nil
	if o.OutDir == "" && !shardOnly {
		return nil, errors.New("qnnpack: build: no output directory")
	}
	if shardOnly && (o.DryRun || o.NoRun) {
		return nil, errors.New("qnnpack: build: a shard's stages cannot be built in a dry run or without running tools")
	}
	for _, s := range o.Stages {
		if s < 0 || s >= len(p.Stages) {
			return nil, fmt.Errorf("qnnpack: build: stage index %d out of range (the plan has %d stages)", s, len(p.Stages))
		}
	}
	soc, err := LookupSoC(o.SoC)
	if err != nil {
		return nil, err
	}
	if o.OptLevel == 0 {
		o.OptLevel = DefaultOptLevel
	}
	if o.WorkDir == "" {
		if shardOnly {
			return nil, errors.New("qnnpack: build: a shard needs a work directory")
		}
		o.WorkDir = filepath.Clean(o.OutDir) + ".work"
	}
	if !shardOnly {
		// OutDir is qnnprep's or refused; whatever happens next, a bundle
		// already in it is no longer the one this build stands for.
		if err := atomicfile.CheckOwned(o.OutDir); err != nil {
			return nil, err
		}
		if err := MarkIncomplete(o.OutDir, "a newer build into this directory started and did not finish"); err != nil {
			return nil, err
		}
	}
	if !o.SkipCheck {
		if v := shard.Check(p, shard.CheckEnv{StateRuntime: o.AllowRecurrentState}); len(v) > 0 {
			msg := make([]string, 0, len(v))
			for _, x := range v {
				msg = append(msg, x.String())
			}
			return nil, fmt.Errorf("qnnpack: the plan breaks %d Genie contract rule(s); nothing was built:\n  %s", len(v), strings.Join(msg, "\n  "))
		}
	}
	for i := range p.Stages {
		if st := &p.Stages[i]; st.OneBit() && p.VTCMMB < shard.MinVTCMOneBit {
			return nil, fmt.Errorf("qnnpack: stage %d holds %s weights but vtcm_mb is %d; 1-bit stages are built with vtcm_mb ≥ %d (re-plan with --vtcm-mb %d)",
				i+1, st.WeightType, p.VTCMMB, shard.MinVTCMOneBit, shard.MinVTCMOneBit)
		}
	}
	sdk := o.SDK
	if sdk == nil {
		if !o.DryRun {
			return nil, ErrNoSDK
		}
		sdk = DryRunSDK()
	}
	jobs, stages, err := PlanJobs(sdk, p, o.Graphs, o.WorkDir, o.ConverterArgs...)
	if err != nil {
		return nil, err
	}
	res := &Result{Jobs: jobs, Stages: stages, Bundle: o.OutDir}
	// The work directory is qnnprep's or refused, before any tool runs.
	stageDirs := make([]string, len(stages))
	for i, sp := range stages {
		stageDirs[i] = filepath.Base(sp.Dir)
	}
	if err := atomicfile.Claim(o.WorkDir, stageDirs...); err != nil {
		return nil, err
	}

	for i, sp := range stages {
		inner, err := CompileExtConfig(p.Stages[i].Graphs, p.VTCMMB, o.OptLevel, soc)
		if err != nil {
			return nil, err
		}
		outer, err := CtxGenConfig(sdk.ExtensionsLib, sp.HTPConfig)
		if err != nil {
			return nil, err
		}
		if err := os.MkdirAll(sp.Dir, 0o755); err != nil {
			return nil, err
		}
		for _, f := range []struct {
			path string
			data []byte
		}{{sp.HTPConfig, inner}, {sp.CtxConfig, outer}} {
			if err := writeIfChanged(f.path, f.data); err != nil {
				return nil, err
			}
		}
	}

	if o.DryRun {
		if o.Log != nil {
			for i := range jobs {
				fmt.Fprintln(o.Log, jobs[i].Command())
			}
		}
	} else {
		ro := RunOptions{
			Parallel: o.Parallel, Timeout: o.Timeout, SDKVersion: sdk.Version, SDKRoot: sdk.Root, Force: o.Force, Log: o.Log,
			Cache: o.Cache, NoRun: o.NoRun,
		}
		if shardOnly {
			ro.Select = func(j *Job) bool { return slices.Contains(o.Stages, j.Stage) }
		}
		res.Runs, err = RunJobs(ctx, jobs, ro)
		if err != nil {
			return res, err
		}
	}
	if err := ctx.Err(); err != nil {
		return res, fmt.Errorf("qnnpack: build interrupted: %w", err)
	}
	if shardOnly {
		res.Bundle = ""
		return res, checkBinarySizes(stages, o.Stages, shard.DefaultMaxStageBytes)
	}
	if !o.DryRun {
		if err := checkBinarySizes(stages, nil, shard.DefaultMaxStageBytes); err != nil {
			return res, err
		}
	}
	res.Manifest, err = writeBundle(ctx, o, sdk, soc, stages)
	return res, err
}

// RecurrentStateNote is what a bundle built with AllowRecurrentState says
// about the n state tensors listed in its manifest.
func RecurrentStateNote(n int) string {
	return fmt.Sprintf("this bundle needs a runtime that feeds the %d past_conv/past_ssm tensors in recurrent_state back from _out to _in between calls, as qnnprep's staged runtime does; Genie (as of QAIRT 2.40) carries only past_key/past_value, so under genie-t2t-run it decodes from stale state", n)
}

// checkBinarySizes refuses context binaries over limit: a context binary
// must stay under 2 GiB to load (qnn-genie.md §7.1). only, when not nil,
// lists the stages built.
func checkBinarySizes(stages []StagePaths, only []int, limit int64) error {
	var errs []string
	for i, sp := range stages {
		if only != nil && !slices.Contains(only, i) {
			continue
		}
		fi, err := os.Stat(sp.Binary)
		if err != nil {
			return err
		}
		if fi.Size() > limit {
			errs = append(errs, fmt.Sprintf("stage %d: %s is %d bytes, over the %d-byte context binary limit", i+1, sp.Binary, fi.Size(), limit))
		}
	}
	if len(errs) > 0 {
		return fmt.Errorf("qnnpack: %s; re-plan with more stages (or --max-stage-bytes lower)", strings.Join(errs, "; "))
	}
	return nil
}

// writeIfChanged writes data to path atomically unless path already holds
// exactly data (keeping its timestamp for people reading the work dir).
func writeIfChanged(path string, data []byte) error {
	if old, err := os.ReadFile(path); err == nil && string(old) == string(data) {
		return nil
	}
	return atomicfile.WriteFile(path, data)
}

func writeBundle(ctx context.Context, o BuildOptions, sdk *SDK, soc SoC, stages []StagePaths) (*Manifest, error) {
	p := o.Plan
	d, err := atomicfile.CreateDir(o.OutDir)
	if err != nil {
		return nil, err
	}
	defer d.Abort()
	put := func(name string, data []byte) error {
		return os.WriteFile(filepath.Join(d.Path, name), data, 0o644)
	}
	m := &Manifest{
		Qnnprep: o.QnnprepVersion,
		SDK:     ManifestSDK{Version: sdk.Version, Source: sdk.VersionSource},
		SoC:     soc.Name,
		Plan:    BundlePlanName,
		Recipe:  o.Recipe,
		DryRun:  o.DryRun,

		Incomplete: o.Incomplete,
	}
	if m.Qnnprep == "" {
		m.Qnnprep = "(unknown)"
	}

	var ctxBins []string
	m.Container = p.Container.String()
	for i, sp := range stages {
		name := filepath.Base(sp.Binary)
		ctxBins = append(ctxBins, name)
		st := &p.Stages[i]
		m.Stages = append(m.Stages, ManifestStage{Binary: name, FirstLayer: st.FirstLayer, LastLayer: st.LastLayer,
			DeviceBytes: st.Bytes, QModelBytes: st.QModelBytes})
		if o.DryRun {
			continue
		}
		if err := linkOrCopy(ctx, sp.Binary, filepath.Join(d.Path, name)); err != nil {
			return nil, err
		}
	}
	gopts := GenieOptions{
		Target: EngineModel{Plan: p, Config: o.Config, CtxBins: ctxBins},
		EOG:    o.EOG,
	}
	if o.Draft != nil {
		dm := &EngineModel{Plan: o.Draft.Plan, Config: o.Draft.Config}
		if err := os.Mkdir(filepath.Join(d.Path, BundleDraftSubdir), 0o755); err != nil {
			return nil, err
		}
		for _, b := range o.Draft.ContextBinaries {
			rel := BundleDraftSubdir + "/" + filepath.Base(b)
			dm.CtxBins = append(dm.CtxBins, rel)
			if o.DryRun {
				continue // named, as the target's are; only the SDK makes them
			}
			if err := copyFile(ctx, b, filepath.Join(d.Path, filepath.FromSlash(rel))); err != nil {
				return nil, fmt.Errorf("qnnpack: draft context binary: %w", err)
			}
		}
		// The draft's plan beside its binaries: what its graphs take and
		// give, for a runtime that runs it (and for people).
		dplan, err := shard.Encode(o.Draft.Plan)
		if err != nil {
			return nil, err
		}
		if err := put(BundleDraftPlanName, dplan); err != nil {
			return nil, err
		}
		gopts.Draft = dm
		if p.Dialog.Type == shard.Eaglet {
			if err := writeEagletFiles(o, d.Path); err != nil {
				return nil, err
			}
			dm.TokenMap = EagletTokenMapName
			gopts.Eaglet = &EagletGenie{LUT: EagletLUTName, LUTSize: o.EagletLUT.Size, DraftLen: p.Dialog.DraftLen}
		}
	}
	genie, err := GenieConfig(gopts)
	if err != nil {
		return nil, err
	}
	ext, err := RuntimeExtConfig(soc)
	if err != nil {
		return nil, err
	}
	planJSON, err := shard.Encode(p)
	if err != nil {
		return nil, err
	}
	for _, f := range []struct {
		name string
		data []byte
	}{{GenieConfigName, genie}, {HTPExtConfigName, ext}, {BundlePlanName, planJSON}} {
		if err := put(f.name, f.data); err != nil {
			return nil, err
		}
	}
	switch {
	case o.Tokenizer != "":
		if err := copyFile(ctx, o.Tokenizer, filepath.Join(d.Path, TokenizerName)); err != nil {
			return nil, fmt.Errorf("qnnpack: tokenizer: %w", err)
		}
	case o.TokenizerJSON != nil:
		if err := put(TokenizerName, o.TokenizerJSON); err != nil {
			return nil, fmt.Errorf("qnnpack: tokenizer: %w", err)
		}
	default:
		m.Notes = append(m.Notes, "tokenizer.json not included: copy the model's Hugging Face tokenizer.json into the bundle")
	}
	if o.AllowRecurrentState {
		if m.RecurrentState = shard.StateTensors(p); len(m.RecurrentState) > 0 {
			m.Notes = append(m.Notes, RecurrentStateNote(len(m.RecurrentState)))
		}
	}
	if p.Dialog.Type == shard.SSD {
		note, err := writeForecastPrefix(o, d.Path)
		if err != nil {
			return nil, err
		}
		if note != "" {
			m.Notes = append(m.Notes, note)
		}
		if err := writeForecastEmbeddings(o, d.Path); err != nil {
			return nil, err
		}
	}
	if err := ctx.Err(); err != nil {
		return nil, fmt.Errorf("qnnpack: build interrupted: %w", err)
	}
	if err := WriteManifest(d.Path, m); err != nil {
		return nil, err
	}
	if err := ctx.Err(); err != nil {
		return nil, fmt.Errorf("qnnpack: build interrupted: %w", err)
	}
	return m, d.Commit()
}

// writeForecastPrefix puts the ssd-q1 forecast prefix at
// <forecast-prefix-name>/kv-cache.primary.qnn-htp, copying the given file
// (checked against the plan) or writing a placeholder; it returns a
// manifest note for the placeholder.
func writeForecastPrefix(o BuildOptions, bundle string) (string, error) {
	p := o.Plan
	name := p.Dialog.ForecastPrefixName
	if name == "" || !filepath.IsLocal(name) {
		return "", fmt.Errorf("qnnpack: ssd-q1 forecast-prefix-name %q must be a relative directory inside the bundle", name)
	}
	bits := o.KVBits
	if bits == 0 {
		bits = 8
	}
	spec, err := ForecastPrefixSpec(p, bits)
	if err != nil {
		return "", err
	}
	dir := filepath.Join(bundle, name)
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return "", err
	}
	dst := filepath.Join(dir, ForecastPrefixFile)
	if o.ForecastPrefix != "" {
		f, err := os.Open(o.ForecastPrefix)
		if err != nil {
			return "", fmt.Errorf("qnnpack: forecast prefix: %w", err)
		}
		defer f.Close()
		fi, err := f.Stat()
		if err != nil {
			return "", err
		}
		got, err := ReadCacheSpec(f, fi.Size(), o.ForecastPrefix)
		if err != nil {
			return "", err
		}
		if got.NumTensors != spec.NumTensors || got.NHeads != spec.NHeads || got.EmbedDim != spec.EmbedDim || got.UpdateSize != spec.UpdateSize {
			return "", fmt.Errorf("qnnpack: forecast prefix %s holds %d tensors × %d heads × %d dims × %d positions; the plan needs %d × %d × %d × %d",
				o.ForecastPrefix, got.NumTensors, got.NHeads, got.EmbedDim, got.UpdateSize, spec.NumTensors, spec.NHeads, spec.EmbedDim, spec.UpdateSize)
		}
		return "", copyFile(context.Background(), o.ForecastPrefix, dst)
	}
	f, err := os.Create(dst)
	if err != nil {
		return "", err
	}
	if err := WritePlaceholderCache(f, spec); err != nil {
		f.Close()
		return "", err
	}
	if err := f.Close(); err != nil {
		return "", err
	}
	return fmt.Sprintf("%s/%s is a zero placeholder with the right shape (%d positions), not a computed forecast prefix: SSD drafts will be poor until a real prefix is supplied",
		name, ForecastPrefixFile, spec.UpdateSize), nil
}

// writeEagletFiles writes the eaglet embedding LUT and draft-token-map.
func writeEagletFiles(o BuildOptions, bundle string) error {
	lut, tm := o.EagletLUT, o.Draft.TokenMap
	switch {
	case lut == nil || lut.Write == nil:
		return fmt.Errorf("qnnpack: eaglet bundle: no embedding LUT")
	case lut.Rows != o.Plan.Model.Vocab || lut.Size != o.Plan.Model.Hidden:
		return fmt.Errorf("qnnpack: eaglet bundle: embedding LUT of %d × %d, the plan needs %d × %d", lut.Rows, lut.Size, o.Plan.Model.Vocab, o.Plan.Model.Hidden)
	case len(tm) != o.Draft.Plan.Model.Vocab:
		return fmt.Errorf("qnnpack: eaglet bundle: draft-token-map of %d ids for a draft vocabulary of %d", len(tm), o.Draft.Plan.Model.Vocab)
	}
	for i, id := range tm {
		if id < 0 || int(id) >= o.Plan.Model.Vocab {
			return fmt.Errorf("qnnpack: eaglet bundle: draft id %d maps to %d, outside the target vocabulary %d", i, id, o.Plan.Model.Vocab)
		}
	}
	data, err := json.Marshal(tm)
	if err != nil {
		return err
	}
	if err := os.WriteFile(filepath.Join(bundle, filepath.FromSlash(EagletTokenMapName)), append(data, '\n'), 0o644); err != nil {
		return err
	}
	f, err := os.Create(filepath.Join(bundle, EagletLUTName))
	if err != nil {
		return err
	}
	bw := bufio.NewWriterSize(f, 1<<20)
	if err := lut.Write(bw); err != nil {
		f.Close()
		return fmt.Errorf("qnnpack: eaglet embedding LUT: %w", err)
	}
	if err := bw.Flush(); err != nil {
		f.Close()
		return err
	}
	if fi, err := f.Stat(); err == nil && fi.Size() != int64(lut.Rows)*int64(lut.Size)*4 {
		f.Close()
		return fmt.Errorf("qnnpack: eaglet embedding LUT: %d bytes written, want %d", fi.Size(), int64(lut.Rows)*int64(lut.Size)*4)
	}
	return f.Close()
}

// ForecastEmbeddingsName is the bundle file holding the ssd-q1 forecast
// embeddings: F32 tensor "forecast_embeddings" [forecast-token-count,
// hidden], the rows token ids vocab… embed to (they are also in the first
// stage's table).
const ForecastEmbeddingsName = "forecast_embeddings.safetensors"

func writeForecastEmbeddings(o BuildOptions, bundle string) error {
	rows := o.ForecastEmbeddings
	n, h := o.Plan.Dialog.ForecastTokenCount, o.Config.Hidden
	if rows == nil {
		return nil
	}
	if h <= 0 || len(rows) != n*h {
		return fmt.Errorf("qnnpack: %d forecast embedding values, the plan needs forecast-token-count %d × hidden %d", len(rows), n, h)
	}
	data := make([]byte, 0, 4*len(rows))
	for _, v := range rows {
		data = binary.LittleEndian.AppendUint32(data, math.Float32bits(v))
	}
	w := &safetensors.Writer{Tensors: []safetensors.WriterTensor{{Name: "forecast_embeddings", Dtype: safetensors.F32, Shape: []int64{int64(n), int64(h)}, Data: safetensors.Bytes(data)}}}
	return safetensors.WriteFile(filepath.Join(bundle, ForecastEmbeddingsName), w)
}

// linkOrCopy hard-links src to dst (context binaries are large), or copies
// it when linking is not possible. Only for files in the work directory,
// which the runner replaces by rename and never rewrites in place.
func linkOrCopy(ctx context.Context, src, dst string) error {
	if err := os.Link(src, dst); err == nil {
		return nil
	}
	return copyFile(ctx, src, dst)
}

func copyFile(ctx context.Context, src, dst string) error {
	in, err := os.Open(src)
	if err != nil {
		return err
	}
	defer in.Close()
	out, err := os.Create(dst)
	if err != nil {
		return err
	}
	buf := make([]byte, 4<<20)
	for {
		if err := ctx.Err(); err != nil {
			out.Close()
			return err
		}
		n, rerr := in.Read(buf)
		if n > 0 {
			if _, err := out.Write(buf[:n]); err != nil {
				out.Close()
				return fmt.Errorf("copy %s: %w", src, err)
			}
		}
		if rerr == io.EOF {
			break
		}
		if rerr != nil {
			out.Close()
			return fmt.Errorf("copy %s: %w", src, rerr)
		}
	}
	return out.Close()
}
