package node

import (
	"sync/atomic"
	"time"

	"github.com/distcache/distcache/internal/ring"
)

// ringNoticed is when this node first noticed the ring epoch in force, both
// as a time and as a version number; the ring it started with counts from
// its start.
//
//   - Metadata it cached before then may be stale (fresh): a write or
//     delete through any node tells the object's metadata owner under the
//     writer's ring (invalidateObjects), so while this node was stopped,
//     or before a ring change made it an object's owner, the changes went
//     to another node (a pod back in the ring after a restart or a
//     scale-down, with its disk: seen in e2e/processfaults
//     TestWriteBackThroughRingChurn). Such metadata is asked again on its
//     first use, as at --meta-ttl: one HEAD per object and ring change.
//     Metadata it cached within RingSettle after then is asked again
//     once RingSettle has passed (trustedFor): members that had not yet
//     noticed the ring told the owner they knew of their writes.
//   - Versions it numbered before then were numbered under another ring
//     (numberedHere): another node may have numbered a newer one since.
//     Versions grow on each node (Journal.NextVersion).
//
// A change is noticed lazily, on first use, so never before it happened:
// what came just after it counts as before, never the other way round.
type ringNoticed struct {
	cur atomic.Pointer[noticed]
}

type noticed struct {
	epoch   int64 // -1: no ring
	at      time.Time
	version uint64
}

// start records the node's start under ring r.
func (rn *ringNoticed) start(r *ring.Ring, at time.Time, version uint64) {
	rn.cur.Store(&noticed{epoch: epochOf(r), at: at, version: version})
}

// of is the notice of r's epoch, taken now (now, next) if it is new.
func (rn *ringNoticed) of(r *ring.Ring, now func() time.Time, next func() uint64) noticed {
	epoch := epochOf(r)
	for {
		old := rn.cur.Load()
		if old.epoch == epoch {
			return *old
		}
		c := &noticed{epoch: epoch, at: now()}
		if next != nil {
			c.version = next()
		}
		if rn.cur.CompareAndSwap(old, c) {
			return *c
		}
	}
}

func epochOf(r *ring.Ring) int64 {
	if r == nil {
		return -1
	}
	return r.Epoch()
}

// noticedRing is ringNoticed's notice of r.
func (s *Server) noticedRing(r *ring.Ring) noticed {
	var next func() uint64
	if s.cfg.Journal != nil {
		next = s.cfg.Journal.NextVersion
	}
	return s.ringNoticed.of(r, s.cfg.Now, next)
}

// DefaultRingSettle is Config.RingSettle's default.
const DefaultRingSettle = 5 * time.Second
