// Package s3proxy is a counting, fault-injecting reverse proxy for tests. It
// sits between the code under test and a real S3 server (MinIO) and produces
// the faults a real server cannot produce on demand: throttling, 5xx errors,
// slow responses, connections reset before or in the middle of a response
// and bodies cut off mid-stream. It also counts requests, records each one
// (with the SDK's invocation id and attempt number, so retries of one
// operation can be told apart and timed) and the most requests it ever had
// in flight at once.
//
// Faults come from the simple one-shot helpers (FailNext, TruncateNext,
// SetDelay) or from rules (Inject): each rule matches requests by method and
// path prefix and applies a Fault to the first Times of them, until a
// deadline, or to each with a probability drawn from a seeded generator, so
// a randomised schedule replays from its seed. See faults.go.
//
// Requests are forwarded with their bodies and headers unchanged, including
// Host: the client signs its requests (SigV4) for the proxy's address, and
// MinIO checks the signature against the Host header it receives, so the
// proxy keeps the original Host instead of rewriting it to the target's.
package s3proxy

import (
	"context"
	"encoding/xml"
	"errors"
	"fmt"
	"io"
	"log"
	"math/rand/v2"
	"net"
	"net/http"
	"net/http/httputil"
	"net/url"
	"strings"
	"sync"
	"testing"
	"time"
)

// Proxy is a running proxy. All methods are safe for concurrent use.
type Proxy struct {
	target *url.URL
	url    string
	rp     *httputil.ReverseProxy

	mu          sync.Mutex
	seen        []request
	inFlight    int
	inFlightMax int
	delay       time.Duration
	fail        fault
	truncate    int

	// Rules, the request log and hooks: faults.go.
	tr        *http.Transport
	rules     []*rule
	pcg       *rand.PCG
	rng       *rand.Rand
	log       []Record
	gen       int // Reset count: a request answered after a Reset is not in the new log
	before    func(Record)
	ignoreIfM func(path string) (string, error)
	condDel   func(ctx context.Context, path string) (etag string, ok bool, err error)
	pathLocks map[string]*sync.Mutex // ConditionalDeletes
	// keepAbandoned: writes are applied although their client has gone
	// (KeepAbandonedWrites).
	keepAbandoned bool
	start         time.Time
}

type request struct{ method, path string }

type fault struct {
	n      int
	status int
	code   string
}

// New starts a proxy on 127.0.0.1 that forwards to target (for example a
// miniotest.Server's Endpoint). It is closed when the test ends.
func New(t testing.TB, target string) *Proxy {
	t.Helper()
	u, err := url.Parse(target)
	if err != nil {
		t.Fatalf("s3proxy: target %q: %v", target, err)
	}
	tr := http.DefaultTransport.(*http.Transport).Clone()
	tr.DisableCompression = true // pass bytes and Content-Length through untouched
	tr.MaxIdleConnsPerHost = 128
	p := &Proxy{target: u, tr: tr, pcg: rand.NewPCG(1, 2), start: time.Now()}
	p.rng = rand.New(p.pcg)
	p.rp = &httputil.ReverseProxy{
		Rewrite: func(r *httputil.ProxyRequest) {
			r.SetURL(u)
			r.Out.Host = r.In.Host // keep the Host the client signed
		},
		Transport:      tr,
		ModifyResponse: p.modifyResponse,
		ErrorLog:       log.New(io.Discard, "", 0),
	}

	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatalf("s3proxy: %v", err)
	}
	p.url = "http://" + l.Addr().String()
	srv := &http.Server{Handler: http.HandlerFunc(p.serve), ErrorLog: log.New(io.Discard, "", 0)}
	go func() { _ = srv.Serve(l) }()
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		if err := srv.Shutdown(ctx); err != nil {
			_ = srv.Close()
		}
		tr.CloseIdleConnections()
	})
	return p
}

// URL is the proxy's endpoint, http://127.0.0.1:PORT.
func (p *Proxy) URL() string { return p.url }

// Count is the number of requests seen so far (including failed ones) whose
// method is method and whose URL path starts with pathPrefix. An empty method
// matches every method; an empty prefix matches every path. Paths are
// path-style: "/bucket/key".
func (p *Proxy) Count(method, pathPrefix string) int {
	p.mu.Lock()
	defer p.mu.Unlock()
	n := 0
	for _, r := range p.seen {
		if (method == "" || r.method == method) && strings.HasPrefix(r.path, pathPrefix) {
			n++
		}
	}
	return n
}

// InFlightMax is the largest number of requests the proxy has had in flight
// at once since it started or since the last Reset. A request is in flight
// from when it arrives (including any delay) until the proxy starts writing
// the last byte of its response (or resets its connection): a client that
// got its whole answer and sends its next request is never counted twice.
func (p *Proxy) InFlightMax() int {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.inFlightMax
}

// Reset forgets counted and recorded requests and the in-flight maximum,
// and cancels pending faults, rules, hooks and the delay.
func (p *Proxy) Reset() {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.seen = nil
	p.gen++
	p.inFlightMax = p.inFlight
	p.delay = 0
	p.fail = fault{}
	p.truncate = 0
	p.rules = nil
	p.log = nil
	p.before = nil
	p.ignoreIfM = nil
	p.condDel = nil
}

// FailNext makes the next n requests fail with status and an S3 XML error
// body carrying s3Code (for example 503 "SlowDown" or 500 "InternalError").
// They are not forwarded.
func (p *Proxy) FailNext(n int, status int, s3Code string) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.fail = fault{n: n, status: status, code: s3Code}
}

// TruncateNext makes the next n requests that get a response with a body
// from the server lose the second half of that body: the proxy sends the
// headers (with the full Content-Length) and half of the bytes, then drops
// the connection.
func (p *Proxy) TruncateNext(n int) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.truncate = n
}

// SetDelay delays every request by d before it is forwarded (or failed).
func (p *Proxy) SetDelay(d time.Duration) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.delay = d
}

func (p *Proxy) serve(w http.ResponseWriter, r *http.Request) {
	p.mu.Lock()
	p.seen = append(p.seen, request{method: r.Method, path: r.URL.Path})
	p.inFlight++
	p.inFlightMax = max(p.inFlightMax, p.inFlight)
	delay := p.delay
	var f fault
	if p.fail.n > 0 {
		p.fail.n--
		f = p.fail
	}
	rec := newRecord(r, time.Since(p.start))
	injected := p.pick(r)
	if f.status != 0 {
		injected = Fault{Kind: Status, Status: f.status, Code: f.code}
	}
	rec.Fault = injected
	idx, gen := len(p.log), p.gen
	p.log = append(p.log, rec)
	before, ignoreIfMatch, condDel, keepAbandoned := p.before, p.ignoreIfM, p.condDel, p.keepAbandoned
	p.mu.Unlock()
	release := sync.OnceFunc(func() {
		p.mu.Lock()
		p.inFlight--
		p.mu.Unlock()
	})
	defer release()
	if before != nil {
		before(rec)
	}
	if keepAbandoned && (r.Method == http.MethodPut || r.Method == http.MethodPost || r.Method == http.MethodDelete) {
		var whole bool
		if r, whole = detach(r); !whole {
			return
		}
	}
	sw := &statusWriter{ResponseWriter: w, head: r.Method == http.MethodHead, release: release, left: -1,
		onStatus: func(code int) { p.setStatus(gen, idx, code) }}

	if injected.Kind == Delay {
		delay += injected.Delay
	}
	if delay > 0 {
		select {
		case <-time.After(delay):
		case <-r.Context().Done():
			return
		}
	}
	switch injected.Kind {
	case Status:
		writeS3Error(sw, r, fault{status: injected.Status, code: injected.Code})
		return
	case ResetBeforeHeaders:
		release()
		resetConn(w, false)
		return
	case ResetMidBody, TruncateBody:
		p.forwardBroken(sw, r, injected.Kind)
		return
	}
	if ignoreIfMatch != nil && r.Method == http.MethodGet && r.Header.Get("If-Match") != "" {
		p.forwardIgnoringIfMatch(sw, r, ignoreIfMatch)
		return
	}
	if condDel != nil && (r.Method == http.MethodPut || r.Method == http.MethodPost || r.Method == http.MethodDelete) {
		defer p.lockPath(r.URL.Path)()
		if r.Method == http.MethodDelete && !p.deleteMatches(sw, r, condDel) {
			return
		}
	}
	p.rp.ServeHTTP(sw, r)
}

// setStatus records the status of request idx of the log of generation gen.
func (p *Proxy) setStatus(gen, idx, code int) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if gen == p.gen {
		p.log[idx].Status = code
	}
}

// modifyResponse cuts the body of the response short when a truncation is
// pending. ReverseProxy then aborts the connection, so the client sees the
// body end early.
func (p *Proxy) modifyResponse(resp *http.Response) error {
	if resp.ContentLength <= 1 || resp.Request.Method == http.MethodHead {
		return nil
	}
	p.mu.Lock()
	cut := p.truncate > 0
	if cut {
		p.truncate--
	}
	p.mu.Unlock()
	if cut {
		resp.Body = &truncatedBody{rc: resp.Body, left: resp.ContentLength / 2}
	}
	return nil
}

var errTruncated = errors.New("s3proxy: body truncated on purpose")

type truncatedBody struct {
	rc   io.ReadCloser
	left int64
}

func (b *truncatedBody) Read(p []byte) (int, error) {
	if b.left <= 0 {
		return 0, errTruncated
	}
	if int64(len(p)) > b.left {
		p = p[:b.left]
	}
	n, err := b.rc.Read(p)
	b.left -= int64(n)
	return n, err
}

func (b *truncatedBody) Close() error { return b.rc.Close() }

type s3Error struct {
	XMLName   xml.Name `xml:"Error"`
	Code      string   `xml:"Code"`
	Message   string   `xml:"Message"`
	Resource  string   `xml:"Resource"`
	RequestID string   `xml:"RequestId"`
}

func writeS3Error(w http.ResponseWriter, r *http.Request, f fault) {
	body, _ := xml.Marshal(s3Error{
		Code:      f.code,
		Message:   fmt.Sprintf("injected by s3proxy: %d %s", f.status, f.code),
		Resource:  r.URL.Path,
		RequestID: "s3proxy",
	})
	body = append([]byte(xml.Header), body...)
	w.Header().Set("Content-Type", "application/xml")
	w.Header().Set("X-Amz-Request-Id", "s3proxy")
	if r.Method == http.MethodHead { // HEAD responses carry no body
		w.WriteHeader(f.status)
		return
	}
	w.Header().Set("Content-Length", fmt.Sprint(len(body)))
	w.WriteHeader(f.status)
	_, _ = w.Write(body)
}
