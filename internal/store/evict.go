package store

// makeRoomLocked unindexes the chunks to evict so that the reserved bytes
// fit: first the tenant's own chunks while it is over its quota, then the
// policy's victims while live bytes are over the live target. ok is false
// if the room is held by puts in flight. The victims are for drop.
func (s *Store) makeRoomLocked(t *tenantUsage, quota int64) (victims []*entry, ok bool) {
	if quota > 0 {
		victims = s.evictTenantLocked(t, quota, victims)
		if t.bytes+t.reserved > quota {
			return victims, false
		}
	}
	for s.idx.bytes+s.idx.reserved > s.liveTarget {
		v := s.idx.victim()
		if v == nil {
			break
		}
		victims = append(victims, s.popLocked(v))
	}
	return victims, s.idx.bytes+s.idx.reserved <= s.liveTarget
}

// evictTenantLocked unindexes t's chunks chosen by the policy while t is
// over quota, appending them to victims.
func (s *Store) evictTenantLocked(t *tenantUsage, quota int64, victims []*entry) []*entry {
	for t.bytes+t.reserved > quota {
		v := s.idx.tenantVictim(t)
		if v == nil {
			break
		}
		victims = append(victims, s.popLocked(v))
	}
	return victims
}

// evictForSpace evicts the policy's victims worth about one
// value-log file (at least need bytes) when the disk is at its bound with
// nothing left to reclaim, which happens when the live target is too large
// for the bound (or LSM and metadata grew). It reports whether it evicted.
func (s *Store) evictForSpace(need int64) bool {
	target := max(need, s.vlogFile)
	var victims []*entry
	var freed int64
	s.mu.Lock()
	for freed < target {
		v := s.idx.victim()
		if v == nil {
			break
		}
		victims = append(victims, s.popLocked(v))
		freed += v.size
	}
	s.mu.Unlock()
	s.drop(victims, true)
	return len(victims) > 0
}

// enforceQuotas evicts chunks of tenants that are over their (possibly just
// lowered) quota.
func (s *Store) enforceQuotas() {
	if s.opts.TenantQuota == nil {
		return
	}
	s.mu.Lock()
	names := make([]string, 0, len(s.idx.tenants))
	for name := range s.idx.tenants {
		names = append(names, name)
	}
	s.mu.Unlock()
	for _, name := range names {
		q := s.opts.TenantQuota(name)
		if q <= 0 {
			continue
		}
		var victims []*entry
		s.mu.Lock()
		if t := s.idx.tenants[name]; t != nil {
			victims = s.evictTenantLocked(t, q, victims)
		}
		s.mu.Unlock()
		s.drop(victims, true)
	}
}
