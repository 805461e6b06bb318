package node

import (
	"context"
	"fmt"
	"slices"
	"sync"

	"github.com/distcache/distcache/internal/nodeapi"
	"github.com/distcache/distcache/internal/ring"
	"github.com/distcache/distcache/internal/tenancy"
	"github.com/distcache/distcache/internal/writeback"
)

// Before a held version goes to S3 (writeback.Persister.Confirm), a node
// that may have missed a newer version of its key asks the members that
// would hold one. S3 keeps no trace of a delete: a copy of version 1 on a
// node that was down while version 2, a DELETE, was written, persisted
// and applied, finds S3 empty and would bring the key back. The holders of
// the delete keep it as a tombstone for writeback.TombstoneLife (the one
// that persisted it, and the others, Journal.Applied), so they can tell.

// confirmHeld returns the newest version of e's key held by one of the
// members that would hold it, when newer than e (e must not be sent; nil:
// none is). The persister asks again once S3 has e, to undo it if a newer
// delete was applied meanwhile. A node
// that numbered e itself, in this process, under the ring in force, has
// seen every version of the key (it numbers them) and asks nobody. Any
// other asks, all at once: the key's first members in placement order (as
// many as the policy keeps copies and one more) under the ring and under
// the previous membership, and e's other holders the ring still lists. A
// member of the ring in force that does not answer fails the check: it may
// be the one keeping the delete, so e waits (the persister retries).
func (s *Server) confirmHeld(ctx context.Context, e writeback.Entry) (newer *writeback.Entry, err error) {
	r := s.currentRing()
	if r == nil || s.numberedHere(r, e) {
		return nil, nil
	}
	asked := s.heldWitnesses(r, e)
	newest, errs := s.newestHeld(ctx, e.Tenant, heldObject(e.Name), asked, "held_confirm")
	if newest != nil && newest.Version > e.Version {
		return newest, nil
	}
	listed := r.Members()
	for i, m := range asked {
		if errs[i] != nil && slices.ContainsFunc(listed, func(l ring.Member) bool { return l.Name == m.Name }) {
			return nil, fmt.Errorf("member %s: %w", m.Name, errs[i])
		}
	}
	return nil, nil // members gone from the ring took what they held with them, or handed it on
}

// heldSettled reports whether version e, held here, is its key's newest
// (the persister's check, confirmHeld, for a read): once confirmed it is
// remembered under the ring in force, which makes this node the one that
// numbers the key's next version. superseded: a newer one is held
// elsewhere. When the members cannot all be asked, e is taken as settled
// for this read, not remembered.
func (s *Server) heldSettled(ctx context.Context, e writeback.Entry) (superseded bool) {
	r := s.currentRing()
	if r == nil || s.numberedHere(r, e) || s.confirmed.has(r.Epoch(), adoptedKey(e)) {
		return false
	}
	newer, err := s.confirmHeld(ctx, e)
	if err == nil && newer == nil {
		s.confirmed.add(r.Epoch(), adoptedKey(e))
	}
	return newer != nil
}

// confirmedVersions are the held versions confirmed to be their key's
// newest under one ring epoch (heldSettled); a new epoch forgets them.
type confirmedVersions struct {
	mu    sync.Mutex
	epoch int64
	keys  map[string]bool
}

// maxConfirmed bounds confirmedVersions: past it they are forgotten (and
// asked about again) rather than grow without end.
const maxConfirmed = 1 << 16

func (c *confirmedVersions) has(epoch int64, key string) bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.epoch == epoch && c.keys[key]
}

func (c *confirmedVersions) add(epoch int64, key string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.epoch != epoch || len(c.keys) >= maxConfirmed {
		c.epoch, c.keys = epoch, map[string]bool{}
	}
	c.keys[key] = true
}

// heldWitnesses are the members other than this node that would hold a
// version of e's key newer than e: see confirmHeld.
func (s *Server) heldWitnesses(r *ring.Ring, e writeback.Entry) []ring.Member {
	copies := max(len(e.Holders), tenancy.DefaultReplicas)
	id := nodeapi.MetaID(heldObject(e.Name))
	var out []ring.Member
	add := func(m ring.Member) {
		if m.Name != s.cfg.Self && !slices.ContainsFunc(out, func(o ring.Member) bool { return o.Name == m.Name }) {
			out = append(out, m)
		}
	}
	for _, m := range r.Candidates(id, copies+1) {
		add(m)
	}
	for _, m := range r.PreviousCandidates(id, copies+1) {
		add(m)
	}
	for _, h := range e.Holders {
		if m, ok := r.Member(h); ok {
			add(m)
		}
	}
	return out
}

// numberedHere reports whether this node numbered e itself (its first
// holder, the key's metadata owner when it was written) since it noticed
// the ring in force (ringNoticed): then no other node numbered a newer
// version of the key.
func (s *Server) numberedHere(r *ring.Ring, e writeback.Entry) bool {
	if len(e.Holders) == 0 || e.Holders[0] != s.cfg.Self {
		return false
	}
	return e.Version > s.noticedRing(r).version
}
