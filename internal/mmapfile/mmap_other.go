//go:build !unix

package mmapfile

import (
	"errors"
	"os"
)

func mmap(*os.File, int) ([]byte, error)   { return nil, errors.New("mmap not supported") }
func mmapRW(*os.File, int) ([]byte, error) { return nil, errors.New("mmap not supported") }
func munmap([]byte) error                  { return nil }
func dontNeed([]byte)                      {}
