package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"text/tabwriter"

	"github.com/qnnprep/qnnprep/model"
	"github.com/qnnprep/qnnprep/quantize"
)

var inspectCmd = &command{
	Name:    "inspect",
	Usage:   "qnnprep inspect PATH [--json]",
	Summary: "show a model's architecture, hyper-parameters, tensors and the size of each recipe",
	Run:     runInspect,
}

func runInspect(ctx context.Context, c *command, args []string) error {
	fs := newFlags(c)
	asJSON := fs.Bool("json", false, "print JSON")
	if err := parseFlags(fs, args); err != nil {
		return err
	}
	if fs.NArg() != 1 {
		return usageError("want one PATH (an HF directory, a .safetensors file or a .gguf file)")
	}
	var info *inspectInfo
	m, err := model.Open(fs.Arg(0))
	switch {
	case err == nil:
		defer m.Close()
		if info, err = inspectModel(m); err != nil {
			return err
		}
	case isGGUFFile(fs.Arg(0), err):
		// A valid GGUF the pipeline cannot use (vocabulary only,
		// another architecture) is still shown, with why as notes.
		if info, err = inspectGGUF(fs.Arg(0), err); err != nil {
			return err
		}
	default:
		return err
	}
	if *asJSON {
		enc := json.NewEncoder(os.Stdout)
		enc.SetIndent("", "  ")
		return enc.Encode(info)
	}
	if info.Config == nil {
		printInspectGGUF(os.Stdout, info)
		return nil
	}
	printInspect(os.Stdout, info)
	return nil
}

// inspectInfo is what `inspect --json` prints.
type inspectInfo struct {
	Path        string `json:"path"`
	Format      string `json:"format"`
	GGUFVersion uint32 `json:"gguf_version,omitempty"`
	// Config is nil for a GGUF the pipeline cannot use; Metadata is set
	// only then.
	Config   *model.Config   `json:"config,omitempty"`
	Metadata []inspectKV     `json:"metadata,omitempty"`
	Tensors  []inspectTensor `json:"tensors"`
	Weights  int64           `json:"weights"`
	Bytes    int64           `json:"bytes"`
	BPW      float64         `json:"bits_per_weight"`
	Recipes  []recipeSize    `json:"recipes,omitempty"`
	// Notes say what the pipeline does not support in the file.
	Notes []string `json:"notes,omitempty"`
}

type inspectTensor struct {
	Name  string  `json:"name"`
	Dims  []int64 `json:"dims"`
	Type  string  `json:"type"`
	Bytes int64   `json:"bytes"`
}

type recipeSize struct {
	Recipe    string   `json:"recipe"`
	Bytes     int64    `json:"bytes"`
	BPW       float64  `json:"bits_per_weight"`
	Fallbacks []string `json:"fallbacks,omitempty"`
	Error     string   `json:"error,omitempty"`
}

func inspectModel(m *model.Model) (*inspectInfo, error) {
	info := &inspectInfo{Path: m.Path, Format: m.Format, Config: &m.Config}
	for _, t := range m.Tensors {
		info.Tensors = append(info.Tensors, inspectTensor{t.Name, t.Dims, t.Type.String(), t.Bytes()})
		info.Weights += t.Elements()
		info.Bytes += t.Bytes()
	}
	if info.Weights > 0 {
		info.BPW = float64(info.Bytes*8) / float64(info.Weights)
	}
	for _, name := range quantize.RecipeNames() {
		if name == "keep" {
			continue
		}
		rs := recipeSize{Recipe: name}
		ds, err := quantize.Plan(m, quantize.Options{Recipe: quantize.Recipes[name]})
		if err != nil {
			rs.Error = err.Error()
			info.Recipes = append(info.Recipes, rs)
			continue
		}
		for i, d := range ds {
			t := m.Tensors[i]
			rb, _ := d.Kind.Type.RowBytes(t.Dims[0])
			rs.Bytes += rb * t.Rows()
			if d.Fallback {
				rs.Fallbacks = append(rs.Fallbacks, fmt.Sprintf("%s→%s", t.Name, d.Kind))
			}
		}
		if info.Weights > 0 {
			rs.BPW = float64(rs.Bytes*8) / float64(info.Weights)
		}
		info.Recipes = append(info.Recipes, rs)
	}
	return info, nil
}

func printInspect(w io.Writer, info *inspectInfo) {
	c := *info.Config
	fmt.Fprintf(w, "%s (%s)\n", info.Path, info.Format)
	fmt.Fprintf(w, "architecture %s: %d layers, hidden %d, FFN %d, heads %d/%d kv × %d, vocab %d, context %d\n",
		c.Arch, c.Layers, c.Hidden, c.FFN, c.Heads, c.KVHeads, c.HeadDim, c.VocabSize, c.ContextLength)
	rope := "norm"
	if c.RopeNeox {
		rope = "neox"
	}
	fmt.Fprintf(w, "rope %s θ=%g over %d dims, rms eps %g, tied embeddings %v\n", rope, c.RopeTheta, c.RopeDim, c.RMSEps, c.TiedEmbeddings)
	if c.Hybrid() {
		n := 0
		for _, k := range c.LayerKinds {
			if k == model.DeltaNet {
				n++
			}
		}
		fmt.Fprintf(w, "Gated DeltaNet: %d of %d layers, conv %d, key heads %d × %d, value heads %d × %d\n",
			n, c.Layers, c.ConvKernel, c.SSMKeyHeads, c.SSMKeyDim, c.SSMValueHeads, c.SSMValueDim)
	}
	fmt.Fprintln(w)
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "tensor\tshape\ttype\tbytes")
	for _, t := range info.Tensors {
		fmt.Fprintf(tw, "%s\t%v\t%s\t%d\n", t.Name, t.Dims, t.Type, t.Bytes)
	}
	tw.Flush()
	fmt.Fprintf(w, "\n%d tensors, %d weights, %d bytes, %.3f bits per weight\n\n", len(info.Tensors), info.Weights, info.Bytes, info.BPW)
	tw = tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "recipe\tbytes\tbpw\tfallbacks")
	for _, r := range info.Recipes {
		if r.Error != "" {
			fmt.Fprintf(tw, "%s\t-\t-\t%s\n", r.Recipe, r.Error)
			continue
		}
		fmt.Fprintf(tw, "%s\t%d\t%.3f\t%d\n", r.Recipe, r.Bytes, r.BPW, len(r.Fallbacks))
	}
	tw.Flush()
}
