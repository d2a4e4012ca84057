//go:build unix

package main

import "syscall"

// mkfifo and mknodNull make the special files TestNeverDestroysInputs
// points outputs at: a fifo, and a character device 1:3 (/dev/null).
func mkfifo(path string) error    { return syscall.Mkfifo(path, 0o644) }
func mknodNull(path string) error { return syscall.Mknod(path, syscall.S_IFCHR|0o666, 1<<8|3) }
