package freeport

import (
	"net"
	"testing"

	"github.com/distcache/distcache/internal/testutil"
)

// TestNextNeverRepeats takes many addresses in a row, each closed before
// the next is asked for (so the kernel is free to hand the same port out
// again), and checks that none is given twice and each can be listened on.
func TestNextNeverRepeats(t *testing.T) {
	seen := map[string]bool{}
	for range 200 {
		addr, err := Next()
		testutil.Must(t, err)
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
	testutil.Must(t, err)
	if len(addrs) != 3 || addrs[0] == addrs[1] || addrs[1] == addrs[2] || addrs[0] == addrs[2] {
		t.Fatalf("Several(3) = %q", addrs)
	}
}
