package gateway

import (
	"errors"
	"io"
	"log/slog"
	"math/rand/v2"
	"net"
	"net/http"
	"net/url"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/distcache/distcache/internal/sigv4"
)

// Config wires a Gateway. Verifier, Cache and Upstream are required.
type Config struct {
	// Verifier checks every request's SigV4 signature against the
	// gateway's credentials.
	Verifier *sigv4.Verifier
	// Cache serves GetObject/HeadObject and writes PutObject through.
	Cache Cache
	// Upstream passes every other supported operation to a cache node.
	Upstream *Upstream
	// Domains are the host names the gateway is reached by (such as
	// "localhost"); a request for a sub-domain of one of them, or of
	// amazonaws.com, is virtual-hosted-style and refused with a message
	// saying to use path-style addressing.
	Domains []string
	// ReadPieceBytes is the unit GetObject reads in; set it to the cache
	// client's page size (its chunk size without pages) so that a piece
	// is one page (default DefaultReadPieceBytes, the cache's default
	// chunk size).
	ReadPieceBytes int64
	// ReadAhead is the most pieces of one GetObject fetched ahead of the
	// client (default 8): whole objects of at most ReadAhead pieces are
	// fetched whole at once; other ranges a piece at a time until 8 MiB
	// are sent, then one ahead, doubling per piece consumed. It bounds a
	// read's memory to ReadAhead+1 pieces.
	ReadAhead int
	// ReadBufferBytes bounds the bytes all GetObjects hold at once in
	// fetched pieces (default DefaultReadBufferBytes, at least ReadAhead
	// pieces): past it, a GetObject that holds nothing waits for its first
	// pieces and one that holds some reads ahead less.
	ReadBufferBytes int64
	// ClientWriteTimeout is the longest one write of a GetObject's body to
	// its client may take (default DefaultClientWriteTimeout; negative:
	// none). A client that takes no piece for that long is dropped, so a
	// stalled client cannot keep read buffers from everyone else.
	ClientWriteTimeout time.Duration
	// BucketCacheTTL is how long a bucket's existence, learnt to tell
	// NoSuchBucket from NoSuchKey, is remembered (default 1 minute).
	BucketCacheTTL time.Duration
	// Metrics defaults to unregistered metrics.
	Metrics *Metrics
	// Logger defaults to discarding.
	Logger *slog.Logger
}

// Gateway is an http.Handler speaking the S3 API (path-style) in front of a
// distcache cache. See the package documentation.
type Gateway struct {
	cfg     Config
	cache   Cache
	up      *Upstream
	metrics *Metrics
	log     *slog.Logger
	buckets *bucketCache
	pieces  sync.Pool // *[]byte of capacity ReadPieceBytes
	buffers *readBuffers
	// versions are the response headers of recently read versions.
	versions *versionHeaderCache
	// hostSuffixes are ".amazonaws.com" and the Domains', lower case: a
	// Host under one is a virtual-hosted-style request.
	hostSuffixes []string
}

// DefaultClientWriteTimeout is the default Config.ClientWriteTimeout.
const DefaultClientWriteTimeout = time.Minute

// DefaultPageBytes is the page size `cachenode gateway` gives its page
// cache where it divides the chunk size (--page-bytes): ClickHouse reads a
// few hundred KiB of most ranges of a selective query, and a 1 MiB page
// costs the nodes a quarter of a 4 MiB chunk for them, while a scan's
// reads still go 32 pages ahead (tools/benchmark/profiling.md, ninth pass).
const DefaultPageBytes = 1 << 20

// ReadGeometry is what GetObject reads in for a cache of chunkBytes chunks
// read through a page cache of pageBytes pages (pageCache false: none):
// pieces of a page (of a chunk without a page cache, or where the page
// does not divide the chunk), and the most pieces fetched ahead of the
// client (Config.ReadAhead), parallelism chunks' worth.
func ReadGeometry(chunkBytes, pageBytes int64, pageCache bool, parallelism int) (piece int64, ahead int) {
	piece = chunkBytes
	if pageCache && pageBytes > 0 && pageBytes < chunkBytes && chunkBytes%pageBytes == 0 {
		piece = pageBytes
	}
	return piece, parallelism * int(chunkBytes/piece)
}

// DefaultReadPieceBytes is the default Config.ReadPieceBytes.
const DefaultReadPieceBytes = 4 << 20

// New checks cfg and returns a Gateway.
func New(cfg Config) (*Gateway, error) {
	if cfg.Verifier == nil || cfg.Cache == nil || cfg.Upstream == nil {
		return nil, errors.New("gateway: Verifier, Cache and Upstream are required")
	}
	if cfg.Metrics == nil {
		cfg.Metrics = NewMetrics(nil)
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.DiscardHandler)
	}
	if cfg.ReadPieceBytes <= 0 {
		cfg.ReadPieceBytes = DefaultReadPieceBytes
	}
	if cfg.ReadAhead <= 0 {
		cfg.ReadAhead = 8
	}
	if cfg.ReadBufferBytes <= 0 {
		cfg.ReadBufferBytes = DefaultReadBufferBytes
	}
	if cfg.ClientWriteTimeout == 0 {
		cfg.ClientWriteTimeout = DefaultClientWriteTimeout
	}
	// A GetObject's first window is taken whole: the budget must hold one.
	cfg.ReadBufferBytes = max(cfg.ReadBufferBytes, int64(cfg.ReadAhead)*cfg.ReadPieceBytes)
	if cfg.BucketCacheTTL <= 0 {
		cfg.BucketCacheTTL = time.Minute
	}
	if cfg.Upstream.Metrics == nil {
		cfg.Upstream.Metrics = cfg.Metrics
	}
	g := &Gateway{cfg: cfg, cache: cfg.Cache, up: cfg.Upstream, metrics: cfg.Metrics, log: cfg.Logger,
		buckets: newBucketCache(cfg.BucketCacheTTL), buffers: newReadBuffers(cfg.ReadBufferBytes, cfg.Metrics),
		versions: newVersionHeaderCache()}
	for _, d := range append([]string{"amazonaws.com"}, cfg.Domains...) {
		if d = strings.ToLower(strings.TrimSuffix(d, ".")); d != "" {
			g.hostSuffixes = append(g.hostSuffixes, "."+d)
		}
	}
	g.pieces.New = func() any { b := make([]byte, cfg.ReadPieceBytes); return &b }
	return g, nil
}

// exchange is one S3 request being served.
type exchange struct {
	w     *responseWriter // &rw
	rw    responseWriter
	r     *http.Request
	query url.Values // r.URL.Query(), parsed once (nil without a query)
	rt    route
	id    string // x-amz-request-id
	start time.Time
	in    int64 // request body bytes read
}

func (x *exchange) fail(e *s3Error) { writeError(x.w, x.r, x.rt, x.id, e) }

// readBody reads the request's whole body of n bytes (its Content-Length,
// then its end, so that sigv4's end-of-body checks run) and counts it in
// x.in. On an error it answers the request and returns false.
func (x *exchange) readBody(n int64) ([]byte, bool) {
	buf := make([]byte, n)
	_, err := io.ReadFull(x.r.Body, buf)
	if err == nil {
		err = expectEOF(x.r.Body)
	}
	x.in = int64(len(buf))
	if err != nil {
		x.fail(fromBodyError(err))
		return nil, false
	}
	return buf, true
}

// ServeHTTP authenticates, routes and serves one S3 request.
func (g *Gateway) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	x := &exchange{rw: responseWriter{ResponseWriter: w}, r: r, id: newRequestID(), start: time.Now()}
	x.w = &x.rw
	g.metrics.inflight.Inc()
	defer func() {
		g.metrics.inflight.Dec()
		status := x.w.status
		if status == 0 {
			status = http.StatusOK
		}
		if p := recover(); p != nil {
			// A response cut off mid-body (http.ErrAbortHandler) counts as
			// the failure it is.
			g.metrics.observe(x.rt.op, statusAborted, x.in, x.w.bytes, x.start)
			panic(p)
		}
		g.metrics.observe(x.rt.op, status, x.in, x.w.bytes, x.start)
	}()
	h := w.Header()
	id := []string{x.id}
	h["X-Amz-Request-Id"] = id // canonical keys: no Set, no canonicalization per request
	h["X-Amz-Id-2"] = id
	h["Server"] = serverHeader

	if r.ContentLength != 0 && r.Header["Expect"] != nil {
		// net/http tells the client to send the body on its first read,
		// and closes the connection after an answer that came before the
		// body's end, so that what the client sends next is not read as a
		// request; it can tell only from the body it gave the handler,
		// which sigv4 replaces.
		b := &expectedBody{ReadCloser: r.Body}
		r.Body, x.rw.expected = b, b
	}
	if r.URL.RawQuery != "" {
		x.query = r.URL.Query()
	}
	x.rt = parseRoute(r.Method, r.URL.Path, x.query, r.Header)
	if e := g.checkVirtualHost(r); e != nil {
		x.fail(e)
		return
	}
	auth, err := g.cfg.Verifier.Verify(r)
	if err != nil {
		g.log.Debug("request refused", "op", x.rt.op, "err", err, "remote", r.RemoteAddr)
		x.fail(fromBodyError(err))
		return
	}
	switch x.rt.handling {
	case refused:
		x.fail(x.rt.err)
	case viaCacheRead:
		g.getObject(x)
	case viaCacheWrite:
		g.putObject(x, auth)
	case viaPassthrough:
		if f, ok := g.cache.(forgetter); ok && r.Method != http.MethodGet && r.Method != http.MethodHead {
			// A write the client does not see (a copy, a multipart upload, a
			// batch delete): whatever metadata it keeps of the key is stale
			// once S3 has it, and may be stale during it.
			key := x.rt.key
			if x.rt.op == OpDeleteObjects {
				key = "" // its keys are in the body: forget them all
			}
			f.Forget(x.rt.bucket, key)
			defer f.Forget(x.rt.bucket, key)
		}
		if x.rt.op == OpDeleteObjects {
			g.deleteObjects(x)
			return
		}
		g.passthrough(x)
	}
}

// forgetter is a Cache that keeps object metadata (*client.Client of an
// immutable cache).
type forgetter interface {
	Forget(bucket, key string)
}

// checkVirtualHost refuses virtual-hosted-style requests, whose bucket is
// in the Host header: the gateway would otherwise take the first path
// segment, part of the key, for the bucket.
func (g *Gateway) checkVirtualHost(r *http.Request) *s3Error {
	host := r.Host
	if h, _, err := net.SplitHostPort(host); err == nil {
		host = h
	}
	host = strings.ToLower(strings.TrimSuffix(host, "."))
	if net.ParseIP(host) != nil {
		return nil
	}
	for _, suffix := range g.hostSuffixes {
		if strings.HasSuffix(host, suffix) {
			return newS3Error(http.StatusBadRequest, CodeInvalidRequest,
				"Virtual-hosted-style requests (%s) are not supported by the distcache gateway: configure the client "+
					"for path-style addressing (http://%s/BUCKET/KEY; UsePathStyle, force_path_style, "+
					"s3ForcePathStyle or addressing_style=path).", r.Host, suffix[1:])
		}
	}
	return nil
}

// serverHeader is the Server header of every answer.
var serverHeader = []string{"distcache"}

// responseWriter records the status and the body bytes written.
type responseWriter struct {
	http.ResponseWriter
	status int
	bytes  int64
	// expected is the body of a request sent with Expect: 100-continue.
	expected *expectedBody
}

func (w *responseWriter) WriteHeader(code int) {
	if w.status == 0 {
		w.status = code
		w.closeIfBodyUnread()
	}
	w.ResponseWriter.WriteHeader(code)
}

func (w *responseWriter) Write(p []byte) (int, error) {
	if w.status == 0 {
		w.status = http.StatusOK
		w.closeIfBodyUnread()
	}
	n, err := w.ResponseWriter.Write(p)
	w.bytes += int64(n)
	return n, err
}

func (w *responseWriter) Unwrap() http.ResponseWriter { return w.ResponseWriter }

// closeIfBodyUnread closes the connection after the answer when the
// client waits for 100 Continue before its body, or sends a body not read
// to its end: what comes next on the connection may be the body, not a
// request (net/http decides the same from the body it gave the handler).
func (w *responseWriter) closeIfBodyUnread() {
	if w.expected != nil && !w.expected.eof.Load() {
		w.Header().Set("Connection", "close")
	}
}

// expectedBody is the body of a request sent with Expect: 100-continue, as
// net/http gave it; it notes its end.
type expectedBody struct {
	io.ReadCloser
	eof atomic.Bool
}

func (b *expectedBody) Read(p []byte) (int, error) {
	n, err := b.ReadCloser.Read(p)
	if err == io.EOF {
		b.eof.Store(true)
	}
	return n, err
}

// newRequestID returns 16 upper-case hex digits, like S3's request IDs:
// unique enough to find a request in the logs, not a secret (math/rand's
// per-thread generator, one allocation).
func newRequestID() string {
	const digits = "0123456789ABCDEF"
	var b [16]byte
	v := rand.Uint64()
	for i := range b {
		b[i] = digits[v>>60]
		v <<= 4
	}
	return string(b[:])
}

// Unavailable is an S3 handler answering every request 503
// ServiceUnavailable with msg, for a gateway that is not ready yet (no cache
// node reached).
func Unavailable(msg string) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		id := newRequestID()
		w.Header().Set("X-Amz-Request-Id", id)
		w.Header().Set("Retry-After", "1")
		writeError(w, r, route{}, id, newS3Error(http.StatusServiceUnavailable, CodeServiceUnavailable, "%s", msg))
	})
}
