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
// When no member answered, the seeds that are not members are tried. When
// none of those answered either, the same goes on in each fallback zone
// (Config.Fallback) in turn: its members by its own ring, then its seeds.
// Only when no node of any zone answered does the error wrap
// ErrUnavailable. moved, when set, says how many payload bytes the
// attempt that succeeded moved (received, or sent for a put): they are
// counted as crossing zones when that attempt went to another zone.
func (c *Client) try(ctx context.Context, op, bucket, key string, id chunk.ID, moved func() int64, attempt attemptFunc) error {
	var (
		buf   [16]ring.Member
		errs  []error
		tries int
	)
	for zi := -1; zi < len(c.fallback); zi++ {
		zone, r, seeds := c.cfg.Zone, c.ring.Load(), c.seeds
		var fz *fallbackZone
		if zi >= 0 {
			fz = c.fallback[zi]
			zone, r, seeds = fz.name, fz.ring.Load(), fz.seeds
			if r == nil {
				c.triggerFallbackRefresh() // its seeds stand in meanwhile
			}
		}
		var members []ring.Member
		if r != nil {
			members = c.route(r, id, buf[:0])
		}
		// Members and seeds that failed a moment ago are skipped while
		// another zone is left to try: a zone whose nodes all fail (or
		// hang until the dial times out) should cost its readers one
		// failure each per few seconds, not one per request.
		skipDown := zi < len(c.fallback)-1
		answered, err := c.tryZone(ctx, op, members, seeds, skipDown, &tries, &errs, attempt)
		if !answered {
			continue
		}
		if err == nil && fz != nil {
			c.metrics.zoneFallbacks.WithLabelValues(zone, op).Inc()
			if moved != nil {
				dir := DirectionIn
				if op == opPut {
					dir = DirectionOut
				}
				c.CountCrossZone(zone, dir, moved())
			}
		}
		return err
	}
	n := 0
	if r := c.ring.Load(); r != nil {
		n = len(r.Members())
	}
	msg := fmt.Sprintf("none of the %d cache nodes answered, nor any seed", n)
	if len(c.fallback) > 0 {
		msg += ", nor any node of another zone"
	}
	return &Error{Op: op, Bucket: bucket, Key: key, Kind: ErrUnavailable, Message: msg, Err: errors.Join(errs...)}
}

// tryZone is try within one zone: its members in placement order, then its
// seeds that are not members; with skipDown, those marked down are not
// tried. answered is false when no node of the zone answered (the failures
// are added to errs); tries counts the attempts of the whole request, so
// that every one after the first is a failover.
func (c *Client) tryZone(ctx context.Context, op string, members []ring.Member, seeds []string, skipDown bool, tries *int,
	errs *[]error, attempt attemptFunc) (answered bool, err error) {
	var (
		last      *Error
		upstreams int
		now       time.Time
	)
	if skipDown {
		now = time.Now()
	}
	for _, m := range members {
		if skipDown && c.isDown(m.Address, now) {
			continue
		}
		if *tries > 0 {
			c.metrics.failovers.Inc()
		}
		*tries++
		actx, cancel := context.WithTimeout(ctx, c.cfg.Timeout)
		err := attempt(actx, m.Address)
		cancel()
		if err == nil {
			c.metrics.requests.WithLabelValues(op, resultOK).Inc()
			c.markUp(m.Address)
			return true, nil
		}
		if ctx.Err() != nil {
			return true, ctx.Err() // the caller gave up; not the member's fault
		}
		var fe *finalError
		if errors.As(err, &fe) {
			return true, fe.err
		}
		var e *Error
		if errors.As(err, &e) {
			c.metrics.requests.WithLabelValues(op, resultOf(e)).Inc()
			switch classify(e) {
			case done:
				return true, e
			case upstream:
				upstreams++
				last = e
				if upstreams >= c.cfg.Candidates {
					return true, e
				}
				continue
			}
		} else {
			c.metrics.requests.WithLabelValues(op, resultUnreachable).Inc()
		}
		c.log.Warn("cache node failed; trying the next member", "node", m.Address, "member", m.Name, "op", op, "err", err)
		c.markDown(m.Address)
		*errs = append(*errs, fmt.Errorf("%s: %w", m.Address, err))
	}
	if last != nil {
		return true, last
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
	for _, addr := range seeds {
		if tried[addr] || skipDown && c.isDown(addr, now) {
			continue
		}
		tried[addr] = true
		if *tries > 0 {
			c.metrics.failovers.Inc()
		}
		*tries++
		actx, cancel := context.WithTimeout(ctx, c.cfg.Timeout)
		err := attempt(actx, addr)
		cancel()
		if err == nil {
			c.metrics.requests.WithLabelValues(op, resultOK).Inc()
			if skipDown {
				c.markUp(addr)
			}
			return true, nil
		}
		if ctx.Err() != nil {
			return true, ctx.Err()
		}
		var fe *finalError
		if errors.As(err, &fe) {
			return true, fe.err
		}
		var e *Error
		if errors.As(err, &e) {
			c.metrics.requests.WithLabelValues(op, resultOf(e)).Inc()
			return true, e // an answer: the seed's node is up and said this
		}
		c.metrics.requests.WithLabelValues(op, resultUnreachable).Inc()
		if skipDown {
			c.markDown(addr) // skipped for a while: another zone answers meanwhile
		}
		*errs = append(*errs, fmt.Errorf("seed %s: %w", addr, err))
	}
	return false, nil
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
