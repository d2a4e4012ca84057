package onnx

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
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

// writeChunk is how much tensor data WriteFileContext writes between two
// looks at its context, so a cancelled export stops within milliseconds
// even inside a multi-GB tensor.
const writeChunk = 4 << 20

// WriteFileContext is WriteFile that stops, returning ctx.Err() and
// leaving no file under path or path+".data", once ctx is cancelled: it
// checks ctx between initializers and every writeChunk bytes within one.
func (g *Graph) WriteFileContext(ctx context.Context, path string, opts WriteOptions) error {
	if opts.IRVersion == 0 {
		opts.IRVersion = 8
	}
	if opts.Opset == 0 {
		opts.Opset = 17
	}
	external := opts.External || g.InitBytes() > MaxInline
	m := g.proto(opts)

	var data *atomicfile.File
	if external {
		dataPath := path + ".data"
		var err error
		data, err = atomicfile.Create(dataPath)
		if err != nil {
			return err
		}
		defer data.Abort()
		bw := bufio.NewWriterSize(data, 1<<20)
		var off int64
		for i := range g.Inits {
			if err := ctx.Err(); err != nil {
				return err
			}
			t := m.Graph.Initializer[i]
			b, err := g.Inits[i].bytes()
			if err != nil {
				return fmt.Errorf("onnx: %s: %w", path, err)
			}
			if len(b) < MinExternal {
				t.RawData = b
				continue
			}
			pad := (externalAlign - off%externalAlign) % externalAlign
			if _, err := bw.Write(make([]byte, pad)); err != nil {
				return fmt.Errorf("write %s: %w", dataPath, err)
			}
			off += pad
			for rest := b; len(rest) > 0; rest = rest[min(len(rest), writeChunk):] {
				if err := ctx.Err(); err != nil {
					return err
				}
				if _, err := bw.Write(rest[:min(len(rest), writeChunk)]); err != nil {
					return fmt.Errorf("write %s: %w", dataPath, err)
				}
			}
			t.DataLocation = pb.TensorProto_EXTERNAL
			t.ExternalData = []*pb.StringStringEntryProto{
				{Key: "location", Value: filepath.Base(dataPath)},
				{Key: "offset", Value: strconv.FormatInt(off, 10)},
				{Key: "length", Value: strconv.Itoa(len(b))},
			}
			off += int64(len(b))
		}
		if err := bw.Flush(); err != nil {
			return fmt.Errorf("write %s: %w", dataPath, err)
		}
	} else {
		for i := range g.Inits {
			if err := ctx.Err(); err != nil {
				return err
			}
			b, err := g.Inits[i].bytes()
			if err != nil {
				return fmt.Errorf("onnx: %s: %w", path, err)
			}
			m.Graph.Initializer[i].RawData = b
		}
	}
	b, err := proto.MarshalOptions{Deterministic: true}.Marshal(m)
	if err != nil {
		return fmt.Errorf("encode %s: %w", path, err)
	}
	f, err := atomicfile.Create(path)
	if err != nil {
		return err
	}
	defer f.Abort()
	if _, err := f.Write(b); err != nil {
		return fmt.Errorf("write %s: %w", path, err)
	}
	// Last look before the renames: a cancelled export must not leave a
	// .data file whose .onnx never follows.
	if err := ctx.Err(); err != nil {
		return err
	}
	if data != nil {
		if err := data.Commit(); err != nil {
			return err
		}
	} else if err := os.Remove(path + ".data"); err != nil && !errors.Is(err, os.ErrNotExist) {
		return fmt.Errorf("remove stale %s.data: %w", path, err)
	}
	return f.Commit()
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
