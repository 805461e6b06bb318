package store

import (
	"errors"
	"fmt"

	"github.com/dgraph-io/badger/v4"

	"github.com/distcache/distcache/internal/chunk"
)

// PutChunk stores a chunk on disk (and in RAM). It evicts chunks (chosen by
// the eviction policy, index.go) to make room, the tenant's own first when
// the tenant is over its quota, and returns ErrNoSpace when the chunk cannot be stored within
// the disk bound. A chunk that is already stored is only touched; a put
// that races another put or a delete of the same chunk is dropped (nil), and
// so is one that races a DeleteObject of its object (see there).
// data is copied; the caller may reuse it.
func (s *Store) PutChunk(id chunk.ID, data []byte) error {
	if len(data) > maxPayload {
		return fmt.Errorf("store: chunk %s: %d bytes is too large", id, len(data))
	}
	v := NewValue(len(data))
	copy(v.Payload(), data)
	return s.PutValue(id, v)
}

// PutValue is PutChunk without the copy: the store keeps v, whose payload
// must not change from now on (the RAM tier hands it to readers).
func (s *Store) PutValue(id chunk.ID, v Value) error {
	if err := s.enter(); err != nil {
		return err
	}
	defer s.leave()
	data := v.Payload()
	if len(data) > maxPayload {
		return fmt.Errorf("store: chunk %s: %d bytes is too large", id, len(data))
	}
	key := chunkKey(id)
	ks := string(key)
	size := int64(len(data))
	var quota int64
	if s.opts.TenantQuota != nil {
		quota = s.opts.TenantQuota(id.Tenant)
	}
	if size > s.liveTarget || (quota > 0 && size > quota) {
		s.rejected.Add(1)
		return fmt.Errorf("%w: chunk %s of %d bytes exceeds the capacity or tenant quota", ErrNoSpace, id, size)
	}
	entries := v.entries(key)
	payload := data
	var cost int64
	largest := 0
	for _, e := range entries {
		cost += putCost(len(e.Key), len(e.Value))
		largest = max(largest, len(e.Value))
	}
	parts := len(entries) - 1

	s.mu.Lock()
	for {
		e := s.idx.entries[ks]
		if e != nil && e.size == size {
			s.idx.touch(e)
			if s.ram != nil {
				s.ram.Set(ks, payload, size)
			}
			s.mu.Unlock()
			return nil
		}
		if _, busy := s.inflight[ks]; busy {
			s.mu.Unlock()
			return nil // another caller is writing or deleting this very chunk
		}
		if e == nil {
			break
		}
		// Same ID, different length (a caller bug or an ETag reused for
		// different bytes): drop the old version first.
		s.popLocked(e)
		s.mu.Unlock()
		s.drop([]*entry{e}, false)
		s.mu.Lock()
	}
	// Reserve first, so the tenant stays pinned and concurrent puts see
	// the room this one takes.
	t := s.idx.tenant(id.Tenant)
	t.reserved += size
	s.idx.reserved += size
	victims, ok := s.makeRoomLocked(t, quota)
	if ok {
		s.inflight[ks] = false // claim the key: only this put writes and indexes it now
	} else {
		t.reserved -= size
		s.idx.reserved -= size
		s.idx.dropTenantIfEmpty(t)
	}
	s.mu.Unlock()

	s.drop(victims, true)
	if !ok {
		s.rejected.Add(1)
		return fmt.Errorf("%w: chunk %s: no room within the capacity or tenant quota", ErrNoSpace, id)
	}
	s.notePut(largest)
	admitted := s.admit(cost)
	if !admitted && s.evictForSpace(cost) {
		// Nothing left to reclaim: displace old chunks, as a cache
		// should, rather than refuse every put from now on.
		admitted = s.admit(cost)
	}
	var err error
	if admitted {
		if s.hooks != nil && s.hooks.putWrite != nil {
			s.hooks.putWrite(ks)
		}
		s.writeGate.RLock()
		err = s.db.Update(func(txn *badger.Txn) error {
			for _, e := range entries {
				if err := txn.SetEntry(e); err != nil {
					return err
				}
			}
			return nil
		})
		s.writeGate.RUnlock()
		s.wrote(cost)
		if err == nil && s.hooks != nil && s.hooks.putIndex != nil {
			s.hooks.putIndex(ks)
		}
	}

	s.mu.Lock()
	written := admitted && err == nil
	// A DeleteObject of the object ran while the put held its claim: it
	// could not delete a chunk that was being written, so the put drops it.
	doomed := s.inflight[ks]
	if written && !doomed {
		if old := s.idx.entries[ks]; old != nil { // cannot happen while ks is claimed
			s.removeLocked(old)
		}
		s.idx.add(ks, len(chunkPrefix(id.Object)), id.Tenant, size).parts = parts
		if s.ram != nil {
			s.ram.Set(ks, payload, size)
		}
	}
	t.reserved -= size
	s.idx.reserved -= size
	if !written || !doomed {
		delete(s.inflight, ks)
	}
	s.idx.dropTenantIfEmpty(t)
	s.mu.Unlock()
	if written && doomed {
		// Still claimed, so nothing else touches ks until it is deleted.
		s.unwrite(id, key, parts, size)
		return nil
	}
	switch {
	case !admitted:
		s.rejected.Add(1)
		return fmt.Errorf("%w: chunk %s: the disk is at its bound", ErrNoSpace, id)
	case err != nil:
		s.errors.Add(1)
		return fmt.Errorf("store: put chunk %s: %w", id, err)
	}
	return nil
}

// unwrite deletes a chunk its put wrote but may not index because a
// DeleteObject doomed its claim, and releases the claim. If the delete
// fails, the chunk stays on disk unindexed (never served), like after a
// failed DeleteObject.
func (s *Store) unwrite(id chunk.ID, key []byte, parts int, size int64) {
	if err := s.deleteKeys(diskKeys(string(key), parts)); err != nil {
		s.errors.Add(1)
		s.log.Error("delete chunk put during its object's deletion", "chunk", id.String(), "err", err)
	} else {
		s.noteGarbage(size)
	}
	s.mu.Lock()
	delete(s.inflight, string(key))
	s.mu.Unlock()
}

// PutMeta stores an object's metadata. Metadata is small, lives in the LSM
// tree and counts toward no quota, but its bytes are measured with the rest.
func (s *Store) PutMeta(o chunk.Object, m chunk.Meta) error {
	if err := s.enter(); err != nil {
		return err
	}
	defer s.leave()
	key := metaKey(o)
	val, err := encodeMeta(m)
	if err != nil {
		return fmt.Errorf("store: encode metadata %s: %w", o, err)
	}
	cost := metaCost(len(key), len(val))
	if !s.fsRoom(cost) {
		s.rejected.Add(1)
		return fmt.Errorf("%w: metadata %s: the filesystem is full", ErrNoSpace, o)
	}
	s.charge(cost)
	s.writeGate.RLock()
	err = s.db.Update(func(txn *badger.Txn) error { return txn.Set(key, val) })
	s.writeGate.RUnlock()
	s.wrote(cost)
	if err != nil {
		s.errors.Add(1)
		return fmt.Errorf("store: put metadata %s: %w", o, err)
	}
	return nil
}

// ReplaceMeta replaces an object's metadata with m, or deletes it when m is
// nil, only while the stored metadata is of version etag: a newer version
// stored meanwhile (or none at all) is left as it is. It reports whether it
// changed anything.
func (s *Store) ReplaceMeta(o chunk.Object, etag string, m *chunk.Meta) (bool, error) {
	if err := s.enter(); err != nil {
		return false, err
	}
	defer s.leave()
	key := metaKey(o)
	var val []byte
	var cost int64
	if m != nil {
		var err error
		if val, err = encodeMeta(*m); err != nil {
			return false, fmt.Errorf("store: encode metadata %s: %w", o, err)
		}
		cost = metaCost(len(key), len(val))
		if !s.fsRoom(cost) {
			s.rejected.Add(1)
			return false, fmt.Errorf("%w: metadata %s: the filesystem is full", ErrNoSpace, o)
		}
		s.charge(cost)
		defer s.wrote(cost)
	}
	changed := false
	s.writeGate.RLock()
	err := s.db.Update(func(txn *badger.Txn) error {
		item, err := txn.Get(key)
		if errors.Is(err, badger.ErrKeyNotFound) {
			return nil
		}
		if err != nil {
			return err
		}
		cur, err := item.ValueCopy(nil)
		if err != nil {
			return err
		}
		if old, err := decodeMeta(cur); err != nil || old.ETag != etag {
			return nil // another version (or a corrupt one, which GetMeta deletes)
		}
		changed = true
		if m == nil {
			return txn.Delete(key)
		}
		return txn.Set(key, val)
	})
	s.writeGate.RUnlock()
	if errors.Is(err, badger.ErrConflict) {
		return false, nil // written meanwhile: that write stands
	}
	if err != nil {
		s.errors.Add(1)
		return false, fmt.Errorf("store: replace metadata %s: %w", o, err)
	}
	return changed, nil
}
