package main

import (
	"errors"
	"fmt"
	"io"
	"math"
	"reflect"
	"strings"
	"text/tabwriter"

	"github.com/qnnprep/qnnprep/gguf"
	"github.com/qnnprep/qnnprep/tokenizer"
)

// inspectKV is one GGUF metadata pair as inspect shows it: scalars in
// full, strings cut at maxShownString bytes, arrays as their length and
// first few elements.
type inspectKV struct {
	Key   string `json:"key"`
	Type  string `json:"type"`            // UINT32, STRING, ARRAY[STRING], ...
	Count int    `json:"count,omitempty"` // array length
	Value any    `json:"value"`           // the value, or an array's first elements
}

const (
	maxShownString   = 120
	maxShownElements = 8
)

// inspectGGUF describes any valid GGUF file, whether or not the pipeline
// can use it: its metadata, tensor table and totals, with openErr (why
// model.Open refused it) and what the pipeline does not support as notes.
func inspectGGUF(path string, openErr error) (*inspectInfo, error) {
	f, err := gguf.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	info := &inspectInfo{Path: path, Format: "gguf", GGUFVersion: f.Version}
	for _, kv := range f.Metadata {
		info.Metadata = append(info.Metadata, showKV(kv))
	}
	for i := range f.Tensors {
		t := &f.Tensors[i]
		info.Tensors = append(info.Tensors, inspectTensor{t.Name, t.Dims, t.Type.String(), t.Bytes()})
		info.Weights += t.Elements()
		info.Bytes += t.Bytes()
	}
	if info.Weights > 0 {
		info.BPW = float64(info.Bytes*8) / float64(info.Weights)
	}
	// model.Open's message starts "model: PATH: "; the path is shown above.
	msg := strings.TrimPrefix(strings.TrimPrefix(openErr.Error(), "model: "), path+": ")
	info.Notes = append(info.Notes, "not a model the pipeline can use: "+msg)
	if len(f.Tensors) == 0 {
		info.Notes = append(info.Notes, "no tensors: a vocabulary-only file")
	}
	if _, ok := f.Metadata.Get("tokenizer.ggml.model"); ok {
		if v, err := tokenizer.FromGGUF(f.Metadata); err != nil {
			info.Notes = append(info.Notes, "vocabulary not usable: "+strings.TrimPrefix(err.Error(), "tokenizer: "))
		} else {
			info.Notes = append(info.Notes, fmt.Sprintf("vocabulary of %d tokens (%s): usable as `convert --vocab` for a model with %d embedding rows",
				len(v.Tokens), v.Model, len(v.Tokens)))
		}
	}
	return info, nil
}

func showKV(kv gguf.KV) inspectKV {
	typ, elem, _ := gguf.TypeOf(kv.Value)
	out := inspectKV{Key: kv.Key, Type: typ.String(), Value: finite(kv.Value)}
	switch v := kv.Value.(type) {
	case string:
		out.Value = clipString(v)
	default:
		if typ != gguf.Array {
			break
		}
		out.Type = fmt.Sprintf("ARRAY[%s]", elem)
		rv := reflect.ValueOf(kv.Value)
		out.Count = rv.Len()
		head := make([]any, 0, min(out.Count, maxShownElements))
		for i := 0; i < rv.Len() && i < maxShownElements; i++ {
			e := rv.Index(i).Interface()
			if s, ok := e.(string); ok {
				e = clipString(s)
			}
			head = append(head, finite(e))
		}
		out.Value = head
	}
	return out
}

// finite spells out a NaN or infinite float, which JSON cannot hold.
func finite(v any) any {
	var f float64
	switch x := v.(type) {
	case float32:
		f = float64(x)
	case float64:
		f = x
	default:
		return v
	}
	if math.IsNaN(f) || math.IsInf(f, 0) {
		return fmt.Sprint(f)
	}
	return v
}

func clipString(s string) string {
	if len(s) <= maxShownString {
		return s
	}
	cut := maxShownString
	for cut > 0 && !isRuneStart(s[cut]) {
		cut--
	}
	return s[:cut] + fmt.Sprintf("… (%d bytes)", len(s))
}

func isRuneStart(b byte) bool { return b&0xC0 != 0x80 }

// printInspectGGUF prints what inspectGGUF found.
func printInspectGGUF(w io.Writer, info *inspectInfo) {
	fmt.Fprintf(w, "%s (gguf v%d)\n\n", info.Path, info.GGUFVersion)
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "key\ttype\tvalue")
	for _, kv := range info.Metadata {
		v := fmt.Sprintf("%v", kv.Value)
		if s, ok := kv.Value.(string); ok {
			v = fmt.Sprintf("%q", s)
		}
		if kv.Count > 0 || strings.HasPrefix(kv.Type, "ARRAY") {
			v = fmt.Sprintf("%d elements: %s", kv.Count, fmtHead(kv.Value, kv.Count))
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\n", kv.Key, kv.Type, v)
	}
	tw.Flush()
	fmt.Fprintln(w)
	if len(info.Tensors) > 0 {
		tw = tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
		fmt.Fprintln(tw, "tensor\tshape\ttype\tbytes")
		for _, t := range info.Tensors {
			fmt.Fprintf(tw, "%s\t%v\t%s\t%d\n", t.Name, t.Dims, t.Type, t.Bytes)
		}
		tw.Flush()
		fmt.Fprintln(w)
	}
	fmt.Fprintf(w, "%d metadata keys, %d tensors, %d weights, %d bytes", len(info.Metadata), len(info.Tensors), info.Weights, info.Bytes)
	if info.Weights > 0 {
		fmt.Fprintf(w, ", %.3f bits per weight", info.BPW)
	}
	fmt.Fprintln(w)
	for _, n := range info.Notes {
		fmt.Fprintln(w, "note:", n)
	}
}

func fmtHead(v any, n int) string {
	head, _ := v.([]any)
	parts := make([]string, len(head))
	for i, e := range head {
		if s, ok := e.(string); ok {
			parts[i] = fmt.Sprintf("%q", s)
		} else {
			parts[i] = fmt.Sprint(e)
		}
	}
	s := "[" + strings.Join(parts, " ")
	if n > len(head) {
		s += " …"
	}
	return s + "]"
}

// isGGUFFile reports whether path names a file that starts with the GGUF
// magic, so that inspect shows it even when it is not a usable model.
func isGGUFFile(path string, openErr error) bool {
	var fe *gguf.FormatError
	if errors.As(openErr, &fe) {
		return false // not valid GGUF: the error says why
	}
	f, err := gguf.Open(path)
	if err != nil {
		return false
	}
	f.Close()
	return true
}
