package gateway

import (
	"context"
	"net"
	"net/http"
	"sync"
	"syscall"
)

// clientConn is an S3 client's connection as LimitUnsent's listener hands
// it out. Between startBatch and flush it holds small writes and sends
// them with the next large one in one writev, or at flush: net/http writes
// an answer's status line and headers with the first 4 KiB of its body
// (its 4 KiB write buffer) and the rest of the body in a second write, so a
// 64 KiB range was two system calls and two wake-ups of the client. A
// GetObject served whole from the page cache (serveCachedPiece) batches
// its answer; everything else writes as it would without it.
//
// The handler finds the connection through its request: net/http puts
// each connection's LocalAddr into its requests' contexts
// (http.LocalAddrContextKey), and a clientConn's is a clientAddr pointing
// back to it. A request that came another way has no batch.
type clientConn struct {
	net.Conn
	local    clientAddr
	mu       sync.Mutex // for a Close or Write from another goroutine
	batching bool
	buf      *[]byte // from batchBufs while batching
	// iov and bufs are the writev of what is held and a large write:
	// here, not on the stack, where net.Buffers.WriteTo would move them
	// to the heap (two allocations per answer).
	iov  [2][]byte
	bufs net.Buffers
}

// clientAddr is a clientConn's local address.
type clientAddr struct {
	net.Addr
	c *clientConn
}

func newClientConn(c net.Conn) *clientConn {
	cc := &clientConn{Conn: c}
	cc.local = clientAddr{Addr: c.LocalAddr(), c: cc}
	return cc
}

func (c *clientConn) LocalAddr() net.Addr { return &c.local }

// SyscallConn and CloseWrite are the TCP connection's (net/http half-closes
// connections it gives up on with CloseWrite).
func (c *clientConn) SyscallConn() (syscall.RawConn, error) {
	if sc, ok := c.Conn.(syscall.Conn); ok {
		return sc.SyscallConn()
	}
	return nil, errNotTCP
}

func (c *clientConn) CloseWrite() error {
	if cw, ok := c.Conn.(interface{ CloseWrite() error }); ok {
		return cw.CloseWrite()
	}
	return errNotTCP
}

var errNotTCP = &net.OpError{Op: "syscall", Err: syscall.EINVAL}

// connOf is the clientConn a request came on, or nil.
func connOf(ctx context.Context) *clientConn {
	if a, ok := ctx.Value(http.LocalAddrContextKey).(*clientAddr); ok {
		return a.c
	}
	return nil
}

// Sizes of a batch: writes shorter than heldWrite are held (net/http's
// 4 KiB, TLS records of at most 16 KiB) up to maxBatch in all; a longer
// write goes at once, with what is held, in one writev.
const (
	heldWrite = 17 << 10
	maxBatch  = 128 << 10
)

// batchBufs recycles batch buffers: a connection holds one only while it
// writes an answer, not while idle.
var batchBufs = sync.Pool{New: func() any { b := make([]byte, 0, maxBatch); return &b }}

func (c *clientConn) Write(p []byte) (int, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if !c.batching {
		return c.Conn.Write(p)
	}
	if len(p) < heldWrite && len(*c.buf)+len(p) <= maxBatch {
		*c.buf = append(*c.buf, p...)
		return len(p), nil
	}
	held := len(*c.buf)
	if held == 0 {
		return c.Conn.Write(p)
	}
	c.iov = [2][]byte{*c.buf, p}
	c.bufs = c.iov[:]
	n, err := c.bufs.WriteTo(c.Conn)
	c.iov, c.bufs = [2][]byte{}, nil // no reference to p kept
	*c.buf = (*c.buf)[:0]
	return int(max(n-int64(held), 0)), err
}

// startBatch holds the writes that follow until flush.
func (c *clientConn) startBatch() {
	c.mu.Lock()
	if !c.batching {
		c.batching, c.buf = true, batchBufs.Get().(*[]byte)
	}
	c.mu.Unlock()
}

// flush sends what is held and ends the batch.
func (c *clientConn) flush() error {
	c.mu.Lock()
	defer c.mu.Unlock()
	if !c.batching {
		return nil
	}
	var err error
	if len(*c.buf) > 0 {
		_, err = c.Conn.Write(*c.buf)
	}
	*c.buf = (*c.buf)[:0]
	batchBufs.Put(c.buf)
	c.batching, c.buf = false, nil
	return err
}
