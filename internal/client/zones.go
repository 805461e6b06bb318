package client

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/distcache/distcache/internal/ring"
)

// fallbackZone is another zone of the cache (Config.Fallback): its seeds
// and the ring learnt from them, refreshed by fallbackLoop. Its members
// are tried, by try, only when no node of the client's zone answered.
type fallbackZone struct {
	name  string
	seeds []string // host:port
	ring  ring.Holder
}

// newFallbackZones checks Config.Fallback and parses its seeds.
func newFallbackZones(zone string, cfg []ZoneSeeds) ([]*fallbackZone, error) {
	if len(cfg) > 0 && zone == "" {
		return nil, errors.New("client: Fallback needs Zone (the zone the client reads in)")
	}
	seen := map[string]bool{zone: true}
	var out []*fallbackZone
	for _, z := range cfg {
		switch {
		case z.Zone == "":
			return nil, errors.New("client: a Fallback zone has no name")
		case z.Zone == zone:
			return nil, fmt.Errorf("client: Fallback names the client's own zone %q", zone)
		case seen[z.Zone]:
			return nil, fmt.Errorf("client: Fallback names zone %q twice", z.Zone)
		case len(z.Seeds) == 0:
			return nil, fmt.Errorf("client: Fallback zone %q has no seeds", z.Zone)
		}
		seen[z.Zone] = true
		fz := &fallbackZone{name: z.Zone}
		for _, s := range z.Seeds {
			addr, err := seedAddress(s)
			if err != nil {
				return nil, fmt.Errorf("zone %s: %w", z.Zone, err)
			}
			fz.seeds = append(fz.seeds, addr)
		}
		out = append(out, fz)
	}
	return out, nil
}

// indexFallback maps the addresses of the fallback zones' members and seeds
// to their zone (fallbackZoneOf), after a fallback ring changed.
func (c *Client) indexFallback() {
	if len(c.fallback) == 0 {
		return
	}
	idx := map[string]*fallbackZone{}
	for _, z := range c.fallback {
		for _, s := range z.seeds {
			idx[s] = z
		}
		if r := z.ring.Load(); r != nil {
			for _, m := range r.Members() {
				idx[m.Address] = z
			}
		}
	}
	c.fallbackAddrs.Store(&idx)
}

// fallbackZoneOf is the fallback zone the node at addr belongs to, nil for
// the client's own zone.
func (c *Client) fallbackZoneOf(addr string) *fallbackZone {
	idx := c.fallbackAddrs.Load()
	if idx == nil {
		return nil
	}
	return (*idx)[addr]
}

// fallbackLoop learns the fallback zones' rings at once, then refreshes them
// every RingRefresh and soon after a trigger (a fallback answer carried a
// newer epoch, or a request needed a zone whose ring is not known yet).
// It runs beside refreshLoop so that an unreachable zone never delays the
// refresh of the client's own ring.
func (c *Client) fallbackLoop(ctx context.Context) {
	defer c.loops.Done()
	last := time.Now()
	c.refreshFallback(ctx)
	c.refreshEvery(ctx, last, c.fallbackNow, c.refreshFallback)
}

// refreshFallback fetches each fallback zone's ring and keeps it if newer.
func (c *Client) refreshFallback(ctx context.Context) {
	changed := false
	for _, z := range c.fallback {
		r, ok := c.fetchZoneRing(ctx, z.name, z.ring.Load(), z.seeds)
		if !ok {
			if ctx.Err() != nil {
				return
			}
			c.log.Debug("no node of a fallback zone answered a ring fetch", "zone", z.name)
			continue
		}
		if z.ring.StoreIfNewer(r) {
			changed = true
			c.log.Info("ring of a fallback zone updated", "zone", z.name, "epoch", r.Epoch(), "members", len(r.Members()))
		}
	}
	if changed {
		c.indexFallback()
	}
}

// triggerFallbackRefresh asks fallbackLoop to fetch the fallback rings soon.
func (c *Client) triggerFallbackRefresh() {
	select {
	case c.fallbackNow <- struct{}{}:
	default:
	}
}

// ZoneNode is a node of another zone, as FallbackNodes lists it.
type ZoneNode struct {
	Zone string
	URL  string // https://host:port
}

// FallbackNodes lists the nodes of the fallback zones (Config.Fallback) in
// the order they are tried: zone by zone, each zone's active members, then
// its seeds that are not members. The gateway's pass-through goes to them
// when no node of its own zone answers.
func (c *Client) FallbackNodes() []ZoneNode {
	var out []ZoneNode
	for _, z := range c.fallback {
		seen := map[string]bool{}
		if r := z.ring.Load(); r != nil {
			for _, m := range r.Members() {
				if m.State == ring.StateActive && m.Address != "" && !seen[m.Address] {
					seen[m.Address] = true
					out = append(out, ZoneNode{Zone: z.name, URL: "https://" + m.Address})
				}
			}
		}
		for _, s := range z.seeds {
			if !seen[s] {
				seen[s] = true
				out = append(out, ZoneNode{Zone: z.name, URL: "https://" + s})
			}
		}
	}
	return out
}

// Directions of distcache_cross_zone_bytes_total, as seen from this zone.
const (
	DirectionIn  = "in"  // bytes received from another zone's node
	DirectionOut = "out" // bytes sent to another zone's node
)

// CountCrossZone counts n bytes that crossed to (DirectionOut) or from
// (DirectionIn) peerZone outside the client's own requests (the gateway's
// pass-through to a fallback zone).
func (c *Client) CountCrossZone(peerZone, direction string, n int64) {
	if n > 0 {
		c.metrics.crossZoneBytes.WithLabelValues(peerZone, direction).Add(float64(n))
	}
}
