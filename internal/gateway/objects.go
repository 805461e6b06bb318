package gateway

import (
	"context"
	"errors"
	"io"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/distcache/distcache/internal/chunk"
	"github.com/distcache/distcache/internal/client"
	"github.com/distcache/distcache/internal/holdback"
	"github.com/distcache/distcache/internal/httprange"
	"github.com/distcache/distcache/internal/s3cond"
	"github.com/distcache/distcache/internal/sigv4"
)

// Cache is the distcache client the gateway reads and writes objects
// through (*client.Client).
type Cache interface {
	Stat(ctx context.Context, bucket, key string) (client.Meta, error)
	ReadAt(ctx context.Context, bucket, key string, m client.Meta, p []byte, off int64) (int, error)
	Put(ctx context.Context, bucket, key string, body io.Reader, size int64, contentType string) (client.Meta, error)
}

// viewer is a Cache that can hand out ranges held in its RAM without a
// copy, and reads ahead of readers moving through an object
// (*client.Client with a page cache).
type viewer interface {
	View(ctx context.Context, bucket, key string, m client.Meta, off, n int64) (client.PageView, bool, error)
	CachedView(ctx context.Context, bucket, key string, m client.Meta, off, n int64) (client.PageView, bool)
	NoteRead(ctx context.Context, bucket, key string, m client.Meta, off, n int64)
}

var _ viewer = (*client.Client)(nil)

// defaultContentType is what S3 reports for objects stored without one.
const defaultContentType = "binary/octet-stream"

// responseOverrides are GetObject query parameters that set response
// headers.
var responseOverrides = [][2]string{
	{"response-content-type", "Content-Type"},
	{"response-content-language", "Content-Language"},
	{"response-expires", "Expires"},
	{"response-cache-control", "Cache-Control"},
	{"response-content-disposition", "Content-Disposition"},
	{"response-content-encoding", "Content-Encoding"},
}

// getObject serves GetObject and HeadObject from the cache: metadata from
// Stat (cached by the nodes), then the range streamed chunk by chunk with
// ReadAhead chunks in flight (never the whole object in memory, never a
// chunk past the range).
func (g *Gateway) getObject(x *exchange) {
	ctx := x.r.Context()
	for attempt := 0; ; attempt++ {
		m, err := g.cache.Stat(ctx, x.rt.bucket, x.rt.key)
		if err != nil {
			x.fail(g.cacheError(ctx, x, err))
			return
		}
		retry := g.serveVersion(x, m)
		if !retry {
			return
		}
		if attempt == 1 {
			x.fail(newS3Error(http.StatusServiceUnavailable, CodeSlowDown,
				"The object changed while it was being read; please retry."))
			return
		}
	}
}

// serveVersion answers with version m. It returns true when the version
// disappeared before anything was sent (the object was overwritten): the
// caller Stats again.
func (g *Gateway) serveVersion(x *exchange, m client.Meta) (retry bool) {
	r, h := x.r, x.w.Header()
	delete(h, "Content-Range")
	vh := g.versions.get(m)
	vh.set(h)
	switch pre, cond := s3cond.Eval(r.Header, m.ETag, m.LastModified); pre {
	case s3cond.NotModified:
		for _, k := range [...]string{"Content-Type", "Accept-Ranges", "Content-Encoding", "Content-Language", "Content-Disposition"} {
			delete(h, k) // the body's, and there is none
		}
		x.w.WriteHeader(http.StatusNotModified)
		return false
	case s3cond.Failed:
		x.fail(errPreconditionFailed(cond))
		return false
	}
	rng, partial, rerr := parseRange(r.Header.Get("Range"), m.Size)
	if rerr != nil {
		x.fail(rerr)
		return false
	}
	if !partial {
		rng = httprange.Range{Off: 0, Len: m.Size}
		if mode := r.Header["X-Amz-Checksum-Mode"]; len(mode) > 0 && strings.EqualFold(mode[0], "ENABLED") {
			vh.setChecksum(h)
		}
	}
	if len(x.query) > 0 {
		for _, o := range responseOverrides {
			if v := x.query.Get(o[0]); v != "" {
				h.Set(o[1], v)
			}
		}
	}
	status := http.StatusOK
	if partial {
		// Content-Length and Content-Range in one allocation.
		vs := []string{strconv.FormatInt(rng.Len, 10), rng.ContentRange(m.Size)}
		h[hContentLength], h[hContentRange] = vs[0:1:1], vs[1:2:2]
		status = http.StatusPartialContent
	} else {
		h[hContentLength] = []string{strconv.FormatInt(rng.Len, 10)}
	}
	if r.Method == http.MethodHead || rng.Len == 0 {
		x.w.WriteHeader(status)
		return false
	}

	ctx := r.Context()
	v, canView := g.cache.(viewer)
	if canView {
		// The range is one read for the cache's read-ahead, not one per
		// piece (a range of a few chunks is not a scan by itself).
		v.NoteRead(ctx, x.rt.bucket, x.rt.key, m, rng.Off, rng.Len)
		ctx = client.WithoutReadAhead(ctx)
		if g.serveCachedPiece(ctx, x, v, m, rng, status) {
			return false
		}
	}
	readAt := func(ctx context.Context, p []byte, off int64) (int, error) {
		return g.cache.ReadAt(ctx, x.rt.bucket, x.rt.key, m, p, off)
	}
	body := newRangeReader(ctx, readAt, &g.pieces, g.buffers, g.cfg.ReadPieceBytes, g.cfg.ReadAhead, rng.Off, rng.Len, m.Size)
	if canView {
		body.view = func(ctx context.Context, off, n int64) (client.PageView, bool, error) {
			return v.View(ctx, x.rt.bucket, x.rt.key, m, off, n)
		}
		body.cached = func(off, n int64) (client.PageView, bool) {
			return v.CachedView(ctx, x.rt.bucket, x.rt.key, m, off, n)
		}
	}
	defer body.Close()
	if err := body.prime(); err != nil {
		if errors.Is(err, client.ErrChanged) {
			return true
		}
		x.fail(g.cacheError(r.Context(), x, err))
		return false
	}
	x.w.WriteHeader(status)
	out := g.clientWriter(x)
	defer out.done()
	_, err := body.WriteTo(&out)
	g.sent(x, m, out.err, err)
	return false
}

// serveCachedPiece answers a range that lies in one piece held in the
// cache's RAM straight from it, as the range reader would (the piece lent,
// counted in the read buffers while it is written), without a range
// reader: most 64 KiB hits. It returns false, having sent nothing, when
// the range is not one cached piece or the read buffers are all held; the
// caller then reads the range as any other.
func (g *Gateway) serveCachedPiece(ctx context.Context, x *exchange, v viewer, m client.Meta, rng httprange.Range, status int) bool {
	piece := g.cfg.ReadPieceBytes
	if rng.Off/piece != (rng.Off+rng.Len-1)/piece || !g.buffers.tryAcquire(rng.Len) {
		return false
	}
	defer g.buffers.release(rng.Len)
	pv, ok := v.CachedView(ctx, x.rt.bucket, x.rt.key, m, rng.Off, rng.Len)
	if !ok {
		return false
	}
	defer pv.Release()
	x.w.WriteHeader(status)
	out := g.clientWriter(x)
	defer out.done()
	if c := connOf(x.r.Context()); c != nil && x.r.ProtoMajor == 1 {
		// The status line, the headers and the body in one write. HTTP/1
		// only: its answers are written by this goroutine as it writes
		// them, while HTTP/2 writes frames from a goroutine of its own
		// (and waits for window updates the client sends only for bytes
		// it has received). An error sending the end is the
		// connection's: net/http's next write or read on it fails.
		c.startBatch()
		defer c.flush()
	}
	n, err := out.Write(pv.Data)
	if err == nil && n < len(pv.Data) {
		err = io.ErrShortWrite
	}
	g.sent(x, m, out.err, err)
	return true
}

// sent ends a GetObject whose body was written with the error err
// (clientErr: the client's side of it): a client that went away is let go;
// a failed read aborts the response.
func (g *Gateway) sent(x *exchange, m client.Meta, clientErr, err error) {
	if err == nil || clientErr != nil || x.r.Context().Err() != nil {
		return // done, or the client went away
	}
	g.log.Warn("object read failed mid-stream; aborting the response", "bucket", x.rt.bucket, "key", x.rt.key,
		"etag", m.ETag, "sent", x.w.bytes, "err", err)
	panic(http.ErrAbortHandler)
}

// clientWriter records the error of writing to the client, and gives each
// write its deadline (Config.ClientWriteTimeout).
type clientWriter struct {
	w       io.Writer
	timeout time.Duration
	// deadline sets the connection's write deadline (nil: none set).
	deadline func(time.Time) error
	err      error
}

// writeDeadliner is what http.ResponseController sets write deadlines
// through (net/http's ResponseWriter has it).
type writeDeadliner interface{ SetWriteDeadline(time.Time) error }

// clientWriter is the writer of x's body to its client; call done after
// the body.
func (g *Gateway) clientWriter(x *exchange) clientWriter {
	out := clientWriter{w: x.w}
	if d := g.cfg.ClientWriteTimeout; d > 0 {
		out.timeout = d
		if dl, ok := x.w.ResponseWriter.(writeDeadliner); ok {
			out.deadline = dl.SetWriteDeadline
		} else {
			out.deadline = http.NewResponseController(x.w).SetWriteDeadline
		}
	}
	return out
}

func (c *clientWriter) Write(p []byte) (int, error) {
	if c.deadline != nil {
		_ = c.deadline(time.Now().Add(c.timeout))
	}
	n, err := c.w.Write(p)
	if err != nil {
		c.err = err
	}
	return n, err
}

// done clears the write deadline: the connection may serve another request.
func (c *clientWriter) done() {
	if c.deadline != nil {
		_ = c.deadline(time.Time{})
	}
}

// Canonical header names set on every GetObject (no canonicalization per
// request).
const (
	hContentLength = "Content-Length"
	hContentRange  = "Content-Range"
)

// putObject writes the object through the cache: the node answers once S3
// has it. The body is the one sigv4 installed (decoded and verified); small
// bodies are read and verified whole first, so a failed node can be
// retried; larger ones stream, their last byte held back until verified.
// The SHA-256 the client signed, if it signed one, is checked here as the
// body passes and goes along: the node signs its PUT to S3 with it (and so
// streams the body on to S3), and checks it again where no S3 would before
// the bytes are kept (a multipart upload, a held write). Leaving the check
// to the node alone would save 13% of the CPU of B5's 16 MiB PUTs, but a
// node of an older release, during a rolling upgrade, would keep such
// bodies unchecked.
func (g *Gateway) putObject(x *exchange, auth *sigv4.Result) {
	r := x.r
	if r.ContentLength < 0 {
		// Chunked, or aws-chunked without x-amz-decoded-content-length:
		// S3 refuses a PutObject of unknown length.
		x.fail(newS3Error(http.StatusLengthRequired, CodeMissingContentLength, "You must provide the Content-Length HTTP header."))
		return
	}
	ctx := r.Context()
	if auth.PayloadMode == sigv4.PayloadSHA256 {
		ctx = client.WithPayloadSHA256(ctx, r.Header.Get("X-Amz-Content-Sha256"))
	}
	stored := chunk.StoredHeaders(r.Header)
	if stored.UserMetadataSize() > chunk.MaxUserMetadata {
		x.fail(newS3Error(http.StatusBadRequest, "MetadataTooLarge", "Your metadata headers exceed the maximum allowed metadata size."))
		return
	}
	ctx = client.WithStoredHeaders(ctx, stored)
	size := r.ContentLength
	var body io.Reader = http.NoBody
	var tracked *trackingBody
	release, buffered := g.up.buffer(size)
	switch {
	case size == 0:
		if r.Body != nil && r.Body != http.NoBody {
			// An empty aws-chunked body: its end checks its trailer.
			if _, err := io.Copy(io.Discard, r.Body); err != nil {
				x.fail(fromBodyError(err))
				return
			}
		}
	case buffered:
		defer release()
		replay := newReplayBody(holdback.New(r.Body), size)
		tracked, body = &replay.src, replay
		if trailer := trailingChecksum(r); trailer != "" {
			// The checksum comes after the body (SDKs over https): read
			// the body first, which checks it, so that the checksum goes
			// ahead of the body and is kept, as S3 keeps it.
			if _, err := io.Copy(io.Discard, replay); err != nil {
				x.in = tracked.n
				x.fail(fromBodyError(err))
				return
			}
			if _, err := replay.Seek(0, io.SeekStart); err != nil {
				x.fail(errInternal(err))
				return
			}
			if stored == nil {
				stored = chunk.Headers{}
			}
			stored[trailer] = r.Trailer.Get(trailer)
			ctx = client.WithStoredHeaders(ctx, stored)
		}
	default:
		tracked = &trackingBody{r: holdback.New(r.Body)}
		body = tracked
	}
	m, err := g.cache.Put(ctx, x.rt.bucket, x.rt.key, body, size, r.Header.Get("Content-Type"))
	if tracked != nil {
		x.in = tracked.n
		if tracked.err != nil && !errors.Is(tracked.err, io.EOF) {
			x.fail(fromBodyError(tracked.err))
			return
		}
	}
	if err != nil {
		x.fail(g.cacheError(r.Context(), x, err))
		return
	}
	x.w.Header().Set("ETag", s3cond.QuoteETag(m.ETag))
	answerChecksums(x.w.Header(), r)
	x.w.Header().Set("Content-Length", "0")
	x.w.WriteHeader(http.StatusOK)
}

// answerChecksums answers a PutObject with the x-amz-checksum-<algorithm>
// values its body was declared with (headers, or aws-chunked trailers),
// as S3 does: the verifier checked them when the body ended, and a body
// that failed never reached a node. A PutObject's checksum type is always
// FULL_OBJECT.
func answerChecksums(h http.Header, r *http.Request) {
	for _, k := range chunk.ChecksumHeaders {
		for _, declared := range []http.Header{r.Header, r.Trailer} {
			if vs := declared[k]; len(vs) == 1 && vs[0] != "" {
				h.Set(k, vs[0])
				h.Set(chunk.ChecksumTypeHeader, chunk.FullObjectChecksum)
			}
		}
	}
}

// nodeS3Codes are the S3 error codes a node's 4xx answer may carry as
// they are (the node refused the request as S3 would).
var nodeS3Codes = map[string]bool{"MetadataTooLarge": true, "InvalidArgument": true, "InvalidStorageClass": true,
	sigv4.CodeXAmzContentSHA256Mismatch: true}

// cacheError maps a client error to the S3 error to answer.
func (g *Gateway) cacheError(ctx context.Context, x *exchange, err error) *s3Error {
	var ce *client.Error
	msg := err.Error()
	if errors.As(err, &ce) && ce.Message != "" {
		msg = ce.Message
	}
	switch {
	case errors.Is(err, client.ErrNotFound):
		if x.r.Method == http.MethodPut {
			return errNoSuchBucket()
		}
		return g.notFound(ctx, x.rt.bucket)
	case errors.Is(err, client.ErrAccessDenied):
		return errAccessDenied(msg)
	case errors.Is(err, client.ErrInvalidRange):
		return newS3Error(http.StatusRequestedRangeNotSatisfiable, CodeInvalidRange, "The requested range is not satisfiable")
	case errors.Is(err, client.ErrChanged):
		return newS3Error(http.StatusServiceUnavailable, CodeSlowDown, "The object changed while it was being read; please retry.")
	case errors.Is(err, client.ErrUnavailable) && ce != nil && ce.Code == CodeSlowDown:
		return newS3Error(http.StatusServiceUnavailable, CodeSlowDown, "Please reduce your request rate. (%s)", msg)
	case errors.Is(err, client.ErrUnavailable):
		g.log.Warn("cache unavailable", "op", x.rt.op, "bucket", x.rt.bucket, "key", x.rt.key, "err", err)
		return errUnavailable(msg)
	case errors.Is(err, context.Canceled) && ctx.Err() != nil:
		return newS3Error(http.StatusBadRequest, CodeRequestTimeout, "The client went away.")
	case ce != nil && ce.Status == http.StatusNotImplemented && ce.Code == CodeNotImplemented:
		// What the cache cannot keep for the key (a WriteBack key's
		// storage class): refused as S3 refuses what it does not do.
		return newS3Error(http.StatusNotImplemented, CodeNotImplemented, "%s", msg)
	case ce != nil && ce.Status >= 400 && ce.Status < 500:
		code := CodeInvalidRequest
		if nodeS3Codes[ce.Code] {
			code = ce.Code
		}
		return newS3Error(http.StatusBadRequest, code, "%s", msg)
	}
	g.log.Error("cache request failed", "op", x.rt.op, "bucket", x.rt.bucket, "key", x.rt.key, "err", err)
	return errInternal(err)
}
