package getserver

import (
	"bufio"
	"io"
	"log"
	"net"
	"net/http"
	"testing"
	"time"
)

// A connection waits IdleTimeout for each next request, however many it
// served before, and is closed once one does not come in time.
func TestIdleTimeoutIsPerWait(t *testing.T) {
	const idle = 400 * time.Millisecond
	s := &Server{Handler: http.HandlerFunc(handler), Fallback: &http.Server{IdleTimeout: idle, ErrorLog: log.New(io.Discard, "", 0)}}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	go func() { _ = s.Serve(ln) }()
	t.Cleanup(func() { _ = s.Close() })
	c := dial(t, ln.Addr().String())
	br := bufio.NewReader(c)
	for i := range 8 { // 1.2 s in all, 3 idle timeouts
		if i > 0 {
			time.Sleep(idle * 3 / 8)
		}
		if _, err := io.WriteString(c, "GET /again HTTP/1.1\r\nHost: x\r\n\r\n"); err != nil {
			t.Fatal(err)
		}
		if got := readBody(t, br); got != "GET /again 0" {
			t.Fatalf("request %d: %q", i, got)
		}
	}
	last := time.Now()
	if n, err := br.ReadByte(); err == nil {
		t.Fatalf("read %q from a connection that should have been closed", n)
	}
	if waited := time.Since(last); waited < idle-idle/16 || waited > idle+time.Second {
		t.Errorf("closed %v after the last answer, want about %v", waited, idle)
	}
}
