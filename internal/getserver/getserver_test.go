package getserver

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"log"
	"net"
	"net/http"
	"strconv"
	"strings"
	"sync/atomic"
	"syscall"
	"testing"
	"time"
)

// answers are handler behaviours, by path, that the framing must treat as
// net/http does.
var answers = map[string]func(w http.ResponseWriter, r *http.Request){
	"/range": func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Length", "65536")
		w.Header().Set("Content-Type", "binary/octet-stream")
		w.WriteHeader(http.StatusPartialContent)
		_, _ = w.Write(bytes.Repeat([]byte("r"), 65536))
	},
	"/sniffed-with-length": func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Length", "5")
		_, _ = w.Write([]byte("hello"))
	},
	"/small": func(w http.ResponseWriter, _ *http.Request) { _, _ = w.Write([]byte("<html>hi</html>")) },
	"/big":   func(w http.ResponseWriter, _ *http.Request) { _, _ = w.Write(bytes.Repeat([]byte("b"), 10000)) },
	"/pieces": func(w http.ResponseWriter, _ *http.Request) {
		for range 5 {
			_, _ = w.Write(bytes.Repeat([]byte("p"), 1000))
		}
	},
	"/empty": func(http.ResponseWriter, *http.Request) {},
	"/xml": func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Type", "application/xml")
		w.WriteHeader(http.StatusNotFound)
		_, _ = io.WriteString(w, "<Error><Code>NoSuchKey</Code></Error>")
	},
	"/not-modified": func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Type", "text/plain")
		w.Header().Set("Content-Length", "10")
		w.Header().Set("Etag", `"x"`)
		w.WriteHeader(http.StatusNotModified)
	},
	"/no-content": func(w http.ResponseWriter, _ *http.Request) { w.WriteHeader(http.StatusNoContent) },
	"/short": func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Length", "100")
		_, _ = w.Write([]byte("only 18 bytes here"))
	},
	"/over": func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Length", "3")
		_, err := w.Write([]byte("too long"))
		w.Header().Set("X-Ignored", fmt.Sprint(err)) // after the head: not sent
	},
	"/close": func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Connection", "close")
		_, _ = w.Write([]byte("bye"))
	},
	"/flush": func(w http.ResponseWriter, _ *http.Request) {
		_, _ = w.Write([]byte("first"))
		w.(http.Flusher).Flush()
		_, _ = w.Write([]byte("second"))
	},
	"/changed-after-header": func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("X-Before", "1")
		w.WriteHeader(http.StatusOK)
		w.Header().Set("X-After", "1")
		_, _ = w.Write([]byte("x"))
	},
	"/abort-early": func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Length", "10")
		_, _ = w.Write([]byte("12345"))
		panic(http.ErrAbortHandler)
	},
	"/abort-late": func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Length", "100000")
		w.Header().Set("Content-Type", "binary/octet-stream")
		_, _ = w.Write(bytes.Repeat([]byte("a"), 10000))
		panic(http.ErrAbortHandler)
	},
	"/newline": func(w http.ResponseWriter, _ *http.Request) {
		w.Header()["X-Multi"] = []string{"a\r\nb", " c "}
		_, _ = w.Write([]byte("n"))
	},
}

// handlerWith answers the paths of answers and extra, and any other request
// with its method, path and body length.
func handlerWith(extra map[string]func(w http.ResponseWriter, r *http.Request)) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		if h, ok := extra[r.URL.Path]; ok {
			h(w, r)
			return
		}
		handler(w, r)
	}
}

func handler(w http.ResponseWriter, r *http.Request) {
	if h, ok := answers[r.URL.Path]; ok {
		h(w, r)
		return
	}
	body, _ := io.ReadAll(r.Body)
	w.Header().Set("X-Method", r.Method)
	_, _ = fmt.Fprintf(w, "%s %s %d", r.Method, r.URL.Path, len(body))
}

// servers starts a Server and a plain net/http server on the same handler;
// lane and fallback count the requests each side of the Server answered.
func servers(t *testing.T, extra map[string]func(w http.ResponseWriter, r *http.Request)) (s *Server, laneAddr, plainAddr string, lane, fallback *atomic.Int64) {
	t.Helper()
	lane, fallback = new(atomic.Int64), new(atomic.Int64)
	count := func(n *atomic.Int64) http.Handler {
		return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { n.Add(1); handlerWith(extra)(w, r) })
	}
	quiet := log.New(io.Discard, "", 0)
	s = &Server{Handler: count(lane), Fallback: &http.Server{Handler: count(fallback), ErrorLog: quiet,
		IdleTimeout: time.Minute, ReadHeaderTimeout: time.Minute}}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- s.Serve(ln) }()
	plain := &http.Server{Handler: handlerWith(extra), ErrorLog: quiet}
	pln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	go func() { _ = plain.Serve(pln) }()
	t.Cleanup(func() {
		_ = s.Close()
		_ = s.Fallback.Close()
		_ = plain.Close()
		if err := <-done; !errors.Is(err, http.ErrServerClosed) {
			t.Errorf("Serve: %v, want ErrServerClosed", err)
		}
	})
	return s, ln.Addr().String(), pln.Addr().String(), lane, fallback
}

// exchange sends raw on a new connection to addr and reads one answer to
// a request of method; reused says whether the connection then answered a
// second request.
type exchange struct {
	status        int
	proto         string
	header        http.Header
	body          string
	contentLength int64
	chunked       bool
	hasDate       bool
	close         bool   // Connection: close
	err           string // reading the answer
	reused        bool
}

func roundTrip(t *testing.T, addr, method, raw string) exchange {
	t.Helper()
	c := dial(t, addr)
	if _, err := io.WriteString(c, raw); err != nil {
		t.Fatal(err)
	}
	br := bufio.NewReader(c)
	resp, err := http.ReadResponse(br, &http.Request{Method: method})
	if err != nil {
		return exchange{err: "head: " + errorKind(err)}
	}
	body, err := io.ReadAll(resp.Body)
	x := exchange{status: resp.StatusCode, proto: resp.Proto, header: resp.Header, body: string(body),
		contentLength: resp.ContentLength, chunked: len(resp.TransferEncoding) > 0, hasDate: resp.Header.Get("Date") != "", close: resp.Close}
	resp.Header.Del("Date")
	if err != nil {
		x.err = "body: " + errorKind(err)
	}
	if _, err := io.WriteString(c, "GET /again HTTP/1.1\r\nHost: x\r\n\r\n"); err == nil {
		if again, err := http.ReadResponse(br, nil); err == nil {
			x.reused = again.StatusCode == http.StatusOK
		}
	}
	return x
}

// errorKind is what an error reading an answer says, less the addresses.
func errorKind(err error) string {
	switch {
	case errors.Is(err, syscall.ECONNRESET):
		return "connection reset"
	case errors.Is(err, io.ErrUnexpectedEOF), errors.Is(err, io.EOF):
		return "closed: " + err.Error()
	}
	return err.Error()
}

func TestAnswersAreFramedAsNetHTTPFrames(t *testing.T) {
	_, laneAddr, plainAddr, lane, fallback := servers(t, nil)
	var paths []string
	for p := range answers {
		paths = append(paths, p)
	}
	requests := map[string]string{
		"GET 1.1":            "GET %s HTTP/1.1\r\nHost: x\r\n\r\n",
		"HEAD 1.1":           "HEAD %s HTTP/1.1\r\nHost: x\r\n\r\n",
		"GET 1.1 close":      "GET %s HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n",
		"GET 1.0":            "GET %s HTTP/1.0\r\n\r\n",
		"GET 1.0 keep-alive": "GET %s HTTP/1.0\r\nConnection: keep-alive\r\n\r\n",
		"HEAD 1.0 keep":      "HEAD %s HTTP/1.0\r\nConnection: Keep-Alive\r\n\r\n",
	}
	served := int64(0)
	for name, format := range requests {
		method, _, _ := strings.Cut(name, " ")
		for _, p := range paths {
			raw := fmt.Sprintf(format, p)
			want := roundTrip(t, plainAddr, method, raw)
			before := lane.Load()
			got := roundTrip(t, laneAddr, method, raw)
			if lane.Load() == before {
				t.Errorf("%s %s: not answered by the Server itself", name, p)
			}
			served++
			if fmt.Sprint(got) != fmt.Sprint(want) {
				t.Errorf("%s %s:\n got %+v\nwant %+v", name, p, got, want)
			}
		}
	}
	if n := fallback.Load(); n != 0 {
		t.Errorf("%d reads were handed to net/http", n)
	}
	t.Logf("%d answers compared", served)
}

func TestOtherRequestsAreNetHTTPs(t *testing.T) {
	_, addr, _, lane, fallback := servers(t, nil)
	c := dial(t, addr)
	br := bufio.NewReader(c)
	// send writes raw and reads the answers' bodies; served checks who
	// answered so far.
	send := func(raw string, bodies ...string) {
		t.Helper()
		if _, err := io.WriteString(c, raw); err != nil {
			t.Fatal(err)
		}
		for _, want := range bodies {
			if got := readBody(t, br); got != want {
				t.Errorf("after %.50q: %q, want %q", raw, got, want)
			}
		}
	}
	served := func(here, netHTTP int64) {
		t.Helper()
		if lane.Load() != here || fallback.Load() != netHTTP {
			t.Errorf("answered here %d, by net/http %d; want %d and %d", lane.Load(), fallback.Load(), here, netHTTP)
		}
	}
	send("GET /first HTTP/1.1\r\nHost: x\r\n\r\n", "GET /first 0")
	// A PUT and the GET after it in one write: net/http answers the PUT
	// (lent the connection) and gives the connection back for the GET.
	send("PUT /put HTTP/1.1\r\nHost: x\r\nContent-Length: 7\r\n\r\npayloadGET /after HTTP/1.1\r\nHost: x\r\n\r\n",
		"PUT /put 7", "GET /after 0")
	send("GET /later HTTP/1.1\r\nHost: x\r\n\r\n", "GET /later 0")
	served(3, 1)
	// A chunked body takes the connection to net/http for good.
	send("PUT /chunked HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\n3\r\nabc\r\n0\r\n\r\n", "PUT /chunked 3")
	send("GET /last HTTP/1.1\r\nHost: x\r\n\r\n", "GET /last 0")
	served(3, 3)

	// A GET with a body, and heads net/http refuses, are net/http's too.
	for raw, want := range map[string]int{
		"GET /b HTTP/1.1\r\nHost: x\r\nContent-Length: 2\r\n\r\nhi":                    http.StatusOK,
		"GET /b HTTP/1.1\r\n\r\n":                                                      http.StatusBadRequest, // no Host
		"GET /b HTTP/1.1\r\nHost: x\r\nHost: y\r\n\r\n":                                http.StatusBadRequest,
		"GET /b HTTP/1.1\r\nHost: x\r\nBad Name: v\r\n\r\n":                            http.StatusBadRequest,
		"GET /b HTTP/1.1\r\nHost: x\r\nExpect: 100-continue\r\n\r\n":                   http.StatusOK,
		"GET /b HTTP/1.1\nHost: x\n\n":                                                 http.StatusOK, // lines ended by bare LFs
		"GET /b HTTP/1.1\r\nHost: x\r\nX: " + strings.Repeat("v", 20<<10) + "\r\n\r\n": http.StatusOK, // longer than here's limit
	} {
		before := fallback.Load()
		if got := roundTrip(t, addr, "GET", raw); got.status != want {
			t.Errorf("%.60q: %d, want %d", raw, got.status, want)
		}
		if fallback.Load() == before && want == http.StatusOK {
			t.Errorf("%.60q: not answered by net/http", raw)
		}
	}
}

// dial connects to addr for the test, with a deadline no answer should take.
func dial(t *testing.T, addr string) net.Conn {
	t.Helper()
	c, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = c.Close() })
	_ = c.SetDeadline(time.Now().Add(30 * time.Second))
	return c
}

func readBody(t *testing.T, br *bufio.Reader) string {
	t.Helper()
	resp, err := http.ReadResponse(br, nil)
	if err != nil {
		t.Fatal(err)
	}
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

func TestPipelinedRequestsAreAnsweredInOrder(t *testing.T) {
	_, addr, _, _, _ := servers(t, nil)
	c := dial(t, addr)
	var raw strings.Builder
	for i := range 20 {
		fmt.Fprintf(&raw, "GET /p%d HTTP/1.1\r\nHost: x\r\n\r\n", i)
	}
	if _, err := io.WriteString(c, raw.String()); err != nil {
		t.Fatal(err)
	}
	br := bufio.NewReader(c)
	for i := range 20 {
		if got, want := readBody(t, br), "GET /p"+strconv.Itoa(i)+" 0"; got != want {
			t.Fatalf("answer %d: %q, want %q", i, got, want)
		}
	}
}

// TestContextEndsWhenTheClientGoesAway: a handler waiting on its request's
// Done learns that the client closed the connection, and a next request
// sent while it waited is served after it.
func TestContextEndsWhenTheClientGoesAway(t *testing.T) {
	waiting, ended := make(chan struct{}), make(chan error, 1)
	proceed := make(chan struct{})
	extra := map[string]func(http.ResponseWriter, *http.Request){}
	extra["/wait-for-client"] = func(w http.ResponseWriter, r *http.Request) {
		done := r.Context().Done()
		waiting <- struct{}{}
		select {
		case <-done:
			ended <- r.Context().Err()
		case <-proceed:
			_, _ = w.Write([]byte("proceeded"))
		}
	}
	_, addr, _, _, _ := servers(t, extra)

	c := dial(t, addr)
	_, _ = io.WriteString(c, "GET /wait-for-client HTTP/1.1\r\nHost: x\r\n\r\n")
	<-waiting
	_ = c.Close()
	select {
	case err := <-ended:
		if !errors.Is(err, context.Canceled) {
			t.Errorf("Err after the client left: %v", err)
		}
	case <-time.After(30 * time.Second):
		t.Fatal("the handler's context did not end when the client went away")
	}

	c = dial(t, addr)
	_, _ = io.WriteString(c, "GET /wait-for-client HTTP/1.1\r\nHost: x\r\n\r\n")
	<-waiting
	_, _ = io.WriteString(c, "GET /next HTTP/1.1\r\nHost: x\r\n\r\n") // read by the watch, or not yet
	time.Sleep(50 * time.Millisecond)                                 // either order must work; this makes the first likely
	close(proceed)
	br := bufio.NewReader(c)
	if got := readBody(t, br); got != "proceeded" {
		t.Errorf("first answer %q", got)
	}
	if got := readBody(t, br); got != "GET /next 0" {
		t.Errorf("second answer %q", got)
	}
}

func TestContextEndsWithTheHandler(t *testing.T) {
	ended := make(chan error, 1)
	extra := map[string]func(http.ResponseWriter, *http.Request){}
	extra["/leave-goroutine"] = func(_ http.ResponseWriter, r *http.Request) {
		ctx := r.Context()
		go func() { <-ctx.Done(); ended <- ctx.Err() }()
	}
	_, addr, _, _, _ := servers(t, extra)
	if got := roundTrip(t, addr, "GET", "GET /leave-goroutine HTTP/1.1\r\nHost: x\r\n\r\n"); got.status != http.StatusOK || !got.reused {
		t.Errorf("answer %+v", got)
	}
	select {
	case err := <-ended:
		if !errors.Is(err, context.Canceled) {
			t.Errorf("Err: %v", err)
		}
	case <-time.After(30 * time.Second):
		t.Fatal("the context outlived its handler")
	}
}

func TestShutdownClosesIdleConnectionsAndEndsTheBusy(t *testing.T) {
	started, finish := make(chan struct{}), make(chan struct{})
	extra := map[string]func(http.ResponseWriter, *http.Request){}
	extra["/busy"] = func(w http.ResponseWriter, _ *http.Request) {
		close(started)
		<-finish
		_, _ = w.Write([]byte("done"))
	}
	s, addr, _, _, _ := servers(t, extra)

	idle, busy := dial(t, addr), dial(t, addr)
	_, _ = io.WriteString(busy, "GET /busy HTTP/1.1\r\nHost: x\r\n\r\n")
	<-started

	shut := make(chan error, 1)
	go func() { shut <- s.Shutdown(context.Background()) }()
	if n, err := idle.Read(make([]byte, 1)); n != 0 || err == nil {
		t.Errorf("idle connection: read %d, %v; want it closed", n, err)
	}
	select {
	case err := <-shut:
		t.Fatalf("Shutdown returned (%v) while a request was in flight", err)
	default:
	}
	close(finish)
	resp, err := http.ReadResponse(bufio.NewReader(busy), nil)
	if err != nil {
		t.Fatal(err)
	}
	if !resp.Close {
		t.Error("the last answer did not say Connection: close")
	}
	if err := <-shut; err != nil {
		t.Errorf("Shutdown: %v", err)
	}
	if _, err := net.DialTimeout("tcp", addr, 5*time.Second); err == nil {
		t.Error("still accepting after Shutdown")
	}
}

// writes are handlers of requests with bodies, by path.
var writes = map[string]func(w http.ResponseWriter, r *http.Request){
	"/read-all": func(w http.ResponseWriter, r *http.Request) {
		b, _ := io.ReadAll(r.Body)
		w.Header().Set("Etag", strconv.Quote(strconv.Itoa(len(b))))
	},
	"/read-none": func(w http.ResponseWriter, _ *http.Request) { _, _ = w.Write([]byte("ignored the body")) },
	"/read-some": func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.CopyN(io.Discard, r.Body, 10)
		w.WriteHeader(http.StatusCreated)
	},
	"/panic": func(http.ResponseWriter, *http.Request) { panic(http.ErrAbortHandler) },
	"/context": func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.ReadAll(r.Body)
		_, _ = fmt.Fprint(w, r.Context().Err()) // not cancelled while answering
	},
}

// TestWritesAreAnsweredByNetHTTP: requests with bodies get net/http's own
// answers, and the connection serves on (or not) as net/http would have.
func TestWritesAreAnsweredByNetHTTP(t *testing.T) {
	_, laneAddr, plainAddr, lane, fallback := servers(t, writes)
	small, big := strings.Repeat("s", 100), strings.Repeat("b", 300<<10) // net/http reads up to 256 KiB of a body left unread
	for path := range writes {
		for name, raw := range map[string]string{
			"small":          "PUT " + path + " HTTP/1.1\r\nHost: x\r\nContent-Length: 100\r\n\r\n" + small,
			"big":            "PUT " + path + " HTTP/1.1\r\nHost: x\r\nContent-Length: " + strconv.Itoa(len(big)) + "\r\n\r\n" + big,
			"empty POST":     "POST " + path + " HTTP/1.1\r\nHost: x\r\n\r\n",
			"close":          "PUT " + path + " HTTP/1.1\r\nHost: x\r\nConnection: close\r\nContent-Length: 100\r\n\r\n" + small,
			"expect":         "PUT " + path + " HTTP/1.1\r\nHost: x\r\nExpect: 100-continue\r\nContent-Length: 100\r\n\r\n" + small,
			"GET with body":  "GET " + path + " HTTP/1.1\r\nHost: x\r\nContent-Length: 100\r\n\r\n" + small,
			"HTTP/1.0 write": "PUT " + path + " HTTP/1.0\r\nContent-Length: 100\r\n\r\n" + small,
		} {
			method, _, _ := strings.Cut(raw, " ")
			want := roundTrip(t, plainAddr, method, raw)
			before := fallback.Load()
			got := roundTrip(t, laneAddr, method, raw)
			if fallback.Load() == before && path != "/panic" {
				t.Errorf("%s %s: not answered by net/http", name, path)
			}
			if fmt.Sprint(got) != fmt.Sprint(want) {
				t.Errorf("%s %s:\n got %+v\nwant %+v", name, path, got, want)
			}
		}
	}
	if lane.Load() == 0 {
		t.Error("no connection was given back for its next request")
	}
}
