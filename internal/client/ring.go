package client

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strconv"
	"time"

	"github.com/distcache/distcache/internal/ring"
)

// maxRingBytes bounds a /v1/ring answer.
const maxRingBytes = 4 << 20

// errNoRing is a node that runs alone, without a ring (404 NoRing).
var errNoRing = errors.New("node runs without a ring")

// initRing fetches the first ring from the seeds, in order. If every seed
// that answers runs alone (no ring), the seeds themselves become the
// members of an epoch-0 ring, so standalone nodes work too.
func (c *Client) initRing(ctx context.Context) error {
	var errs []error
	standalone := false
	for _, addr := range c.seeds {
		r, err := c.fetchRing(ctx, addr, c.cfg.Zone)
		if err == nil {
			c.storeRing(r)
			return nil
		}
		if ctx.Err() != nil {
			return ctx.Err()
		}
		standalone = standalone || errors.Is(err, errNoRing)
		errs = append(errs, fmt.Errorf("%s: %w", addr, err))
	}
	if standalone {
		r, err := seedRing(c.seeds)
		if err != nil {
			return err
		}
		c.log.Info("cache nodes run without a ring; routing over the seeds", "seeds", c.seeds)
		c.storeRing(r)
		return nil
	}
	return &Error{Op: opRing, Message: "no seed answered", Kind: ErrUnavailable, Err: errors.Join(errs...)}
}

// seedRing is a ring of the seeds, for nodes that run alone.
func seedRing(seeds []string) (*ring.Ring, error) {
	spec := ring.Spec{Hash: ring.HashParams{Algorithm: ring.AlgorithmRendezvousXXHash64}}
	seen := map[string]bool{}
	for i, addr := range seeds {
		if seen[addr] {
			continue
		}
		seen[addr] = true
		spec.Members = append(spec.Members, ring.Member{Name: "seed-" + strconv.Itoa(i), Address: addr, Ordinal: i,
			Weight: ring.DefaultWeight, State: ring.StateActive})
	}
	return ring.New(spec)
}

// fetchRing asks one node for its ring. With zone set, a ring of another
// zone is refused (errWrongZone).
func (c *Client) fetchRing(ctx context.Context, addr, zone string) (*ring.Ring, error) {
	ctx, cancel := context.WithTimeout(ctx, min(c.cfg.Timeout, 10*time.Second))
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, "https://"+addr+"/v1/ring", nil)
	if err != nil {
		return nil, err
	}
	if c.cfg.Tenant != "" {
		req.Header.Set(headerTenant, c.cfg.Tenant)
	}
	resp, err := c.http.Do(req)
	if err != nil {
		c.metrics.requests.WithLabelValues(opRing, resultUnreachable).Inc()
		return nil, err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		e := answerError(opRing, "", "", addr, resp)
		c.metrics.requests.WithLabelValues(opRing, resultOf(e)).Inc()
		if e.Code == "NoRing" {
			return nil, errNoRing
		}
		return nil, e
	}
	if err := c.checkChunkSize(opRing, addr, resp.Header); err != nil {
		c.metrics.requests.WithLabelValues(opRing, resultNodeError).Inc()
		return nil, err
	}
	body, err := io.ReadAll(io.LimitReader(resp.Body, maxRingBytes+1))
	if err == nil && len(body) > maxRingBytes {
		err = errors.New("ring document too large")
	}
	if err != nil {
		c.metrics.requests.WithLabelValues(opRing, resultUnreachable).Inc()
		return nil, err
	}
	r, err := ring.Parse(body)
	if err != nil {
		c.metrics.requests.WithLabelValues(opRing, resultNodeError).Inc()
		return nil, err
	}
	if zone != "" && r.Zone() != zone {
		c.metrics.requests.WithLabelValues(opRing, resultWrongZone).Inc()
		c.log.Warn("refused a ring of another zone", "node", addr, "ringZone", r.Zone(), "zone", zone, "epoch", r.Epoch())
		return nil, &wrongZoneError{got: r.Zone(), want: zone}
	}
	c.metrics.requests.WithLabelValues(opRing, resultOK).Inc()
	return r, nil
}

// wrongZoneError is a ring document of another zone than the one asked for.
type wrongZoneError struct{ got, want string }

func (e *wrongZoneError) Error() string {
	return fmt.Sprintf("the node routes by the ring of zone %q, not %q", e.got, e.want)
}

// storeRing puts r in force if it is newer than the ring in force.
func (c *Client) storeRing(r *ring.Ring) bool {
	if !c.ring.StoreIfNewer(r) {
		return false
	}
	c.metas.forgetLeased() // the metadata owners may have moved
	c.metrics.ringEpoch.Set(float64(r.Epoch()))
	c.log.Info("ring updated", "epoch", r.Epoch(), "members", len(r.Members()))
	return true
}

// refreshRing fetches the ring from the members in force (up ones first,
// in random order), then from the seeds, and keeps it if it is newer.
func (c *Client) refreshRing(ctx context.Context) {
	r, ok := c.fetchZoneRing(ctx, c.cfg.Zone, c.ring.Load(), c.seeds)
	switch {
	case !ok:
		if ctx.Err() != nil {
			return
		}
		c.metrics.ringRefreshes.WithLabelValues("error").Inc()
		c.log.Warn("no cache node answered a ring fetch; keeping the ring in force")
	case c.storeRing(r):
		c.metrics.ringRefreshes.WithLabelValues("updated").Inc()
	default:
		c.metrics.ringRefreshes.WithLabelValues("unchanged").Inc()
	}
}

// fetchZoneRing asks the members of cur (up ones first, in random order),
// then seeds, then the members marked down, for zone's ring, and returns
// the first ring one of them gave (ok false: none did).
func (c *Client) fetchZoneRing(ctx context.Context, zone string, cur *ring.Ring, seeds []string) (r *ring.Ring, ok bool) {
	var up, down []string
	now := time.Now()
	if cur != nil {
		for _, m := range cur.Members() {
			if c.down.Down(m.Address, now) {
				down = append(down, m.Address)
			} else {
				up = append(up, m.Address)
			}
		}
	}
	seen := map[string]bool{}
	for _, addr := range append(append(shuffled(up), seeds...), down...) {
		if seen[addr] {
			continue
		}
		seen[addr] = true
		r, err := c.fetchRing(ctx, addr, zone)
		if err != nil {
			if ctx.Err() != nil {
				return nil, false
			}
			c.log.Debug("ring fetch failed", "node", addr, "zone", zone, "err", err)
			continue
		}
		return r, true
	}
	return nil, false
}

// refreshLoop fetches the ring every RingRefresh, and soon after a
// trigger (a member failed, an answer carried a newer epoch).
func (c *Client) refreshLoop(ctx context.Context) {
	defer c.loops.Done()
	c.refreshEvery(ctx, time.Time{}, c.refreshNow, c.refreshRing)
}

// refreshEvery calls refresh every RingRefresh and soon after a trigger,
// never sooner than minRefreshGap after the last call (at last), until
// ctx ends.
func (c *Client) refreshEvery(ctx context.Context, last time.Time, trigger <-chan struct{}, refresh func(context.Context)) {
	t := time.NewTicker(c.cfg.RingRefresh)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		case <-trigger:
			if wait := minRefreshGap - time.Since(last); wait > 0 {
				select {
				case <-ctx.Done():
					return
				case <-time.After(wait):
				}
			}
		}
		last = time.Now()
		refresh(ctx)
	}
}

// triggerRefresh asks the refresh loop to fetch the ring soon.
func (c *Client) triggerRefresh() {
	select {
	case c.refreshNow <- struct{}{}:
	default:
	}
}

// observeAnswer notes what every answer of the node at addr tells about
// the cache: a newer ring epoch triggers a refresh of that node's zone's
// ring.
func (c *Client) observeAnswer(addr string, h http.Header) {
	v := h.Get(headerRingEpoch)
	if v == "" {
		return
	}
	e, err := strconv.ParseInt(v, 10, 64)
	if err != nil {
		return
	}
	if z := c.fallbackZoneOf(addr); z != nil {
		if r := z.ring.Load(); r == nil || e > r.Epoch() {
			c.triggerFallbackRefresh()
		}
		return
	}
	if r := c.ring.Load(); r == nil || e > r.Epoch() {
		c.metas.forgetLeased() // the metadata owners may have moved
		c.triggerRefresh()
	}
}
