package gateway

import (
	"bufio"
	"bytes"
	"io"
	"net"
	"net/http"
	"os"
	"strconv"
	"strings"
	"testing"
	"time"
)

// writeSyscalls is this process's count of write system calls (write,
// writev...), from /proc/self/io.
func writeSyscalls(t *testing.T) int {
	t.Helper()
	data, err := os.ReadFile("/proc/self/io")
	if err != nil {
		t.Skipf("no /proc/self/io: %v", err)
	}
	for line := range strings.SplitSeq(string(data), "\n") {
		if v, ok := strings.CutPrefix(line, "syscw: "); ok {
			n, err := strconv.Atoi(v)
			if err != nil {
				t.Fatal(err)
			}
			return n
		}
	}
	t.Skip("no syscw in /proc/self/io")
	return 0
}

// TestCachedHitIsOneSocketWrite: a GetObject answered from the page cache
// goes out in one write (status line, headers and body), where net/http
// alone makes two (its 4 KiB buffer, then the rest); the answers are
// whole and the connection is kept alive.
func TestCachedHitIsOneSocketWrite(t *testing.T) {
	g, signedAt := benchGateway(t)
	data := g.cache.(*memCache).data
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	srv := &http.Server{Handler: g, ReadHeaderTimeout: 30 * time.Second}
	go func() { _ = srv.Serve(LimitUnsent(roomyListener{ln}, DefaultClientUnsentBytes)) }()
	defer srv.Close()
	conn, err := net.Dial("tcp", ln.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	// Room for a whole answer in the socket buffers, so that a slow
	// reader (a loaded machine) never makes a write partial.
	if err := conn.(*net.TCPConn).SetReadBuffer(4 << 20); err != nil {
		t.Fatal(err)
	}
	br := bufio.NewReaderSize(conn, 256<<10)
	get := func(off int64) {
		t.Helper()
		var req bytes.Buffer
		if err := signedGET(t, ln.Addr().String(), off, signedAt).Write(&req); err != nil {
			t.Fatal(err)
		}
		if _, err := conn.Write(req.Bytes()); err != nil {
			t.Fatal(err)
		}
		resp, err := http.ReadResponse(br, nil)
		if err != nil {
			t.Fatal(err)
		}
		body, err := io.ReadAll(resp.Body)
		if err != nil {
			t.Fatal(err)
		}
		if resp.StatusCode != http.StatusPartialContent || !bytes.Equal(body, data[off:off+benchRange]) || resp.Close {
			t.Fatalf("GET at %d: %s, %d bytes (right bytes: %v), close %v", off, resp.Status, len(body),
				bytes.Equal(body, data[off:off+benchRange]), resp.Close)
		}
	}
	get(0) // the connection is up, the versions' headers formatted
	const reads = 50
	before := writeSyscalls(t)
	for i := range int64(reads) {
		get(i * benchRange)
	}
	// Each read is the client's request and the answer.
	writes := writeSyscalls(t) - before
	t.Logf("%d write system calls for %d reads", writes, reads)
	// Two a read (request, answer); net/http alone makes three. Some
	// slack for writes of other goroutines of this process.
	if writes > 2*reads+reads/2 {
		t.Errorf("%d write system calls for %d reads: the answers took more than one each", writes, reads)
	}
}

// roomyListener gives its connections a send buffer that holds a whole
// answer.
type roomyListener struct{ net.Listener }

func (l roomyListener) Accept() (net.Conn, error) {
	c, err := l.Listener.Accept()
	if tc, ok := c.(*net.TCPConn); ok {
		_ = tc.SetWriteBuffer(4 << 20)
	}
	return c, err
}
