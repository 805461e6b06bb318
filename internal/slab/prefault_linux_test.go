package slab

import (
	"testing"
	"unsafe"

	"golang.org/x/sys/unix"
)

// A block is resident as soon as it is made: writing a buffer then
// faults nothing.
func TestBlocksAreFaultedIn(t *testing.T) {
	const size = 4 << 20
	p := New(size, blockBytes)
	b, ok := p.Get()
	if !ok {
		t.Fatal("no buffer")
	}
	pages := make([]byte, size/unix.Getpagesize())
	_, _, errno := unix.Syscall(unix.SYS_MINCORE, uintptr(unsafe.Pointer(&b[0])), uintptr(len(b)), uintptr(unsafe.Pointer(&pages[0])))
	if errno != 0 {
		t.Fatalf("mincore: %v", errno)
	}
	for i, v := range pages {
		if v&1 == 0 {
			t.Fatalf("page %d of a fresh buffer is not resident", i)
		}
	}
}
