package node

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"

	"github.com/distcache/distcache/internal/chunk"
	"github.com/distcache/distcache/internal/failover"
	"github.com/distcache/distcache/internal/ring"
)

// CrossZone is what a node does across zones on a miss
// (DistributedCache spec.crossZone).
type CrossZone string

const (
	// CrossZoneNever keeps a zone to itself: a miss goes to S3.
	CrossZoneNever CrossZone = "Never"
	// CrossZoneOnMiss asks, on a miss, the chunk's owner in each other zone
	// for it (from that node's store only) before S3: inter-zone bytes are
	// billed, but usually cost less than S3 requests and much less time.
	CrossZoneOnMiss CrossZone = "OnMiss"
)

// ParseCrossZone parses a CrossZone ("" is CrossZoneNever).
func ParseCrossZone(s string) (CrossZone, error) {
	switch CrossZone(s) {
	case "", CrossZoneNever:
		return CrossZoneNever, nil
	case CrossZoneOnMiss:
		return CrossZoneOnMiss, nil
	}
	return "", fmt.Errorf("cross-zone mode %q is neither %s nor %s", s, CrossZoneNever, CrossZoneOnMiss)
}

// ZoneRings holds the rings of a cache's other zones, each in a holder of
// its own that its source (a file, the API server) replaces whole. The
// zero value is empty and ready to use; it is safe for concurrent use.
type ZoneRings struct {
	mu      sync.Mutex
	zones   []string // sorted
	holders map[string]*ring.Holder
}

// Holder returns zone's holder, creating an empty one the first time.
func (z *ZoneRings) Holder(zone string) *ring.Holder {
	z.mu.Lock()
	defer z.mu.Unlock()
	if h, ok := z.holders[zone]; ok {
		return h
	}
	if z.holders == nil {
		z.holders = map[string]*ring.Holder{}
	}
	h := &ring.Holder{}
	z.holders[zone] = h
	i, _ := slices.BinarySearch(z.zones, zone)
	z.zones = slices.Insert(z.zones, i, zone)
	return h
}

// Rings returns the rings known, by zone name; zones whose ring has not
// arrived yet are left out.
func (z *ZoneRings) Rings() []*ring.Ring {
	if z == nil {
		return nil
	}
	z.mu.Lock()
	defer z.mu.Unlock()
	out := make([]*ring.Ring, 0, len(z.zones))
	for _, name := range z.zones {
		if r := z.holders[name].Load(); r != nil {
			out = append(out, r)
		}
	}
	return out
}

// fromOtherZones asks the chunk's owner in each other zone, in zone order,
// for the chunk from its store only (X-Distcache-Local-Only: never an S3
// fetch, never relayed), and returns the first answer. own is this node's
// ring, whose zone is skipped. ok is false when no zone had it.
func (s *Server) fromOtherZones(ctx context.Context, own *ring.Ring, c caller, id chunk.ID, objectSize int64) (data []byte, ok bool) {
	_, length, inObject := chunk.Bounds(objectSize, id.Size, id.Index)
	if !inObject {
		return nil, false
	}
	var owners []zoneOwner
	for _, zr := range s.cfg.Zones.Rings() {
		if zone := zr.Zone(); zone != own.Zone() {
			owners = append(owners, zoneOwner{zone: zone, Member: zr.Owner(id)})
		}
	}
	failover.Try(&s.peers.down, owners, zoneOwner.key, func(owner zoneOwner, down bool) failover.Verdict {
		zone := owner.zone
		if down {
			s.metrics.PeerRequests.WithLabelValues(peerCrossZone, "skipped_down").Inc()
			return failover.Skip
		}
		got, err := s.peers.get(ctx, owner.Member, c.tenant.Name, id, objectSize, true)
		if err == nil && int64(len(got)) != length {
			// Another chunk layout (a zone with another chunk size): not
			// this chunk's bytes.
			err = &peerError{status: 200, code: "ChunkSize", msg: fmt.Sprintf("sent %d bytes for a chunk of %d", len(got), length)}
		}
		switch {
		case err == nil:
			s.metrics.PeerRequests.WithLabelValues(peerCrossZone, "ok").Inc()
			s.metrics.CrossZoneBytes.WithLabelValues(zone, directionIn).Add(float64(len(got)))
			data, ok = got, true
			return failover.Done
		case errors.Is(err, errNotCached):
			s.metrics.PeerRequests.WithLabelValues(peerCrossZone, "miss").Inc()
			return failover.Next
		case peerIsHealthy(err):
			s.metrics.PeerRequests.WithLabelValues(peerCrossZone, "error").Inc()
			s.log.Debug("another zone's owner could not answer a chunk", "zone", zone, "peer", owner.Name, "err", err)
			return failover.Next
		}
		s.metrics.PeerRequests.WithLabelValues(peerCrossZone, "unreachable").Inc()
		s.log.Debug("another zone's owner unreachable", "zone", zone, "peer", owner.Name, "err", err)
		return failover.Failed
	})
	return data, ok
}

// zoneOwner is a chunk's owner in another zone.
type zoneOwner struct {
	zone string
	ring.Member
}

// key names the owner in Peers.down: member names are unique within a zone
// only.
func (z zoneOwner) key() string { return z.zone + "/" + z.Name }

// peerCrossZone is the kind label of fromOtherZones' requests, and
// directionIn the direction of the bytes they bring.
const (
	peerCrossZone = "cross_zone"
	directionIn   = "in"
)
