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
//
// A put goes in steps: check the chunk against the capacity and quota
// (newPut), claim its key and reserve room for it, evicting what must go
// (claimPut), charge its bytes to the disk estimate (admitPut), write it
// (writePut), and index it or undo it (finishPut).
func (s *Store) PutValue(id chunk.ID, v Value) error { return s.putValue(id, v, true) }

// PutValueOnDisk is PutValue to the disk tier only: the chunk does not go
// to RAM, and the store holds no reference to v once it returns, so the
// caller may reuse v. For chunks no read has asked for (a write-through's):
// the RAM tier keeps what reads brought in, and a buffer filled again
// spares the page faults of a fresh one, which a kept buffer costs.
func (s *Store) PutValueOnDisk(id chunk.ID, v Value) error { return s.putValue(id, v, false) }

func (s *Store) putValue(id chunk.ID, v Value, toRAM bool) error {
	if err := s.enter(); err != nil {
		return err
	}
	defer s.leave()
	p, err := s.newPut(id, v)
	if err != nil {
		return err
	}
	p.toRAM = toRAM
	if ok, err := s.claimPut(p); !ok {
		return err
	}
	admitted := s.admitPut(p)
	if admitted {
		err = s.writePut(p)
	}
	return s.finishPut(p, admitted, err)
}

// put is one PutValue in progress.
type put struct {
	id      chunk.ID
	key     []byte
	ks      string // string(key)
	payload []byte
	size    int64 // len(payload)
	quota   int64 // the tenant's quota, 0 for none
	entries []*badger.Entry
	cost    int64        // what the entries can add on disk (putCost)
	largest int          // the longest value among the entries
	t       *tenantUsage // the tenant, from claimPut on: it holds the put's reservation
	toRAM   bool         // the payload goes to the RAM tier too (PutValue, not PutValueOnDisk)
}

// newPut prepares the put of v as id, or refuses a chunk that could never
// fit the capacity or the tenant's quota.
func (s *Store) newPut(id chunk.ID, v Value) (*put, error) {
	data := v.Payload()
	if len(data) > maxPayload {
		return nil, fmt.Errorf("store: chunk %s: %d bytes is too large", id, len(data))
	}
	key := chunkKey(id)
	p := &put{id: id, key: key, ks: string(key), payload: data, size: int64(len(data))}
	if s.opts.TenantQuota != nil {
		p.quota = s.opts.TenantQuota(id.Tenant)
	}
	if p.size > s.liveTarget || (p.quota > 0 && p.size > p.quota) {
		s.rejected.Add(1)
		return nil, fmt.Errorf("%w: chunk %s of %d bytes exceeds the capacity or tenant quota", ErrNoSpace, id, p.size)
	}
	p.entries = v.entries(key)
	for _, e := range p.entries {
		p.cost += putCost(len(e.Key), len(e.Value))
		p.largest = max(p.largest, len(e.Value))
	}
	return p, nil
}

// claimPut claims the put's key, so that only this put writes and indexes
// it, and reserves the put's bytes, evicting chunks to make room for them
// (the tenant's own first while it is over its quota). ok is false when
// there is nothing to write (err is nil: see settleLocked) or no room (err
// is ErrNoSpace).
func (s *Store) claimPut(p *put) (ok bool, err error) {
	s.mu.Lock()
	if !s.settleLocked(p) {
		s.mu.Unlock()
		return false, nil
	}
	// Reserve first, so the tenant stays pinned and concurrent puts see
	// the room this one takes.
	p.t = s.idx.tenant(p.id.Tenant)
	p.t.reserved += p.size
	s.idx.reserved += p.size
	victims, ok := s.makeRoomLocked(p.t, p.quota)
	if ok {
		s.inflight[p.ks] = false // claim the key: only this put writes and indexes it now
	} else {
		s.unreserveLocked(p)
	}
	s.mu.Unlock()

	s.drop(victims, true)
	if !ok {
		s.rejected.Add(1)
		return false, fmt.Errorf("%w: chunk %s: no room within the capacity or tenant quota", ErrNoSpace, p.id)
	}
	return true, nil
}

// settleLocked reports whether the put is to write its key, which is then
// neither indexed nor claimed. It is not when the chunk is already stored
// (it is touched and, for PutValue, its payload goes to RAM) or when another caller is
// writing or deleting this very chunk. A stored chunk of the same ID but
// another length (a caller bug, or an ETag reused for different bytes) is
// dropped first, with s.mu released meanwhile. s.mu must be held.
func (s *Store) settleLocked(p *put) bool {
	for {
		e := s.idx.entries[p.ks]
		if e != nil && e.size == p.size {
			s.idx.touch(e)
			if p.toRAM {
				s.toRAMLocked(p.ks, p.payload)
			}
			return false
		}
		if _, busy := s.inflight[p.ks]; busy {
			return false
		}
		if e == nil {
			return true
		}
		s.popLocked(e)
		s.mu.Unlock()
		s.drop([]*entry{e}, false)
		s.mu.Lock()
	}
}

// unreserveLocked gives back the room claimPut reserved.
func (s *Store) unreserveLocked(p *put) {
	p.t.reserved -= p.size
	s.idx.reserved -= p.size
	s.idx.dropTenantIfEmpty(p.t)
}

// admitPut charges the put's bytes to the disk estimate (space.go),
// reclaiming space if needed; when there is nothing left to reclaim it
// displaces old chunks, as a cache should, rather than refuse every put
// from now on.
func (s *Store) admitPut(p *put) bool {
	s.notePut(p.largest)
	if s.admit(p.cost) {
		return true
	}
	return s.evictForSpace(p.cost) && s.admit(p.cost)
}

// writePut writes the put's entries to badger in one transaction.
func (s *Store) writePut(p *put) error {
	if s.hooks != nil && s.hooks.putWrite != nil {
		s.hooks.putWrite(p.ks)
	}
	err := s.update(func(txn *badger.Txn) error {
		for _, e := range p.entries {
			if err := txn.SetEntry(e); err != nil {
				return err
			}
		}
		return nil
	})
	s.wrote(p.cost)
	if err == nil && s.hooks != nil && s.hooks.putIndex != nil {
		s.hooks.putIndex(p.ks)
	}
	return err
}

// finishPut indexes the chunk written (admitted, and err, writePut's
// error, nil) and puts it in RAM, gives back the reservation and the claim,
// and returns the put's result. If a DeleteObject of the object ran while
// the put held its claim, it could not delete a chunk that was being
// written, so the put deletes it instead of indexing it (unwrite).
func (s *Store) finishPut(p *put, admitted bool, err error) error {
	written := admitted && err == nil
	s.mu.Lock()
	doomed := s.inflight[p.ks]
	if written && !doomed {
		if old := s.idx.entries[p.ks]; old != nil { // cannot happen while ks is claimed
			s.removeLocked(old)
		}
		s.idx.add(p.ks, len(chunkPrefix(p.id.Object)), p.id.Tenant, p.size).parts = len(p.entries) - 1
		if p.toRAM {
			s.toRAMLocked(p.ks, p.payload)
		}
	}
	s.unreserveLocked(p)
	if !written || !doomed {
		delete(s.inflight, p.ks)
	}
	s.mu.Unlock()
	switch {
	case written && doomed:
		// Still claimed, so nothing else touches ks until it is deleted.
		s.unwrite(p)
		return nil
	case !admitted:
		s.rejected.Add(1)
		return fmt.Errorf("%w: chunk %s: the disk is at its bound", ErrNoSpace, p.id)
	case err != nil:
		s.errors.Add(1)
		return fmt.Errorf("store: put chunk %s: %w", p.id, err)
	}
	return nil
}

// toRAMLocked puts a chunk's payload in the RAM tier, if there is one.
// Holding s.mu orders it with removeLocked's removal of the same key.
func (s *Store) toRAMLocked(ks string, payload []byte) {
	if s.ram != nil {
		s.ram.Set(ks, payload, int64(len(payload)))
	}
}

// unwrite deletes a chunk its put wrote but may not index because a
// DeleteObject doomed its claim, and releases the claim. If the delete
// fails, the chunk stays on disk unindexed (never served), like after a
// failed DeleteObject.
func (s *Store) unwrite(p *put) {
	if err := s.deleteGarbage(diskKeys(p.ks, len(p.entries)-1), p.size); err != nil {
		s.log.Error("delete chunk put during its object's deletion", "chunk", p.id.String(), "err", err)
	}
	s.release(p.ks)
}

// PutMeta stores an object's metadata. Metadata is small, lives in the LSM
// tree and counts toward no quota, but its bytes are measured with the rest.
func (s *Store) PutMeta(o chunk.Object, m chunk.Meta) error {
	if err := s.enter(); err != nil {
		return err
	}
	defer s.leave()
	key := metaKey(o)
	val, cost, err := s.chargeMeta(o, key, m)
	if err != nil {
		return err
	}
	err = s.update(func(txn *badger.Txn) error { return txn.Set(key, val) })
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
	if m != nil {
		var cost int64
		var err error
		if val, cost, err = s.chargeMeta(o, key, *m); err != nil {
			return false, err
		}
		defer s.wrote(cost)
	}
	changed := false
	err := s.update(func(txn *badger.Txn) error {
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
		if s.hooks != nil && s.hooks.replaceRead != nil {
			s.hooks.replaceRead(string(key))
		}
		if m == nil {
			return txn.Delete(key)
		}
		return txn.Set(key, val)
	})
	if errors.Is(err, badger.ErrConflict) {
		return false, nil // written meanwhile: that write stands
	}
	if err != nil {
		s.errors.Add(1)
		return false, fmt.Errorf("store: replace metadata %s: %w", o, err)
	}
	return changed, nil
}

// chargeMeta encodes m for key and charges the bytes storing it can add to
// the disk estimate (the caller says when they are written: Store.wrote),
// or refuses it when the filesystem is full.
func (s *Store) chargeMeta(o chunk.Object, key []byte, m chunk.Meta) (val []byte, cost int64, err error) {
	if val, err = encodeMeta(m); err != nil {
		return nil, 0, fmt.Errorf("store: encode metadata %s: %w", o, err)
	}
	cost = metaCost(len(key), len(val))
	if !s.fsRoom(cost) {
		s.rejected.Add(1)
		return nil, 0, fmt.Errorf("%w: metadata %s: the filesystem is full", ErrNoSpace, o)
	}
	s.charge(cost)
	return val, cost, nil
}

// update runs fn in a read-write transaction, holding writeGate shared as
// every badger write does (space.go).
func (s *Store) update(fn func(*badger.Txn) error) error {
	s.writeGate.RLock()
	defer s.writeGate.RUnlock()
	return s.db.Update(fn)
}
