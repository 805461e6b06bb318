package client

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"strconv"
	"time"

	"github.com/distcache/distcache/internal/chunk"
	"github.com/distcache/distcache/internal/nodeapi"
	"github.com/distcache/distcache/internal/ring"
)

// attemptFunc makes one request to the member at addr. It returns nil on
// success, an *Error for an answer, a finalError to stop trying, and any
// other error when the member failed (unreachable, timed out, broke off).
type attemptFunc func(ctx context.Context, addr string) error

// finalError stops the failover loop with err, without counting an attempt.
type finalError struct{ err error }

func (e *finalError) Error() string { return e.err.Error() }

// try runs attempt against the members that serve id, owner first, until
// one succeeds or gives an answer every member would give:
//
//   - a member that fails is marked down (tried after all the others for
//     a few seconds), the ring is refreshed, and the next member is tried,
//     down to the last active member;
//   - a member that answers that its S3 failed (a 5xx with a node error
//     code) is healthy: the next candidate is tried, as it may have the
//     data cached, but after Candidates such answers the last is returned;
//   - any other answer (success, 4xx) is final.
//
// When no member answered, the seeds that are not members are tried last;
// when none of those answered either, the error wraps ErrUnavailable.
func (c *Client) try(ctx context.Context, op, bucket, key string, id chunk.ID, attempt attemptFunc) error {
	var buf [16]ring.Member
	members := c.route(c.ring.Load(), id, buf[:0])
	var (
		errs      []error
		last      *Error
		upstreams int
	)
	for i, m := range members {
		if i > 0 {
			c.metrics.failovers.Inc()
		}
		actx, cancel := context.WithTimeout(ctx, c.cfg.Timeout)
		err := attempt(actx, m.Address)
		cancel()
		if err == nil {
			c.metrics.requests.WithLabelValues(op, resultOK).Inc()
			c.markUp(m.Address)
			return nil
		}
		if ctx.Err() != nil {
			return ctx.Err() // the caller gave up; not the member's fault
		}
		var fe *finalError
		if errors.As(err, &fe) {
			return fe.err
		}
		var e *Error
		if errors.As(err, &e) {
			c.metrics.requests.WithLabelValues(op, resultOf(e)).Inc()
			switch classify(e) {
			case done:
				return e
			case upstream:
				upstreams++
				last = e
				if upstreams >= c.cfg.Candidates {
					return e
				}
				continue
			}
		} else {
			c.metrics.requests.WithLabelValues(op, resultUnreachable).Inc()
		}
		c.log.Warn("cache node failed; trying the next member", "node", m.Address, "member", m.Name, "op", op, "err", err)
		c.markDown(m.Address)
		errs = append(errs, fmt.Errorf("%s: %w", m.Address, err))
	}
	if last != nil {
		return last
	}
	// Every member of the ring in force failed. That ring may be stale:
	// pods replaced faster than a new ring reaches everyone (a rolling
	// update). The seeds (a Service, in Kubernetes) lead to whichever nodes
	// are up now, and any node serves any chunk (forwarding it or reading
	// S3 itself).
	tried := make(map[string]bool, len(members))
	for _, m := range members {
		tried[m.Address] = true
	}
	for _, addr := range c.seeds {
		if tried[addr] {
			continue
		}
		tried[addr] = true
		c.metrics.failovers.Inc()
		actx, cancel := context.WithTimeout(ctx, c.cfg.Timeout)
		err := attempt(actx, addr)
		cancel()
		if err == nil {
			c.metrics.requests.WithLabelValues(op, resultOK).Inc()
			return nil
		}
		if ctx.Err() != nil {
			return ctx.Err()
		}
		var fe *finalError
		if errors.As(err, &fe) {
			return fe.err
		}
		var e *Error
		if errors.As(err, &e) {
			c.metrics.requests.WithLabelValues(op, resultOf(e)).Inc()
			return e // an answer: the seed's node is up and said this
		}
		c.metrics.requests.WithLabelValues(op, resultUnreachable).Inc()
		errs = append(errs, fmt.Errorf("seed %s: %w", addr, err))
	}
	return &Error{Op: op, Bucket: bucket, Key: key, Kind: ErrUnavailable,
		Message: fmt.Sprintf("none of the %d cache nodes answered, nor any seed", len(members)), Err: errors.Join(errs...)}
}

// route lists the active members in placement order for id (owner first),
// with the members marked down moved to the end.
func (c *Client) route(r *ring.Ring, id chunk.ID, dst []ring.Member) []ring.Member {
	all := r.AppendCandidates(dst, id, 0)
	now := time.Now()
	c.downMu.Lock()
	anyDown := len(c.down) > 0
	c.downMu.Unlock()
	if !anyDown {
		return all
	}
	var downs []ring.Member
	up := all[:0]
	for _, m := range all {
		if c.isDown(m.Address, now) {
			downs = append(downs, m)
		} else {
			up = append(up, m)
		}
	}
	return append(up, downs...)
}

// chunkID names chunk idx of version m, as the nodes place it.
func (c *Client) chunkID(bucket, key, etag string, chunkSize, idx int64) chunk.ID {
	return chunk.ID{Object: chunk.Object{Tenant: c.tenant, Bucket: bucket, Key: key}, ETag: etag, Size: chunkSize, Index: idx}
}

// metaID places an object's metadata operations (stat, put, delete): always
// on the same member, so the node that wrote or deleted an object is the
// one whose metadata a later Stat reads.
func (c *Client) metaID(bucket, key string) chunk.ID {
	return nodeapi.MetaID(chunk.Object{Tenant: c.tenant, Bucket: bucket, Key: key})
}

// newRequest builds a node API request for bucket/key on addr.
//
// The URL is built, not parsed: ObjectPath escapes bucket and key so that
// their unescaped path is exactly /v1/objects/{bucket}/{key}; that is the
// URL's Path, and the escaped form its RawPath when the two differ, which
// is what url.Parse makes of the same string. This runs for every chunk
// request.
func (c *Client) newRequest(ctx context.Context, method, addr, bucket, key, query string) (*http.Request, error) {
	if ctx == nil {
		return nil, errors.New("client: nil context")
	}
	escaped := nodeapi.ObjectPath(bucket, key)
	u := &url.URL{Scheme: "https", Host: addr, Path: objectsPrefix + bucket + "/" + key, RawQuery: query}
	if escaped != u.Path {
		u.RawPath = escaped
	}
	req := (&http.Request{Method: method, URL: u, Proto: "HTTP/1.1", ProtoMajor: 1, ProtoMinor: 1,
		Header: make(http.Header, 2), Host: addr}).WithContext(ctx)
	if c.cfg.Tenant != "" {
		req.Header[headerTenant] = []string{c.cfg.Tenant}
	}
	return req, nil
}

// objectsPrefix starts every object path of the node API.
const objectsPrefix = "/v1/objects/"

// checkChunkSize learns the nodes' chunk size from an answer, or checks it
// against the one known.
func (c *Client) checkChunkSize(op, addr string, h http.Header) error {
	v := h.Get(headerChunkSize)
	if v == "" {
		return nil
	}
	n, err := strconv.ParseInt(v, 10, 64)
	if err != nil || n <= 0 {
		return fmt.Errorf("node %s sent chunk size %q", addr, v)
	}
	return c.learnChunkSize(op, addr, n)
}

func (c *Client) learnChunkSize(op, addr string, n int64) error {
	if c.chunkSize.CompareAndSwap(0, n) {
		if c.cfg.PrefaultPageCache {
			// In the background: New waits for the same pool itself.
			go c.pagePool(c.pageSize(n)).Prefault()
		}
		return nil
	}
	if cur := c.chunkSize.Load(); cur != n {
		return &Error{Op: op, Node: addr, Message: fmt.Sprintf("the node's chunk size is %d, the client's %d: every client and node of a cache must use the same", n, cur)}
	}
	return nil
}

func checkObjectName(op, bucket, key string) error {
	if bucket == "" || key == "" {
		return &Error{Op: op, Bucket: bucket, Key: key, Message: "bucket and key must not be empty"}
	}
	return nil
}
