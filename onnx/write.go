package onnx

import (
	"bufio"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"sort"
	"strconv"

	"google.golang.org/protobuf/proto"

	"github.com/qnnprep/qnnprep/internal/atomicfile"
	pb "github.com/qnnprep/qnnprep/onnx/onnxpb"
)

// WriteOptions controls how a model is serialised.
type WriteOptions struct {
	IRVersion int64 // default 8
	Opset     int64 // default 17
	Producer  string
	Version   string
	Metadata  [][2]string // metadata_props, in order
	// External forces initializers into a side file NAME.data. Without it
	// they go there only when the model would pass protobuf's 2 GiB limit.
	External bool
}

// MaxInline is the initializer size above which data goes to an external
// file: protobuf messages cannot exceed 2 GiB, and the graph needs room.
const MaxInline = 2<<30 - 64<<20

// MinExternal is the size below which an initializer stays inline even
// with external data (onnx's own external-data helper uses the same
// threshold): shape inference must read the Reshape, Split and Slice
// constants, and cannot read them from an external file.
const MinExternal = 1024

// externalAlign keeps every external tensor page-aligned so readers can
// map it, as the ONNX spec recommends.
const externalAlign = 4096

// WriteFile writes the graph as an ONNX model at path (and path+".data" if
// the data is external). Both files appear only when both are complete.
func (g *Graph) WriteFile(path string, opts WriteOptions) error {
	return g.WriteFileContext(context.Background(), path, opts)
}

// writeChunk is how much tensor data is written between two looks at the
// context, so a cancelled export stops within milliseconds even inside a
// multi-GB tensor.
const writeChunk = 4 << 20

// WriteFileContext is WriteFile that stops, returning ctx.Err() and
// leaving no file under path or path+".data", once ctx is cancelled: it
// checks ctx between initializers and every writeChunk bytes within one.
func (g *Graph) WriteFileContext(ctx context.Context, path string, opts WriteOptions) error {
	external := opts.External || g.InitBytes() > MaxInline
	return writeModels(ctx, []*Graph{g}, []string{path}, []WriteOptions{opts}, path+".data", external, nil)
}

// sideFile is a file written and committed with the models, before them
// (a graph's encodings JSON).
type sideFile struct {
	path  string
	write func(w io.Writer) error
}

// writeModels writes graph gs[i] as an ONNX model at paths[i]. With
// external set, every initializer of MinExternal bytes or more goes to
// the one data file dataPath (in the models' directory), page-aligned,
// and an initializer several graphs hold (the same Key, or the same bytes
// for one without a Load) is stored there once and referenced by offset
// and length from each model: the AR/CL variants of a stage share one copy
// of its weights. Without external, initializers are inline and a stale
// dataPath is removed.
//
// side files are written beside and committed just before the models,
// so a model under its final name always has them and its data.
//
// Nothing appears under a final name until every file is complete; once
// ctx is cancelled it returns ctx.Err(), having checked between
// initializers and every writeChunk bytes within one. The same graphs
// give the same bytes.
func writeModels(ctx context.Context, gs []*Graph, paths []string, opts []WriteOptions, dataPath string, external bool, side []sideFile) error {
	ms := make([]*pb.ModelProto, len(gs))
	for i, g := range gs {
		o := opts[i]
		if o.IRVersion == 0 {
			o.IRVersion = 8
		}
		if o.Opset == 0 {
			o.Opset = 17
		}
		ms[i] = g.proto(o)
	}
	var data *atomicfile.File
	if external {
		for _, p := range paths {
			if filepath.Dir(p) != filepath.Dir(dataPath) {
				return fmt.Errorf("onnx: %s: external data %s must be in the model's directory", p, dataPath)
			}
		}
		var err error
		if data, err = atomicfile.Create(dataPath); err != nil {
			return err
		}
		defer data.Abort()
		if err := writeExternal(ctx, gs, ms, data, dataPath); err != nil {
			return err
		}
	} else {
		for i, g := range gs {
			for j := range g.Inits {
				if err := ctx.Err(); err != nil {
					return err
				}
				b, err := g.Inits[j].bytes()
				if err != nil {
					return fmt.Errorf("onnx: %s: %w", paths[i], err)
				}
				ms[i].Graph.Initializer[j].RawData = b
			}
		}
	}
	files := make([]*atomicfile.File, len(gs))
	for i := range gs {
		b, err := proto.MarshalOptions{Deterministic: true}.Marshal(ms[i])
		if err != nil {
			return fmt.Errorf("encode %s: %w", paths[i], err)
		}
		if external { // the inline bytes are in b now; let them go
			for _, t := range ms[i].Graph.Initializer {
				t.RawData = nil
			}
		}
		f, err := atomicfile.Create(paths[i])
		if err != nil {
			return err
		}
		defer f.Abort()
		if _, err := f.Write(b); err != nil {
			return fmt.Errorf("write %s: %w", paths[i], err)
		}
		files[i] = f
	}
	sides := make([]*atomicfile.File, len(side))
	for i, sf := range side {
		f, err := atomicfile.Create(sf.path)
		if err != nil {
			return err
		}
		defer f.Abort()
		if err := sf.write(f); err != nil {
			return fmt.Errorf("write %s: %w", sf.path, err)
		}
		sides[i] = f
	}
	// Last look before the renames: a cancelled export must not leave a
	// data file whose models never follow.
	if err := ctx.Err(); err != nil {
		return err
	}
	for _, f := range sides {
		if err := f.Commit(); err != nil {
			return err
		}
	}
	stale := []string{}
	for _, p := range paths {
		if p+".data" != dataPath {
			stale = append(stale, p+".data") // an older export's own data file
		}
	}
	if data != nil {
		if err := data.Commit(); err != nil {
			return err
		}
	} else {
		stale = append(stale, dataPath)
	}
	for _, p := range stale {
		if err := os.Remove(p); err != nil && !errors.Is(err, os.ErrNotExist) {
			return fmt.Errorf("remove stale %s: %w", p, err)
		}
	}
	for _, f := range files {
		if err := f.Commit(); err != nil {
			return err
		}
	}
	return nil
}

// writeExternal writes the initializers of gs into data and points the
// matching TensorProtos of ms at them (small ones stay inline).
func writeExternal(ctx context.Context, gs []*Graph, ms []*pb.ModelProto, data *atomicfile.File, dataPath string) error {
	bw := bufio.NewWriterSize(data, 1<<20)
	w := &ctxWriter{ctx: ctx, w: bw}
	type span struct{ off, n int64 }
	stored := map[string]span{}
	var off int64
	for i, g := range gs {
		for j := range g.Inits {
			if err := ctx.Err(); err != nil {
				return err
			}
			in := &g.Inits[j]
			t := ms[i].Graph.Initializer[j]
			n := in.Bytes()
			if n < MinExternal {
				b, err := in.bytes()
				if err != nil {
					return fmt.Errorf("onnx: %s: %w", dataPath, err)
				}
				t.RawData = b
				continue
			}
			key := in.Key
			if in.Load == nil {
				b, err := in.bytes()
				if err != nil {
					return fmt.Errorf("onnx: %s: %w", dataPath, err)
				}
				sum := sha256.Sum256(b)
				key = "sha256 " + hex.EncodeToString(sum[:])
			}
			s, ok := stored[key]
			if !ok {
				pad := (externalAlign - off%externalAlign) % externalAlign
				if _, err := w.Write(make([]byte, pad)); err != nil {
					return fmt.Errorf("write %s: %w", dataPath, err)
				}
				off += pad
				if err := in.writeTo(ctx, w); err != nil {
					if ctx.Err() != nil {
						return ctx.Err()
					}
					return fmt.Errorf("onnx: %s: %w", dataPath, err)
				}
				s = span{off, n}
				off += n
				stored[key] = s
			} else if s.n != n {
				return fmt.Errorf("onnx: %s: initializer %s: %d bytes, but %d under the same key %q", dataPath, in.Name, n, s.n, key)
			}
			t.DataLocation = pb.TensorProto_EXTERNAL
			t.ExternalData = []*pb.StringStringEntryProto{
				{Key: "location", Value: filepath.Base(dataPath)},
				{Key: "offset", Value: strconv.FormatInt(s.off, 10)},
				{Key: "length", Value: strconv.FormatInt(s.n, 10)},
			}
		}
	}
	if err := bw.Flush(); err != nil {
		return fmt.Errorf("write %s: %w", dataPath, err)
	}
	return nil
}

// ctxWriter writes to w in pieces of at most writeChunk bytes and stops
// with ctx.Err() once ctx is cancelled.
type ctxWriter struct {
	ctx context.Context
	w   io.Writer
}

func (c *ctxWriter) Write(p []byte) (int, error) {
	n := 0
	for len(p) > 0 {
		if err := c.ctx.Err(); err != nil {
			return n, err
		}
		k := min(len(p), writeChunk)
		m, err := c.w.Write(p[:k])
		n += m
		if err != nil {
			return n, err
		}
		p = p[k:]
	}
	return n, nil
}

func (g *Graph) proto(opts WriteOptions) *pb.ModelProto {
	gp := &pb.GraphProto{Name: g.Name, Node: g.Nodes}
	for _, in := range g.Inits {
		gp.Initializer = append(gp.Initializer, &pb.TensorProto{
			Name: in.Name, DataType: int32(in.Type), Dims: in.Shape,
		})
	}
	for _, v := range g.Inputs {
		gp.Input = append(gp.Input, valueInfo(v))
	}
	for _, v := range g.Outputs {
		gp.Output = append(gp.Output, valueInfo(v))
	}
	m := &pb.ModelProto{
		IrVersion:       opts.IRVersion,
		ProducerName:    opts.Producer,
		ProducerVersion: opts.Version,
		Graph:           gp,
		OpsetImport:     []*pb.OperatorSetIdProto{{Domain: "", Version: opts.Opset}},
	}
	for _, kv := range opts.Metadata {
		m.MetadataProps = append(m.MetadataProps, &pb.StringStringEntryProto{Key: kv[0], Value: kv[1]})
	}
	return m
}

func valueInfo(v Value) *pb.ValueInfoProto {
	shape := &pb.TensorShapeProto{}
	for _, d := range v.Shape {
		shape.Dim = append(shape.Dim, &pb.TensorShapeProto_Dimension{Value: &pb.TensorShapeProto_Dimension_DimValue{DimValue: d}})
	}
	return &pb.ValueInfoProto{
		Name: v.Name,
		Type: &pb.TypeProto{Value: &pb.TypeProto_TensorType{TensorType: &pb.TypeProto_Tensor{ElemType: int32(v.Type), Shape: shape}}},
	}
}

// Read parses an ONNX file (without loading external data); for tests and
// tools that inspect what was written.
func Read(path string) (*pb.ModelProto, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	m := &pb.ModelProto{}
	if err := proto.Unmarshal(b, m); err != nil {
		return nil, fmt.Errorf("onnx: %s: %w", path, err)
	}
	return m, nil
}

// ExternalData lists the external data files the ONNX model at path
// references (as paths beside it), sorted, without reading them. A
// location that is not a plain file name in the model's directory is an
// error: qnnprep writes none, and a tool must not be sent elsewhere.
func ExternalData(path string) ([]string, error) {
	m, err := Read(path)
	if err != nil {
		return nil, err
	}
	seen := map[string]bool{}
	var out []string
	for _, t := range m.GetGraph().GetInitializer() {
		if t.DataLocation != pb.TensorProto_EXTERNAL {
			continue
		}
		for _, kv := range t.ExternalData {
			if kv.Key != "location" {
				continue
			}
			if kv.Value == "" || kv.Value != filepath.Base(kv.Value) || kv.Value == "." || kv.Value == ".." {
				return nil, fmt.Errorf("onnx: %s: initializer %s: external data location %q is not a file beside the model", path, t.Name, kv.Value)
			}
			if p := filepath.Join(filepath.Dir(path), kv.Value); !seen[p] {
				seen[p] = true
				out = append(out, p)
			}
		}
	}
	sort.Strings(out)
	return out, nil
}
