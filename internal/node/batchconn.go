package node

import (
	"net"
	"sync"
)

// BatchingListener wraps the TCP listener that a TLS listener serving
// ServeReads sits on, so that a read connection sends each answer in one
// write to the socket instead of one per TLS record (crypto/tls writes
// every record of up to 16 KiB on its own): a 64 KiB range read is then
// one system call instead of five, and the client is woken once. Other
// connections write as they would without it.
func BatchingListener(ln net.Listener) net.Listener { return batchingListener{ln} }

type batchingListener struct{ net.Listener }

func (l batchingListener) Accept() (net.Conn, error) {
	c, err := l.Listener.Accept()
	if err != nil {
		return nil, err
	}
	return &batchConn{Conn: c}, nil
}

// maxBatch bounds what one batch holds: a 64 KiB range's records and its
// header fit; longer answers go out in writes of about this size.
const maxBatch = 128 << 10

// batchBufs recycles batch buffers: a connection holds one only while it
// writes an answer, not while idle (a node may keep thousands open).
var batchBufs = sync.Pool{New: func() any { b := make([]byte, 0, maxBatch); return &b }}

// batchConn holds what is written between startBatch and flush. The lock
// is for a Close from another goroutine (its TLS alert is a write).
type batchConn struct {
	net.Conn
	mu       sync.Mutex
	batching bool
	buf      *[]byte // from batchBufs while batching
}

func (c *batchConn) Write(p []byte) (int, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if !c.batching {
		return c.Conn.Write(p)
	}
	if len(*c.buf)+len(p) > maxBatch {
		if err := c.flushLocked(); err != nil {
			return 0, err
		}
		if len(p) > maxBatch {
			return c.Conn.Write(p)
		}
	}
	*c.buf = append(*c.buf, p...)
	return len(p), nil
}

func (c *batchConn) startBatch() {
	c.mu.Lock()
	if !c.batching {
		c.batching, c.buf = true, batchBufs.Get().(*[]byte)
	}
	c.mu.Unlock()
}

// flush sends the batch and ends it.
func (c *batchConn) flush() error {
	c.mu.Lock()
	defer c.mu.Unlock()
	if !c.batching {
		return nil
	}
	err := c.flushLocked()
	c.batching = false
	batchBufs.Put(c.buf)
	c.buf = nil
	return err
}

func (c *batchConn) flushLocked() error {
	if len(*c.buf) == 0 {
		return nil
	}
	_, err := c.Conn.Write(*c.buf)
	*c.buf = (*c.buf)[:0]
	return err
}
