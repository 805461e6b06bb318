//go:build !unix

package store

import (
	"errors"
	"io/fs"
)

// allocated falls back to the apparent size where st_blocks is unavailable.
func allocated(fi fs.FileInfo) int64 { return fi.Size() }

// fsAvailable is unknown here: the bound is DiskBytes alone.
func fsAvailable(string) (int64, error) { return 0, errors.ErrUnsupported }
