package safetensors

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"slices"
	"strconv"
	"unicode/utf8"
)

// MaxHeaderSize is the largest header the format allows (MAX_HEADER_SIZE in
// the Rust implementation).
const MaxHeaderSize = 100_000_000

// TensorInfo describes one tensor of a file.
type TensorInfo struct {
	Name  string
	Dtype Dtype
	Shape []int64 // row-major, PyTorch order
	File  string  // path of the file holding the data
	Begin int64   // absolute file offset of the first data byte
	End   int64   // absolute file offset one past the last data byte
}

// Elements returns the number of elements (1 for a 0-rank tensor).
func (t *TensorInfo) Elements() int64 {
	n := int64(1)
	for _, s := range t.Shape {
		n *= s
	}
	return n
}

// Bytes returns the size of the tensor's data.
func (t *TensorInfo) Bytes() int64 { return t.End - t.Begin }

// ParseHeader parses and validates the JSON header hdr (the N bytes that
// follow the 8-byte length) of a file whose data section, after the
// header, holds dataSize bytes. name is used in errors and as
// TensorInfo.File. The tensors are returned in data order, with absolute
// file offsets (8 + len(hdr) + the header's data_offsets).
//
// It applies the rules of the Rust reader and more: the header starts with
// '{', is valid UTF-8 JSON optionally followed by whitespace, __metadata__
// maps strings to strings, every tensor has exactly dtype, shape and
// data_offsets with a known dtype and non-negative dimensions, its byte
// size equals numel*bits/8, names are unique, and the data of all tensors
// tiles [0, dataSize) with no hole and no overlap.
func ParseHeader(hdr []byte, dataSize int64, name string) (map[string]string, []TensorInfo, error) {
	md, ts, err := parseHeader(hdr, dataSize)
	if err != nil {
		return nil, nil, at(err, name, "")
	}
	base := 8 + int64(len(hdr))
	for i := range ts {
		ts[i].File = name
		ts[i].Begin += base
		ts[i].End += base
	}
	return md, ts, nil
}

// parseHeader does ParseHeader's work with offsets relative to the data
// section and errors that lack the file name.
func parseHeader(hdr []byte, dataSize int64) (map[string]string, []TensorInfo, error) {
	if len(hdr) > MaxHeaderSize {
		return nil, nil, errorf(ErrHeaderTooLarge, "header is %d bytes, more than the format's limit of %d", len(hdr), MaxHeaderSize)
	}
	if dataSize < 0 {
		return nil, nil, errorf(ErrDataSize, "negative data size %d", dataSize)
	}
	if len(hdr) == 0 || hdr[0] != '{' {
		return nil, nil, errorf(ErrHeader, "header must be a JSON object starting with '{'")
	}
	if !utf8.Valid(hdr) {
		return nil, nil, errorf(ErrHeader, "header is not valid UTF-8")
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
		t, err := readTensor(dec)
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

// checkLayout verifies that each tensor's offsets fit its shape and that
// together they tile [0, dataSize) exactly; it sorts ts by offset.
func checkLayout(ts []TensorInfo, dataSize int64) error {
	for i := range ts {
		t := &ts[i]
		if t.End < t.Begin {
			return &FormatError{Tensor: t.Name, Err: ErrOffsets, Msg: fmt.Sprintf("data_offsets [%d, %d]: end before begin", t.Begin, t.End)}
		}
		if t.End > dataSize {
			return &FormatError{Tensor: t.Name, Err: ErrOffsets, Msg: fmt.Sprintf("data_offsets [%d, %d] past end of data (%d bytes)", t.Begin, t.End, dataSize)}
		}
		n, err := byteSize(t.Dtype, t.Shape)
		if err != nil {
			return at(err, "", t.Name)
		}
		if t.End-t.Begin != n {
			return &FormatError{Tensor: t.Name, Err: ErrSize, Msg: fmt.Sprintf("data_offsets [%d, %d] hold %d bytes, shape %v of %s needs %d", t.Begin, t.End, t.End-t.Begin, t.Shape, t.Dtype, n)}
		}
	}
	slices.SortFunc(ts, func(a, b TensorInfo) int {
		if a.Begin != b.Begin {
			return compareInt(a.Begin, b.Begin)
		}
		return compareInt(a.End, b.End)
	})
	var pos int64
	for _, t := range ts {
		switch {
		case t.Begin > pos:
			return &FormatError{Tensor: t.Name, Err: ErrOffsets, Msg: fmt.Sprintf("data_offsets [%d, %d] leave a hole: expected begin %d (end of the previous tensor)", t.Begin, t.End, pos)}
		case t.Begin < pos:
			return &FormatError{Tensor: t.Name, Err: ErrOffsets, Msg: fmt.Sprintf("data_offsets [%d, %d] overlap the previous tensor, which ends at %d", t.Begin, t.End, pos)}
		}
		pos = t.End
	}
	if pos != dataSize {
		return errorf(ErrDataSize, "tensors end at data offset %d but the data section holds %d bytes (trailing bytes)", pos, dataSize)
	}
	return nil
}

func compareInt(a, b int64) int {
	switch {
	case a < b:
		return -1
	case a > b:
		return 1
	}
	return 0
}

// readTensor reads {"dtype": ..., "shape": [...], "data_offsets": [b, e]}.
// Begin and End are left relative to the data section.
func readTensor(dec *json.Decoder) (TensorInfo, error) {
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
			dims, err := uintArray(dec, "shape")
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
			offs, err := uintArray(dec, "data_offsets")
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
func uintArray(dec *json.Decoder, what string) ([]uint64, error) {
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
			return nil, errorf(kindOf(what), "%s: expected a non-negative integer, found %s", what, describe(tok))
		}
		v, err := strconv.ParseUint(string(num), 10, 64)
		if err != nil {
			return nil, errorf(kindOf(what), "%s: expected a non-negative integer, found %s", what, num)
		}
		out = append(out, v)
	}
	if _, err := dec.Token(); err != nil {
		return nil, jsonErr(err)
	}
	return out, nil
}

func kindOf(what string) error {
	if what == "shape" {
		return ErrShape
	}
	return ErrOffsets
}

// readStringMap reads a JSON object whose values are all strings,
// rejecting duplicate keys.
func readStringMap(dec *json.Decoder) (map[string]string, error) {
	if err := delim(dec, '{', "an object"); err != nil {
		return nil, err
	}
	m := map[string]string{}
	for dec.More() {
		k, err := stringToken(dec, "a key")
		if err != nil {
			return nil, err
		}
		if _, dup := m[k]; dup {
			return nil, errorf(ErrHeader, "key %q appears twice", k)
		}
		v, err := stringToken(dec, fmt.Sprintf("a string value for %q", k))
		if err != nil {
			return nil, err
		}
		m[k] = v
	}
	if _, err := dec.Token(); err != nil {
		return nil, jsonErr(err)
	}
	return m, nil
}

func stringToken(dec *json.Decoder, want string) (string, error) {
	tok, err := dec.Token()
	if err != nil {
		return "", jsonErr(err)
	}
	s, ok := tok.(string)
	if !ok {
		return "", errorf(ErrHeader, "expected %s, found %s", want, describe(tok))
	}
	return s, nil
}

func delim(dec *json.Decoder, d json.Delim, want string) error {
	tok, err := dec.Token()
	if err != nil {
		return jsonErr(err)
	}
	if tok != d {
		return errorf(ErrHeader, "expected %s, found %s", want, describe(tok))
	}
	return nil
}

// describe names a JSON token for an error message without echoing
// arbitrarily long input.
func describe(tok json.Token) string {
	switch v := tok.(type) {
	case json.Delim:
		switch v {
		case '{':
			return "an object"
		case '[':
			return "an array"
		}
		return fmt.Sprintf("%q", string(v))
	case string:
		return fmt.Sprintf("string %q", clip(v))
	case json.Number:
		return "number " + string(v)
	case bool:
		return "a boolean"
	case nil:
		return "null"
	}
	return fmt.Sprintf("%T", tok)
}

func jsonErr(err error) error {
	if errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF) {
		return &FormatError{Err: ErrHeader, Msg: "header JSON ends early", Cause: err}
	}
	return &FormatError{Err: ErrHeader, Msg: "header is not valid JSON: " + err.Error(), Cause: err}
}

// clip shortens untrusted strings quoted in error messages.
func clip(s string) string {
	if len(s) > 40 {
		return s[:40] + "…"
	}
	return s
}
