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
	go func() { _ = srv.Serve(LimitUnsent(ln, DefaultClientUnsentBytes)) }()
	defer srv.Close()
	conn, err := net.Dial("tcp", ln.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
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
	if writes > 2*reads+reads/5 {
		t.Errorf("%d write system calls for %d reads: the answers took more than one each", writes, reads)
	}
}
