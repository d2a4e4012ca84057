//go:build !unix

package safetensors

import (
	"errors"
	"os"
)

func mmap(f *os.File, size int64) ([]byte, error) { return nil, errors.ErrUnsupported }

func munmap(b []byte) error { return nil }
