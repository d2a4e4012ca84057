// Package onnx writes ONNX models: a small graph builder over the protobuf
// messages in onnxpb, with deterministic bytes and external data for models
// past protobuf's 2 GiB limit.
//
// BuildStage turns one graph of a shard plan (a stage for one AR and CL)
// into an ONNX graph over exactly the plan's inputs and outputs, with
// float32 weights holding the qmodel's exact values, and the QNN
// encodings (AIMET format 1.0.0, encodings.schema.json) whose scales give
// back the qmodel's integer codes; Export writes every graph of a plan.
//
// Graph conventions (ops: MatMul, Gather, Reshape, Transpose, Split,
// Slice, Concat, Conv, Softmax, Sigmoid, Exp, Softplus and elementwise
// arithmetic, chosen for the HTP backend; that HTP runs the Gated DeltaNet
// part as built is not verified here):
//   - matrices are MatMul initializers [in, out] named as the GGUF tensor
//     (a tied head is a second initializer output.weight); the embedding
//     is a Gather over token_embd.weight [vocab, hidden];
//   - RMSNorm is ReduceMean/Add/Sqrt/Div/Mul; attention takes
//     concat(past_key_L_in, new keys) with the additive attention_mask,
//     whose first CL−AR columns are the past slots;
//   - RoPE reads position_ids_cos/_sin [1,1,AR,rotary/2] (the tables
//     Genie computes, frequency scaling included) and rotates the model's
//     pairs, adjacent (llama GGUF) or halves (NEOX), leaving partial-rotary
//     dims as they are;
//   - a Gated DeltaNet layer concatenates past_conv_L_in [conv_dim, K−1]
//     (oldest tap first) with the new rows, runs a depthwise Conv, and
//     unrolls the delta rule token by token from past_ssm_L_in; AR-c
//     graphs start from zero state.
package onnx

import (
	"bytes"
	"context"
	"fmt"
	"io"

	pb "github.com/qnnprep/qnnprep/onnx/onnxpb"
)

// DataType is an ONNX tensor element type (TensorProto.DataType).
type DataType int32

const (
	Float   DataType = DataType(pb.TensorProto_FLOAT)
	Uint8   DataType = DataType(pb.TensorProto_UINT8)
	Int8    DataType = DataType(pb.TensorProto_INT8)
	Int32   DataType = DataType(pb.TensorProto_INT32)
	Int64   DataType = DataType(pb.TensorProto_INT64)
	Bool    DataType = DataType(pb.TensorProto_BOOL)
	Float16 DataType = DataType(pb.TensorProto_FLOAT16)
	Uint32  DataType = DataType(pb.TensorProto_UINT32)
)

// Size returns the bytes per element.
func (d DataType) Size() int {
	switch d {
	case Uint8, Int8, Bool:
		return 1
	case Float16:
		return 2
	case Float, Int32, Uint32:
		return 4
	case Int64:
		return 8
	}
	return 0
}

func (d DataType) String() string { return pb.TensorProto_DataType(d).String() }

// Initializer is a constant tensor. Data holds the raw little-endian
// elements; it is referenced, not copied, until the model is written.
// A lazy initializer has no Data but a Load function that streams the
// bytes to w when the model is written (and stops with ctx.Err() once ctx
// is cancelled), so a writer with external data holds a slice of one
// tensor at a time however large the model is.
type Initializer struct {
	Name  string
	Type  DataType
	Shape []int64
	Data  []byte
	Load  func(ctx context.Context, w io.Writer) error
	// Key identifies a lazy initializer's contents across the graphs
	// written together into one data file (WriteModels): initializers
	// with the same Key hold the same bytes, which are stored once.
	// Initializers with Data are matched by their bytes instead.
	Key string
}

// Bytes is the initializer's size from its type and shape.
func (in *Initializer) Bytes() int64 {
	n := int64(in.Type.Size())
	for _, d := range in.Shape {
		n *= d
	}
	return n
}

// bytes returns the initializer's data, loading a lazy one into memory,
// and checks its length.
func (in *Initializer) bytes() ([]byte, error) {
	if in.Load == nil {
		if int64(len(in.Data)) != in.Bytes() {
			return nil, fmt.Errorf("initializer %s: %d bytes for shape %v of %s", in.Name, len(in.Data), in.Shape, in.Type)
		}
		return in.Data, nil
	}
	var buf bytes.Buffer
	buf.Grow(int(in.Bytes()))
	if err := in.writeTo(context.Background(), &buf); err != nil {
		return nil, err
	}
	return buf.Bytes(), nil
}

// writeTo writes the initializer's bytes to w, streaming a lazy one, and
// checks that exactly Bytes() of them came.
func (in *Initializer) writeTo(ctx context.Context, w io.Writer) error {
	if in.Load == nil {
		b, err := in.bytes()
		if err != nil {
			return err
		}
		_, err = w.Write(b)
		return err
	}
	cw := &countWriter{w: w, limit: in.Bytes()}
	if err := in.Load(ctx, cw); err != nil {
		return fmt.Errorf("initializer %s: %w", in.Name, err)
	}
	if cw.n != cw.limit {
		return fmt.Errorf("initializer %s: %d bytes for shape %v of %s", in.Name, cw.n, in.Shape, in.Type)
	}
	return nil
}

// countWriter passes at most limit bytes on to w and counts them.
type countWriter struct {
	w        io.Writer
	n, limit int64
}

func (c *countWriter) Write(p []byte) (int, error) {
	if c.n+int64(len(p)) > c.limit {
		return 0, fmt.Errorf("more than the %d bytes of its shape", c.limit)
	}
	n, err := c.w.Write(p)
	c.n += int64(n)
	return n, err
}

// Value is a typed, fixed-shape graph input or output.
type Value struct {
	Name  string
	Type  DataType
	Shape []int64
}

// Graph collects nodes, values and initializers in insertion order, which
// is the order they are written in, so the same build gives the same bytes.
type Graph struct {
	Name    string
	Inputs  []Value
	Outputs []Value
	Inits   []Initializer
	Nodes   []*pb.NodeProto

	names map[string]bool // every value name, to keep them unique
	seq   map[string]int  // per-op counters for generated names
}

// NewGraph returns an empty graph.
func NewGraph(name string) *Graph {
	return &Graph{Name: name, names: map[string]bool{}, seq: map[string]int{}}
}

func (g *Graph) claim(name string) {
	if g.names[name] {
		panic(fmt.Sprintf("onnx: graph %s: value %q defined twice", g.Name, name))
	}
	g.names[name] = true
}

// Input declares a graph input.
func (g *Graph) Input(name string, t DataType, shape ...int64) string {
	g.claim(name)
	g.Inputs = append(g.Inputs, Value{name, t, shape})
	return name
}

// Output declares that value name is a graph output.
func (g *Graph) Output(name string, t DataType, shape ...int64) {
	g.Outputs = append(g.Outputs, Value{name, t, shape})
}

// Init adds an initializer and returns its name.
func (g *Graph) Init(name string, t DataType, shape []int64, data []byte) string {
	n := int64(t.Size())
	for _, d := range shape {
		n *= d
	}
	if int64(len(data)) != n {
		panic(fmt.Sprintf("onnx: initializer %s: %d bytes for shape %v of %s", name, len(data), shape, t))
	}
	g.claim(name)
	g.Inits = append(g.Inits, Initializer{Name: name, Type: t, Shape: shape, Data: data})
	return name
}

// LazyInit adds an initializer whose bytes load streams to w when the
// model is written (once per write), and returns its name. key identifies
// the contents (Initializer.Key); "" means the name, type and shape.
func (g *Graph) LazyInit(name, key string, t DataType, shape []int64, load func(ctx context.Context, w io.Writer) error) string {
	g.claim(name)
	if key == "" {
		key = fmt.Sprintf("%s %s %v", name, t, shape)
	}
	g.Inits = append(g.Inits, Initializer{Name: name, Type: t, Shape: shape, Load: load, Key: key})
	return name
}

// Attr is a node attribute.
type Attr = *pb.AttributeProto

// AttrInt returns an INT attribute.
func AttrInt(name string, v int64) Attr {
	return &pb.AttributeProto{Name: name, Type: pb.AttributeProto_INT, I: v}
}

// AttrInts returns an INTS attribute.
func AttrInts(name string, v ...int64) Attr {
	return &pb.AttributeProto{Name: name, Type: pb.AttributeProto_INTS, Ints: v}
}

// Node adds a node with explicit output names.
func (g *Graph) Node(op string, inputs, outputs []string, attrs ...Attr) {
	for _, o := range outputs {
		g.claim(o)
	}
	g.seq[op]++
	g.Nodes = append(g.Nodes, &pb.NodeProto{
		Name: fmt.Sprintf("%s_%d", op, g.seq[op]), OpType: op,
		Input: inputs, Output: outputs, Attribute: attrs,
	})
}

// Op adds a single-output node and returns its generated output name.
func (g *Graph) Op(op string, inputs []string, attrs ...Attr) string {
	out := fmt.Sprintf("%s_%d_out", op, g.seq[op]+1)
	for g.names[out] {
		g.seq[op]++
		out = fmt.Sprintf("%s_%d_out", op, g.seq[op]+1)
	}
	g.Node(op, inputs, []string{out}, attrs...)
	return out
}

// Named adds a single-output node whose output is called name.
func (g *Graph) Named(name, op string, inputs []string, attrs ...Attr) string {
	g.Node(op, inputs, []string{name}, attrs...)
	return name
}

// InitBytes is the total size of the initializers.
func (g *Graph) InitBytes() int64 {
	var n int64
	for i := range g.Inits {
		n += g.Inits[i].Bytes()
	}
	return n
}
