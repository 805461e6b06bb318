//go:build unix

package store

import (
	"io/fs"
	"syscall"
)

// allocated is the space a file occupies on disk (st_blocks*512, what du
// reports), so sparse, preallocated badger files count only what is written.
func allocated(fi fs.FileInfo) int64 {
	if st, ok := fi.Sys().(*syscall.Stat_t); ok {
		return int64(st.Blocks) * 512
	}
	return fi.Size()
}

// fsAvailable is the space unprivileged users may still allocate on the
// filesystem holding dir (statfs f_bavail).
func fsAvailable(dir string) (int64, error) {
	var st syscall.Statfs_t
	if err := syscall.Statfs(dir, &st); err != nil {
		return 0, err
	}
	return int64(st.Bavail) * int64(st.Bsize), nil
}
