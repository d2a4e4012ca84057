package safetensors

import (
	"errors"
	"fmt"
)

// Sentinel errors classify what is wrong with a file; test with errors.Is.
// The error text itself names the file, the tensor and what was expected.
var (
	ErrTooShort       = errors.New("file too short")
	ErrHeaderTooLarge = errors.New("header too large")
	ErrHeaderLength   = errors.New("header length past end of file")
	ErrHeader         = errors.New("invalid header")
	ErrMetadata       = errors.New("invalid __metadata__")
	ErrDtype          = errors.New("unknown dtype")
	ErrShape          = errors.New("invalid shape")
	ErrSize           = errors.New("data size does not match shape and dtype")
	ErrOffsets        = errors.New("invalid data offsets")
	ErrDataSize       = errors.New("data section size mismatch")
	ErrDuplicate      = errors.New("duplicate tensor name")
	ErrShardPath      = errors.New("invalid shard path")
	ErrMissingShard   = errors.New("missing shard")
	ErrIndex          = errors.New("index does not match shards")
	ErrNotFound       = errors.New("tensor not found")
	ErrConvert        = errors.New("cannot convert")
)

// FormatError reports a problem in a safetensors file or index.
type FormatError struct {
	File   string // path of the file (or index) at fault
	Tensor string // tensor name, if the problem concerns one tensor
	Err    error  // one of the Err* sentinels
	Msg    string // what was found and what was expected
	Cause  error  // underlying error (I/O, JSON), if any
}

func (e *FormatError) Error() string {
	s := "safetensors: " + e.File
	if e.Tensor != "" {
		s += fmt.Sprintf(": tensor %q", e.Tensor)
	}
	return s + ": " + e.Msg
}

// Unwrap returns the sentinel and, if any, the underlying cause.
func (e *FormatError) Unwrap() []error {
	if e.Cause != nil {
		return []error{e.Err, e.Cause}
	}
	return []error{e.Err}
}

// errorf builds a FormatError without file or tensor; callers that know
// them fill them in with at.
func errorf(kind error, format string, args ...any) *FormatError {
	return &FormatError{Err: kind, Msg: fmt.Sprintf(format, args...)}
}

// at fills in the file and, if still empty, the tensor of a FormatError;
// other errors are wrapped into one.
func at(err error, file, tensor string) error {
	var fe *FormatError
	if errors.As(err, &fe) {
		if fe.File == "" {
			fe.File = file
		}
		if fe.Tensor == "" {
			fe.Tensor = tensor
		}
		return fe
	}
	return &FormatError{File: file, Tensor: tensor, Err: ErrHeader, Msg: err.Error(), Cause: err}
}

// msgOf returns the message of a FormatError without its file prefix, or
// err's text, for embedding one error in another's message.
func msgOf(err error) string {
	var fe *FormatError
	if errors.As(err, &fe) {
		return fe.Msg
	}
	return err.Error()
}
