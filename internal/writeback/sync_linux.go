package writeback

import (
	"os"
	"syscall"
)

// fdatasync makes f's data durable, and of its metadata what reading the
// data needs (its length), without the rest (times).
func fdatasync(f *os.File) error {
	c, err := f.SyscallConn()
	if err != nil {
		return err
	}
	var serr error
	if err := c.Control(func(fd uintptr) {
		for {
			if serr = syscall.Fdatasync(int(fd)); serr != syscall.EINTR {
				return
			}
		}
	}); err != nil {
		return err
	}
	if serr != nil {
		return &os.PathError{Op: "fdatasync", Path: f.Name(), Err: serr}
	}
	return nil
}
