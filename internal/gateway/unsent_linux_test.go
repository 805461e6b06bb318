package gateway

import (
	"errors"
	"net"
	"os"
	"syscall"
	"testing"
	"time"

	"golang.org/x/sys/unix"
)

// queuedForIdleClient is how many bytes a server connection accepted from
// ln takes in writes to a client that reads nothing, before a write would
// wait: what a GetObject sends a client that has stopped reading.
func queuedForIdleClient(t *testing.T, ln net.Listener) (queued int, lowat int) {
	t.Helper()
	client, err := net.Dial("tcp", ln.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	defer client.Close()
	server, err := ln.Accept()
	if err != nil {
		t.Fatal(err)
	}
	defer server.Close()
	rc, err := server.(syscall.Conn).SyscallConn()
	if err != nil {
		t.Fatal(err)
	}
	var gerr error
	if err := rc.Control(func(fd uintptr) {
		lowat, gerr = unix.GetsockoptInt(int(fd), unix.IPPROTO_TCP, unix.TCP_NOTSENT_LOWAT)
	}); err != nil || gerr != nil {
		t.Fatal(err, gerr)
	}
	// Writes of 64 KiB until one cannot finish within the deadline: the
	// kernel has stopped taking bytes. A loaded machine only delays the
	// end; it cannot make the kernel take more.
	buf := make([]byte, 64<<10)
	for queued < 256<<20 {
		_ = server.SetWriteDeadline(time.Now().Add(500 * time.Millisecond))
		n, err := server.Write(buf)
		queued += n
		if errors.Is(err, os.ErrDeadlineExceeded) {
			return queued, lowat
		}
		if err != nil {
			t.Fatal(err)
		}
	}
	t.Fatalf("the kernel took %d bytes for a client that reads nothing", queued)
	return 0, 0
}

// TestLimitUnsent: a connection of a LimitUnsent listener carries
// TCP_NOTSENT_LOWAT, and a client that stops reading gets at most its
// receive window and the limit, against the several MiB Linux queues
// otherwise.
func TestLimitUnsent(t *testing.T) {
	const limit = 128 << 10
	plain, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer plain.Close()
	limited := LimitUnsent(plain, limit)

	queued, lowat := queuedForIdleClient(t, limited)
	if lowat != limit {
		t.Fatalf("TCP_NOTSENT_LOWAT of an accepted connection: %d, want %d", lowat, limit)
	}
	// The client's receive buffer starts at tcp_rmem's default (128 KiB
	// here), and grows only as the client reads.
	if queued > 1<<20 {
		t.Errorf("the kernel took %d bytes for an idle client with %d unsent allowed; want under 1 MiB", queued, limit)
	}

	unlimited, lowatDefault := queuedForIdleClient(t, plain)
	t.Logf("idle client: %d bytes queued with the limit, %d without (TCP_NOTSENT_LOWAT %d)", queued, unlimited, lowatDefault)
	if unlimited <= queued {
		t.Errorf("without the limit the kernel took %d bytes, with it %d: the limit made no difference", unlimited, queued)
	}
	if _, lowat := queuedForIdleClient(t, LimitUnsent(plain, 0)); lowat != lowatDefault {
		t.Errorf("LimitUnsent(ln, 0) set TCP_NOTSENT_LOWAT %d (the default is %d)", lowat, lowatDefault)
	}
}
