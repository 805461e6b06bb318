package store

import (
	"errors"
	"fmt"
	"strings"

	"github.com/dgraph-io/badger/v4"

	"github.com/distcache/distcache/internal/chunk"
)

// DeleteObject removes an object's metadata and every chunk of every ETag
// and chunk size of it, on disk and in RAM. A put of one of its chunks that
// races it is either dropped (it returns nil and stores nothing) or stored
// after it; one that has claimed its chunk (is writing it, for example) when
// DeleteObject is called is dropped. Either way the index and disk agree.
func (s *Store) DeleteObject(o chunk.Object) error {
	if err := s.enter(); err != nil {
		return err
	}
	defer s.leave()
	prefix := chunkPrefix(o)
	obj := string(prefix)

	s.mu.Lock()
	owned, bytes := s.claimObjectLocked(obj, nil, 0) // no longer served from here on
	s.mu.Unlock()
	defer func() { s.release(owned...) }()
	owned, bytes, listErr := s.claimOnDisk(prefix, owned, bytes)
	if listErr == nil && len(owned) == 0 && !s.hasKey(metaKey(o)) {
		// Nothing of it here, as for every new key written: no tombstone
		// to commit (a write transaction, waiting for badger's writer).
		// The effect is a tombstone committed at the look, which a racing
		// put may follow as it may follow the commit.
		return nil
	}

	del := make([][]byte, 0, 1+len(owned))
	del = append(del, metaKey(o))
	for _, k := range owned {
		del = append(del, []byte(k))
	}
	err := s.deleteGarbage(del, bytes)
	switch {
	case listErr != nil:
		s.errors.Add(1)
		return fmt.Errorf("store: delete object %s: list chunks: %w", o, listErr)
	case err != nil:
		return fmt.Errorf("store: delete object %s: %w", o, err)
	}
	return nil
}

// hasKey reports whether key is stored (true when badger cannot tell, so
// that a caller deleting it does not skip the delete).
func (s *Store) hasKey(key []byte) bool {
	err := s.view(func(txn *badger.Txn) error {
		_, err := txn.Get(key)
		return err
	})
	return !errors.Is(err, badger.ErrKeyNotFound)
}

// claimOnDisk claims the chunks of the object whose chunk prefix is prefix
// that are on disk but not indexed, appending them to owned and bytes:
// chunks put since claimObjectLocked ran (now indexed or claimed: it runs
// again) and chunks left by a failed delete (unindexed and unclaimed). A
// chunk that is claimed is never deleted here: its claim holder may be
// about to index it. err is badger's error listing the chunks.
func (s *Store) claimOnDisk(prefix []byte, owned []string, bytes int64) (_ []string, _ int64, err error) {
	obj := string(prefix)
	if s.hooks != nil && s.hooks.deleteList != nil {
		s.hooks.deleteList(obj)
	}
	var listed []string
	err = s.view(func(txn *badger.Txn) error {
		it := txn.NewIterator(badger.IteratorOptions{Prefix: prefix})
		defer it.Close()
		for it.Rewind(); it.Valid(); it.Next() {
			listed = append(listed, string(it.Item().Key()))
		}
		return nil
	})
	if err != nil {
		return owned, bytes, err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	owned, bytes = s.claimObjectLocked(obj, owned, bytes)
	for _, k := range listed {
		// Not indexed: claimObjectLocked just unindexed the object.
		if _, claimed := s.inflight[k]; !claimed {
			s.inflight[k] = false
			owned = append(owned, k)
		}
	}
	return owned, bytes, nil
}

// claimObjectLocked unindexes the indexed chunks of the object whose chunk
// prefix is obj and claims them for deletion (appending their keys to owned
// and their bytes to bytes), and dooms every claim on a chunk of the object:
// a put holding one then deletes its chunk instead of indexing it.
func (s *Store) claimObjectLocked(obj string, owned []string, bytes int64) ([]string, int64) {
	for _, e := range s.idx.objectEntries(obj) {
		s.popLocked(e)
		owned = append(owned, e.key)
		for _, k := range diskKeys(e.key, e.parts)[1:] {
			s.inflight[string(k)] = false
			owned = append(owned, string(k))
		}
		bytes += e.size
	}
	for k := range s.inflight {
		if strings.HasPrefix(k, obj) {
			s.inflight[k] = true
		}
	}
	return owned, bytes
}

// dropCorrupt deletes an entry that failed verification.
func (s *Store) dropCorrupt(id chunk.ID, key []byte, gen uint64, cause error) {
	s.checksumFailures.Add(1)
	s.misses.Add(1)
	ks := string(key)
	s.mu.Lock()
	e := s.idx.entries[ks]
	if e == nil || e.gen != gen {
		s.mu.Unlock() // already replaced or removed by someone else
		return
	}
	if _, busy := s.inflight[ks]; busy {
		s.mu.Unlock()
		return
	}
	s.popLocked(e)
	s.mu.Unlock()
	s.log.Warn("corrupt chunk deleted", "chunk", id.String(), "err", cause)
	if err := s.deleteGarbage(diskKeys(ks, e.parts), e.size); err != nil {
		s.log.Error("delete corrupt chunk", "chunk", id.String(), "err", err)
	}
	s.release(ks)
}

// removeLocked removes e from the index and its payload from RAM.
func (s *Store) removeLocked(e *entry) {
	s.idx.remove(e)
	if s.ram != nil {
		s.ram.Del(e.key)
	}
}

// popLocked unindexes e and claims its key for drop.
func (s *Store) popLocked(e *entry) *entry {
	s.removeLocked(e)
	s.inflight[e.key] = false
	return e
}

// drop deletes entries unindexed by popLocked from badger and clears their
// in-flight marks; evicted says whether to count them as evictions.
func (s *Store) drop(victims []*entry, evicted bool) {
	if len(victims) == 0 {
		return
	}
	if evicted {
		s.evictions.Add(uint64(len(victims)))
	}
	keys := make([][]byte, 0, len(victims))
	claims := make([]string, 0, len(victims))
	var bytes int64
	for _, v := range victims {
		keys = append(keys, diskKeys(v.key, v.parts)...)
		claims = append(claims, v.key)
		bytes += v.size
	}
	if err := s.deleteGarbage(keys, bytes); err != nil {
		// The bytes stay on disk unaccounted until the next restart; the
		// measured usage still covers them, so the bound holds.
		s.log.Error("delete chunks", "chunks", len(keys), "err", err)
	}
	s.release(claims...)
}

// release gives up the claims on keys (Store.inflight).
func (s *Store) release(keys ...string) {
	s.mu.Lock()
	for _, k := range keys {
		delete(s.inflight, k)
	}
	s.mu.Unlock()
}

// deleteGarbage deletes keys (deleteKeys), whose payload is bytes, and
// notes those bytes as value-log garbage; a failure is counted and returned.
func (s *Store) deleteGarbage(keys [][]byte, bytes int64) error {
	err := s.deleteKeys(keys)
	if err != nil {
		s.errors.Add(1)
	} else {
		s.noteGarbage(bytes)
	}
	return err
}

// deleteKeys writes tombstones for keys, in as many transactions as needed.
func (s *Store) deleteKeys(keys [][]byte) error {
	var cost int64
	for _, k := range keys {
		cost += deleteCost(len(k))
	}
	s.charge(cost)
	defer s.wrote(cost) // after the commit and RUnlock below
	s.writeGate.RLock()
	defer s.writeGate.RUnlock()
	txn := s.db.NewTransaction(true)
	defer func() { txn.Discard() }()
	for _, k := range keys {
		err := txn.Delete(k)
		if errors.Is(err, badger.ErrTxnTooBig) {
			if err := txn.Commit(); err != nil {
				return err
			}
			txn = s.db.NewTransaction(true)
			err = txn.Delete(k)
		}
		if err != nil {
			return err
		}
	}
	return txn.Commit()
}
