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

func dupFd(*os.File) int                    { return -1 }
func closeFd(int)                           {}
func pread(int, []byte, int64) (int, error) { return 0, errors.New("not supported") }
