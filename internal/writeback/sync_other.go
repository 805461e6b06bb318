//go:build !linux

package writeback

import "os"

// fdatasync makes f durable (fsync where fdatasync is not available).
func fdatasync(f *os.File) error { return f.Sync() }
