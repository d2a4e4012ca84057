package main

import (
	"context"
	"fmt"
	"io"
	"os"
	"regexp"
	"strconv"
	"strings"
	"text/tabwriter"

	"github.com/spf13/pflag"

	"github.com/qnnprep/qnnprep/internal/bytesize"
	"github.com/qnnprep/qnnprep/model"
	"github.com/qnnprep/qnnprep/shard"
)

var planCmd = &command{
	Name:    "plan",
	Usage:   "qnnprep plan MODEL [--stages N | --layers-per-stage N | --max-stage-bytes SIZE] [--container 4bit|8bit] [--ar 128,1] [--cl 4096] [--dialog TYPE ...] [-o plan.json]",
	Summary: "split a model into HTP stages and lay out every graph's Genie I/O (writes plan.json)",
	Run:     runPlan,
}

func runPlan(ctx context.Context, c *command, args []string) error {
	fs := newFlags(c)
	out := fs.StringP("output", "o", "plan.json", "where to write the plan")
	name := fs.String("name", "", "model name used in graph names (default: general.name or the file name)")
	planOptions := addPlanFlags(fs)
	if err := parseFlags(fs, args); err != nil {
		return err
	}
	if fs.NArg() != 1 {
		return usageError("want one MODEL (an HF directory, a .safetensors file or a .gguf file)")
	}
	o, err := planOptions()
	if err != nil {
		return err
	}

	if err := checkPaths(modelInput(fs.Arg(0)), []string{*out}, nil); err != nil {
		return err
	}
	m, err := model.Open(fs.Arg(0))
	if err != nil {
		return err
	}
	defer m.Close()
	sizes, err := shard.ModelSizes(m, o.Container)
	if err != nil {
		return err
	}
	if *name == "" {
		*name = shard.ModelName(m)
	}
	p, err := shard.NewPlan(m.Config, sizes, *name, o)
	if err != nil {
		return err
	}
	if err := shard.WritePlan(*out, p); err != nil {
		return err
	}
	printPlan(os.Stdout, p)
	vs := shard.Check(p, shard.CheckEnv{})
	if len(vs) == 0 {
		fmt.Printf("\nwrote %s; Genie contract: no violations\n", *out)
	} else {
		fmt.Printf("\nwrote %s; Genie contract: %d violation(s) — run `qnnprep check %s`\n", *out, len(vs), *out)
	}
	return nil
}

// printPlan prints the stage table (first variant's I/O) and the variants.
func printPlan(w io.Writer, p *shard.Plan) {
	fmt.Fprintf(w, "%s (%s): %d layers in %d stages, split by %s, %s positions, dialog %s; Q1_0/Q2_0 codes in the %s container\n",
		p.Model.Name, p.Model.Arch, p.Model.Layers, len(p.Stages), p.Split, p.Positional, p.Dialog.Type, p.Container)
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "stage\tlayers\tdevice bytes\tqmodel bytes\tweights\tinputs\toutputs")
	for _, s := range p.Stages {
		var in, out []string
		for _, g := range p.Graphs {
			if g.Stage == s.Index {
				in, out = tensorNames(g.Inputs), tensorNames(g.Outputs)
				break
			}
		}
		wt := s.WeightType
		if wt == "" {
			wt = "-"
		}
		fmt.Fprintf(tw, "%d\t%d-%d\t%s\t%s\t%s\t%s\t%s\n", s.Index, s.FirstLayer, s.LastLayer, bytesize.Format(s.Bytes), bytesize.Format(s.QModelBytes), wt,
			strings.Join(summarize(in), " "), strings.Join(summarize(out), " "))
	}
	tw.Flush()
	fmt.Fprintln(w)
	tw = tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "AR\tCL\tmode\tmask\tn_process\ttoken history\tgraphs")
	for _, v := range p.Variants {
		first, last := shard.GraphName(p.Model.Name, v.AR, v.CL, 0, len(p.Stages)), shard.GraphName(p.Model.Name, v.AR, v.CL, len(p.Stages)-1, len(p.Stages))
		names := first
		if last != first {
			names += " … " + last
		}
		fmt.Fprintf(tw, "%d\t%d\t%s\t%d\t%d\t%d\t%s\n", v.AR, v.CL, v.Mode, v.MaskLen, v.NProcess, v.TokenHistory, names)
	}
	tw.Flush()
}

func tensorNames(ts []shard.Tensor) []string {
	n := make([]string, len(ts))
	for i, t := range ts {
		n[i] = t.Name
	}
	return n
}

var layerTensor = regexp.MustCompile(`^(past_[a-z]+)_(\d+)_(in|out)$`)

// summarize folds per-layer state names: past_key_4_in … past_key_7_in
// becomes past_key_{4-7}_in.
func summarize(names []string) []string {
	type group struct {
		key    string
		layers []int
	}
	var out []string
	var groups []*group
	at := map[string]int{} // group key → index in out
	for _, n := range names {
		m := layerTensor.FindStringSubmatch(n)
		if m == nil {
			out = append(out, n)
			continue
		}
		key := m[1] + "_%s_" + m[3]
		l, _ := strconv.Atoi(m[2])
		if i, ok := at[key]; ok {
			groups[i].layers = append(groups[i].layers, l)
			continue
		}
		at[key] = len(groups)
		groups = append(groups, &group{key, []int{l}})
		out = append(out, "\x00"+strconv.Itoa(len(groups)-1))
	}
	for i, s := range out {
		if strings.HasPrefix(s, "\x00") {
			g := groups[atoiOr(s[1:])]
			r := fmt.Sprint(g.layers[0])
			if len(g.layers) > 1 {
				r = fmt.Sprintf("{%d-%d}", g.layers[0], g.layers[len(g.layers)-1])
			}
			out[i] = fmt.Sprintf(g.key, r)
		}
	}
	return out
}

func atoiOr(s string) int { n, _ := strconv.Atoi(s); return n }

// parseBytes reads "2GiB", "1500MiB", "512KiB", "3GB" or a plain byte count.
func parseBytes(s string) (int64, error) {
	units := []struct {
		suffix string
		mul    float64
	}{{"GiB", 1 << 30}, {"MiB", 1 << 20}, {"KiB", 1 << 10}, {"GB", 1e9}, {"MB", 1e6}, {"KB", 1e3}, {"B", 1}}
	t := strings.TrimSpace(s)
	mul := 1.0
	for _, u := range units {
		if strings.HasSuffix(t, u.suffix) {
			t, mul = strings.TrimSpace(strings.TrimSuffix(t, u.suffix)), u.mul
			break
		}
	}
	v, err := strconv.ParseFloat(t, 64)
	if n := v * mul; err != nil || !(n >= 1 && n <= 1<<50) { // NaN fails both
		return 0, fmt.Errorf("size %q: want a positive number of bytes, optionally with GiB, MiB, KiB, GB, MB or KB", s)
	}
	return int64(v * mul), nil
}

// addPlanFlags defines the plan flags 'qnnprep plan' takes and returns a
// function that turns them into shard.Options after parsing.
func addPlanFlags(fs *pflag.FlagSet) func() (shard.Options, error) {
	var o shard.Options
	fs.IntVar(&o.Stages, "stages", 0, "split into this many stages, layers spread evenly")
	fs.IntVar(&o.LayersPerStage, "layers-per-stage", 0, "put this many layers in each stage")
	maxBytes := fs.String("max-stage-bytes", "2GiB", "largest stage (context binary, in device bytes) when balancing by bytes, e.g. 1500MiB")
	container := fs.String("container", "4bit", "integer width Q1_0/Q2_0 codes are exported in, which stage sizes are measured in: 4bit or 8bit")
	fs.IntSliceVar(&o.AR, "ar", nil, "tokens per call of each graph variant (default 128,1; the 128 lowered to CL/4 for short contexts)")
	fs.IntSliceVar(&o.CL, "cl", nil, "context lengths (default min(model context, 4096))")
	fs.BoolVar(&o.ARc, "arc", false, "allow CL == AR (AR-c) graphs, which re-process all history")
	pos := fs.String("positional", "", "positional encoding: rope (rope-dim = rotary dims / 2) or absolute (default rope; absolute for linear or yarn RoPE scaling, whose tables Genie cannot compute, so the graphs hold them)")
	dialog := fs.String("dialog", "basic", "Genie dialog: basic, ssd-q1, spd, lade or eaglet")
	fs.IntVar(&o.Dialog.ForecastTokenCount, "forecast-token-count", 0, "ssd-q1: trained forecast embeddings")
	fs.IntSliceVar(&o.Dialog.Branches, "branches", nil, "ssd-q1: children per tree level, e.g. 3,2")
	fs.IntVar(&o.Dialog.ForecastPrefix, "forecast-prefix", 0, "ssd-q1: forecast-prefix KV entries")
	fs.StringVar(&o.Dialog.ForecastPrefixName, "forecast-prefix-name", "", "ssd-q1: forecast-prefix directory")
	fs.IntVar(&o.Dialog.DraftLen, "draft-len", 0, "spd, eaglet: draft length")
	fs.IntVar(&o.Dialog.Window, "window", 0, "lade: window")
	fs.IntVar(&o.Dialog.NGram, "ngram", 0, "lade: n-gram size")
	fs.IntVar(&o.Dialog.GCap, "gcap", 0, "lade: guess cap")
	fs.IntVar(&o.Dialog.NBranches, "n-branches", 0, "eaglet: branches")
	fs.IntVar(&o.Dialog.MaxTargetTokens, "max-tokens-target-can-evaluate", 0, "eaglet: most tokens the target verifies at once")
	fs.IntVar(&o.VTCMMB, "vtcm-mb", 0, "HTP vtcm_mb (default 8)")
	fs.IntVar(&o.ContextSize, "context-size", 0, "Genie context.size (default: the largest CL)")
	fs.IntVar(&o.ProbePromptTokens, "probe-prompt", 0, "prompt length the recorded n_process/token-history numbers assume (default 1)")
	return func() (shard.Options, error) {
		var err error
		if o.MaxStageBytes, err = parseBytes(*maxBytes); err != nil {
			return o, usageError("--max-stage-bytes: %v", err)
		}
		if o.Container, err = shard.ParseContainer(*container); err != nil {
			return o, usageError("--container: %v", err)
		}
		o.Positional = shard.Positional(*pos)
		o.Dialog.Type = shard.DialogType(*dialog)
		return o, nil
	}
}
