package gateway

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
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
	var body io.Reader
	var counter *countingReader
	if size != 0 && r.Body != nil && r.Body != http.NoBody {
		counter = &countingReader{r: r.Body}
		body = counter
	}
	resp, err := g.up.Forward(r.Context(), r.Method, x.rt.bucket, x.rt.key, forwardQuery(r.URL.RawQuery),
		forwardHeaders(r.Header), body, size)
	if counter != nil {
		x.in = counter.n
	}
	g.answer(x, resp, err)
}

// forwardBody passes the request through with a body already read,
// preferring the node preferred.
func (g *Gateway) forwardBody(x *exchange, header http.Header, body []byte, preferred string) {
	r := x.r
	resp, err := g.up.send(r.Context(), r.Method, x.rt.bucket, x.rt.key, forwardQuery(r.URL.RawQuery), header, body, preferred)
	g.answer(x, resp, err)
}

// answer relays a pass-through answer, or the error of getting none.
func (g *Gateway) answer(x *exchange, resp *http.Response, err error) {
	if err != nil {
		x.fail(g.forwardError(x, err))
		return
	}
	defer resp.Body.Close()
	if resp.Header.Get(headerNodeError) != "" {
		x.fail(nodeError(resp))
		return
	}
	if loc := resp.Header.Get("Location"); resp.StatusCode/100 == 3 && strings.HasPrefix(loc, "/v1/") {
		// The node's router, not S3: relaying it would send the client to
		// a node path on the gateway.
		x.fail(errInternal(fmt.Errorf("the cache node redirected the request to %s", loc)))
		return
	}
	g.relay(x, resp)
}

// forwardError maps a failed pass-through to the S3 error to answer.
func (g *Gateway) forwardError(x *exchange, err error) *s3Error {
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

// relay copies a node's (that is, S3's) answer to the client: status,
// headers and the body, streamed.
func (g *Gateway) relay(x *exchange, resp *http.Response) {
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
	resp, err := g.up.Forward(ctx, http.MethodHead, bucket, "", "", http.Header{}, nil, 0)
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
