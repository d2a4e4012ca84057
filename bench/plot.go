package bench

import (
	"bytes"
	"fmt"
	"image/color"
	"io"
	"path/filepath"
	"sort"
	"strings"

	"gonum.org/v1/plot"
	"gonum.org/v1/plot/plotter"
	"gonum.org/v1/plot/vg"
	"gonum.org/v1/plot/vg/draw"
	"gonum.org/v1/plot/vg/vgimg"
	"gonum.org/v1/plot/vg/vgsvg"

	"github.com/qnnprep/qnnprep/internal/atomicfile"
)

// palette is colour-blind friendly (Okabe–Ito), one colour per model.
var palette = []color.Color{
	color.RGBA{0, 114, 178, 255}, color.RGBA{213, 94, 0, 255}, color.RGBA{0, 158, 115, 255},
	color.RGBA{204, 121, 167, 255}, color.RGBA{230, 159, 0, 255}, color.RGBA{86, 180, 233, 255},
	color.RGBA{0, 0, 0, 255},
}

// WritePlot draws s to path, an .svg or .png file: tokens/s against
// depth for pp and for tg (one line per model, engine and thread count;
// llama.cpp dashed), and, when there are speculative results, the
// speed-up against K. Axes are labelled with their units.
func WritePlot(path string, s *Suite) error {
	var buf bytes.Buffer
	if err := Plot(&buf, strings.TrimPrefix(strings.ToLower(filepath.Ext(path)), "."), s); err != nil {
		return fmt.Errorf("bench: plot %s: %w", path, err)
	}
	return atomicfile.WriteFile(path, buf.Bytes())
}

// Plot writes the figure of WritePlot to w in format "svg" or "png".
func Plot(w io.Writer, format string, s *Suite) error {
	var panels []*plot.Plot
	for _, kind := range []string{"pp", "tg"} {
		if p, ok := depthPanel(s, kind); ok {
			panels = append(panels, p)
		}
	}
	if p, ok := specPanel(s); ok {
		panels = append(panels, p)
	}
	if len(panels) == 0 {
		return fmt.Errorf("nothing to plot")
	}
	width := vg.Length(len(panels)) * 5 * vg.Inch
	height := 4.5 * vg.Inch
	var c draw.Canvas
	var wt io.WriterTo
	switch format {
	case "png":
		img := vgimg.NewWith(vgimg.UseWH(width, height), vgimg.UseDPI(120))
		c = draw.New(img)
		wt = vgimg.PngCanvas{Canvas: img}
	case "svg":
		sv := vgsvg.New(width, height)
		c = draw.New(sv)
		wt = sv
	default:
		return fmt.Errorf("format %q: want svg or png", format)
	}
	c.SetColor(color.White)
	c.Fill(c.Rectangle.Path())
	tiles := draw.Tiles{Rows: 1, Cols: len(panels), PadX: vg.Inch / 4, PadY: vg.Inch / 8, PadLeft: vg.Inch / 8, PadRight: vg.Inch / 8, PadTop: vg.Inch / 8, PadBottom: vg.Inch / 8}
	canvases := plot.Align([][]*plot.Plot{panels}, tiles, c)
	for i, p := range panels {
		p.Draw(canvases[0][i])
	}
	_, err := wt.WriteTo(w)
	return err
}

type seriesKey struct {
	model   string
	engine  string
	threads int
	test    string // pp512, tg128: runs of another length are other series
}

func depthPanel(s *Suite, kind string) (*plot.Plot, bool) {
	series := map[seriesKey]plotter.XYs{}
	errs := map[seriesKey]plotter.YErrors{}
	tests := map[string]bool{}
	for _, r := range s.Reports {
		label := modelLabel(r.Model)
		for _, x := range r.Results {
			if x.Kind != kind {
				continue
			}
			tests[x.Test] = true
			k := seriesKey{label, x.Engine, x.Threads, x.Test}
			series[k] = append(series[k], plotter.XY{X: float64(x.Depth), Y: x.TokensPerSec})
			errs[k] = append(errs[k], struct{ Low, High float64 }{min(x.Stddev, x.TokensPerSec), x.Stddev}) // no bar below 0
		}
	}
	if len(series) == 0 {
		return nil, false
	}
	p := plot.New()
	name := map[string]string{"pp": "prompt processing", "tg": "generation"}[kind]
	var names []string
	for t := range tests {
		names = append(names, t)
	}
	sort.Strings(names)
	p.Title.Text = fmt.Sprintf("%s (%s)", name, strings.Join(names, ", "))
	p.X.Label.Text = "depth (context tokens before the test)"
	p.Y.Label.Text = "tokens/s"
	p.Y.Min = 0
	p.Legend.Top = true
	p.Add(plotter.NewGrid())
	keys := sortedKeys(series)
	var combos []string // one colour per model and thread count
	ymax := 0.0
	for _, k := range keys {
		if c := fmt.Sprint(k.model, k.threads, k.test); indexOf(combos, c) < 0 {
			combos = append(combos, c)
		}
		for i, xy := range series[k] {
			ymax = max(ymax, xy.Y+errs[k][i].High)
		}
	}
	headroom(p, ymax, len(keys))
	for _, k := range keys {
		xy := series[k]
		order := make([]int, len(xy))
		for i := range order {
			order[i] = i
		}
		sort.Slice(order, func(i, j int) bool { return xy[order[i]].X < xy[order[j]].X })
		sx, se := make(plotter.XYs, len(xy)), make(plotter.YErrors, len(xy))
		for i, o := range order {
			sx[i], se[i] = xy[o], errs[k][o]
		}
		col := palette[indexOf(combos, fmt.Sprint(k.model, k.threads, k.test))%len(palette)]
		l, pts, err := plotter.NewLinePoints(sx)
		if err != nil {
			continue
		}
		l.Color, pts.Color = col, col
		l.Width = vg.Points(1.5)
		if k.engine != "qnnprep" {
			l.Dashes = []vg.Length{vg.Points(5), vg.Points(3)}
			pts.Shape = draw.TriangleGlyph{}
		} else {
			pts.Shape = draw.CircleGlyph{}
		}
		p.Add(l, pts)
		if eb, err := plotter.NewYErrorBars(struct {
			plotter.XYs
			plotter.YErrors
		}{sx, se}); err == nil {
			eb.Color = col
			p.Add(eb)
		}
		entry := fmt.Sprintf("%s, %s, %d thr", k.model, k.engine, k.threads)
		if len(tests) > 1 {
			entry += ", " + k.test
		}
		p.Legend.Add(entry, l, pts)
	}
	return p, true
}

func specPanel(s *Suite) (*plot.Plot, bool) {
	series := map[seriesKey]plotter.XYs{}
	for _, r := range s.Reports {
		label := modelLabel(r.Model)
		for _, x := range r.Speculative {
			k := seriesKey{label, dialogLabel(x), x.Threads, ""} // one line per speculative path
			series[k] = append(series[k], plotter.XY{X: float64(x.K), Y: x.Speedup})
		}
	}
	if len(series) == 0 {
		return nil, false
	}
	p := plot.New()
	ymax := 1.0
	for _, xy := range series {
		for _, v := range xy {
			ymax = max(ymax, v.Y)
		}
	}
	headroom(p, ymax, len(series))
	p.Title.Text = "speculative decoding"
	p.X.Label.Text = "K (draft tokens per window)"
	p.Y.Label.Text = "speed-up over greedy (×)"
	p.Y.Min = 0
	p.Legend.Top = true
	p.Add(plotter.NewGrid())
	one, _ := plotter.NewLine(plotter.XYs{{X: 1, Y: 1}, {X: 1, Y: 1}})
	for i, k := range sortedKeys(series) {
		xy := series[k]
		sort.Slice(xy, func(i, j int) bool { return xy[i].X < xy[j].X })
		one.XYs = append(one.XYs, plotter.XY{X: xy[len(xy)-1].X, Y: 1})
		l, pts, err := plotter.NewLinePoints(xy)
		if err != nil {
			continue
		}
		col := palette[i%len(palette)]
		l.Color, pts.Color = col, col
		l.Width = vg.Points(1.5)
		p.Add(l, pts)
		p.Legend.Add(fmt.Sprintf("%s, %s, %d thr", k.model, k.engine, k.threads), l, pts)
	}
	one.Dashes = []vg.Length{vg.Points(2), vg.Points(2)}
	one.Color = color.Gray{128}
	p.Add(one)
	return p, true
}

// headroom sets the y range from 0 to above the data, leaving the top of
// the panel to a legend of n entries.
func headroom(p *plot.Plot, ymax float64, n int) {
	if ymax <= 0 {
		ymax = 1
	}
	free := max(0.35, 1-0.06*float64(n)-0.05)
	p.Y.Min, p.Y.Max = 0, ymax/free
}

func sortedKeys(m map[seriesKey]plotter.XYs) []seriesKey {
	keys := make([]seriesKey, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Slice(keys, func(i, j int) bool {
		a, b := keys[i], keys[j]
		if a.model != b.model {
			return a.model < b.model
		}
		if a.engine != b.engine {
			return a.engine > b.engine // qnnprep before llama.cpp
		}
		if a.threads != b.threads {
			return a.threads < b.threads
		}
		return a.test < b.test
	})
	return keys
}

func indexOf(s []string, v string) int {
	for i, x := range s {
		if x == v {
			return i
		}
	}
	return -1
}
