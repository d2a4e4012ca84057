package safetensors

import (
	"bytes"
	"encoding/json"
	"errors"
	"reflect"
	"slices"
	"strconv"
	"strings"
	"testing"
)

// This file keeps the encoding/json header parser that the scanner in
// header.go replaced, as an oracle: FuzzHeaderOracle checks that both
// accept the same headers and read the same tensors and metadata.

// parseHeader does ParseHeader's work with offsets relative to the data
// section and errors that lack the file name.
func parseHeaderJSON(hdr []byte, dataSize int64) (map[string]string, []TensorInfo, error) {
	if err := checkHeaderBytes(hdr, dataSize); err != nil {
		return nil, nil, err
	}
	dec := json.NewDecoder(bytes.NewReader(hdr))
	dec.UseNumber()
	if _, err := dec.Token(); err != nil { // the '{' checked above
		return nil, nil, jsonErr(err)
	}
	var (
		md   map[string]string
		ts   []TensorInfo
		seen = map[string]bool{}
	)
	for dec.More() {
		key, err := stringToken(dec, "a tensor name")
		if err != nil {
			return nil, nil, err
		}
		if seen[key] {
			if key == "__metadata__" {
				return nil, nil, errorf(ErrMetadata, "__metadata__ appears twice")
			}
			return nil, nil, &FormatError{Tensor: key, Err: ErrDuplicate, Msg: "name appears twice in the header"}
		}
		seen[key] = true
		if key == "__metadata__" {
			if md, err = readStringMap(dec); err != nil {
				return nil, nil, &FormatError{Err: ErrMetadata, Msg: "__metadata__ must map strings to strings: " + msgOf(err), Cause: err}
			}
			continue
		}
		if key == "" {
			return nil, nil, errorf(ErrHeader, "empty tensor name")
		}
		t, err := readTensorJSON(dec)
		if err != nil {
			return nil, nil, at(err, "", key)
		}
		t.Name = key
		ts = append(ts, t)
	}
	if _, err := dec.Token(); err != nil { // '}'
		return nil, nil, jsonErr(err)
	}
	for _, c := range hdr[dec.InputOffset():] {
		if c != ' ' && c != '\t' && c != '\n' && c != '\r' {
			return nil, nil, errorf(ErrHeader, "unexpected %q after the header object (only space padding may follow)", c)
		}
	}
	if err := checkLayout(ts, dataSize); err != nil {
		return nil, nil, err
	}
	return md, ts, nil
}

// readTensor reads {"dtype": ..., "shape": [...], "data_offsets": [b, e]}.
// Begin and End are left relative to the data section.
func readTensorJSON(dec *json.Decoder) (TensorInfo, error) {
	var t TensorInfo
	if err := delim(dec, '{', "a tensor object {\"dtype\", \"shape\", \"data_offsets\"}"); err != nil {
		return t, err
	}
	var haveDtype, haveShape, haveOffsets bool
	for dec.More() {
		key, err := stringToken(dec, "a field name")
		if err != nil {
			return t, err
		}
		switch key {
		case "dtype":
			if haveDtype {
				return t, errorf(ErrHeader, "field dtype appears twice")
			}
			haveDtype = true
			s, err := stringToken(dec, "a dtype string")
			if err != nil {
				return t, err
			}
			t.Dtype = Dtype(s)
			if !t.Dtype.Valid() {
				return t, errorf(ErrDtype, "unknown dtype %q (expected one of %v)", clip(s), Dtypes())
			}
		case "shape":
			if haveShape {
				return t, errorf(ErrHeader, "field shape appears twice")
			}
			haveShape = true
			dims, err := uintArrayJSON(dec, "shape")
			if err != nil {
				return t, err
			}
			t.Shape = make([]int64, len(dims))
			for i, d := range dims {
				if d > maxInt64 {
					return t, errorf(ErrShape, "shape dimension %d too large", d)
				}
				t.Shape[i] = int64(d)
			}
		case "data_offsets":
			if haveOffsets {
				return t, errorf(ErrHeader, "field data_offsets appears twice")
			}
			haveOffsets = true
			offs, err := uintArrayJSON(dec, "data_offsets")
			if err != nil {
				return t, err
			}
			if len(offs) != 2 {
				return t, errorf(ErrOffsets, "data_offsets has %d numbers, expected [begin, end]", len(offs))
			}
			if offs[0] > maxInt64 || offs[1] > maxInt64 {
				return t, errorf(ErrOffsets, "data_offsets %v too large", offs)
			}
			t.Begin, t.End = int64(offs[0]), int64(offs[1])
		default:
			return t, errorf(ErrHeader, "unexpected field %q (expected dtype, shape, data_offsets)", key)
		}
	}
	if _, err := dec.Token(); err != nil {
		return t, jsonErr(err)
	}
	switch {
	case !haveDtype:
		return t, errorf(ErrHeader, "missing field dtype")
	case !haveShape:
		return t, errorf(ErrHeader, "missing field shape")
	case !haveOffsets:
		return t, errorf(ErrHeader, "missing field data_offsets")
	}
	return t, nil
}

// uintArray reads a JSON array of non-negative integers. Its length is
// bounded by the header size, which was checked before.
func uintArrayJSON(dec *json.Decoder, what string) ([]uint64, error) {
	if err := delim(dec, '[', what+" array"); err != nil {
		return nil, err
	}
	var out []uint64
	for dec.More() {
		tok, err := dec.Token()
		if err != nil {
			return nil, jsonErr(err)
		}
		num, ok := tok.(json.Number)
		if !ok {
			return nil, errorf(kindOfJSON(what), "%s: expected a non-negative integer, found %s", what, describe(tok))
		}
		v, err := strconv.ParseUint(string(num), 10, 64)
		if err != nil {
			return nil, errorf(kindOfJSON(what), "%s: expected a non-negative integer, found %s", what, num)
		}
		out = append(out, v)
	}
	if _, err := dec.Token(); err != nil {
		return nil, jsonErr(err)
	}
	return out, nil
}

func kindOfJSON(what string) error {
	if what == "shape" {
		return ErrShape
	}
	return ErrOffsets
}

// FuzzHeaderOracle: the scanner accepts exactly the headers the
// encoding/json parser accepts (but for the limits only the scanner has)
// and reads the same tensors and metadata from them.
func FuzzHeaderOracle(f *testing.F) {
	f.Add([]byte(`{"test":{"dtype":"I32","shape":[2,2],"data_offsets":[0,16]}}`), int64(16))
	f.Add([]byte(`{"__metadata__":{"format":"pt","k\u00e9\"":"v\ud83d\ude00\ud800x"},"a":{"dtype":"F4","shape":[2,2],"data_offsets":[0,2]},"b":{"dtype":"F8_E4M3","shape":[],"data_offsets":[2,3]}}  `), int64(3))
	f.Add([]byte(`{"a\/b":{"shape":[0] , "dtype":"U8","data_offsets":[0,0]},"c":{"dtype":"BOOL","shape":[1e0],"data_offsets":[0,0]}}`), int64(0))
	f.Add([]byte(`{"w":{"dtype":true,"shape":[-0.5E+3],"data_offsets":[0,1]}}`), int64(1))
	f.Add([]byte(`{}`), int64(0))
	f.Fuzz(func(t *testing.T, hdr []byte, dataSize int64) {
		md, ts, err := parseHeader(hdr, dataSize)
		wantMD, wantTS, wantErr := parseHeaderJSON(hdr, dataSize)
		if err != nil && (strings.Contains(err.Error(), "a shape has at most") || strings.Contains(err.Error(), "entries")) {
			return // a limit of the scanner's own
		}
		if (err == nil) != (wantErr == nil) {
			t.Fatalf("scanner error %v, encoding/json error %v", err, wantErr)
		}
		if err != nil {
			if !errors.As(err, new(*FormatError)) {
				t.Fatalf("error %T is not a *FormatError: %v", err, err)
			}
			return
		}
		order := func(a, b TensorInfo) int {
			if c := compareInt(a.Begin, b.Begin); c != 0 {
				return c
			}
			if c := compareInt(a.End, b.End); c != 0 {
				return c
			}
			return strings.Compare(a.Name, b.Name)
		}
		slices.SortFunc(ts, order)
		slices.SortFunc(wantTS, order)
		if !reflect.DeepEqual(md, wantMD) || !reflect.DeepEqual(ts, wantTS) {
			t.Fatalf("scanner read\n%v %+v\nencoding/json read\n%v %+v", md, ts, wantMD, wantTS)
		}
	})
}
