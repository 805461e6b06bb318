package s3proxy

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/s3"
	"github.com/aws/aws-sdk-go-v2/service/s3/types"
)

// Kind is a kind of fault.
type Kind int

// Fault kinds.
const (
	// Pass forwards the request untouched.
	Pass Kind = iota
	// Delay holds the request for Fault.Delay, then forwards it (a latency
	// spike).
	Delay
	// Status answers Fault.Status with an S3 XML error carrying Fault.Code
	// (503 SlowDown, 500 InternalError, ...) without forwarding.
	Status
	// ResetBeforeHeaders resets the connection (TCP RST: SO_LINGER 0, then
	// close) before any byte of the response.
	ResetBeforeHeaders
	// ResetMidBody forwards the request, sends the response's headers (with
	// the full Content-Length) and half of its body, then resets the
	// connection. Responses without a body of at least 2 bytes are reset
	// before their headers instead.
	ResetMidBody
	// TruncateBody is ResetMidBody with an orderly close (FIN) instead of a
	// reset: the client gets fewer bytes than Content-Length promised.
	TruncateBody
)

var kindNames = map[Kind]string{
	Pass: "pass", Delay: "delay", Status: "status", ResetBeforeHeaders: "reset-before-headers",
	ResetMidBody: "reset-mid-body", TruncateBody: "truncate-body",
}

func (k Kind) String() string {
	if s, ok := kindNames[k]; ok {
		return s
	}
	return "kind-" + strconv.Itoa(int(k))
}

// Fault is what the proxy does to one request.
type Fault struct {
	Kind   Kind
	Status int           // Status: the HTTP status
	Code   string        // Status: the S3 error code
	Delay  time.Duration // Delay: how long
}

// Common faults.
var (
	SlowDown      = Fault{Kind: Status, Status: http.StatusServiceUnavailable, Code: "SlowDown"}
	InternalError = Fault{Kind: Status, Status: http.StatusInternalServerError, Code: "InternalError"}
	ResetHeaders  = Fault{Kind: ResetBeforeHeaders}
	ResetBody     = Fault{Kind: ResetMidBody}
	Truncate      = Fault{Kind: TruncateBody}
)

// Spike is a latency spike of d.
func Spike(d time.Duration) Fault { return Fault{Kind: Delay, Delay: d} }

func (f Fault) String() string {
	switch f.Kind {
	case Status:
		return fmt.Sprintf("%d %s", f.Status, f.Code)
	case Delay:
		return "delay " + f.Delay.String()
	}
	return f.Kind.String()
}

// Rule applies Fault to the requests it matches. The zero values of the
// filters match everything; Times, Until and Probability limit how often it
// applies.
type Rule struct {
	Method     string // "" matches every method
	PathPrefix string // "" matches every path; paths are "/bucket/key"
	// Conditional matches only requests with an If-Match or If-None-Match
	// header (conditional writes, for an S3 that lacks them).
	Conditional bool
	Fault       Fault
	// Times is the number of requests the rule applies to; 0 is no limit.
	Times int
	// Until is when the rule stops applying (a storm window); zero is never.
	Until time.Time
	// Probability that a matching request gets the fault, drawn from the
	// proxy's seeded generator (Seed); 0 means always.
	Probability float64
}

type rule struct {
	Rule
	used int
}

// Inject adds rules. For each request the rules are tried in the order
// added; the first that matches (and whose dice, with a Probability, says
// yes) applies. FailNext's failures come before any rule.
func (p *Proxy) Inject(rules ...Rule) {
	p.mu.Lock()
	defer p.mu.Unlock()
	for _, r := range rules {
		p.rules = append(p.rules, &rule{Rule: r})
	}
}

// ClearFaults removes every rule and pending one-shot fault and the delay,
// but keeps the counts and the request log.
func (p *Proxy) ClearFaults() {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.rules = nil
	p.fail = fault{}
	p.truncate = 0
	p.delay = 0
}

// Seed reseeds the generator rules with a Probability draw from, so a
// randomised schedule is replayed by its seed (given the same order of
// requests).
func (p *Proxy) Seed(seed uint64) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.pcg.Seed(seed, seed^0x9e3779b97f4a7c15)
}

// pick returns the fault for r; p.mu is held.
func (p *Proxy) pick(r *http.Request) Fault {
	now := time.Now()
	for _, ru := range p.rules {
		switch {
		case ru.Method != "" && ru.Method != r.Method,
			!strings.HasPrefix(r.URL.Path, ru.PathPrefix),
			ru.Conditional && r.Header.Get("If-Match") == "" && r.Header.Get("If-None-Match") == "",
			ru.Times > 0 && ru.used >= ru.Times,
			!ru.Until.IsZero() && !now.Before(ru.Until):
			continue
		}
		if ru.Probability > 0 && ru.Probability < 1 && p.rng.Float64() >= ru.Probability {
			continue
		}
		ru.used++
		return ru.Fault
	}
	return Fault{}
}

// Record is one request the proxy received.
type Record struct {
	Method, Path string
	Range        string // the Range header
	IfMatch      string // the If-Match header
	IfNoneMatch  string // the If-None-Match header
	// ContentSHA256 is the x-amz-content-sha256 header (the payload hash
	// the request was signed with); Expect the Expect header.
	ContentSHA256, Expect string
	// Invocation is the SDK's amz-sdk-invocation-id: the same for every
	// attempt of one operation. Attempt is the attempt number from
	// amz-sdk-request (1 for the first), 0 when absent.
	Invocation string
	Attempt    int
	// At is when the request arrived, since the proxy started.
	At    time.Duration
	Fault Fault
	// Status is the status the proxy answered with (recorded before it was
	// sent); 0 when the connection was reset before any header, or the
	// request is still waiting for its answer.
	Status int
}

func newRecord(r *http.Request, at time.Duration) Record {
	rec := Record{Method: r.Method, Path: r.URL.Path, Range: r.Header.Get("Range"), IfMatch: r.Header.Get("If-Match"),
		IfNoneMatch:   r.Header.Get("If-None-Match"),
		ContentSHA256: r.Header.Get("X-Amz-Content-Sha256"), Expect: r.Header.Get("Expect"),
		Invocation: r.Header.Get("Amz-Sdk-Invocation-Id"), At: at}
	for _, part := range strings.Split(r.Header.Get("Amz-Sdk-Request"), ";") {
		if v, ok := strings.CutPrefix(strings.TrimSpace(part), "attempt="); ok {
			rec.Attempt, _ = strconv.Atoi(v)
		}
	}
	return rec
}

// Requests returns the requests received since the proxy started or since
// the last Reset, in arrival order.
func (p *Proxy) Requests() []Record {
	p.mu.Lock()
	defer p.mu.Unlock()
	return append([]Record(nil), p.log...)
}

// OnRequest calls fn with every request's record (its fault decided) before
// the proxy acts on it, on the request's goroutine; the request waits for
// fn. Tests use it to change the object in S3 between the requests of one
// read. nil removes the hook.
func (p *Proxy) OnRequest(fn func(Record)) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.before = fn
}

// BodyHeldUntilPut returns a request body of data that gives its first n
// bytes, then holds the rest back until the proxy sees a PUT whose path
// ends with pathSuffix ("" for any): what shows an upload going on to S3
// while its body is still arriving. With no such PUT within 20 seconds, the
// body fails. It sets the OnRequest hook (OnRequest(nil) removes it).
func (p *Proxy) BodyHeldUntilPut(data []byte, n int, pathSuffix string) io.Reader {
	arrived := make(chan struct{})
	var once sync.Once
	p.OnRequest(func(rec Record) {
		if rec.Method == http.MethodPut && strings.HasSuffix(rec.Path, pathSuffix) {
			once.Do(func() { close(arrived) })
		}
	})
	pr, pw := io.Pipe()
	go func() {
		_, _ = pw.Write(data[:n])
		select {
		case <-arrived:
		case <-time.After(20 * time.Second):
			pw.CloseWithError(errors.New("S3 got no PUT while the body was still being sent"))
			return
		}
		_, _ = pw.Write(data[n:])
		_ = pw.Close()
	}()
	return pr
}

// IgnoreIfMatch makes the proxy behave like an S3-compatible store that
// does not implement If-Match on GET: when the server refuses a GET with
// 412 Precondition Failed, the proxy reads the same Range of the object's
// current version from presign(path) (a presigned GET URL of the target
// server, as the proxy holds no credentials) and answers with that. nil
// turns it off.
func (p *Proxy) IgnoreIfMatch(presign func(path string) (string, error)) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.ignoreIfM = presign
}

// ConditionalDeletes makes the proxy honour If-Match on DELETE as AWS S3
// does (on general purpose buckets, since September 2025) and MinIO does
// not: a DELETE whose If-Match is not the object's current ETag is
// answered 412 PreconditionFailed, one of a missing object 404 NoSuchKey,
// and only the others are forwarded. head reports the object's current
// ETag at the target (the proxy holds no credentials). The writes of a key
// through the proxy (PUT, POST, DELETE) are forwarded one at a time, so a
// DELETE's look and the DELETE are one step for them. nil turns it off.
func (p *Proxy) ConditionalDeletes(head func(ctx context.Context, path string) (etag string, ok bool, err error)) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.condDel = head
}

// KeepAbandonedWrites makes the proxy apply a write (PUT, POST, DELETE) it
// received whole even when its client has gone by the time it is
// forwarded (killed, or it gave up on the request), as S3 applies a
// request it received: the body is read at arrival (a body cut short is
// never forwarded), and neither a delay nor the forwarding ends with the
// client's connection. Without it a held write is dropped when the proxy
// notices its client gone, which for a request with a body is only once
// it reads that body. A killed node's uploads then land late, as they can
// in S3.
func (p *Proxy) KeepAbandonedWrites() {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.keepAbandoned = true
}

// detach reads r's body whole and returns r on a context its client's
// going does not end (KeepAbandonedWrites); false: the body was cut short.
func detach(r *http.Request) (*http.Request, bool) {
	body, err := io.ReadAll(r.Body)
	if err != nil {
		return r, false
	}
	r = r.WithContext(context.WithoutCancel(r.Context()))
	r.Body = io.NopCloser(bytes.NewReader(body))
	return r, true
}

// HeadWith is a head for ConditionalDeletes that asks c (a client of the
// target itself) for the object of a path-style /bucket/key.
func HeadWith(c *s3.Client) func(ctx context.Context, path string) (etag string, ok bool, err error) {
	return func(ctx context.Context, path string) (string, bool, error) {
		b, k, _ := strings.Cut(strings.TrimPrefix(path, "/"), "/")
		out, err := c.HeadObject(ctx, &s3.HeadObjectInput{Bucket: &b, Key: &k})
		var nf *types.NotFound
		if errors.As(err, &nf) {
			return "", false, nil
		}
		if err != nil {
			return "", false, err
		}
		return aws.ToString(out.ETag), true, nil
	}
}

// lockPath serializes the writes of path (ConditionalDeletes) and returns
// the unlock.
func (p *Proxy) lockPath(path string) func() {
	p.mu.Lock()
	if p.pathLocks == nil {
		p.pathLocks = map[string]*sync.Mutex{}
	}
	l := p.pathLocks[path]
	if l == nil {
		l = &sync.Mutex{}
		p.pathLocks[path] = l
	}
	p.mu.Unlock()
	l.Lock()
	return l.Unlock
}

// deleteMatches answers a conditional DELETE whose condition fails, as
// AWS S3 does, and reports whether it is to be forwarded.
func (p *Proxy) deleteMatches(w *statusWriter, r *http.Request, head func(context.Context, string) (string, bool, error)) bool {
	want := r.Header.Get("If-Match")
	if want == "" {
		return true
	}
	etag, ok, err := head(r.Context(), r.URL.Path)
	switch {
	case err != nil:
		w.WriteHeader(http.StatusBadGateway)
		return false
	case !ok:
		writeS3Error(w, r, fault{status: http.StatusNotFound, code: "NoSuchKey"})
		return false
	case strings.Trim(etag, `"`) != strings.Trim(want, `"`):
		writeS3Error(w, r, fault{status: http.StatusPreconditionFailed, code: "PreconditionFailed"})
		return false
	}
	return true
}

// statusWriter records the status written, and calls release just before
// the last byte of the response goes out (see InFlightMax).
type statusWriter struct {
	http.ResponseWriter
	status   int
	head     bool
	release  func()
	onStatus func(int) // before the status goes out
	left     int64     // body bytes still to write; -1 unknown
}

func (w *statusWriter) WriteHeader(code int) {
	if w.status != 0 {
		w.ResponseWriter.WriteHeader(code)
		return
	}
	w.status = code
	w.onStatus(code)
	n, err := strconv.ParseInt(w.Header().Get("Content-Length"), 10, 64)
	switch {
	case w.head, code == http.StatusNoContent, code == http.StatusNotModified, err == nil && n == 0:
		w.release()
	case err == nil:
		w.left = n
	}
	w.ResponseWriter.WriteHeader(code)
}

func (w *statusWriter) Write(b []byte) (int, error) {
	if w.status == 0 {
		w.WriteHeader(http.StatusOK)
	}
	if w.left >= 0 {
		if int64(len(b)) >= w.left {
			w.release()
		}
		w.left -= int64(len(b))
	}
	return w.ResponseWriter.Write(b)
}

func (w *statusWriter) Unwrap() http.ResponseWriter { return w.ResponseWriter }

// resetConn takes the connection over and resets it: SO_LINGER 0 makes
// close send a TCP RST instead of a FIN. What the handler wrote is flushed
// first; when it wrote nothing, nothing is sent (a Flush would send a 200).
func resetConn(w http.ResponseWriter, wrote bool) {
	rc := http.NewResponseController(w)
	if wrote {
		_ = rc.Flush()
	}
	conn, _, err := rc.Hijack()
	if err != nil {
		panic(http.ErrAbortHandler)
	}
	if tc, ok := conn.(*net.TCPConn); ok {
		_ = tc.SetLinger(0)
	}
	_ = conn.Close()
}

// roundTrip sends r to the target as the reverse proxy would (Host kept).
func (p *Proxy) roundTrip(r *http.Request) (*http.Response, error) {
	out := r.Clone(r.Context())
	out.URL.Scheme, out.URL.Host = p.target.Scheme, p.target.Host
	out.Host = r.Host
	out.RequestURI = ""
	return p.tr.RoundTrip(out)
}

// forwardBroken forwards r and breaks the response off halfway through its
// body: a reset (ResetMidBody) or an orderly close (TruncateBody).
func (p *Proxy) forwardBroken(w *statusWriter, r *http.Request, kind Kind) {
	resp, err := p.roundTrip(r)
	if err != nil {
		w.WriteHeader(http.StatusBadGateway)
		return
	}
	defer resp.Body.Close()
	if r.Method == http.MethodHead || resp.ContentLength <= 1 {
		w.release()
		resetConn(w.ResponseWriter, false)
		return
	}
	copyHeader(w.Header(), resp.Header)
	w.WriteHeader(resp.StatusCode)
	_, _ = io.CopyN(w, resp.Body, resp.ContentLength/2)
	w.release()
	if kind == ResetMidBody {
		resetConn(w.ResponseWriter, true)
		return
	}
	_ = http.NewResponseController(w.ResponseWriter).Flush()
	panic(http.ErrAbortHandler) // the server closes the connection
}

// forwardIgnoringIfMatch forwards r; a 412 is replaced by the current
// version's bytes (see IgnoreIfMatch).
func (p *Proxy) forwardIgnoringIfMatch(w *statusWriter, r *http.Request, presign func(string) (string, error)) {
	resp, err := p.roundTrip(r)
	if err != nil {
		w.WriteHeader(http.StatusBadGateway)
		return
	}
	if resp.StatusCode == http.StatusPreconditionFailed {
		resp.Body.Close()
		u, err := presign(r.URL.Path)
		if err != nil {
			w.WriteHeader(http.StatusBadGateway)
			return
		}
		req, err := http.NewRequestWithContext(r.Context(), http.MethodGet, u, nil)
		if err != nil {
			w.WriteHeader(http.StatusBadGateway)
			return
		}
		if rng := r.Header.Get("Range"); rng != "" {
			req.Header.Set("Range", rng)
		}
		if resp, err = p.tr.RoundTrip(req); err != nil {
			w.WriteHeader(http.StatusBadGateway)
			return
		}
	}
	defer resp.Body.Close()
	copyHeader(w.Header(), resp.Header)
	w.WriteHeader(resp.StatusCode)
	if _, err := io.Copy(w, resp.Body); err != nil {
		panic(http.ErrAbortHandler)
	}
}

func copyHeader(dst, src http.Header) {
	for k, vs := range src {
		switch http.CanonicalHeaderKey(k) {
		case "Connection", "Keep-Alive", "Transfer-Encoding", "Trailer", "Upgrade", "Proxy-Connection":
			continue
		}
		dst[k] = append([]string(nil), vs...)
	}
}
