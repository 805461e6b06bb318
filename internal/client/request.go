package client

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"strconv"

	"github.com/distcache/distcache/internal/chunk"
	"github.com/distcache/distcache/internal/failover"
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
	)
	// ask makes one attempt at addr. It returns ok when the attempt
	// succeeded, stop when the request ends with err whatever the node
	// (the caller gave up, a finalError), an answer, or the failure.
	ask := func(addr string) (ok, stop bool, answer *Error, failure error) {
		if *tries > 0 {
			c.metrics.failovers.Inc()
		}
		*tries++
		actx, cancel := context.WithTimeout(ctx, c.cfg.Timeout)
		aerr := attempt(actx, addr)
		cancel()
		if aerr == nil {
			c.metrics.requests.WithLabelValues(op, resultOK).Inc()
			return true, false, nil, nil
		}
		var final error
		if answer, final = c.attemptFailed(ctx, op, aerr); final != nil {
			err = final
			return false, true, nil, aerr
		}
		return false, false, answer, aerr
	}
	memberAddr := func(m ring.Member) string { return m.Address }
	answered = failover.Try(&c.down, members, memberAddr, func(m ring.Member, down bool) failover.Verdict {
		if skipDown && down {
			return failover.Skip
		}
		ok, stop, e, failure := ask(m.Address)
		switch {
		case ok:
			return failover.Done
		case stop:
			return failover.Stop
		case e != nil && classify(e) == done:
			err = e
			return failover.Stop
		case e != nil && classify(e) == upstream:
			// Healthy: its S3 failed. The next may have the data cached.
			upstreams++
			last = e
			if upstreams >= c.cfg.Candidates {
				err = e
				return failover.Stop
			}
			return failover.Next
		}
		c.log.Warn("cache node failed; trying the next member", "node", m.Address, "member", m.Name, "op", op, "err", failure)
		*errs = append(*errs, fmt.Errorf("%s: %w", m.Address, failure))
		return failover.Failed
	})
	if answered {
		return true, err
	}
	if last != nil {
		return true, last
	}
	// Every member of the ring in force failed. That ring may be stale:
	// pods replaced faster than a new ring reaches everyone (a rolling
	// update). The seeds (a Service, in Kubernetes) lead to whichever nodes
	// are up now, and any node serves any chunk (relaying it or reading
	// S3 itself). Seeds are marked down only with skipDown: skipped for a
	// while, another zone answers meanwhile.
	tried := make(map[string]bool, len(members))
	for _, m := range members {
		tried[m.Address] = true
	}
	seedAddr := func(addr string) string { return addr }
	answered = failover.Try(&c.down, seeds, seedAddr, func(addr string, down bool) failover.Verdict {
		if tried[addr] || skipDown && down {
			return failover.Skip
		}
		tried[addr] = true
		ok, stop, e, failure := ask(addr)
		switch {
		case ok && skipDown:
			return failover.Done
		case ok || stop:
			return failover.Stop
		case e != nil:
			err = e // an answer: the seed's node is up and said this
			return failover.Stop
		}
		*errs = append(*errs, fmt.Errorf("seed %s: %w", addr, failure))
		if skipDown {
			return failover.Failed
		}
		return failover.Next
	})
	return answered, err
}

// attemptFailed sorts out a failed attempt: final is the error the request
// ends with whatever the node (the caller gave up, a finalError); answer is
// the node's error answer, if it gave one. It counts the attempt unless
// final.
func (c *Client) attemptFailed(ctx context.Context, op string, aerr error) (answer *Error, final error) {
	if ctx.Err() != nil {
		return nil, ctx.Err() // the caller gave up; not the node's fault
	}
	var fe *finalError
	if errors.As(aerr, &fe) {
		return nil, fe.err
	}
	if errors.As(aerr, &answer) {
		c.metrics.requests.WithLabelValues(op, resultOf(answer)).Inc()
		return answer, nil
	}
	c.metrics.requests.WithLabelValues(op, resultUnreachable).Inc()
	return nil, nil
}

// route lists the active members in placement order for id (owner first),
// with the members marked down moved to the end.
func (c *Client) route(r *ring.Ring, id chunk.ID, dst []ring.Member) []ring.Member {
	return failover.DownLast(&c.down, r.AppendCandidates(dst, id, 0), func(m ring.Member) string { return m.Address })
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
