package node

import (
	"context"
	"errors"
	"net/http"
	"net/url"
	"strconv"
	"sync"
	"time"

	"github.com/distcache/distcache/internal/chunk"
	"github.com/distcache/distcache/internal/ctxtime"
	"github.com/distcache/distcache/internal/metalease"
	"github.com/distcache/distcache/internal/nodeapi"
	"github.com/distcache/distcache/internal/pki"
	"github.com/distcache/distcache/internal/ring"
	"github.com/distcache/distcache/internal/tenancy"
)

// Metadata leases (internal/metalease, internal/nodeapi/leases.go): the
// metadata owner marks the HEAD answers a gateway may keep, numbers every
// change of an object's metadata, and acknowledges a write only once the
// gateways that may keep the old version have learnt of it.

// handleInvalidations answers a gateway's long poll for metadata changes.
func (s *Server) handleInvalidations(w http.ResponseWriter, r *http.Request) {
	q := r.URL.Query()
	watcher := q.Get("watcher")
	since, err := strconv.ParseUint(q.Get("since"), 10, 64)
	if watcher == "" || len(watcher) > 128 || err != nil {
		writeError(w, newError(http.StatusBadRequest, CodeBadRequest, "a poll needs watcher (1 to 128 bytes) and since (a change number)"))
		return
	}
	c, aerr := s.identify(r)
	if aerr != nil {
		// A tenant just removed says it applied its reset (Revoke).
		if name := claimedTenant(r); name != "" {
			s.leases.Acknowledge(name, watcher, since, q.Get("incarnation"))
		}
		writeError(w, aerr)
		return
	}
	ans, err := s.leases.Poll(r.Context(), c.tenant.Name, watcher, since, q.Get("incarnation"))
	if errors.Is(err, metalease.ErrWatcherTenant) {
		writeError(w, newError(http.StatusForbidden, CodeAccessDenied, err.Error()))
		return
	}
	s.metrics.MetaWatchers.Set(float64(s.leases.Watchers()))
	writeJSON(w, http.StatusOK, ans)
}

// FollowRing resets the gateways' metadata leases from this node at every
// ring change, until ctx ends: objects it answered for may have another
// metadata owner now, which writes tell instead of it (metalease.ResetAll).
func (s *Server) FollowRing(ctx context.Context) {
	if s.cfg.Ring == nil {
		return
	}
	changed := s.cfg.Ring.Changed() // before Load: a change between them is not missed
	epoch := int64(-1)
	if r := s.cfg.Ring.Load(); r != nil {
		epoch = r.Epoch()
	}
	for {
		select {
		case <-ctx.Done():
			return
		case <-changed:
		}
		changed = s.cfg.Ring.Changed()
		if r := s.cfg.Ring.Load(); r != nil && r.Epoch() != epoch {
			epoch = r.Epoch()
			s.leases.ResetAll()
		}
	}
}

// metaLease is the HeaderMetaLease value for metadata m this node answers
// with, or "" when it must not be kept: seq is the change number read
// before m was; owned says this node resolved m as o's metadata owner (a
// relayed or fallback answer is not kept: the owner's changes would not
// reach the gateway through this node).
func (s *Server) metaLease(m chunk.Meta, seq uint64, owned bool) string {
	if !owned {
		return ""
	}
	// An immutable cache never revalidates, so its answers stay fresh; they
	// are leased all the same, so that writes and deletes through the cache
	// and a tenant's removal reach every gateway.
	fresh := nodeapi.FreshForever
	if !s.cfg.Immutable {
		fresh = s.trustedFor(m)
	}
	if fresh < time.Millisecond {
		return ""
	}
	return nodeapi.MetaLease{Incarnation: s.leases.Incarnation(), Seq: seq, Fresh: fresh}.String()
}

// ownsMeta reports whether this node is o's metadata owner by its ring (or
// runs alone).
func (s *Server) ownsMeta(o chunk.Object) bool {
	r := s.currentRing()
	return r == nil || r.Owner(nodeapi.MetaID(o)).Name == s.cfg.Self
}

// invalidate drops an object's metadata and chunks after it changed, and
// numbers the change for the gateways that keep metadata; writes await
// the number before they are acknowledged.
func (s *Server) invalidate(o chunk.Object) uint64 {
	if err := s.store.DeleteObject(o); err != nil {
		s.storeFailed("delete_object", err)
	}
	return s.leases.Changed(o.Tenant, o.Bucket, o.Key)
}

// awaitLeases holds a write's acknowledgement until no gateway of the
// tenant can still use metadata older than change seq (at most MetaLease).
func (s *Server) awaitLeases(ctx context.Context, tenant string, seq uint64) {
	lapsed, err := s.leases.Await(context.WithoutCancel(ctx), tenant, seq)
	if err != nil {
		return
	}
	outcome := "notified"
	if lapsed > 0 {
		outcome = "lapsed"
	}
	s.metrics.MetaLeaseWaits.WithLabelValues(outcome).Inc()
}

// invalidateObjects drops objects here and at their metadata owners after
// a write or delete (the owner is where every node reads an object's
// metadata from, so once it has forgotten the old version no node serves
// it), and returns once every gateway keeping metadata here or there has
// learnt of the change.
func (s *Server) invalidateObjects(ctx context.Context, c caller, objs ...chunk.Object) {
	var (
		last   uint64
		owners []ring.Member
		remote []chunk.Object
	)
	r := s.currentRing()
	for _, o := range objs {
		last = s.invalidate(o)
		for _, owner := range s.metaOwnersToTell(r, c, o) {
			owners, remote = append(owners, owner), append(remote, o)
		}
	}
	// The owners (one at a time) answer once their gateways learnt of the
	// change, while this node waits for its own.
	var wg sync.WaitGroup
	wg.Go(func() {
		for i, o := range remote {
			s.invalidateAt(ctx, c, owners[i], o, r.Epoch(), "invalidate")
		}
	})
	s.awaitLeases(ctx, c.tenant.Name, last)
	wg.Wait()
}

// invalidateAt tells o's metadata owner, chosen by the ring of epoch, to
// forget it; the owner answers once its gateways have learnt of the change.
// kind labels the peer request's metric.
func (s *Server) invalidateAt(ctx context.Context, c caller, owner ring.Member, o chunk.Object, epoch int64, kind string) {
	result := "ok"
	ctx = context.WithoutCancel(ctx)
	if s.peers.down.Down(owner.Name, time.Now()) {
		// It failed a moment ago: most likely still down (then, if it
		// comes back, it distrusts what it cached before: ringNoticed), and
		// a write should not wait long for it; long enough, if it is back,
		// for its gateways to learn of the change.
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, s.leases.Lease()+time.Second)
		defer cancel()
	}
	err := s.peers.invalidate(ctx, owner, c.tenant.Name, o, s.cfg.Self, epoch)
	var pe *peerError
	switch {
	case err == nil:
		s.peers.down.MarkUp(owner.Name)
	case !errors.As(err, &pe):
		// Unreachable: most likely dead. Its gateways keep what it
		// answered until the leases it granted before it failed end (a
		// lease after the poll that got it): the write waits for them,
		// as for a gateway that stopped polling.
		s.peers.down.MarkDown(owner.Name)
		if from, ok := s.peers.down.FailingSince(owner.Name); ok {
			if wait := time.Until(from.Add(s.leases.Lease())); wait > 0 {
				_ = ctxtime.Sleep(ctx, wait)
				s.metrics.MetaLeaseWaits.WithLabelValues("owner_unreachable").Inc()
			}
		}
	}
	if err != nil {
		result = "error"
		s.log.Warn("could not invalidate at the metadata owner; if it is alive, it serves the old version until its metadata TTL",
			"peer", owner.Name, "object", o.String(), "err", err)
	}
	s.metrics.PeerRequests.WithLabelValues(kind, result).Inc()
}

// takeInvalidation is what a member does when another tells it that o
// changed: it forgets o, and answers once its gateways have learnt of it
// and, when its ring is newer than the one the sender chose it by (a write
// racing a ring change), once o's owner under its ring has too: the sender
// told the owner it knew, not the one nodes and gateways now ask.
// Epochs only grow along such a chain, so it ends.
func (s *Server) takeInvalidation(ctx context.Context, c caller, o chunk.Object, q url.Values) {
	var wg sync.WaitGroup
	r := s.currentRing()
	if epoch, err := strconv.ParseInt(q.Get("epoch"), 10, 64); err == nil && r != nil && r.Epoch() > epoch {
		if owner := r.Owner(nodeapi.MetaID(o)); owner.Name != s.cfg.Self && owner.Name != q.Get("from") {
			wg.Go(func() { s.invalidateAt(ctx, c, owner, o, r.Epoch(), "invalidate_passed_on") })
		}
	}
	s.awaitLeases(ctx, c.tenant.Name, s.invalidate(o))
	wg.Wait()
}

// claimedTenant is the tenant a request's verified identity acts for, as
// identify reads it, whether or not the tenant is configured.
func claimedTenant(r *http.Request) string {
	id, ok := pki.FromContext(r.Context())
	switch {
	case !ok:
		return ""
	case id.Kind == pki.KindTenant:
		return id.Name
	case id.Kind == pki.KindPeer:
		return r.Header.Get(HeaderTenant)
	}
	return ""
}

// reloadHook is what a Tenants implementation that reports its reloads
// offers (tenancy.Watcher).
type reloadHook interface {
	OnReload(func(old, cur *tenancy.Config))
}

// revokeChanged makes the gateways forget what they keep of every tenant a
// reload removed or changed (buckets, policies, credentials), before the
// reload counts as done: a removed tenant's gateway serves nothing more
// from its RAM once the nodes have the new file, but for a gateway that
// cannot be reached, which stops at the end of its lease.
func (s *Server) revokeChanged(old, cur *tenancy.Config) {
	changed := tenancy.Changed(old, cur)
	var wg sync.WaitGroup
	for _, name := range changed {
		wg.Go(func() {
			ctx, cancel := context.WithTimeout(context.Background(), 2*s.leases.Lease())
			defer cancel()
			lapsed, err := s.leases.Revoke(ctx, name)
			s.log.Info("tenant changed: gateways dropped what they kept of it", "tenant", name, "waitedOut", lapsed, "err", err)
		})
	}
	wg.Wait()
}
