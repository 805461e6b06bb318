package node

import (
	"context"
	"errors"
	"net/http"
	"time"

	"github.com/distcache/distcache/internal/chunk"
	"github.com/distcache/distcache/internal/metrics"
	"github.com/distcache/distcache/internal/ring"
	"github.com/distcache/distcache/internal/s3backend"
	"github.com/distcache/distcache/internal/store"
)

// fresh reports whether cached metadata may be used without asking S3
// (trustedFor).
func (s *Server) fresh(m chunk.Meta) bool {
	return s.cfg.Immutable || s.trustedFor(m) > 0
}

// trustedFor is how much longer metadata m may be used without asking S3
// (not with Immutable): what remains of --meta-ttl since S3 confirmed it,
// nothing if that was before this node noticed the ring in force
// (ringNoticed), and if it was within RingSettle after, no later than the
// end of RingSettle: a write by a member still on the previous ring may
// have told another node.
func (s *Server) trustedFor(m chunk.Meta) time.Duration {
	n := s.noticedRing(s.currentRing())
	if m.FetchedAt.Before(n.at) {
		return 0
	}
	now := s.cfg.Now()
	left := s.cfg.MetaTTL - now.Sub(m.FetchedAt)
	if settled := n.at.Add(s.cfg.RingSettle); n.epoch >= 0 && m.FetchedAt.Before(settled) {
		left = min(left, settled.Sub(now))
	}
	return left
}

// meta returns the object's metadata. In a ring it asks the object's
// metadata owner (the one place it is cached); the owner, or a node alone,
// answers from the store while fresh, else from S3 (one HEAD however many
// callers miss at once). When S3 is unreachable, stale metadata is still used
// so cached chunks keep being served.
func (s *Server) meta(ctx context.Context, c caller, o chunk.Object, force bool) (chunk.Meta, error) {
	m, _, err := s.resolveMeta(ctx, c, o, force)
	return m, err
}

// resolveMeta is meta, and says whether this node resolved the metadata as
// o's metadata owner (or alone) rather than relayed the owner's answer or
// stood in for an owner it cannot reach.
func (s *Server) resolveMeta(ctx context.Context, c caller, o chunk.Object, force bool) (chunk.Meta, bool, error) {
	if c.noCache(o) {
		m, err := s.headNoCache(ctx, c, o)
		return m, false, err
	}
	if m, ok, err := s.remoteMeta(ctx, c, o, force); ok {
		return m, false, err
	}
	owned := s.ownsMeta(o)
	m, ok, superseded, err := s.heldMetaOf(ctx, o)
	if ok {
		return m, owned, err
	}
	cached, err := s.store.GetMeta(o)
	have := err == nil
	if err != nil && !errors.Is(err, store.ErrNotFound) {
		s.metrics.StoreFailures.WithLabelValues("get_meta", "error").Inc()
	}
	if have && !force && !superseded && s.fresh(cached) {
		return cached, owned, nil
	}
	// A held key this node holds no version of: another member may (S3
	// does not have it yet).
	m, held, unanswered, err := s.heldMetaFromPeers(ctx, c, o)
	if held {
		return m, false, err
	}
	ran := false
	v, err, _ := s.metas.Do(o.String(), func() (any, error) {
		ran = true
		// Re-check: a HEAD that just finished may have stored it (this
		// caller looked before it did, and came after its flight ended).
		if m, err := s.store.GetMeta(o); err == nil && !force && s.fresh(m) {
			return m, nil
		}
		m, err := s.s3.Head(context.WithoutCancel(ctx), c.creds, o.Bucket, o.Key)
		if err != nil {
			return chunk.Meta{}, err
		}
		m.FetchedAt = s.cfg.Now()
		if have {
			outcome := "unchanged"
			if m.ETag != cached.ETag {
				outcome = "changed"
				s.invalidate(o)
			}
			s.metrics.MetaRevalidations.WithLabelValues(outcome).Inc()
		}
		if err := s.store.PutMeta(o, m); err != nil {
			s.storeFailed("put_meta", err)
		}
		return m, nil
	})
	if !ran {
		s.metrics.SingleflightJoins.Inc()
	}
	if err != nil {
		switch {
		case unanswered && (errors.Is(err, s3backend.ErrNotFound) || errors.Is(err, s3backend.ErrAccessDenied)):
			// S3 has no such key, or refuses it; the holders that could
			// not be asked may hold every copy of an acknowledged version
			// of it: the client retries rather than takes S3's answer (a
			// pod of a rolling restart is back in seconds).
			return chunk.Meta{}, owned, newError(http.StatusServiceUnavailable, CodeSlowDown,
				"the cache nodes that may hold a write-back version of the object could not be asked; retry: "+err.Error())
		case have && errors.Is(err, s3backend.ErrUnavailable):
			s.metrics.MetaRevalidations.WithLabelValues("stale_served").Inc()
			return cached, owned, nil
		case have && errors.Is(err, s3backend.ErrNotFound):
			s.invalidate(o) // deleted behind our back
		case have:
			s.metrics.MetaRevalidations.WithLabelValues("error").Inc()
		}
		return chunk.Meta{}, owned, err
	}
	return v.(chunk.Meta), owned, nil
}

// version says which version of an object a chunk read is for.
type version struct {
	// etag is the ETag the reader pinned ("" for the current version).
	etag string
	// size is the object's size when a peer passed it with etag, else -1:
	// then even a miss needs no metadata.
	size int64
	// meta is the version when the reader resolved it (known): the
	// chunks of an object stream after its metadata.
	meta  chunk.Meta
	known bool
}

// readChunk is the node's one chunk read: every lane that reads a chunk
// (getChunk, which the mux, routeReads and read connections all reach
// through get, and getObject for each chunk of a stream) comes here. It
// returns the version read (Size -1 when a pinned hit needed no metadata),
// the payload, which must not be modified, and which tier answered (or a
// miss, or the owner when relayed).
//
// A read pinned to an ETag (as gateways and peers send) is answered from
// the store without resolving metadata when the chunk is there. Otherwise
// the version is resolved (metadata, checked against the pinned ETag) and
// the chunk loaded (loadChunk). When S3 says that version is gone (412 on
// If-Match), a read of the current version learns the new one and reads
// it once more; any other read fails with the 412, and the metadata is
// refreshed if this node's own S3 GET found it, so the next Stat sees the
// new version rather than at the TTL.
func (s *Server) readChunk(ctx context.Context, c caller, o chunk.Object, idx int64, v version) (chunk.Meta, []byte, string, error) {
	m := v.meta
	if !v.known && v.etag != "" && !c.noCache(o) {
		id := chunk.ID{Object: o, ETag: v.etag, Size: s.cfg.ChunkSize, Index: idx}
		if data, tier, err := s.lookup(id); err == nil {
			return chunk.Meta{Size: -1, ETag: v.etag}, data, hitResult(tier), nil
		}
		if v.size >= 0 {
			m, v.known = chunk.Meta{Size: v.size, ETag: v.etag}, true
		}
	}
	current := !v.known && v.etag == ""
	if !v.known {
		var err error
		if m, err = s.pinnedMeta(ctx, c, o, v.etag); err != nil {
			return m, nil, metrics.ResultError, err
		}
	}
	data, result, gone, err := s.loadChunk(ctx, c, o, m, idx)
	if current && errors.Is(err, s3backend.ErrPreconditionFailed) {
		// The version the metadata named is gone: learn the new one
		// (dropping the old chunks) and read that.
		if m, err = s.meta(ctx, c, o, true); err != nil {
			return m, nil, metrics.ResultError, err
		}
		data, result, gone, err = s.loadChunk(ctx, c, o, m, idx)
	}
	if gone {
		_, _ = s.meta(context.WithoutCancel(ctx), c, o, true)
	}
	return m, data, result, err
}

// loadChunk returns chunk idx of the object version m, and which tier (or a
// miss, or the owner when relayed) answered: the store, else the owner when
// this node is not one of the chunk's candidates, else, in one flight per
// chunk, in turn the previous owner (warm handoff), the owners in the other
// zones (with CrossZoneOnMiss), then S3. gone reports that this node's S3
// GET found version m gone (412): the flight ran here.
func (s *Server) loadChunk(ctx context.Context, c caller, o chunk.Object, m chunk.Meta, idx int64) (data []byte, result string, gone bool, err error) {
	if c.noCache(o) {
		data, result, err = s.readNoCache(ctx, c, o, m, idx)
		return data, result, false, err
	}
	off, length, ok := chunk.Bounds(m.Size, s.cfg.ChunkSize, idx)
	if !ok {
		return nil, metrics.ResultError, false, newError(http.StatusRequestedRangeNotSatisfiable, CodeInvalidRange,
			"chunk index is outside the object")
	}
	id := chunk.ID{Object: o, ETag: m.ETag, Size: s.cfg.ChunkSize, Index: idx}
	if data, tier, err := s.lookup(id); err == nil {
		return data, hitResult(tier), false, nil
	}
	if c.localOnly {
		return nil, metrics.ResultMiss, false, newError(http.StatusNotFound, CodeNotCached, "chunk not cached on this node")
	}
	r := s.currentRing()
	if r != nil && !c.hop && r.Owner(id).Name != s.cfg.Self {
		if data, relayed, err := s.relayChunk(ctx, r, c, id, peerSize(m)); relayed {
			return data, metrics.ResultRelayed, false, err
		}
		// No owner could answer: read S3 here, so a read never fails
		// because members are down.
	}
	ran := false
	v, err, _ := s.chunks.Do(id.String(), func() (any, error) {
		ran = true
		// Re-check: a fetch that just finished may have stored it.
		if data, _, err := s.lookup(id); err == nil {
			return data, nil
		}
		bg := context.WithoutCancel(ctx)
		data, handedOff := []byte(nil), false
		if r != nil {
			data, handedOff = s.fromPrevious(bg, r, c, id, peerSize(m))
		}
		if !handedOff && r != nil && s.cfg.CrossZone == CrossZoneOnMiss {
			data, handedOff = s.fromOtherZones(bg, r, c, id, peerSize(m))
		}
		if handedOff {
			if s.shouldStore(r, id) {
				if err := s.store.PutChunk(id, data); err != nil {
					s.storeFailed("put_chunk", err) // still serve it: pass-through
				}
			}
			return data, nil
		}
		// Read S3 (or, for a version S3 does not have yet, its holders)
		// straight into the buffer the store keeps.
		v := store.NewValue(int(length))
		if m.Held != "" {
			if err := s.fromHolders(bg, c, o, m, off, v.Payload()); err != nil {
				return nil, err
			}
		} else if err := s.s3.GetRangeInto(bg, c.creds, o.Bucket, o.Key, m.ETag, off, v.Payload()); err != nil {
			return nil, err
		}
		if s.shouldStore(r, id) {
			if err := s.store.PutValue(id, v); err != nil {
				s.storeFailed("put_chunk", err) // still serve it: pass-through
			}
		}
		return v.Payload(), nil
	})
	if !ran {
		s.metrics.SingleflightJoins.Inc()
	}
	if err != nil {
		return nil, metrics.ResultError, ran && errors.Is(err, s3backend.ErrPreconditionFailed), err
	}
	return v.([]byte), metrics.ResultMiss, false, nil
}

// relayChunk reads a chunk this node does not own from its owner (or the
// next candidates: fromOwners). Concurrent reads of one chunk make one
// relayed request. relayed=false means no member answered.
func (s *Server) relayChunk(ctx context.Context, r *ring.Ring, c caller, id chunk.ID, objectSize int64) (data []byte, relayed bool, err error) {
	type result struct {
		data []byte
		ok   bool
	}
	ran := false
	v, err, _ := s.chunks.Do("relay "+id.String(), func() (any, error) {
		ran = true
		data, ok, err := s.fromOwners(context.WithoutCancel(ctx), r, c, id, objectSize)
		return result{data, ok}, err
	})
	if !ran {
		s.metrics.SingleflightJoins.Inc()
	}
	res, _ := v.(result)
	return res.data, res.ok, err
}

// shouldStore keeps chunks on the members that serve them: the owner and the
// next candidates (which take over when the owner is down), not every node
// a read happened to pass through.
func (s *Server) shouldStore(r *ring.Ring, id chunk.ID) bool {
	if r == nil {
		return true
	}
	for _, m := range r.Candidates(id, s.cfg.Candidates) {
		if m.Name == s.cfg.Self {
			return true
		}
	}
	return false
}

// lookup reads the local store; store errors count and read as a miss.
func (s *Server) lookup(id chunk.ID) ([]byte, store.Tier, error) {
	data, tier, err := s.store.GetChunk(id)
	if err != nil && !errors.Is(err, store.ErrNotFound) {
		s.storeFailed("get_chunk", err)
	}
	return data, tier, err
}

func (s *Server) storeFailed(op string, err error) {
	reason := "error"
	if errors.Is(err, store.ErrNoSpace) {
		reason = "no_space"
	} else {
		// A broken disk fails every request: warn at most every
		// storeWarnEvery, with the count since the last warning (the
		// metric counts each).
		s.storeWarnings.Add(1)
		s.storeWarn.Do(func() {
			s.log.Warn("local store failed; serving from S3", "op", op, "err", err,
				"failuresSinceLastWarning", s.storeWarnings.Swap(0))
		})
	}
	s.metrics.StoreFailures.WithLabelValues(op, reason).Inc()
}

func hitResult(t store.Tier) string {
	if t == store.TierRAM {
		return metrics.ResultHitRAM
	}
	return metrics.ResultHitDisk
}

// pinnedMeta is meta, checked against an ETag the client pinned (the gateway
// pins the version it saw so all chunks of one read are of one version).
func (s *Server) pinnedMeta(ctx context.Context, c caller, o chunk.Object, pinned string) (chunk.Meta, error) {
	m, err := s.meta(ctx, c, o, false)
	if err != nil || pinned == "" || m.ETag == pinned {
		return m, err
	}
	if m, err = s.meta(ctx, c, o, true); err != nil {
		return m, err
	}
	if m.ETag != pinned {
		return m, newError(http.StatusPreconditionFailed, CodePreconditionFailed,
			"object changed: ETag is now "+m.ETag)
	}
	return m, nil
}
