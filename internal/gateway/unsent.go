package gateway

import (
	"net"
	"syscall"
)

// DefaultClientUnsentBytes is the default of LimitUnsent for S3 clients'
// connections.
const DefaultClientUnsentBytes = 128 << 10

// LimitUnsent returns the listener for S3 clients' connections: its TCP
// connections queue at most about n bytes in the kernel that have not been
// sent yet (TCP_NOTSENT_LOWAT on Linux; elsewhere, and for n <= 0, the
// kernel's default), and send a GetObject answered from the page cache in
// one write (clientConn).
//
// Why the limit: a GetObject writes as fast as its pieces arrive, and a
// client that stops reading leaves its connection's buffers to fill. Linux
// grows a connection's send buffer to several MiB, so a ClickHouse read
// that asks for the rest of a column file, takes a few hundred KiB and
// drops the response, had the gateway fetch and write ~4 MiB for it, and
// the gateway's read-ahead took those writes for a client reading on. With
// the unsent queue bounded, writes go no further than the client reads
// (plus its receive window). Bytes in flight on the network are not
// limited, so the send buffer still grows for long, fast connections.
func LimitUnsent(ln net.Listener, n int) net.Listener {
	if !unsentLimitSupported {
		n = 0
	}
	return &clientListener{Listener: ln, unsent: n}
}

type clientListener struct {
	net.Listener
	unsent int
}

func (l *clientListener) Accept() (net.Conn, error) {
	c, err := l.Listener.Accept()
	if err != nil {
		return nil, err
	}
	if sc, ok := c.(syscall.Conn); ok && l.unsent > 0 {
		// A socket that refuses the option still serves, with the
		// kernel's default queue.
		_ = setUnsentLimit(sc, l.unsent)
	}
	return newClientConn(c), nil
}
