package node

import (
	"context"
	"errors"
	"slices"
	"strconv"
	"time"

	"github.com/distcache/distcache/internal/ctxtime"
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
//
// A node the ring does not list at all (neither active nor draining) is
// one that is restarting: the operator publishes Ready pods only, so a pod
// of a rolling restart leaves the ring when it stops and comes back when
// it is Ready again, with its disk. Such a node copies what it holds to
// the holders the ring wants but keeps its own copies: back in the ring it
// is again the metadata owner of its keys and must answer for them at
// once, not send their reads to S3 (which does not have them: 404, or the
// tenant's 403) until the others hand them back. Only draining gives
// copies up.

// heldPlacementInterval is how often a node checks that the versions it
// holds are where the ring in force wants them (at once after a change,
// again while some could not be copied).
const heldPlacementInterval = 2 * time.Second

// keepHeldPlaced hands held versions over whenever the ring changes, until
// ctx ends.
func (s *Server) keepHeldPlaced(ctx context.Context) {
	var placed int64 = -1 // the ring epoch every version was placed for
	tick := 0
	ctxtime.Every(ctx, heldPlacementInterval, func() {
		tick++
		r := s.currentRing()
		if r != nil && tick%heldCheckTicks == 0 {
			s.checkHeldCopies(ctx, r)
		}
		if r == nil || r.Epoch() == placed {
			return
		}
		s.cfg.Journal.Reconsider() // the ring may make this node the persister of versions it holds
		if pending := s.placeHeld(ctx, r); pending == 0 {
			placed = r.Epoch()
		} else {
			s.log.Info("held versions not yet where the ring wants them; retrying", "pending", pending, "epoch", r.Epoch())
		}
	})
}

// placeHeld copies each held version to the holders r wants that lack it
// and drops this node's copy where r does not want it. It returns how many
// versions could not be placed.
func (s *Server) placeHeld(ctx context.Context, r *ring.Ring) (pending int) {
	listed := slices.ContainsFunc(r.Members(), func(m ring.Member) bool { return m.Name == s.cfg.Self })
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
				if !errors.Is(err, writeback.ErrBusy) {
					s.storeFailed("held_write", err)
				}
				pending++
			}
			continue
		}
		if !listed {
			continue // restarting: kept for when it is back (above)
		}
		if err := s.cfg.Journal.HandOver(e); err != nil { // not Drop: the ring may give it back
			pending++
			continue
		}
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

// heldCheckTicks: every this many placement ticks (30 s) a node checks the
// copies it keeps for another holder to persist.
const heldCheckTicks = 15

// heldCheckAge is how old a copy must be before it is checked: younger
// ones are being persisted in the ordinary way.
const heldCheckAge = 30 * time.Second

// checkHeldCopies looks at the copies this node keeps but does not persist
// that have waited long: the holder that persists them may have done so
// while this node could not be told (it was down), or may have lost its
// copy (its disk was lost). A copy superseded at that holder, or whose
// version S3 has (or a newer one), is dropped; a copy that holder lacks
// and S3 does not have is persisted by this node instead.
func (s *Server) checkHeldCopies(ctx context.Context, r *ring.Ring) {
	for _, e := range s.cfg.Journal.Entries() {
		if e.Transient || e.Done || s.PersistsHeld(e) || s.cfg.Now().Sub(e.LastModified) < heldCheckAge {
			continue
		}
		persister, ok := s.heldPersister(r, e)
		if !ok {
			continue
		}
		theirs, err := s.peers.listHeld(ctx, persister, e.Tenant, e.Bucket, e.Key)
		if err != nil {
			continue // asked again next time
		}
		var version uint64
		done := false
		for _, t := range theirs {
			if t.Key == e.Key {
				version, done = t.Version, t.Done
			}
		}
		switch {
		case version > e.Version, version == e.Version && done:
			s.cfg.Journal.Drop(e) // superseded, or a delete S3 has applied
			continue
		case version == e.Version:
			continue // it has the copy and will persist it
		}
		inS3, err := s.heldS3.Version(ctx, e)
		switch {
		case err != nil:
		case inS3.Exists && inS3.Version >= e.Version:
			s.cfg.Journal.Drop(e) // persisted, and this copy was never dropped
		default:
			s.log.Warn("a held version's persisting holder does not have it: persisting it from here", "object", e.String(), "holder", persister.Name)
			s.adopted.Store(adoptedKey(e), true)
			s.cfg.Journal.Reconsider()
		}
	}
}

// heldPersister is the member that persists e (PersistsHeld): the first of
// its holders, in its key's placement order, that is an active member.
func (s *Server) heldPersister(r *ring.Ring, e writeback.Entry) (ring.Member, bool) {
	for _, m := range r.Candidates(nodeapi.MetaID(heldObject(e.Name)), 0) {
		if slices.Contains(e.Holders, m.Name) {
			return m, true
		}
	}
	return ring.Member{}, false
}

func adoptedKey(e writeback.Entry) string {
	return e.Tenant + "\x00" + e.Bucket + "\x00" + e.Key + "\x00" + strconv.FormatUint(e.Version, 10)
}
