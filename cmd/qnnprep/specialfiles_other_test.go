//go:build !unix

package main

import "errors"

func mkfifo(path string) error    { return errors.ErrUnsupported }
func mknodNull(path string) error { return errors.ErrUnsupported }
