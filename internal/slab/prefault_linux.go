package slab

import "golang.org/x/sys/unix"

// prefault faults b in with one system call; kernels before 5.14 lack
// MADV_POPULATE_WRITE, and b is then touched page by page.
func prefault(b []byte) {
	if err := unix.Madvise(b, unix.MADV_POPULATE_WRITE); err != nil {
		touch(b)
	}
}
