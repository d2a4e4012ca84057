package safetensors

import (
	"bytes"
	"fmt"
	"io"
	"slices"
	"strconv"
	"strings"
	"unicode"
	"unicode/utf16"
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

// Limits beyond the format's: far above what any framework writes, they
// keep the memory a header costs within a small multiple of its size.
const (
	// MaxDims is the most dimensions a tensor may have (PyTorch and
	// NumPy tensors in checkpoints have at most 5 or 6).
	MaxDims = 16
	// MaxMetadata is the most __metadata__ entries a header may have.
	MaxMetadata = 4096
)

// checkHeaderBytes checks what must hold before a header is parsed: its
// size, the data size, a leading '{' and valid UTF-8.
func checkHeaderBytes(hdr []byte, dataSize int64) error {
	if len(hdr) > MaxHeaderSize {
		return errorf(ErrHeaderTooLarge, "header is %d bytes, more than the format's limit of %d", len(hdr), MaxHeaderSize)
	}
	if dataSize < 0 {
		return errorf(ErrDataSize, "negative data size %d", dataSize)
	}
	if len(hdr) == 0 || hdr[0] != '{' {
		return errorf(ErrHeader, "header must be a JSON object starting with '{'")
	}
	if !utf8.Valid(hdr) {
		return errorf(ErrHeader, "header is not valid UTF-8")
	}
	return nil
}

// parseHeader does ParseHeader's work with offsets relative to the data
// section and errors that lack the file name.
//
// It scans the JSON itself rather than with encoding/json, whose token
// API allocates for every token (a 60 MB header cost 700 MB): a first
// pass checks the syntax and counts tensors, dimensions and metadata
// entries, and a second fills storage of exactly that size. The result
// costs at most about 2.7 times the header's size (headers of many
// tensors with 16 dimensions each; TestHeaderMemory measures it).
func parseHeader(hdr []byte, dataSize int64) (map[string]string, []TensorInfo, error) {
	if err := checkHeaderBytes(hdr, dataSize); err != nil {
		return nil, nil, err
	}
	count := &scanner{b: hdr}
	if err := count.header(); err != nil {
		return nil, nil, err
	}
	fill := &scanner{b: hdr, store: true,
		ts:   make([]TensorInfo, 0, count.nTensors),
		dims: make([]int64, 0, count.nDims),
	}
	if count.nMeta > 0 || count.haveMeta {
		fill.md = make(map[string]string, count.nMeta)
	}
	if err := fill.header(); err != nil {
		return nil, nil, err
	}
	ts := fill.ts
	// Duplicate names, found by sorting (a set of names would cost more
	// than the header).
	slices.SortFunc(ts, func(a, b TensorInfo) int { return strings.Compare(a.Name, b.Name) })
	for i := 1; i < len(ts); i++ {
		if ts[i].Name == ts[i-1].Name {
			return nil, nil, &FormatError{Tensor: ts[i].Name, Err: ErrDuplicate, Msg: "name appears twice in the header"}
		}
	}
	if err := checkLayout(ts, dataSize); err != nil {
		return nil, nil, err
	}
	if len(ts) == 0 {
		ts = nil
	}
	return fill.md, ts, nil
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

// scanner reads a header: a JSON object of tensor objects and an optional
// __metadata__ object of strings. With store unset it only checks and
// counts; with store set it fills ts (sharing dims) and md, sized by a
// counting pass.
type scanner struct {
	b []byte
	i int

	store    bool
	ts       []TensorInfo
	dims     []int64
	md       map[string]string
	haveMeta bool

	nTensors, nDims, nMeta int
	nums                   []uint64 // the last array uints read
}

func (s *scanner) header() error {
	s.i = 1 // the '{' checked by the caller
	if s.peek() == '}' {
		s.i++
	} else {
		for {
			key, err := s.text("a tensor name")
			if err != nil {
				return err
			}
			if err := s.expect(':'); err != nil {
				return err
			}
			switch string(key) {
			case "__metadata__":
				if s.haveMeta {
					return errorf(ErrMetadata, "__metadata__ appears twice")
				}
				s.haveMeta = true
				if err := s.metadata(); err != nil {
					return &FormatError{Err: ErrMetadata, Msg: "__metadata__ must map strings to strings: " + msgOf(err), Cause: err}
				}
			case "":
				return errorf(ErrHeader, "empty tensor name")
			default:
				name := ""
				if s.store {
					name = string(key)
				}
				if err := s.tensor(name); err != nil {
					return at(err, "", string(key))
				}
			}
			more, err := s.next('}')
			if err != nil {
				return err
			}
			if !more {
				break
			}
		}
		s.i++ // '}'
	}
	for _, c := range s.b[s.i:] {
		if c != ' ' && c != '\t' && c != '\n' && c != '\r' {
			return errorf(ErrHeader, "unexpected %q after the header object (only space padding may follow)", c)
		}
	}
	return nil
}

// tensor reads {"dtype": ..., "shape": [...], "data_offsets": [b, e]}.
// Begin and End are left relative to the data section.
func (s *scanner) tensor(name string) error {
	var t TensorInfo
	if err := s.open('{', "a tensor object {\"dtype\", \"shape\", \"data_offsets\"}"); err != nil {
		return err
	}
	var haveDtype, haveShape, haveOffsets bool
	for more := s.peek() != '}'; more; {
		key, err := s.text("a field name")
		if err != nil {
			return err
		}
		if err := s.expect(':'); err != nil {
			return err
		}
		switch string(key) {
		case "dtype":
			if haveDtype {
				return errorf(ErrHeader, "field dtype appears twice")
			}
			haveDtype = true
			d, err := s.text("a dtype string")
			if err != nil {
				return err
			}
			if t.Dtype = canonical(d); t.Dtype == "" {
				return errorf(ErrDtype, "unknown dtype %q (expected one of %v)", clip(string(d)), Dtypes())
			}
		case "shape":
			if haveShape {
				return errorf(ErrHeader, "field shape appears twice")
			}
			haveShape = true
			if err := s.uints("shape"); err != nil {
				return err
			}
			if len(s.nums) > MaxDims {
				return errorf(ErrShape, "shape has %d dimensions (a shape has at most %d dimensions)", len(s.nums), MaxDims)
			}
			start := len(s.dims)
			for _, d := range s.nums {
				if d > maxInt64 {
					return errorf(ErrShape, "shape dimension %d too large", d)
				}
				if s.store {
					s.dims = append(s.dims, int64(d))
				}
			}
			s.nDims += len(s.nums)
			if s.store {
				t.Shape = s.dims[start:len(s.dims):len(s.dims)] // appending to it copies
			}
		case "data_offsets":
			if haveOffsets {
				return errorf(ErrHeader, "field data_offsets appears twice")
			}
			haveOffsets = true
			if err := s.uints("data_offsets"); err != nil {
				return err
			}
			offs := s.nums
			if len(offs) != 2 {
				return errorf(ErrOffsets, "data_offsets has %d numbers, expected [begin, end]", len(offs))
			}
			if offs[0] > maxInt64 || offs[1] > maxInt64 {
				return errorf(ErrOffsets, "data_offsets %v too large", offs)
			}
			t.Begin, t.End = int64(offs[0]), int64(offs[1])
		default:
			return errorf(ErrHeader, "unexpected field %q (expected dtype, shape, data_offsets)", clip(string(key)))
		}
		if more, err = s.next('}'); err != nil {
			return err
		}
	}
	if s.peek() == '}' {
		s.i++
	}
	switch {
	case !haveDtype:
		return errorf(ErrHeader, "missing field dtype")
	case !haveShape:
		return errorf(ErrHeader, "missing field shape")
	case !haveOffsets:
		return errorf(ErrHeader, "missing field data_offsets")
	}
	s.nTensors++
	if s.store {
		t.Name = name
		s.ts = append(s.ts, t)
	}
	return nil
}

// canonical returns the Dtype constant spelled d, or "" (no allocation
// per tensor).
func canonical(d []byte) Dtype {
	for _, x := range dtypes {
		if string(x.d) == string(d) {
			return x.d
		}
	}
	return ""
}

// metadata reads an object whose values are all strings, rejecting
// duplicate keys.
func (s *scanner) metadata() error {
	if err := s.open('{', "an object"); err != nil {
		return err
	}
	for more := s.peek() != '}'; more; {
		k, err := s.text("a key")
		if err != nil {
			return err
		}
		if err := s.expect(':'); err != nil {
			return err
		}
		if s.peek() != '"' {
			_, err := s.text(fmt.Sprintf("a string value for %q", clip(string(k))))
			return err
		}
		v, err := s.text("")
		if err != nil {
			return err
		}
		if s.nMeta++; s.nMeta > MaxMetadata {
			return errorf(ErrHeader, "more than %d entries", MaxMetadata)
		}
		if s.store {
			if _, dup := s.md[string(k)]; dup {
				return errorf(ErrHeader, "key %q appears twice", clip(string(k)))
			}
			s.md[string(k)] = string(v)
		}
		if more, err = s.next('}'); err != nil {
			return err
		}
	}
	s.i++ // '}'
	return nil
}

// uints reads a JSON array of non-negative integers into s.nums (reused,
// so reading costs nothing per tensor).
func (s *scanner) uints(what string) error {
	s.nums = s.nums[:0]
	if s.peek() != '[' {
		return s.open('[', what+" array") // the error
	}
	s.i++
	for more := s.peek() != ']'; more; {
		c := s.peek()
		if c != '-' && (c < '0' || c > '9') {
			d, err := s.describe()
			if err != nil {
				return err
			}
			return errorf(kindOf(what), "%s: expected a non-negative integer, found %s", what, d)
		}
		num, err := s.number()
		if err != nil {
			return err
		}
		v, err := strconv.ParseUint(string(num), 10, 64)
		if err != nil {
			return errorf(kindOf(what), "%s: expected a non-negative integer, found %s", what, clip(string(num)))
		}
		if len(s.nums) > MaxDims { // no array here may be longer
			return errorf(kindOf(what), "%s has more than %d numbers (a shape has at most %d dimensions)", what, MaxDims, MaxDims)
		}
		s.nums = append(s.nums, v)
		if more, err = s.next(']'); err != nil {
			return err
		}
	}
	s.i++ // ']'
	return nil
}

func kindOf(what string) error {
	if what == "shape" {
		return ErrShape
	}
	return ErrOffsets
}

// --- JSON lexing ---

func (s *scanner) ws() {
	for s.i < len(s.b) {
		switch s.b[s.i] {
		case ' ', '\t', '\n', '\r':
			s.i++
		default:
			return
		}
	}
}

// peek skips space and returns the next byte, or 0 at the end.
func (s *scanner) peek() byte {
	s.ws()
	if s.i >= len(s.b) {
		return 0
	}
	return s.b[s.i]
}

func (s *scanner) early() error {
	return &FormatError{Err: ErrHeader, Msg: "header JSON ends early", Cause: io.ErrUnexpectedEOF}
}

func (s *scanner) invalid(want string) error {
	if s.i >= len(s.b) {
		return s.early()
	}
	return errorf(ErrHeader, "header is not valid JSON: unexpected %q at byte %d, expected %s", s.b[s.i], s.i, want)
}

func (s *scanner) expect(c byte) error {
	if s.peek() != c {
		return s.invalid(fmt.Sprintf("%q", c))
	}
	s.i++
	return nil
}

// next reads the ',' between members, or (without consuming it) the
// closing byte, and reports whether another member follows.
func (s *scanner) next(closing byte) (bool, error) {
	switch s.peek() {
	case ',':
		s.i++
		return true, nil
	case closing:
		return false, nil
	}
	return false, s.invalid(fmt.Sprintf("',' or %q", closing))
}

// open reads the opening '{' or '[' of a value, or says what was found
// instead.
func (s *scanner) open(d byte, want string) error {
	if s.peek() == d {
		s.i++
		return nil
	}
	found, err := s.describe()
	if err != nil {
		return err
	}
	return errorf(ErrHeader, "expected %s, found %s", want, found)
}

// text reads a string value and returns its unescaped bytes (a slice of
// the header unless it holds escapes), or says what was found instead.
func (s *scanner) text(want string) ([]byte, error) {
	if s.peek() != '"' {
		found, err := s.describe()
		if err != nil {
			return nil, err
		}
		return nil, errorf(ErrHeader, "expected %s, found %s", want, found)
	}
	raw, esc, err := s.stringBytes()
	if err != nil || !esc {
		return raw, err
	}
	return unescape(raw), nil
}

// stringBytes reads a JSON string and returns its bytes between the quotes
// (still escaped) and whether it holds escapes.
func (s *scanner) stringBytes() (raw []byte, esc bool, err error) {
	s.i++ // '"'
	start := s.i
	for s.i < len(s.b) {
		c := s.b[s.i]
		switch {
		case c == '"':
			raw = s.b[start:s.i]
			s.i++
			return raw, esc, nil
		case c < 0x20:
			return nil, false, s.invalid("a character in a string (control characters must be escaped)")
		case c == '\\':
			esc = true
			s.i++
			if s.i >= len(s.b) {
				return nil, false, s.early()
			}
			switch s.b[s.i] {
			case '"', '\\', '/', 'b', 'f', 'n', 'r', 't':
				s.i++
			case 'u':
				s.i++
				for k := 0; k < 4; k++ {
					if s.i >= len(s.b) {
						return nil, false, s.early()
					}
					if !isHex(s.b[s.i]) {
						return nil, false, s.invalid("a hex digit in a \\u escape")
					}
					s.i++
				}
			default:
				return nil, false, s.invalid("an escape character")
			}
		default:
			s.i++
		}
	}
	return nil, false, s.early()
}

func isHex(c byte) bool { return '0' <= c && c <= '9' || 'a' <= c && c <= 'f' || 'A' <= c && c <= 'F' }

func hexVal(b []byte) rune {
	var r rune
	for _, c := range b {
		r <<= 4
		switch {
		case c <= '9':
			r |= rune(c - '0')
		case c >= 'a':
			r |= rune(c - 'a' + 10)
		default:
			r |= rune(c - 'A' + 10)
		}
	}
	return r
}

// unescape decodes a string's escapes as encoding/json does: a \u escape
// that is half of a surrogate pair without its other half becomes U+FFFD.
func unescape(raw []byte) []byte {
	out := make([]byte, 0, len(raw))
	for i := 0; i < len(raw); {
		c := raw[i]
		if c != '\\' {
			out = append(out, c)
			i++
			continue
		}
		e := raw[i+1]
		i += 2
		switch e {
		case 'b':
			out = append(out, '\b')
		case 'f':
			out = append(out, '\f')
		case 'n':
			out = append(out, '\n')
		case 'r':
			out = append(out, '\r')
		case 't':
			out = append(out, '\t')
		case 'u':
			r := hexVal(raw[i : i+4])
			i += 4
			if utf16.IsSurrogate(r) {
				r2 := unicode.ReplacementChar
				if i+6 <= len(raw) && raw[i] == '\\' && raw[i+1] == 'u' {
					if d := utf16.DecodeRune(r, hexVal(raw[i+2:i+6])); d != unicode.ReplacementChar {
						r2 = d
						i += 6
					}
				}
				r = r2
			}
			out = utf8.AppendRune(out, r)
		default: // '"', '\\', '/'
			out = append(out, e)
		}
	}
	return out
}

// number reads a JSON number and returns its text.
func (s *scanner) number() ([]byte, error) {
	start := s.i
	if s.i < len(s.b) && s.b[s.i] == '-' {
		s.i++
	}
	switch {
	case s.i >= len(s.b):
		return nil, s.early()
	case s.b[s.i] == '0':
		s.i++
	case '1' <= s.b[s.i] && s.b[s.i] <= '9':
		s.digits()
	default:
		return nil, s.invalid("a digit")
	}
	if s.i < len(s.b) && s.b[s.i] == '.' {
		s.i++
		if s.i >= len(s.b) || s.b[s.i] < '0' || s.b[s.i] > '9' {
			return nil, s.invalid("a digit after the decimal point")
		}
		s.digits()
	}
	if s.i < len(s.b) && (s.b[s.i] == 'e' || s.b[s.i] == 'E') {
		s.i++
		if s.i < len(s.b) && (s.b[s.i] == '+' || s.b[s.i] == '-') {
			s.i++
		}
		if s.i >= len(s.b) || s.b[s.i] < '0' || s.b[s.i] > '9' {
			return nil, s.invalid("a digit in the exponent")
		}
		s.digits()
	}
	if s.i >= len(s.b) {
		return nil, s.early() // a number cannot end the header
	}
	return s.b[start:s.i], nil
}

func (s *scanner) digits() {
	for s.i < len(s.b) && '0' <= s.b[s.i] && s.b[s.i] <= '9' {
		s.i++
	}
}

// describe names the value at the cursor for an error message, without
// echoing arbitrarily long input; a malformed value is a syntax error.
func (s *scanner) describe() (string, error) {
	switch c := s.peek(); {
	case c == '{':
		return "an object", nil
	case c == '[':
		return "an array", nil
	case c == '"':
		raw, esc, err := s.stringBytes()
		if err != nil {
			return "", err
		}
		str := string(raw[:min(len(raw), 160)])
		if esc {
			str = string(unescape(raw))
		}
		return fmt.Sprintf("string %q", clip(str)), nil
	case c == '-' || '0' <= c && c <= '9':
		num, err := s.number()
		if err != nil {
			return "", err
		}
		return "number " + clip(string(num)), nil
	case c == 't' || c == 'f' || c == 'n':
		for _, lit := range []string{"true", "false", "null"} {
			if bytes.HasPrefix(s.b[s.i:], []byte(lit)) {
				s.i += len(lit)
				if lit == "null" {
					return "null", nil
				}
				return "a boolean", nil
			}
		}
		if len(s.b)-s.i < 5 {
			return "", s.early()
		}
	}
	return "", s.invalid("a value")
}

// clip shortens untrusted strings quoted in error messages.
func clip(s string) string {
	if len(s) > 40 {
		return s[:40] + "…"
	}
	return s
}
