package gateway

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strings"
	"sync"
	"time"
)

// passthrough serves an operation the cache does not interpret by sending
// it to a cache node's /v1/s3 API and streaming S3's answer back.
func (g *Gateway) passthrough(x *exchange) {
	r := x.r
	size := r.ContentLength
	if size < 0 && (r.Method == http.MethodPut || r.Method == http.MethodPost) {
		x.fail(newS3Error(http.StatusLengthRequired, CodeMissingContentLength, "You must provide the Content-Length HTTP header."))
		return
	}
	if trailer := trailingChecksum(r); trailer != "" {
		g.passthroughTrailed(x, trailer)
		return
	}
	var body io.Reader
	var counter *countingReader
	if size != 0 && r.Body != nil && r.Body != http.NoBody {
		counter = &countingReader{r: r.Body}
		body = counter
	}
	resp, err := g.up.Passthrough(r.Context(), r.Method, x.rt.bucket, x.rt.key, passthroughQuery(r.URL.RawQuery),
		passthroughHeaders(r.Header), body, size)
	if counter != nil {
		x.in = counter.n
	}
	g.answer(x, resp, err)
}

// MaxTrailedBody bounds a pass-through body whose checksum comes in an
// aws-chunked trailer (passthroughTrailed): SDKs cut multipart uploads into
// parts of 5 to 16 MiB.
const MaxTrailedBody = 64 << 20

// trailingChecksum is the canonical name of the x-amz-checksum-* trailer
// r's aws-chunked body declares (sigv4 checks it when the body ends), ""
// when none.
func trailingChecksum(r *http.Request) string {
	for k := range r.Trailer {
		if hasPrefixFold(k, "X-Amz-Checksum-") {
			return k
		}
	}
	return ""
}

// passthroughTrailed passes through a request whose body's checksum comes
// in an aws-chunked trailer, as SDKs send it over https: S3 wants the
// checksum with the body (an UploadPart of an upload created with a
// checksum algorithm is refused without one), and a node sends headers
// ahead of the body. So the body is read whole first, which checks it
// against the trailer, and passed on with the checksum as a header.
func (g *Gateway) passthroughTrailed(x *exchange, trailer string) {
	r := x.r
	size := r.ContentLength
	if size > MaxTrailedBody {
		x.fail(newS3Error(http.StatusBadRequest, CodeInvalidRequest,
			"A body whose checksum comes in a trailer (%s) may be at most %d bytes through this gateway: send the checksum as a header, or use smaller parts.",
			strings.ToLower(trailer), MaxTrailedBody))
		return
	}
	release, err := g.up.hold(r.Context(), size)
	if err != nil {
		x.fail(newS3Error(http.StatusBadRequest, CodeRequestTimeout, "The client went away."))
		return
	}
	defer release()
	body := make([]byte, size)
	n, err := io.ReadFull(r.Body, body)
	if err == nil {
		err = expectEOF(r.Body) // the check comes with the body's end
	}
	x.in = int64(n)
	if err != nil {
		x.fail(fromBodyError(err))
		return
	}
	header := passthroughHeaders(r.Header)
	header.Set(trailer, r.Trailer.Get(trailer))
	resp, err := g.up.passthroughRead(r.Context(), r.Method, x.rt.bucket, x.rt.key, passthroughQuery(r.URL.RawQuery), header, body)
	g.answer(x, resp, err)
}

// passthroughBody passes the request through with a body already read,
// preferring the node preferred.
func (g *Gateway) passthroughBody(x *exchange, header http.Header, body []byte, preferred string) {
	r := x.r
	resp, err := g.up.passthroughTo(r.Context(), r.Method, x.rt.bucket, x.rt.key, passthroughQuery(r.URL.RawQuery), header, body, preferred)
	g.answer(x, resp, err)
}

// answer gives the client a pass-through answer, or the error of getting
// none.
func (g *Gateway) answer(x *exchange, resp *http.Response, err error) {
	if err != nil {
		x.fail(g.passthroughError(x, err))
		return
	}
	defer resp.Body.Close()
	if resp.Header.Get(headerNodeError) != "" {
		x.fail(nodeError(resp))
		return
	}
	if loc := resp.Header.Get("Location"); resp.StatusCode/100 == 3 && strings.HasPrefix(loc, "/v1/") {
		// The node's router, not S3: passing it on would send the client to
		// a node path on the gateway.
		x.fail(errInternal(fmt.Errorf("the cache node redirected the request to %s", loc)))
		return
	}
	g.copyAnswer(x, resp)
}

// passthroughError maps a failed pass-through to the S3 error to answer.
func (g *Gateway) passthroughError(x *exchange, err error) *s3Error {
	var be *bodyReadError
	if errors.As(err, &be) {
		return fromBodyError(be.err)
	}
	if errors.Is(err, context.Canceled) {
		return newS3Error(http.StatusBadRequest, CodeRequestTimeout, "The client went away.")
	}
	g.log.Warn("pass-through failed", "op", x.rt.op, "bucket", x.rt.bucket, "key", x.rt.key, "err", err)
	return errUnavailable(err.Error())
}

// copyAnswer copies a node's (that is, S3's) answer to the client: status,
// headers and the body, streamed.
func (g *Gateway) copyAnswer(x *exchange, resp *http.Response) {
	h := x.w.Header()
	for k, v := range resp.Header {
		if !responseHeadersDropped[k] && !hasPrefixFold(k, "X-Distcache-") {
			h[k] = v
		}
	}
	if id := resp.Header.Get("X-Amz-Request-Id"); id != "" {
		h.Set("X-Distcache-S3-Request-Id", id)
	}
	x.w.WriteHeader(resp.StatusCode)
	if x.r.Method == http.MethodHead {
		return
	}
	buf := copyBuffers.Get().(*[]byte)
	defer copyBuffers.Put(buf)
	if _, err := io.CopyBuffer(x.w, resp.Body, *buf); err != nil {
		// The client sees a short body, never a silently truncated one
		// that looks complete.
		g.log.Warn("pass-through answer cut off", "op", x.rt.op, "bucket", x.rt.bucket, "key", x.rt.key, "err", err)
		panic(http.ErrAbortHandler)
	}
}

var copyBuffers = sync.Pool{New: func() any { b := make([]byte, 64<<10); return &b }}

// bucketCache remembers buckets known to exist, so that telling
// NoSuchBucket from NoSuchKey costs one HeadBucket per bucket and TTL.
type bucketCache struct {
	ttl time.Duration
	mu  sync.Mutex
	m   map[string]time.Time
}

func newBucketCache(ttl time.Duration) *bucketCache {
	return &bucketCache{ttl: ttl, m: map[string]time.Time{}}
}

func (b *bucketCache) known(bucket string) bool {
	b.mu.Lock()
	defer b.mu.Unlock()
	t, ok := b.m[bucket]
	return ok && time.Now().Before(t)
}

func (b *bucketCache) add(bucket string) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if len(b.m) > 4096 {
		clear(b.m)
	}
	b.m[bucket] = time.Now().Add(b.ttl)
}

// notFound decides between NoSuchKey and NoSuchBucket after the cache said
// an object does not exist: S3 says which, the node does not.
func (g *Gateway) notFound(ctx context.Context, bucket string) *s3Error {
	if g.buckets.known(bucket) {
		return errNoSuchKey()
	}
	resp, err := g.up.Passthrough(ctx, http.MethodHead, bucket, "", "", http.Header{}, nil, 0)
	if err != nil {
		return errNoSuchKey()
	}
	defer resp.Body.Close()
	switch {
	case resp.StatusCode == http.StatusNotFound && resp.Header.Get(headerNodeError) == "":
		return errNoSuchBucket()
	case resp.StatusCode < 300:
		g.buckets.add(bucket)
	}
	return errNoSuchKey()
}

// requestHeadersDropped are the client's authentication and transport
// headers; the node signs the request again. X-Distcache-* headers are
// dropped too: only the gateway speaks for the tenant.
var requestHeadersDropped = map[string]bool{
	"Authorization": true, "X-Amz-Date": true, "X-Amz-Content-Sha256": true, "X-Amz-Security-Token": true,
	"X-Amz-Decoded-Content-Length": true, "X-Amz-Trailer": true, "Connection": true, "Keep-Alive": true,
	"Proxy-Connection": true, "Proxy-Authorization": true, "Te": true, "Trailer": true, "Transfer-Encoding": true,
	"Upgrade": true, "Host": true, "Content-Length": true, "Expect": true, "Accept-Encoding": true,
}

// passthroughHeaders returns the headers of an S3 request to pass through.
// The trailing checksums of an aws-chunked body were verified by sigv4 but
// cannot be passed on ahead of the body, so a checksum algorithm announced
// without a checksum header is dropped as well (S3 would refuse it).
func passthroughHeaders(in http.Header) http.Header {
	out := make(http.Header, len(in))
	hasChecksum := false
	for k, v := range in {
		if requestHeadersDropped[k] || hasPrefixFold(k, "X-Distcache-") {
			continue
		}
		if hasPrefixFold(k, "X-Amz-Checksum-") && !strings.EqualFold(k, "X-Amz-Checksum-Algorithm") &&
			!strings.EqualFold(k, "X-Amz-Checksum-Type") {
			hasChecksum = true
		}
		out[k] = v
	}
	if !hasChecksum {
		out.Del("X-Amz-Sdk-Checksum-Algorithm")
	}
	return out
}

// presignParams are the query parameters of presigned-URL authentication,
// which must not reach the node (it signs with headers).
var presignParams = map[string]bool{
	"X-Amz-Algorithm": true, "X-Amz-Credential": true, "X-Amz-Date": true, "X-Amz-Expires": true,
	"X-Amz-SignedHeaders": true, "X-Amz-Signature": true, "X-Amz-Security-Token": true, "X-Amz-Content-Sha256": true,
}

// passthroughQuery drops presigned-URL authentication parameters from a raw
// query, keeping everything else exactly as the client encoded it.
func passthroughQuery(raw string) string {
	if raw == "" || !strings.Contains(raw, "X-Amz-") {
		return raw
	}
	var kept []string
	for part := range strings.SplitSeq(raw, "&") {
		name, _, _ := strings.Cut(part, "=")
		if n, err := url.QueryUnescape(name); err == nil && presignParams[n] {
			continue
		}
		kept = append(kept, part)
	}
	return strings.Join(kept, "&")
}

// responseHeadersDropped are hop-by-hop headers and the node's own.
var responseHeadersDropped = map[string]bool{
	"Connection": true, "Keep-Alive": true, "Transfer-Encoding": true, "Trailer": true, "Upgrade": true,
	"X-Amz-Request-Id": true, "X-Amz-Id-2": true,
}

// nodeError turns a node's own error answer (JSON with X-Distcache-Error)
// into the S3 error a client understands.
func nodeError(resp *http.Response) *s3Error {
	var wire struct {
		Code    string `json:"code"`
		Message string `json:"message"`
	}
	body, _ := io.ReadAll(io.LimitReader(resp.Body, 16<<10))
	_ = json.Unmarshal(body, &wire)
	code := resp.Header.Get(headerNodeError)
	if wire.Message == "" {
		wire.Message = http.StatusText(resp.StatusCode)
	}
	if resp.StatusCode == http.StatusNotImplemented {
		// Not a failure to retry: what the cache does not do (a node
		// without a write-back journal asked for a held write).
		return newS3Error(http.StatusNotImplemented, CodeNotImplemented, "%s", wire.Message)
	}
	switch code {
	case CodeAccessDenied:
		return errAccessDenied(wire.Message)
	case CodeNoSuchKey:
		return errNoSuchKey()
	case CodeInvalidRange, CodePreconditionFailed, CodeMissingContentLength:
		return newS3Error(resp.StatusCode, code, "%s", wire.Message)
	case CodeServiceUnavailable:
		return errUnavailable(wire.Message)
	case "BadRequest":
		return newS3Error(http.StatusBadRequest, CodeInvalidRequest, "%s", wire.Message)
	}
	if resp.StatusCode >= 500 {
		return newS3Error(http.StatusServiceUnavailable, CodeServiceUnavailable, "The cache could not complete the request: %s", wire.Message)
	}
	return newS3Error(resp.StatusCode, CodeInvalidRequest, "%s", wire.Message)
}
