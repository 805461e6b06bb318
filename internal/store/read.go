package store

import (
	"errors"
	"fmt"

	"github.com/dgraph-io/badger/v4"

	"github.com/distcache/distcache/internal/chunk"
)

// GetChunk returns a chunk's payload and the tier it came from. The slice is
// read-only and may be shared with other callers. It returns ErrNotFound on
// a miss; a chunk that fails verification is deleted, counted and reported
// as ErrNotFound. Other errors are badger errors; treat them as a miss.
func (s *Store) GetChunk(id chunk.ID) ([]byte, Tier, error) {
	if err := s.enter(); err != nil {
		return nil, "", err
	}
	defer s.leave()
	key := chunkKey(id)
	ks := string(key)

	s.mu.Lock()
	e := s.idx.entries[ks]
	if e == nil {
		s.mu.Unlock()
		s.misses.Add(1)
		return nil, "", ErrNotFound
	}
	s.idx.touch(e)
	gen, parts, size := e.gen, e.parts, e.size
	if s.ram != nil {
		if v, ok := s.ram.Get(ks); ok {
			s.mu.Unlock()
			s.ramHits.Add(1)
			return v, TierRAM, nil
		}
	}
	s.mu.Unlock()

	payload, err := s.readChunk(key, parts, size)
	switch {
	case errors.Is(err, badger.ErrKeyNotFound):
		// Deleted under us (or by a DeleteObject racing a put).
		s.forget(ks, gen)
		s.misses.Add(1)
		return nil, "", ErrNotFound
	case errors.Is(err, errCorrupt):
		s.dropCorrupt(id, key, gen, err)
		return nil, "", ErrNotFound
	case err != nil:
		s.errors.Add(1)
		return nil, "", fmt.Errorf("store: get chunk %s: %w", id, err)
	}
	s.diskHits.Add(1)
	if s.ram != nil {
		s.mu.Lock()
		if e := s.idx.entries[ks]; e != nil && e.gen == gen {
			s.ram.Set(ks, payload, int64(len(payload)))
		}
		s.mu.Unlock()
	}
	return payload, TierDisk, nil
}

// readChunk reads and verifies a chunk of size payload bytes stored in
// parts+1 entries (value.go).
func (s *Store) readChunk(key []byte, parts int, size int64) ([]byte, error) {
	if parts == 0 {
		val, err := s.readValue(key)
		if err != nil {
			return nil, err
		}
		return decodeChunkValue(key, val)
	}
	return s.readRetrying(func(txn *badger.Txn) ([]byte, error) { return readParts(txn, key, parts, size) })
}

// readParts puts together a chunk stored in parts. A missing part is
// corruption: a chunk's entries are written and deleted in one transaction.
// The header must agree with the index (size: the parts' lengths found at
// Open, or what was put) before anything is allocated.
func readParts(txn *badger.Txn, key []byte, parts int, size int64) ([]byte, error) {
	item, err := txn.Get(key)
	if err != nil {
		return nil, err
	}
	var h partsHeader
	if err := item.Value(func(v []byte) (err error) { h, err = decodePartsHeader(v); return err }); err != nil {
		return nil, err
	}
	if h.parts() != parts || int64(h.length) != size {
		return nil, fmt.Errorf("%w: header says %d bytes in %d parts, the index %d in %d", errCorrupt, h.length, h.parts(), size, parts)
	}
	payload := make([]byte, h.length)
	for i := range parts {
		item, err := txn.Get(partKey(key, i))
		if err != nil {
			return nil, fmt.Errorf("%w: part %d: %v", errCorrupt, i, err)
		}
		from, to := h.part(i)
		err = item.Value(func(v []byte) error {
			if len(v) != to-from {
				// Also badger's failed value-log read (see readOne).
				return fmt.Errorf("%w: part %d has %d bytes, want %d", errCorrupt, i, len(v), to-from)
			}
			copy(payload[from:to], v)
			return nil
		})
		if err != nil {
			return nil, err
		}
	}
	if got := chunkCRC(key, payload); got != h.crc {
		return nil, fmt.Errorf("%w: crc32c %08x, want %08x", errCorrupt, got, h.crc)
	}
	return payload, nil
}

// readValue copies a value out of badger. An error reading the value bytes
// of a key the LSM tree has (a value-log read failure, or a panic in
// badger's decoding of a damaged entry) is retried in a new transaction,
// because value-log GC may have moved the value, and then reported as
// errCorrupt. Errors from the key lookup itself are returned as they are.
func (s *Store) readValue(key []byte) ([]byte, error) {
	return s.readRetrying(func(txn *badger.Txn) ([]byte, error) { return readOne(txn, key) })
}

func (s *Store) readRetrying(read func(*badger.Txn) ([]byte, error)) ([]byte, error) {
	var val []byte
	var err error
	for range readAttempts {
		val, err = s.readOnce(read)
		if err == nil || !errors.Is(err, errCorrupt) {
			break
		}
	}
	return val, err
}

// readAttempts bounds readValue's tries. Each retry follows a value-log GC
// that moved the value meanwhile, so more than one is rare.
const readAttempts = 3

func (s *Store) readOnce(read func(*badger.Txn) ([]byte, error)) (val []byte, err error) {
	defer func() {
		if r := recover(); r != nil {
			err = fmt.Errorf("%w: badger panicked reading the value: %v", errCorrupt, r)
		}
	}()
	err = s.view(func(txn *badger.Txn) (err error) {
		val, err = read(txn)
		return err
	})
	return val, err
}

// view runs fn in a read-only transaction, holding writeGate shared so
// that value-log GC (exclusive) never runs while a read or an iterator is
// in flight. badger v4.9.6 self-deadlocks otherwise: a failed value-log
// read opens a debug iterator whose Close deletes files GC left pending,
// taking the lock of the very file the read still holds
// (Item.yieldItemValue). Seen with corrupted files.
func (s *Store) view(fn func(*badger.Txn) error) error {
	s.writeGate.RLock()
	defer s.writeGate.RUnlock()
	return s.db.View(fn)
}

func readOne(txn *badger.Txn, key []byte) ([]byte, error) {
	item, err := txn.Get(key)
	if err != nil {
		return nil, err
	}
	val, err := item.ValueCopy(nil)
	if err == nil && len(val) == 0 && item.ValueSize() > 0 {
		// badger v4 (Item.yieldItemValue) only logs a failed
		// value-log read and returns no bytes and no error. It
		// happens when value-log GC moved the value and removed its
		// file after this transaction looked the key up (GC waits
		// for iterators, not for Get); a new transaction finds the
		// new location. The store never writes an empty value.
		err = errors.New("no bytes read")
	}
	if err != nil {
		return nil, fmt.Errorf("%w: value log read: %v", errCorrupt, err)
	}
	return val, nil
}

// forget drops an index entry whose key badger no longer has.
func (s *Store) forget(ks string, gen uint64) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if e := s.idx.entries[ks]; e != nil && e.gen == gen {
		s.removeLocked(e)
	}
}

// GetMeta returns an object's metadata, or ErrNotFound.
func (s *Store) GetMeta(o chunk.Object) (chunk.Meta, error) {
	if err := s.enter(); err != nil {
		return chunk.Meta{}, err
	}
	defer s.leave()
	key := metaKey(o)
	val, err := s.readValue(key)
	switch {
	case errors.Is(err, badger.ErrKeyNotFound):
		return chunk.Meta{}, ErrNotFound
	case errors.Is(err, errCorrupt):
	case err != nil:
		s.errors.Add(1)
		return chunk.Meta{}, fmt.Errorf("store: get metadata %s: %w", o, err)
	default:
		var m chunk.Meta
		if m, err = decodeMeta(val); err == nil {
			return m, nil
		}
	}
	s.checksumFailures.Add(1)
	s.log.Warn("corrupt metadata deleted", "object", o.String(), "err", err)
	if err := s.deleteKeys([][]byte{key}); err != nil {
		s.errors.Add(1)
	}
	return chunk.Meta{}, ErrNotFound
}
