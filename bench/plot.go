package bench

import (
	"bytes"
	"fmt"
	"image/color"
	"io"
	"math"
	"path/filepath"
	"sort"
	"strings"

	"gonum.org/v1/plot"
	"gonum.org/v1/plot/font"
	"gonum.org/v1/plot/plotter"
	"gonum.org/v1/plot/text"
	"gonum.org/v1/plot/vg"
	"gonum.org/v1/plot/vg/draw"
	"gonum.org/v1/plot/vg/vgimg"
	"gonum.org/v1/plot/vg/vgsvg"

	"github.com/qnnprep/qnnprep/internal/atomicfile"
)

// palette is colour-blind friendly (Okabe–Ito): one colour per test and
// thread count, the same in every panel.
var palette = []color.Color{
	color.RGBA{0, 114, 178, 255}, color.RGBA{213, 94, 0, 255}, color.RGBA{0, 158, 115, 255},
	color.RGBA{204, 121, 167, 255}, color.RGBA{230, 159, 0, 255}, color.RGBA{86, 180, 233, 255},
	color.RGBA{0, 0, 0, 255},
}

// WritePlot draws s to path, an .svg or .png file (see Plot).
func WritePlot(path string, s *Suite) error {
	var buf bytes.Buffer
	if err := Plot(&buf, strings.TrimPrefix(strings.ToLower(filepath.Ext(path)), "."), s); err != nil {
		return fmt.Errorf("bench: plot %s: %w", path, err)
	}
	return atomicfile.WriteFile(path, buf.Bytes())
}

// Plot writes the figure of s to w in format "svg" or "png". A header
// names the models, the CPU, qnnprep's kernels, llama.cpp's backend and
// the load, with one key of colours and line styles for every panel, so
// no legend covers data. Below it: qnnprep's speed over llama.cpp's as
// grouped bars (a group per model, a bar per test and thread count, 1.0
// marked; the mean of repeated runs, each run a dot), decoding's weight
// stream as a share of the memory-read ceiling, and the speculative
// speed-up against K when measured; then tokens/s against depth in small
// multiples, one panel per model.
func Plot(w io.Writer, format string, s *Suite) error {
	f := newFigure(s)
	read, hasRead := f.readPanel()
	spec, hasSpec := specPanel(s)
	f.ratioWidth = 2 * panelWidth * 3 / 4
	if !hasRead && !hasSpec {
		f.ratioWidth = vg.Length(max(len(f.groups), 2)) * panelWidth * 3 / 4
	}
	var top []*plot.Plot
	if p, ok := f.ratioPanel(); ok {
		top = append(top, p)
	}
	if hasRead {
		top = append(top, read)
	}
	if hasSpec {
		top = append(top, spec)
	}
	var small []*plot.Plot
	for _, g := range f.groups {
		if p, ok := f.depthPanel(g); ok {
			small = append(small, p)
		}
	}
	if len(top) == 0 && len(small) == 0 && len(f.failures()) == 0 {
		return fmt.Errorf("nothing to plot")
	}
	cols := max(len(top)+1, len(small), 2) // the ratio panel takes two columns' width
	width := vg.Length(cols) * panelWidth
	header := 0.75 * vg.Inch
	topH, smallH := vg.Length(0), vg.Length(0)
	if len(top) > 0 {
		topH = 3.6 * vg.Inch
	}
	if len(small) > 0 {
		smallH = 3 * vg.Inch
	}
	header += vg.Length(len(f.failures())) * vg.Points(13)
	height := header + topH + smallH
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
	f.drawHeader(draw.Crop(c, 0, 0, height-header, 0))
	pad := vg.Inch / 8
	tiles := func(n int) draw.Tiles {
		return draw.Tiles{Rows: 1, Cols: n, PadX: vg.Inch / 3, PadLeft: pad, PadRight: pad, PadTop: pad, PadBottom: pad}
	}
	if len(top) > 0 {
		row := draw.Crop(c, 0, 0, smallH, -header)
		// The ratio panel is twice as wide as the others: it has a bar
		// per test and thread count for every model.
		first := row
		if len(top) > 1 {
			split := row.Rectangle.Size().X * 2 / vg.Length(len(top)+1)
			first = draw.Crop(row, 0, split-row.Rectangle.Size().X, 0, 0)
			rest := draw.Crop(row, split, 0, 0, 0)
			cs := plot.Align([][]*plot.Plot{top[1:]}, tiles(len(top)-1), rest)
			for i, p := range top[1:] {
				p.Draw(cs[0][i])
			}
		}
		top[0].Draw(draw.Crop(first, pad+vg.Inch/8, -pad, pad, -pad))
	}
	if len(small) > 0 {
		row := draw.Crop(c, 0, 0, 0, -(header + topH))
		// Each small multiple gets one column's width, however few there
		// are: the panels stay comparable between figures.
		grid := make([]*plot.Plot, max(len(small), cols-1))
		copy(grid, small)
		cs := plot.Align([][]*plot.Plot{grid}, tiles(len(grid)), row)
		for i, p := range small {
			p.Draw(cs[0][i])
		}
	}
	_, err := wt.WriteTo(w)
	return err
}

// figure is what the panels share: the models (groups, in the order
// given), the series colours and the header's text.
type figure struct {
	s      *Suite
	groups []string           // model labels, common words cut
	common string             // the words every model label shares
	label  map[*Report]string // each report's group
	series []series           // tests and thread counts, in colour order
	depths []int              // depths with a ratio, ascending
	// ratioWidth is about the width of the ratio panel's data area: two
	// columns, or the whole figure when no other panel shares its row.
	ratioWidth vg.Length
}

// panelWidth is one column of the figure.
const panelWidth = 3.6 * vg.Inch

// series is a test (pp64, tg32) with a thread count: one colour.
type series struct {
	test    string
	kind    string
	threads int
}

func (x series) String() string {
	t := "threads"
	if x.threads == 1 {
		t = "thread"
	}
	return fmt.Sprintf("%s, %d %s", x.test, x.threads, t)
}

func newFigure(s *Suite) *figure {
	f := &figure{s: s, label: map[*Report]string{}}
	var full []string
	for _, r := range s.Reports {
		full = append(full, modelLabel(r.Model))
	}
	f.common = commonWords(full)
	seen := map[string]bool{}
	seenS := map[series]bool{}
	seenD := map[int]bool{}
	for i, r := range s.Reports {
		g := strings.TrimSpace(strings.TrimPrefix(full[i], f.common))
		if g == "" {
			g = full[i]
		}
		switch {
		case r.Error != "":
			g += " (FAILED)"
		case r.Model.Bytes > 0:
			g += " (" + sizeLabel(r.Model.Bytes) + ")"
		}
		f.label[r] = g
		if !seen[g] {
			seen[g] = true
			f.groups = append(f.groups, g)
		}
		for _, x := range r.Results {
			k := series{x.Test, x.Kind, x.Threads}
			if !seenS[k] {
				seenS[k] = true
				f.series = append(f.series, k)
			}
			if x.VsLlama > 0 && !seenD[x.Depth] {
				seenD[x.Depth] = true
				f.depths = append(f.depths, x.Depth)
			}
		}
	}
	sort.Slice(f.series, func(i, j int) bool {
		a, b := f.series[i], f.series[j]
		if a.kind != b.kind {
			return a.kind < b.kind // pp before tg
		}
		if a.threads != b.threads {
			return a.threads < b.threads
		}
		return a.test < b.test
	})
	sort.Ints(f.depths)
	return f
}

// commonWords is the longest run of leading words all labels share, when
// there are several labels ("llama 706.8M" of "llama 706.8M Q1_0" and
// "llama 706.8M F16").
func commonWords(labels []string) string {
	if len(labels) < 2 {
		return ""
	}
	words := strings.Fields(labels[0])
	n := len(words) - 1 // keep at least one word of each label
	for _, l := range labels[1:] {
		w := strings.Fields(l)
		i := 0
		for i < min(n, len(w)-1) && w[i] == words[i] {
			i++
		}
		n = i
	}
	return strings.Join(words[:max(n, 0)], " ")
}

func (f *figure) colour(x series) color.Color {
	for i, s := range f.series {
		if s == x {
			return palette[i%len(palette)]
		}
	}
	return color.Black
}

// light is c halfway to white: the same series at a deeper context.
func light(c color.Color) color.Color {
	r, g, b, _ := c.RGBA()
	return color.RGBA{uint8((r>>8 + 255) / 2), uint8((g>>8 + 255) / 2), uint8((b>>8 + 255) / 2), 255}
}

func textStyle(size vg.Length) draw.TextStyle {
	return draw.TextStyle{Color: color.Black, Font: font.From(plot.DefaultFont, size), Handler: plot.DefaultTextHandler}
}

// drawHeader writes the title, the machines and the key of colours and
// line styles across the top of c.
func (f *figure) drawHeader(c draw.Canvas) {
	x0 := c.Min.X + vg.Inch/4
	y := c.Max.Y - vg.Inch/8
	title := "qnnprep bench"
	if f.common != "" {
		title += ": " + f.common
	}
	ts := textStyle(vg.Points(13))
	ts.YAlign = text.YTop
	c.FillText(ts, vg.Point{X: x0, Y: y}, title)
	y -= vg.Points(17)
	ms := textStyle(vg.Points(9.5))
	ms.YAlign = text.YTop
	c.FillText(ms, vg.Point{X: x0, Y: y}, strings.Join(f.machines(), "   |   "))
	y -= vg.Points(13)
	for _, l := range f.failures() {
		c.FillText(ms, vg.Point{X: x0, Y: y}, l)
		y -= vg.Points(13)
	}
	y -= vg.Points(5)

	// The key: a swatch per series, then the engines' line styles.
	ks := textStyle(vg.Points(10))
	ks.YAlign = text.YCenter
	x := x0
	sw := vg.Points(10)
	for _, sr := range f.series {
		c.FillPolygon(f.colour(sr), []vg.Point{{X: x, Y: y - sw/2}, {X: x + sw, Y: y - sw/2}, {X: x + sw, Y: y + sw/2}, {X: x, Y: y + sw/2}})
		x += sw + vg.Points(4)
		c.FillText(ks, vg.Point{X: x, Y: y}, sr.String())
		x += ks.Width(sr.String()) + vg.Points(14)
	}
	if len(f.depths) > 1 {
		lbl := fmt.Sprintf("pale bar: depth %d", f.depths[1])
		if len(f.depths) > 2 {
			lbl = "paler bar: deeper context"
		}
		c.FillPolygon(light(color.Gray{90}), []vg.Point{{X: x, Y: y - sw/2}, {X: x + sw, Y: y - sw/2}, {X: x + sw, Y: y + sw/2}, {X: x, Y: y + sw/2}})
		x += sw + vg.Points(4)
		c.FillText(ks, vg.Point{X: x, Y: y}, lbl)
		x += ks.Width(lbl) + vg.Points(14)
	}
	engines := []struct {
		name   string
		dashed bool
		glyph  draw.GlyphDrawer
	}{{"qnnprep", false, draw.CircleGlyph{}}, {"llama.cpp (outlined bar)", true, draw.TriangleGlyph{}}}
	if !f.hasLlama() {
		engines = engines[:1]
	}
	for _, e := range engines {
		ls := draw.LineStyle{Color: color.Gray{60}, Width: vg.Points(1.5)}
		if e.dashed {
			ls.Dashes = []vg.Length{vg.Points(5), vg.Points(3)}
		}
		c.StrokeLine2(ls, x, y, x+vg.Points(24), y)
		c.DrawGlyph(draw.GlyphStyle{Color: color.Gray{60}, Radius: vg.Points(3), Shape: e.glyph}, vg.Point{X: x + vg.Points(12), Y: y})
		x += vg.Points(28)
		c.FillText(ks, vg.Point{X: x, Y: y}, e.name)
		x += ks.Width(e.name) + vg.Points(14)
	}
}

// hasLlama reports whether any row is llama.cpp's.
func (f *figure) hasLlama() bool {
	for _, r := range f.s.Reports {
		for _, x := range r.Results {
			if x.Engine == "llama.cpp" {
				return true
			}
		}
	}
	return false
}

// failures are the header's notes on the models that failed: their rows
// have no timings, their groups no bars.
func (f *figure) failures() []string {
	var out []string
	for _, r := range f.s.Reports {
		if r.Error != "" {
			out = append(out, fmt.Sprintf("%s FAILED: %s", r.Model.Path, errorLine(r.Error)))
		}
	}
	return out
}

// machines describes where the reports were measured, one entry per
// distinct CPU, kernel set and llama.cpp backend, with the load range.
func (f *figure) machines() []string {
	type mk struct{ cpu, kernels, backend string }
	var order []mk
	lo, hi := map[mk]float64{}, map[mk]float64{}
	for _, r := range f.s.Reports {
		var backends []string
		for _, x := range r.Results {
			b := strings.Trim(x.Peer+", "+x.Backend, ", ")
			if x.Error != "" {
				b = x.Peer + " " + strings.ToLower(speedLabel(x))
			}
			if x.Engine == "llama.cpp" && indexOf(backends, b) < 0 {
				backends = append(backends, b)
			}
		}
		k := mk{r.Machine.CPU, kernelsLabel(r.Machine), strings.Join(backends, "; ")}
		l0 := min(r.Machine.LoadStart[0], r.Machine.LoadEnd[0])
		l1 := max(r.Machine.LoadStart[0], r.Machine.LoadEnd[0])
		if _, ok := lo[k]; !ok {
			order = append(order, k)
			lo[k], hi[k] = l0, l1
		}
		lo[k], hi[k] = min(lo[k], l0), max(hi[k], l1)
	}
	var out []string
	for _, k := range order {
		cpu := k.cpu
		if cpu == "" {
			cpu = "CPU not recorded"
		}
		s := fmt.Sprintf("%s · qnnprep kernels %s", cpu, k.kernels)
		if k.backend != "" {
			s += " · llama.cpp " + k.backend
		}
		out = append(out, s+fmt.Sprintf(" · load %.1f–%.1f", lo[k], hi[k]))
	}
	return out
}

// bars is one bar chart per series (and depth) over the groups, with its
// run values as dots and its mean written above it.
type bars struct {
	p     *plot.Plot
	n     int // bars per group
	i     int
	width vg.Length
}

// newBars lays out n bars per group over a data area about area wide.
func (f *figure) newBars(p *plot.Plot, n int, area vg.Length) *bars {
	w := min(vg.Points(22), 0.8*area/vg.Length(max(n*len(f.groups), 1)))
	return &bars{p: p, n: n, width: w}
}

// nominalX names the groups under a bar panel, the size on a second line
// so that narrow groups do not run into each other.
func (f *figure) nominalX(p *plot.Plot) {
	names := make([]string, len(f.groups))
	for i, g := range f.groups {
		names[i] = strings.Replace(g, " (", "\n(", 1)
	}
	p.NominalX(names...)
	p.X.Min, p.X.Max = -0.5, float64(len(f.groups))-0.5
}

// ratioTicks labels the ratio axis in steps that keep about ten labels,
// 1.0 among them.
func ratioTicks(ymax float64) stepTicks {
	switch {
	case ymax <= 2:
		return stepTicks{0.25, "%.2f"}
	case ymax <= 5:
		return stepTicks{0.5, "%.1f"}
	case ymax <= 10:
		return stepTicks{1, "%.0f"}
	}
	return stepTicks{math.Ceil(ymax / 10), "%.0f"}
}

// add draws one bar per group: vals[g] are the runs' values (none: no
// bar); outlined draws the bar as an outline (llama.cpp).
func (b *bars) add(vals [][]float64, col color.Color, outlined bool, format string) {
	means := make(plotter.Values, len(vals))
	for g, v := range vals {
		means[g], _ = meanStd(v)
	}
	bc, err := plotter.NewBarChart(means, b.width)
	if err != nil {
		b.i++
		return
	}
	off := (vg.Length(b.i) - vg.Length(b.n-1)/2) * b.width
	bc.Offset = off
	bc.Color = col
	bc.LineStyle.Color = col
	bc.LineStyle.Width = vg.Points(0.5)
	if outlined {
		bc.Color = color.White
		bc.LineStyle.Width = vg.Points(1.5)
	}
	b.p.Add(bc)
	// The dots and labels sit at the bar's x in data units, which the
	// axis only knows once the panel is drawn: they are added as their
	// own plotters keyed by group index, shifted by the bar's offset.
	var lab plotter.XYLabels
	var dots plotter.XYs
	for g, v := range vals {
		if len(v) == 0 {
			continue
		}
		top := means[g] // the label above the bar and its dots
		for _, y := range v {
			top = max(top, y)
		}
		lab.XYs = append(lab.XYs, plotter.XY{X: float64(g), Y: top})
		lab.Labels = append(lab.Labels, fmt.Sprintf(format, means[g]))
		if len(v) > 1 {
			for _, y := range v {
				dots = append(dots, plotter.XY{X: float64(g), Y: y})
			}
		}
	}
	if l, err := plotter.NewLabels(lab); err == nil && len(lab.XYs) > 0 {
		for i := range l.TextStyle {
			l.TextStyle[i] = textStyle(vg.Points(7))
			l.TextStyle[i].XAlign = text.XCenter
			l.TextStyle[i].Rotation = 0
		}
		l.Offset = vg.Point{X: off, Y: vg.Points(3)}
		b.p.Add(l)
	}
	if len(dots) > 0 {
		if sc, err := plotter.NewScatter(dots); err == nil {
			sc.GlyphStyle = draw.GlyphStyle{Color: color.Gray{40}, Radius: vg.Points(1.6), Shape: draw.CircleGlyph{}}
			b.p.Add(offsetPlotter{sc, off})
		}
	}
	b.i++
}

// offsetPlotter draws a plotter shifted right by off, as a bar chart's
// Offset shifts its bars.
type offsetPlotter struct {
	plot.Plotter
	off vg.Length
}

func (o offsetPlotter) Plot(c draw.Canvas, p *plot.Plot) {
	c.Rectangle = c.Rectangle.Add(vg.Point{X: o.off})
	o.Plotter.Plot(c, p)
}

// ratioPanel: qnnprep's tokens/s over llama.cpp's, a group per model and
// a bar per test, thread count and depth.
func (f *figure) ratioPanel() (*plot.Plot, bool) {
	type key struct {
		group string
		s     series
		depth int
	}
	vals := map[key][]float64{}
	ymax := 1.0
	for _, r := range f.s.Reports {
		for _, x := range r.Results {
			if x.Engine == "qnnprep" && x.VsLlama > 0 {
				k := key{f.label[r], series{x.Test, x.Kind, x.Threads}, x.Depth}
				vals[k] = append(vals[k], x.VsLlama)
				ymax = max(ymax, x.VsLlama)
			}
		}
	}
	if len(vals) == 0 {
		return nil, false
	}
	type bar struct {
		s     series
		depth int
	}
	var order []bar
	for _, sr := range f.series {
		for _, d := range f.depths {
			for _, g := range f.groups {
				if len(vals[key{g, sr, d}]) > 0 {
					order = append(order, bar{sr, d})
					break
				}
			}
		}
	}
	p := plot.New()
	p.Title.Text = "qnnprep ÷ llama.cpp, tokens/s (above 1: qnnprep faster)"
	p.Y.Label.Text = "ratio (×)"
	p.Y.Min, p.Y.Max = 0, ymax*1.15
	p.Y.Tick.Marker = ratioTicks(p.Y.Max)
	p.Add(plotter.NewGrid())
	f.nominalX(p)
	b := f.newBars(p, len(order), f.ratioWidth)
	for _, o := range order {
		col := f.colour(o.s)
		for range indexOfInt(f.depths, o.depth) {
			col = light(col)
		}
		vs := make([][]float64, len(f.groups))
		for g, name := range f.groups {
			vs[g] = vals[key{name, o.s, o.depth}]
		}
		b.add(vs, col, false, "%.2f")
	}
	one, _ := plotter.NewLine(plotter.XYs{{X: -0.5, Y: 1}, {X: float64(len(f.groups)) - 0.5, Y: 1}})
	one.Color = color.Black
	one.Width = vg.Points(1.2)
	one.Dashes = []vg.Length{vg.Points(4), vg.Points(2)}
	p.Add(one)
	return p, true
}

// readPanel: each tg row's weight stream as a share of the memory-read
// ceiling with its thread count, qnnprep filled, llama.cpp outlined.
func (f *figure) readPanel() (*plot.Plot, bool) {
	type key struct {
		group, engine string
		s             series
	}
	vals := map[key][]float64{}
	depth0 := map[*Report]int{}
	for _, r := range f.s.Reports {
		depth0[r] = -1
		for _, x := range r.Results {
			if x.ReadFraction > 0 && (depth0[r] < 0 || x.Depth < depth0[r]) {
				depth0[r] = x.Depth
			}
		}
	}
	ymax := 1.0
	for _, r := range f.s.Reports {
		for _, x := range r.Results {
			// The shallowest depth only: deeper, the KV cache is read too.
			if x.ReadFraction > 0 && x.Depth == depth0[r] {
				k := key{f.label[r], x.Engine, series{x.Test, x.Kind, x.Threads}}
				vals[k] = append(vals[k], 100*x.ReadFraction)
				ymax = max(ymax, x.ReadFraction)
			}
		}
	}
	if len(vals) == 0 {
		return nil, false
	}
	type bar struct {
		engine string
		s      series
	}
	var order []bar
	for _, sr := range f.series {
		for _, e := range []string{"qnnprep", "llama.cpp"} {
			for _, g := range f.groups {
				if len(vals[key{g, e, sr}]) > 0 {
					order = append(order, bar{e, sr})
					break
				}
			}
		}
	}
	p := plot.New()
	p.Title.Text = "decoding: weights read ÷ memory-read ceiling"
	p.Y.Label.Text = "% of the probe's GB/s (" + f.ceilingStat() + ")"
	if f.ownCeilings() {
		p.Title.Text = "decoding: weights read ÷ the model's read ceiling"
		p.Y.Label.Text = "% of reading its weights (" + f.ceilingStat() + ")"
	}
	p.Y.Min, p.Y.Max = 0, 100*ymax*1.15
	p.Y.Tick.Marker = stepTicks{20, "%.0f"}
	p.Add(plotter.NewGrid())
	f.nominalX(p)
	b := f.newBars(p, len(order), panelWidth*3/4)
	for _, o := range order {
		vs := make([][]float64, len(f.groups))
		for g, name := range f.groups {
			vs[g] = vals[key{name, o.engine, o.s}]
		}
		b.add(vs, f.colour(o.s), o.engine != "qnnprep", "%.0f%%")
	}
	full, _ := plotter.NewLine(plotter.XYs{{X: -0.5, Y: 100}, {X: float64(len(f.groups)) - 0.5, Y: 100}})
	full.Color = color.Black
	full.Width = vg.Points(1.2)
	full.Dashes = []vg.Length{vg.Points(4), vg.Points(2)}
	p.Add(full)
	return p, true
}

// depthPanel: tokens/s against depth for one model, a line per engine,
// test and thread count through the mean of its runs (each run a dot).
func (f *figure) depthPanel(group string) (*plot.Plot, bool) {
	type key struct {
		engine string
		s      series
	}
	pts := map[key]map[int][]float64{}
	var keys []key
	ymax := 0.0
	depths := map[int]bool{}
	for _, r := range f.s.Reports {
		if f.label[r] != group {
			continue
		}
		for _, x := range r.Results {
			if x.Error != "" { // no timings: the header says why
				continue
			}
			k := key{x.Engine, series{x.Test, x.Kind, x.Threads}}
			if pts[k] == nil {
				pts[k] = map[int][]float64{}
				keys = append(keys, k)
			}
			pts[k][x.Depth] = append(pts[k][x.Depth], x.TokensPerSec)
			ymax = max(ymax, x.TokensPerSec)
			depths[x.Depth] = true
		}
	}
	if len(keys) == 0 {
		return nil, false
	}
	p := plot.New()
	p.Title.Text = group
	p.X.Label.Text = "depth (tokens before the test)"
	p.Y.Label.Text = "tokens/s"
	p.Y.Min, p.Y.Max = 0, max(ymax, 1)*1.08
	p.Y.Tick.Marker = roundTicks(p.Y.Max)
	p.Add(plotter.NewGrid())
	if len(depths) == 1 {
		for d := range depths {
			p.X.Min, p.X.Max = float64(d)-1, float64(d)+1
			p.X.Tick.Marker = plot.ConstantTicks{{Value: float64(d), Label: fmt.Sprint(d)}}
		}
	}
	for _, k := range keys {
		var line, dots plotter.XYs
		var ds []int
		for d := range pts[k] {
			ds = append(ds, d)
		}
		sort.Ints(ds)
		for _, d := range ds {
			m, _ := meanStd(pts[k][d])
			line = append(line, plotter.XY{X: float64(d), Y: m})
			for _, v := range pts[k][d] {
				dots = append(dots, plotter.XY{X: float64(d), Y: v})
			}
		}
		col := f.colour(k.s)
		l, err := plotter.NewLine(line)
		if err != nil {
			continue
		}
		l.Color = col
		l.Width = vg.Points(1.5)
		glyph := draw.GlyphDrawer(draw.CircleGlyph{})
		if k.engine != "qnnprep" {
			l.Dashes = []vg.Length{vg.Points(5), vg.Points(3)}
			glyph = draw.TriangleGlyph{}
		}
		sc, err := plotter.NewScatter(dots)
		if err != nil {
			continue
		}
		sc.GlyphStyle = draw.GlyphStyle{Color: col, Radius: vg.Points(2.5), Shape: glyph}
		p.Add(l, sc)
	}
	return p, true
}

// specPanel: the speculative speed-up against K, a line per model and
// thread count; its few entries sit above the data (headroom).
func specPanel(s *Suite) (*plot.Plot, bool) {
	type key struct {
		model   string
		path    string // one line per speculative path (whole, each plan's dialog)
		threads int
	}
	series := map[key]plotter.XYs{}
	var keys []key
	for _, r := range s.Reports {
		for _, x := range r.Speculative {
			k := key{modelLabel(r.Model), dialogLabel(x), x.Threads}
			if series[k] == nil {
				keys = append(keys, k)
			}
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
	free := max(0.35, 1-0.07*float64(len(series))-0.05)
	p.Y.Min, p.Y.Max = 0, ymax/free
	p.Title.Text = "speculative decoding"
	p.X.Label.Text = "K (draft tokens per window)"
	p.Y.Label.Text = "speed-up over greedy (×)"
	p.Legend.Top = true
	p.Add(plotter.NewGrid())
	one, _ := plotter.NewLine(plotter.XYs{{X: 1, Y: 1}, {X: 1, Y: 1}})
	for i, k := range keys {
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
		p.Legend.Add(fmt.Sprintf("%s, %s, %d thr", k.model, k.path, k.threads), l, pts)
	}
	one.Dashes = []vg.Length{vg.Points(2), vg.Points(2)}
	one.Color = color.Gray{128}
	p.Add(one)
	return p, true
}

// roundTicks labels a tokens/s axis from 0 to ymax at a 1, 2 or 5 step
// giving three to seven labels, as whole numbers where the step allows
// (plot's default ticker may print "250.00" beside "0.00").
func roundTicks(ymax float64) stepTicks {
	step := math.Pow(10, math.Floor(math.Log10(ymax/3)))
	for _, m := range []float64{1, 2, 5, 10} {
		if ymax/(m*step) <= 6 {
			step *= m
			break
		}
	}
	digits := max(0, int(-math.Floor(math.Log10(step)+1e-9)))
	return stepTicks{step, fmt.Sprintf("%%.%df", digits)}
}

// stepTicks labels every multiple of step (1.0 among them on a ratio
// axis), where plot's default ticker may label only the ends.
type stepTicks struct {
	step   float64
	format string
}

func (t stepTicks) Ticks(lo, hi float64) []plot.Tick {
	var ts []plot.Tick
	for i := math.Ceil(lo / t.step); i*t.step <= hi; i++ {
		ts = append(ts, plot.Tick{Value: i * t.step, Label: fmt.Sprintf(t.format, i*t.step)})
	}
	return ts
}

func indexOf(s []string, v string) int {
	for i, x := range s {
		if x == v {
			return i
		}
	}
	return -1
}

func indexOfInt(s []int, v int) int {
	for i, x := range s {
		if x == v {
			return i
		}
	}
	return 0
}

// ownCeilings reports whether every ceiling is its model's own (the probe
// read the model's weights), not a buffer's (older reports).
func (f *figure) ownCeilings() bool {
	n := 0
	for _, r := range f.s.Reports {
		for _, c := range r.Machine.ReadCeiling {
			if c.Source != SourceWeights {
				return false
			}
			n++
		}
	}
	return n > 0
}

// ceilingStat names the statistic the read fractions divide by: the
// probe's upper quartile, or its best window in older reports.
func (f *figure) ceilingStat() string {
	stat := ""
	for _, r := range f.s.Reports {
		for _, c := range r.Machine.ReadCeiling {
			st := c.Statistic
			if st == "" {
				st = "best window"
			}
			if stat != "" && stat != st {
				return "upper quartile or best window"
			}
			stat = st
		}
	}
	return stat
}
