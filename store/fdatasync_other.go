//go:build !linux

package store

import "os"

// fdatasync flushes f (fsync where there is no fdatasync).
func fdatasync(f *os.File) error { return f.Sync() }
