package freeport

import (
	"net"
	"testing"
)

// TestNextNeverRepeats takes many addresses in a row, each closed before
// the next is asked for (so the kernel is free to hand the same port out
// again), and checks that none is given twice and each can be listened on.
func TestNextNeverRepeats(t *testing.T) {
	seen := map[string]bool{}
	for range 200 {
		addr, err := Next()
		if err != nil {
			t.Fatal(err)
		}
		if seen[addr] {
			t.Fatalf("%s handed out twice", addr)
		}
		seen[addr] = true
		l, err := net.Listen("tcp", addr)
		if err != nil {
			t.Fatalf("listen on %s: %v", addr, err)
		}
		l.Close()
	}
}

func TestSeveralAreDistinct(t *testing.T) {
	addrs, err := Several(3)
	if err != nil {
		t.Fatal(err)
	}
	if len(addrs) != 3 || addrs[0] == addrs[1] || addrs[1] == addrs[2] || addrs[0] == addrs[2] {
		t.Fatalf("Several(3) = %q", addrs)
	}
}
