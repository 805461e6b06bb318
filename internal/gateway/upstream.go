package gateway

import (
	"bytes"
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"net/http"
	"slices"
	"strings"
	"sync"
	"time"

	"golang.org/x/sync/semaphore"

	"github.com/distcache/distcache/internal/chunk"
	"github.com/distcache/distcache/internal/client"
	"github.com/distcache/distcache/internal/failover"
	"github.com/distcache/distcache/internal/holdback"
	"github.com/distcache/distcache/internal/nodeapi"
	"github.com/distcache/distcache/internal/ring"
	"github.com/distcache/distcache/internal/sigv4"
)

// Node API details of the pass-through (internal/node/passthrough.go).
const (
	headerTenant    = "X-Distcache-Tenant"
	headerNodeError = "X-Distcache-Error"
	passthroughPath = "/v1/s3/"
)

// DefaultReplayBytes is the largest pass-through request body kept in memory
// so that it can be sent again to another node when the first cannot be
// reached (CompleteMultipartUpload and DeleteObjects bodies fit).
const DefaultReplayBytes = 4 << 20

// Upstream sends S3 requests to the cache nodes' pass-through API
// (/v1/s3/{bucket}/{key}), which signs them again with the tenant's backend
// credentials and passes them through to S3. Any live node will do: a node
// that cannot be reached is skipped for DownFor and the request goes to the
// next one, as long as its body can be sent again.
type Upstream struct {
	// Client reaches the nodes over mTLS with the gateway's certificate.
	Client *http.Client
	// Nodes lists the base URLs (https://host:port) of the members to use.
	Nodes func() []string
	// Tenant is sent as X-Distcache-Tenant (needed with a peer certificate).
	Tenant string
	// Owners, when set, lists the nodes in the order the cache places an
	// object's metadata (the owner first). Operations that change an object
	// go there first: the node that runs them invalidates what it cached,
	// and the owner is the node that caches the object's metadata.
	Owners func(bucket, key string) []string
	// DownFor is how long an unreachable node is tried last (default 5s).
	DownFor time.Duration
	// ReplayBytes bounds the bodies buffered for failover (default
	// DefaultReplayBytes); larger bodies stream and fail over only when
	// the node was unreachable before any byte was sent.
	ReplayBytes int64
	// BufferBytes bounds the memory all buffered bodies take together
	// (default DefaultBufferBytes); past it, bodies stream.
	BufferBytes int64
	// Metrics, when set, counts attempts.
	Metrics *Metrics
	// Fallback, when set, lists nodes of the cache's other zones
	// (client.Client.FallbackNodes), tried in that order once every node
	// of Nodes (or Owners) failed: a zone with no reachable member passes
	// through another zone rather than failing.
	Fallback func() []client.ZoneNode
	// CrossZone, when set, is told the bytes of each exchange with a
	// Fallback node (client.Client.CountCrossZone): the request body sent
	// (direction out) and the response body read (in).
	CrossZone func(peerZone, direction string, n int64)

	// down holds the nodes that failed a moment ago, by base URL
	// (downNodes sets its For to DownFor).
	down     failover.Set
	downOnce sync.Once

	bufOnce     sync.Once
	buffers     *semaphore.Weighted
	bufferTotal int64
}

// DefaultBufferBytes is the default Upstream.BufferBytes.
const DefaultBufferBytes = 256 << 20

func (u *Upstream) initBuffers() {
	u.bufOnce.Do(func() {
		u.bufferTotal = u.BufferBytes
		if u.bufferTotal <= 0 {
			u.bufferTotal = DefaultBufferBytes
		}
		u.buffers = semaphore.NewWeighted(u.bufferTotal)
	})
}

// buffer reserves memory to hold a body of n bytes. It returns false when
// the body is too large to buffer or the budget is spent: stream it.
func (u *Upstream) buffer(n int64) (release func(), ok bool) {
	limit := u.ReplayBytes
	if limit <= 0 {
		limit = DefaultReplayBytes
	}
	if n <= 0 || n > limit {
		return nil, false
	}
	u.initBuffers()
	if !u.buffers.TryAcquire(n) {
		return nil, false
	}
	return func() { u.buffers.Release(n) }, true
}

// hold reserves memory for a body of n bytes that must be read whole,
// waiting for the budget (BufferBytes) when it is spent; n above it
// reserves all of it.
func (u *Upstream) hold(ctx context.Context, n int64) (release func(), err error) {
	u.initBuffers()
	n = min(n, u.bufferTotal)
	if err := u.buffers.Acquire(ctx, n); err != nil {
		return nil, err
	}
	return func() { u.buffers.Release(n) }, nil
}

// errNoNodes is returned when no member is known.
var errNoNodes = errors.New("no cache nodes known")

// upstreamError is a failure to get any answer from the nodes.
type upstreamError struct{ err error }

func (e *upstreamError) Error() string { return "cache nodes unreachable: " + e.err.Error() }
func (e *upstreamError) Unwrap() error { return e.err }

// bodyReadError is a failure reading the client's request body (an
// integrity check of sigv4, or the client going away).
type bodyReadError struct{ err error }

func (e *bodyReadError) Error() string { return "reading the request body: " + e.err.Error() }
func (e *bodyReadError) Unwrap() error { return e.err }

// Passthrough sends one S3 request to a node and returns the node's answer
// (S3's, or the node's own error with X-Distcache-Error). body has size
// bytes (-1: unknown, sent chunked). Errors are *upstreamError (no node
// answered) or *bodyReadError.
func (u *Upstream) Passthrough(ctx context.Context, method, bucket, key, rawQuery string, header http.Header, body io.Reader, size int64) (*http.Response, error) {
	nodes := u.nodesFor(method, bucket, key, rawQuery)
	if body == nil || size == 0 {
		return u.roundTrip(ctx, nodes, method, bucket, key, rawQuery, header, nil, nil, 0)
	}
	release, ok := u.buffer(size)
	if !ok {
		return u.roundTrip(ctx, nodes, method, bucket, key, rawQuery, header, nil, &trackingBody{r: holdback.New(body)}, size)
	}
	defer release() // accounting only: the bytes live as long as the transport needs them
	// Small bodies are read (and verified) first, then can be sent to any
	// node.
	replay := make([]byte, size)
	if _, err := io.ReadFull(body, replay); err != nil {
		return nil, &bodyReadError{err}
	}
	if err := expectEOF(body); err != nil {
		return nil, &bodyReadError{err}
	}
	return u.roundTrip(ctx, nodes, method, bucket, key, rawQuery, header, replay, nil, size)
}

// nodesFor lists the nodes to try for a pass-through, in order: the
// object's owners first for an operation that changes it.
func (u *Upstream) nodesFor(method, bucket, key, rawQuery string) []string {
	if key != "" && u.Owners != nil && toOwner(method, rawQuery) {
		if nodes := u.moveDownLast(u.Owners(bucket, key)); len(nodes) > 0 {
			return nodes
		}
	}
	return u.order()
}

// passthroughRead is Passthrough for a body already read (and verified).
func (u *Upstream) passthroughRead(ctx context.Context, method, bucket, key, rawQuery string, header http.Header, body []byte) (*http.Response, error) {
	return u.roundTrip(ctx, u.nodesFor(method, bucket, key, rawQuery), method, bucket, key, rawQuery, header, body, nil, int64(len(body)))
}

// passthroughTo is Passthrough for a body held in memory, tried on
// preferred first.
func (u *Upstream) passthroughTo(ctx context.Context, method, bucket, key, rawQuery string, header http.Header, body []byte, preferred string) (*http.Response, error) {
	nodes := u.order()
	if preferred != "" {
		rest := []string{preferred}
		for _, n := range nodes {
			if n != preferred {
				rest = append(rest, n)
			}
		}
		nodes = u.moveDownLast(rest)
	}
	return u.roundTrip(ctx, nodes, method, bucket, key, rawQuery, header, body, nil, int64(len(body)))
}

// roundTrip sends the request to the first of nodes that can be reached.
// The body is replay (sent again on failover), or stream (size bytes,
// failover only while none was read), or neither.
func (u *Upstream) roundTrip(ctx context.Context, nodes []string, method, bucket, key, rawQuery string, header http.Header,
	replay []byte, stream *trackingBody, size int64) (*http.Response, error) {
	nodes, zones := u.withFallback(nodes)
	if len(nodes) == 0 {
		return nil, &upstreamError{errNoNodes}
	}
	path := passthroughURLPath(bucket, key)
	var (
		resp  *http.Response
		err   error
		errs  []error
		asked int
	)
	failover.Try(u.downNodes(), nodes, baseURL, func(base string, _ bool) failover.Verdict {
		if asked > 0 {
			u.count("failover")
		}
		asked++
		var reqBody io.Reader
		switch {
		case replay != nil:
			reqBody = bytes.NewReader(replay)
		case stream != nil:
			reqBody = stream
		}
		req, rerr := http.NewRequestWithContext(ctx, method, base+path, reqBody)
		if rerr != nil {
			err = &upstreamError{rerr}
			return failover.Stop
		}
		req.URL.RawPath = path
		req.URL.RawQuery = rawQuery
		req.Header = header.Clone()
		if u.Tenant != "" {
			req.Header.Set(headerTenant, u.Tenant)
		}
		req.ContentLength = size
		if size == 0 {
			req.Body = http.NoBody
		}
		r, derr := u.Client.Do(req)
		if derr == nil {
			u.count("ok")
			if zone := zones[base]; zone != "" && u.CrossZone != nil {
				sent := size
				if stream != nil {
					sent = stream.n
				}
				u.CrossZone(zone, client.DirectionOut, sent)
				r.Body = &crossZoneBody{ReadCloser: r.Body, count: func(n int64) { u.CrossZone(zone, client.DirectionIn, n) }}
			}
			resp = r
			return failover.Done
		}
		if stream != nil && stream.err != nil && !errors.Is(stream.err, io.EOF) {
			err = &bodyReadError{stream.err}
			return failover.Stop
		}
		if ctx.Err() != nil {
			err = &upstreamError{ctx.Err()}
			return failover.Stop
		}
		errs = append(errs, fmt.Errorf("%s: %w", base, derr))
		if stream != nil && stream.n > 0 {
			return failover.FailedLast // the body cannot be sent again
		}
		return failover.Failed
	})
	if resp != nil || err != nil {
		return resp, err
	}
	u.count("failed")
	return nil, &upstreamError{errors.Join(errs...)}
}

// baseURL keys nodes in Upstream.down.
func baseURL(base string) string { return base }

// downNodes is the set of nodes marked down.
func (u *Upstream) downNodes() *failover.Set {
	u.downOnce.Do(func() { u.down.For = u.DownFor })
	return &u.down
}

// withFallback appends the Fallback nodes that are not among nodes, and
// maps each of them to its zone.
func (u *Upstream) withFallback(nodes []string) ([]string, map[string]string) {
	if u.Fallback == nil {
		return nodes, nil
	}
	var zones map[string]string
	for _, n := range u.Fallback() {
		if _, dup := zones[n.URL]; dup || slices.Contains(nodes, n.URL) {
			continue
		}
		if zones == nil {
			zones = map[string]string{}
		}
		zones[n.URL] = n.Zone
		nodes = append(slices.Clip(nodes), n.URL)
	}
	return nodes, zones
}

// crossZoneBody counts the bytes read of an answer from another zone.
type crossZoneBody struct {
	io.ReadCloser
	count func(n int64)
}

func (b *crossZoneBody) Read(p []byte) (int, error) {
	n, err := b.ReadCloser.Read(p)
	if n > 0 {
		b.count(int64(n))
	}
	return n, err
}

func (u *Upstream) count(result string) {
	if u.Metrics != nil {
		u.Metrics.upstream.WithLabelValues(result).Inc()
	}
}

// order returns the nodes to try: those not recently down first, starting
// at a random one so load spreads, then the down ones.
func (u *Upstream) order() []string {
	all := u.Nodes()
	if len(all) == 0 {
		return nil
	}
	start := rand.IntN(len(all))
	rotated := append(slices.Clone(all[start:]), all[:start]...)
	return failover.DownLast(u.downNodes(), rotated, baseURL)
}

// moveDownLast keeps the order of nodes, those recently down last.
func (u *Upstream) moveDownLast(nodes []string) []string {
	return failover.DownLast(u.downNodes(), nodes, baseURL)
}

// toOwner reports whether a key-scoped request goes to the key's metadata
// owner first: a write of the key (PUT, copy, delete) or any step of a
// multipart upload of it. The owner orders the key's writes, and it alone
// takes the held ones (WriteBack, Transient), their multipart uploads
// included, whose parts it keeps until the upload completes.
func toOwner(method, rawQuery string) bool {
	switch method {
	case http.MethodPut, http.MethodPost, http.MethodDelete:
		return true
	}
	return strings.Contains(rawQuery, "uploadId=")
}

// trackingBody is a request body that records how much was read and the
// read error, and ignores Close: the transport closes bodies of failed
// attempts, and a body never sent may still go to the next node.
type trackingBody struct {
	r   io.Reader
	n   int64
	err error
}

func (b *trackingBody) Read(p []byte) (int, error) {
	n, err := b.r.Read(p)
	b.n += int64(n)
	if err != nil {
		b.err = err
	}
	return n, err
}

func (b *trackingBody) Close() error { return nil }

// expectEOF reads the end of a body whose declared length was consumed, so
// that sigv4's end-of-body checks run.
func expectEOF(r io.Reader) error {
	var one [1]byte
	n, err := io.ReadFull(r, one[:])
	switch {
	case n > 0:
		return errors.New("the body is longer than its Content-Length")
	case errors.Is(err, io.EOF):
		return nil
	}
	return err
}

// passthroughURLPath is /v1/s3/{bucket}[/{key}], escaped as the node's
// router needs it to give back exactly bucket and key (see nodeapi).
func passthroughURLPath(bucket, key string) string {
	if key == "" {
		return passthroughPath + sigv4.EscapePath(bucket)
	}
	return passthroughPath + strings.TrimPrefix(nodeapi.ObjectPath(bucket, key), objectsPath)
}

// objectsPath is the prefix of nodeapi.ObjectPath.
const objectsPath = "/v1/objects/"

// NewUpstreamClient returns an HTTP/1.1 client for the nodes' pass-through
// holding tlsConfig's client certificate; with current set, each new
// connection takes its configuration from it instead (see
// client.Config.CurrentTLS). It follows no redirects (the node API never
// sends one; following it could change the target).
func NewUpstreamClient(tlsConfig *tls.Config, current func() *tls.Config, timeout time.Duration) *http.Client {
	tr := client.NodeTransport(tlsConfig, current)
	tr.MaxIdleConnsPerHost = 32
	// A pass-through answer can take as long as S3 does (a
	// CompleteMultipartUpload of many parts, a large copy).
	tr.ResponseHeaderTimeout = timeout
	tr.ExpectContinueTimeout = time.Second
	return &http.Client{
		Transport:     tr,
		CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse },
	}
}

// RingOwners returns an Upstream.Owners function placing keys as the client
// c places object metadata for tenant (the placement tenant: the tenant of
// the client certificate, or the one a peer certificate acts for).
func RingOwners(c *client.Client, tenant string) func(bucket, key string) []string {
	return func(bucket, key string) []string {
		r := c.Ring()
		if r == nil {
			return nil
		}
		var buf [16]ring.Member
		ms := r.AppendCandidates(buf[:0], chunk.ID{Object: chunk.Object{Tenant: tenant, Bucket: bucket, Key: key}}, 0)
		out := make([]string, 0, len(ms))
		for _, m := range ms {
			out = append(out, "https://"+m.Address)
		}
		return out
	}
}

// RingNodes lists the active members of the ring c routes by, as base URLs,
// or the seeds while the ring has none.
func RingNodes(c *client.Client, seeds []string) func() []string {
	return func() []string {
		var out []string
		if r := c.Ring(); r != nil {
			for _, m := range r.Members() {
				if m.State == ring.StateActive && m.Address != "" {
					out = append(out, "https://"+m.Address)
				}
			}
		}
		if len(out) == 0 {
			for _, s := range seeds {
				if !strings.Contains(s, "://") {
					s = "https://" + s
				}
				out = append(out, strings.TrimSuffix(s, "/"))
			}
		}
		return out
	}
}
