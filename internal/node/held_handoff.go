package node

import (
	"context"
	"slices"
	"time"

	"github.com/distcache/distcache/internal/nodeapi"
	"github.com/distcache/distcache/internal/ring"
	"github.com/distcache/distcache/internal/tenancy"
	"github.com/distcache/distcache/internal/writeback"
)

// Held versions follow the ring. A version is kept by the first n active
// members of its key's placement order (n: the holders it was written
// to); when the ring changes (scale-up, a member draining before a
// scale-down, a member gone), every node that holds a version copies it to
// those of the new holders that lack it, and a node that is no longer one
// of them drops its own copy once they all have it. So the key's new
// metadata owner answers for it, reads find it, and a draining member is
// left holding nothing: the operator waits for that before it removes the
// pod.

// heldPlacementInterval is how often a node checks that the versions it
// holds are where the ring in force wants them (at once after a change,
// again while some could not be copied).
const heldPlacementInterval = 2 * time.Second

// keepHeldPlaced hands held versions over whenever the ring changes, until
// ctx ends.
func (s *Server) keepHeldPlaced(ctx context.Context) {
	t := time.NewTicker(heldPlacementInterval)
	defer t.Stop()
	var placed int64 = -1 // the ring epoch every version was placed for
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		r := s.currentRing()
		if r == nil || r.Epoch() == placed {
			continue
		}
		if pending := s.placeHeld(ctx, r); pending == 0 {
			placed = r.Epoch()
		} else {
			s.log.Info("held versions not yet where the ring wants them; retrying", "pending", pending, "epoch", r.Epoch())
		}
	}
}

// placeHeld copies each held version to the holders r wants that lack it
// and drops this node's copy where r does not want it. It returns how many
// versions could not be placed.
func (s *Server) placeHeld(ctx context.Context, r *ring.Ring) (pending int) {
	for _, e := range s.cfg.Journal.Entries() {
		want := wantedHolders(r, e)
		if len(want) == 0 || slices.Equal(want, e.Holders) {
			continue
		}
		c := caller{tenant: &tenancy.Tenant{Name: e.Tenant}}
		moved := e
		moved.Holders = want
		ok := true
		for _, name := range want {
			if name == s.cfg.Self || slices.Contains(e.Holders, name) {
				continue
			}
			if err := s.copyHeld(ctx, r, c, name, moved); err != nil {
				s.log.Warn("cannot hand a held version to its new holder", "object", e.String(), "peer", name, "err", err)
				ok = false
			}
		}
		if !ok {
			pending++
			continue
		}
		if slices.Contains(want, s.cfg.Self) {
			if err := s.cfg.Journal.SetHolders(e, want); err != nil {
				s.storeFailed("held_write", err)
				pending++
			}
			continue
		}
		s.cfg.Journal.Drop(e)
		s.log.Info("handed a held version to its new holders", "object", e.String(), "holders", want)
	}
	return pending
}

// wantedHolders is who r wants to keep version e: as many active members as
// it was written to, in its key's placement order.
func wantedHolders(r *ring.Ring, e writeback.Entry) []string {
	n := max(len(e.Holders), 1)
	var out []string
	for _, m := range r.Candidates(nodeapi.MetaID(heldObject(e.Name)), n) {
		out = append(out, m.Name)
	}
	return out
}
