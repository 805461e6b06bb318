// Package store is the cache node's local storage: a bounded RAM tier
// (ristretto) in front of badger on local NVMe, with a hard byte bound on the
// disk, per-tenant quotas, a checksum per chunk verified on every disk hit,
// and warm restarts.
//
// Layouts: the badger key layout is documented in keys.go, the value layout
// in value.go. How the disk bound is kept, value-log garbage included, is
// documented in space.go.
//
// Tiers: GetChunk looks in RAM, then on disk. A disk hit is verified (CRC-32C)
// and then promoted to RAM, so the RAM tier only ever holds verified payloads
// (or payloads handed to PutChunk by the caller). Every chunk in RAM is also
// in the disk index: evicting or deleting a chunk on disk removes its RAM
// copy, which is how DeleteObject also invalidates RAM.
//
// Index and disk: at rest the index holds exactly the chunks badger holds,
// with their sizes (a failed delete aside, which leaves an unindexed chunk
// that is never served and that DeleteObject or the next Open removes). The
// store's lock is not held across badger calls, so for each chunk key the
// badger write or delete and the index update are ordered by a claim on the
// key (Store.inflight) instead of a lock: see there.
//
// Tenants: the tenant is the first component of every key and of the index,
// and quotas evict only the tenant's own chunks.
package store

import (
	"errors"
	"fmt"
	"log/slog"
	"os"
	"sort"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/dgraph-io/badger/v4"
	"github.com/dgraph-io/ristretto/v2"

	"github.com/distcache/distcache/internal/chunk"
)

// Tier says where GetChunk found a chunk.
type Tier string

const (
	TierRAM  Tier = "ram"
	TierDisk Tier = "disk"
)

var (
	// ErrNotFound is returned on a miss, including for a chunk that failed
	// verification (it has been deleted; refetch it).
	ErrNotFound = errors.New("store: not found")
	// ErrNoSpace means the chunk was not admitted: storing it would break the
	// disk bound, or it is larger than the quota or capacity allows. The node
	// serves the bytes pass-through instead.
	ErrNoSpace = errors.New("store: no space")
	// ErrClosed is returned by every operation after Close.
	ErrClosed = errors.New("store: closed")
)

// Options configures Open.
type Options struct {
	Dir string // badger directory
	// DiskBytes is the hard bound on bytes used under Dir: st_blocks of all
	// files (what du reports), value-log garbage included.
	DiskBytes int64
	RAMBytes  int64 // RAM tier size (0 disables it)
	// TenantQuota is the number of disk bytes (chunk payload) a tenant may
	// hold; 0 means no quota beyond DiskBytes. It is called on each put (and
	// by maintenance), so hot-reloaded quotas apply. May be nil.
	TenantQuota func(tenant string) int64
	Logger      *slog.Logger
	// MaintenanceInterval is the period of usage measurement and value-log
	// GC (default 10s).
	MaintenanceInterval time.Duration
	// LiveFraction is the share of DiskBytes that live chunk payload may
	// use (default 0.6); the rest is headroom for value-log garbage waiting
	// for GC, the LSM tree and GC's own rewrites.
	LiveFraction float64
	// Eviction is the disk tier's eviction policy (default EvictS3FIFO; see
	// index.go).
	Eviction Eviction
}

// DefaultLiveFraction is the default Options.LiveFraction.
const DefaultLiveFraction = 0.6

// MinDiskBytes is the smallest DiskBytes Open accepts: below it badger's
// fixed overheads leave no room for a useful cache.
const MinDiskBytes = 16 << 20

// TenantStats is one tenant's share of the disk tier.
type TenantStats struct {
	Bytes  int64 // payload bytes
	Chunks int64
}

// Stats is a snapshot of the store's gauges and cumulative counters.
type Stats struct {
	DiskBytes    int64 // bytes of live chunk payload accounted by the store
	DiskUsage    int64 // last measured bytes on disk under Dir (du-like)
	DiskCapacity int64 // Options.DiskBytes
	// DiskLimit is the bound in force: DiskCapacity, or less when the
	// filesystem holding Dir has less room (fsroom.go).
	DiskLimit   int64
	DiskFree    int64 // free bytes on that filesystem at the last measurement (-1: unknown)
	RAMBytes    int64 // payload bytes in the RAM tier
	RAMCapacity int64 // Options.RAMBytes (0: no RAM tier)
	Chunks      int64
	Tenants     map[string]TenantStats

	Evictions        uint64 // chunks evicted from disk to make room (policy or quota)
	ChecksumFailures uint64 // corrupt or unreadable entries found (and deleted)
	Errors           uint64 // badger and filesystem errors
	Rejected         uint64 // PutChunk calls that returned ErrNoSpace
	RAMHits          uint64
	DiskHits         uint64
	Misses           uint64
	ForcedFlushes    uint64 // memtable flush + L0 compaction forced for value-log GC
	ValueLogGCs      uint64 // value-log files rewritten and removed by GC
	Resets           uint64 // 1 if Open found the store damaged and started it empty (recover.go)
}

// Store is safe for concurrent use.
type Store struct {
	opts Options
	log  *slog.Logger
	db   *badger.DB
	ram  *ristretto.Cache[string, []byte] // nil when RAMBytes is 0

	liveTarget int64 // LiveFraction*DiskBytes: bound on idx.bytes+idx.reserved
	vlogFile   int64 // badger ValueLogFileSize
	memTable   int64 // badger MemTableSize

	// closeMu is held shared by every operation and exclusively by Close.
	closeMu sync.RWMutex
	closed  bool

	// mu guards the index, inflight and the usage estimate. It is never held
	// across badger calls, only across quick ristretto calls.
	mu  sync.Mutex
	idx *index
	// inflight holds the claims on chunk keys being written or deleted; the
	// value is true once the claim is doomed (see DeleteObject). Only the
	// holder of a key's claim writes or deletes the key in badger or adds it
	// to the index, so those steps happen in one order per key even though
	// mu is released around badger calls. A key is claimed only while it is
	// not indexed (a delete unindexes and claims in one step), and a put
	// indexes its key and releases the claim in one step, so an indexed key
	// is never claimed. Others skip a claimed key: a put of it is dropped,
	// DeleteObject dooms it instead of deleting it. Together: at rest, the
	// index holds exactly the chunks on disk (failed deletes aside).
	inflight map[string]bool
	usage    usage
	// The filesystem limit's log state (fsroom.go).
	fsLimited             bool
	fsLogged, fsErrLogged time.Time

	// writeGate is held shared around every badger write and exclusively by
	// forceFlush, because badger's DropPrefix makes concurrent writes fail.
	writeGate sync.RWMutex
	// gcMu serializes measurement, forced flushes and value-log GC.
	gcMu        sync.Mutex
	lastFlatten time.Time // guarded by gcMu

	garbage  atomic.Int64 // payload bytes deleted since the last forced flush
	maxChunk atomic.Int64 // largest value written, for the GC reserve

	kick chan struct{}
	done chan struct{}
	wg   sync.WaitGroup

	evictions, checksumFailures, errors, rejected atomic.Uint64
	ramHits, diskHits, misses                     atomic.Uint64
	flushes, gcs                                  atomic.Uint64
	resets                                        atomic.Uint64

	hooks *testHooks // nil outside tests
}

// testHooks let tests stop an operation between two of its steps, to force
// an interleaving deterministically. Set before the store is used.
type testHooks struct {
	putWrite   func(key string)    // a put holds its key's claim, before its badger write
	putIndex   func(key string)    // a put's badger write committed, before it is indexed
	deleteList func(prefix string) // DeleteObject, before it lists the object's chunks on disk
}

// Open opens (or creates) the store in opts.Dir and rebuilds its index from
// what is on disk.
func Open(opts Options) (*Store, error) {
	if opts.Dir == "" {
		return nil, errors.New("store: Options.Dir is required")
	}
	if opts.DiskBytes < MinDiskBytes {
		return nil, fmt.Errorf("store: Options.DiskBytes %d is below the minimum %d", opts.DiskBytes, MinDiskBytes)
	}
	if opts.RAMBytes < 0 {
		return nil, fmt.Errorf("store: negative Options.RAMBytes %d", opts.RAMBytes)
	}
	if opts.Logger == nil {
		opts.Logger = slog.Default()
	}
	if opts.MaintenanceInterval <= 0 {
		opts.MaintenanceInterval = 10 * time.Second
	}
	if opts.LiveFraction == 0 {
		opts.LiveFraction = DefaultLiveFraction
	}
	if opts.LiveFraction <= 0 || opts.LiveFraction >= 1 {
		return nil, fmt.Errorf("store: Options.LiveFraction %v outside (0, 1)", opts.LiveFraction)
	}
	switch opts.Eviction {
	case "":
		opts.Eviction = EvictS3FIFO
	case EvictS3FIFO, EvictLRU:
	default:
		return nil, fmt.Errorf("store: unknown Options.Eviction %q (want %q or %q)", opts.Eviction, EvictS3FIFO, EvictLRU)
	}
	if err := os.MkdirAll(opts.Dir, 0o750); err != nil {
		return nil, fmt.Errorf("store: %w", err)
	}
	log := opts.Logger.With("component", "store")
	db, reset, err := openBadger(opts, log) // resets a damaged store: recover.go
	if err != nil {
		return nil, err
	}
	liveTarget := int64(float64(opts.DiskBytes) * opts.LiveFraction)
	s := &Store{
		opts:       opts,
		log:        log,
		db:         db,
		liveTarget: liveTarget,
		vlogFile:   vlogFileSize(opts.DiskBytes),
		memTable:   memTableSize(opts.DiskBytes),
		idx:        newIndex(opts.Eviction, liveTarget),
		inflight:   make(map[string]bool),
		kick:       make(chan struct{}, 1),
		done:       make(chan struct{}),
	}
	if reset {
		s.resets.Store(1)
	}
	if err := s.rebuildIndex(); err != nil {
		return nil, errors.Join(fmt.Errorf("store: rebuild index: %w", err), db.Close())
	}
	openDone(opts.Dir, log)
	if opts.RAMBytes > 0 {
		s.ram, err = ristretto.NewCache(&ristretto.Config[string, []byte]{
			NumCounters:        max(1000, opts.RAMBytes/(32<<10)), // ~10x the chunks that fit
			MaxCost:            opts.RAMBytes,
			BufferItems:        64,
			IgnoreInternalCost: true, // cost is exactly len(payload)
		})
		if err != nil {
			return nil, errors.Join(fmt.Errorf("store: ram tier: %w", err), db.Close())
		}
	}
	s.gcMu.Lock()
	s.measure()
	s.gcMu.Unlock()
	s.wg.Add(1)
	go s.maintenance()
	return s, nil
}

// rebuildIndex indexes every chunk on disk with a key-only iteration,
// ordered by badger version so the eviction order after a restart follows
// write order (chunks moved by value-log GC got a new version and count as
// recent; reads since the last write are not remembered).
func (s *Store) rebuildIndex() error {
	type rec struct {
		key       string
		prefixLen int
		tenant    string
		version   uint64
		size      int64 // payload bytes, -1 if unknown
		parts     int
	}
	var recs []rec
	var bad [][]byte
	err := s.db.View(func(txn *badger.Txn) error {
		it := txn.NewIterator(badger.IteratorOptions{Prefix: []byte{typeChunk}})
		defer it.Close()
		for it.Rewind(); it.Valid(); it.Next() {
			item := it.Item()
			k := item.KeyCopy(nil)
			p, err := parseChunkKey(k)
			if err != nil {
				bad = append(bad, k)
				continue
			}
			n, ok := storedValueLen(len(k), item.EstimatedSize(), item.ValueSize())
			if p.part >= 0 {
				// Parts follow their chunk key in order; the payload is
				// theirs. A stray part (its chunk deleted by a delete cut
				// short) goes; a chunk missing parts fails its read.
				last := len(recs) - 1
				if last < 0 || recs[last].key != string(k[:len(k)-2]) || recs[last].parts != p.part || !ok {
					bad = append(bad, k)
					continue
				}
				if p.part == 0 {
					recs[last].size = 0
				}
				recs[last].parts++
				recs[last].size += n
				continue
			}
			size := int64(-1)
			if ok && n >= valueHeaderLen {
				size = n - valueHeaderLen
			}
			recs = append(recs, rec{string(k), p.prefixLen, p.id.Tenant, item.Version(), size, 0})
		}
		return nil
	})
	if err != nil {
		return err
	}
	for i := range recs {
		if recs[i].size < 0 && recs[i].parts == 0 {
			// The entry does not fit badger's format as we know it: read it.
			n, err := s.readValueLen([]byte(recs[i].key))
			if err != nil {
				s.log.Warn("unreadable chunk at open; deleting it", "key", recs[i].key, "err", err)
				bad = append(bad, []byte(recs[i].key))
				continue
			}
			recs[i].size = n
		}
	}
	if len(bad) > 0 {
		s.checksumFailures.Add(uint64(len(bad)))
		if err := s.deleteKeys(bad); err != nil {
			return err
		}
	}
	sort.SliceStable(recs, func(i, j int) bool { return recs[i].version < recs[j].version })
	for _, r := range recs {
		if r.size >= 0 {
			s.idx.restore(r.key, r.prefixLen, r.tenant, r.size).parts = r.parts
		}
	}
	return nil
}

func (s *Store) readValueLen(key []byte) (int64, error) {
	var n int64
	err := s.db.View(func(txn *badger.Txn) error {
		item, err := txn.Get(key)
		if err != nil {
			return err
		}
		return item.Value(func(v []byte) error {
			p, err := decodeChunkValue(key, v)
			n = int64(len(p))
			return err
		})
	})
	return n, err
}

func (s *Store) enter() error {
	s.closeMu.RLock()
	if s.closed {
		s.closeMu.RUnlock()
		return ErrClosed
	}
	return nil
}

func (s *Store) leave() { s.closeMu.RUnlock() }

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
	// Reads hold writeGate shared so value-log GC (exclusive) never runs
	// while one is in flight. badger v4.9.6 self-deadlocks otherwise: a
	// failed value-log read opens a debug iterator whose Close deletes
	// files GC left pending, taking the lock of the very file the read
	// still holds (Item.yieldItemValue). Seen with corrupted files.
	s.writeGate.RLock()
	defer s.writeGate.RUnlock()
	err = s.db.View(func(txn *badger.Txn) (err error) {
		val, err = read(txn)
		return err
	})
	return val, err
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

// diskKeys are the badger keys of the chunk whose key is ks, stored with
// parts part entries.
func diskKeys(ks string, parts int) [][]byte {
	keys := make([][]byte, 0, 1+parts)
	keys = append(keys, []byte(ks))
	for i := range parts {
		keys = append(keys, partKey(keys[0], i))
	}
	return keys
}

// forget drops an index entry whose key badger no longer has.
func (s *Store) forget(ks string, gen uint64) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if e := s.idx.entries[ks]; e != nil && e.gen == gen {
		s.removeLocked(e)
	}
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
	s.removeLocked(e)
	s.inflight[ks] = false
	s.mu.Unlock()
	s.log.Warn("corrupt chunk deleted", "chunk", id.String(), "err", cause)
	if err := s.deleteKeys(diskKeys(ks, e.parts)); err != nil {
		s.errors.Add(1)
		s.log.Error("delete corrupt chunk", "chunk", id.String(), "err", err)
	} else {
		s.noteGarbage(e.size)
	}
	s.mu.Lock()
	delete(s.inflight, ks)
	s.mu.Unlock()
}

// removeLocked removes e from the index and its payload from RAM.
func (s *Store) removeLocked(e *entry) {
	s.idx.remove(e)
	if s.ram != nil {
		s.ram.Del(e.key)
	}
}

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

// popLocked unindexes e and claims its key for drop.
func (s *Store) popLocked(e *entry) *entry {
	s.removeLocked(e)
	s.inflight[e.key] = false
	return e
}

// makeRoomLocked unindexes the chunks to evict so that the reserved bytes
// fit: first the tenant's own chunks while it is over its quota, then the
// policy's victims while live bytes are over the live target. ok is false
// if the room is held by puts in flight. The victims are for drop.
func (s *Store) makeRoomLocked(t *tenantState, quota int64) (victims []*entry, ok bool) {
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
func (s *Store) evictTenantLocked(t *tenantState, quota int64, victims []*entry) []*entry {
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
	var bytes int64
	for _, v := range victims {
		keys = append(keys, diskKeys(v.key, v.parts)...)
		bytes += v.size
	}
	if err := s.deleteKeys(keys); err != nil {
		// The bytes stay on disk unaccounted until the next restart; the
		// measured usage still covers them, so the bound holds.
		s.errors.Add(1)
		s.log.Error("delete chunks", "chunks", len(keys), "err", err)
	} else {
		s.noteGarbage(bytes)
	}
	s.mu.Lock()
	for _, v := range victims {
		delete(s.inflight, v.key)
	}
	s.mu.Unlock()
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
	defer func() {
		s.mu.Lock()
		for _, k := range owned {
			delete(s.inflight, k)
		}
		s.mu.Unlock()
	}()

	// Chunks on disk the index does not know go too: chunks put since (now
	// indexed or claimed, handled by claimObjectLocked) and chunks left by
	// a failed delete (unindexed and unclaimed). A chunk that is claimed is
	// never deleted here: its claim holder may be about to index it.
	if s.hooks != nil && s.hooks.deleteList != nil {
		s.hooks.deleteList(obj)
	}
	var listed []string
	s.writeGate.RLock() // no value-log GC while this iterator is open (see readOnce)
	listErr := s.db.View(func(txn *badger.Txn) error {
		it := txn.NewIterator(badger.IteratorOptions{Prefix: prefix})
		defer it.Close()
		for it.Rewind(); it.Valid(); it.Next() {
			listed = append(listed, string(it.Item().Key()))
		}
		return nil
	})
	s.writeGate.RUnlock()
	if listErr == nil {
		s.mu.Lock()
		owned, bytes = s.claimObjectLocked(obj, owned, bytes)
		for _, k := range listed {
			// Not indexed: claimObjectLocked just unindexed the object.
			if _, claimed := s.inflight[k]; !claimed {
				s.inflight[k] = false
				owned = append(owned, k)
			}
		}
		s.mu.Unlock()
	}

	del := make([][]byte, 0, 1+len(owned))
	del = append(del, metaKey(o))
	for _, k := range owned {
		del = append(del, []byte(k))
	}
	err := s.deleteKeys(del)
	if err != nil {
		s.errors.Add(1)
	} else {
		s.noteGarbage(bytes)
	}
	switch {
	case listErr != nil:
		s.errors.Add(1)
		return fmt.Errorf("store: delete object %s: list chunks: %w", o, listErr)
	case err != nil:
		return fmt.Errorf("store: delete object %s: %w", o, err)
	}
	return nil
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

// Stats returns a snapshot of the store's gauges and counters.
func (s *Store) Stats() Stats {
	s.mu.Lock()
	st := Stats{
		DiskBytes:    s.idx.bytes,
		DiskUsage:    s.usage.measured,
		DiskCapacity: s.opts.DiskBytes,
		DiskLimit:    s.limitLocked(),
		DiskFree:     s.usage.fsFree,
		RAMCapacity:  s.opts.RAMBytes,
		Chunks:       int64(len(s.idx.entries)),
		Tenants:      make(map[string]TenantStats, len(s.idx.tenants)),
	}
	for name, t := range s.idx.tenants {
		if t.chunks > 0 {
			st.Tenants[name] = TenantStats{Bytes: t.bytes, Chunks: t.chunks}
		}
	}
	s.mu.Unlock()
	if s.ram != nil {
		st.RAMBytes = s.ram.MaxCost() - s.ram.RemainingCost()
	}
	st.Evictions = s.evictions.Load()
	st.ChecksumFailures = s.checksumFailures.Load()
	st.Errors = s.errors.Load()
	st.Rejected = s.rejected.Load()
	st.RAMHits = s.ramHits.Load()
	st.DiskHits = s.diskHits.Load()
	st.Misses = s.misses.Load()
	st.ForcedFlushes = s.flushes.Load()
	st.ValueLogGCs = s.gcs.Load()
	st.Resets = s.resets.Load()
	return st
}

// Close stops maintenance, waits for operations in flight and closes badger
// (which flushes its memtable so the next Open is warm).
func (s *Store) Close() error {
	s.closeMu.Lock()
	if s.closed {
		s.closeMu.Unlock()
		return ErrClosed
	}
	s.closed = true
	s.closeMu.Unlock()
	close(s.done)
	s.wg.Wait()
	s.gcMu.Lock()
	defer s.gcMu.Unlock()
	err := s.db.Close()
	if s.ram != nil {
		s.ram.Close()
	}
	if err != nil {
		return fmt.Errorf("store: close badger: %w", err)
	}
	return nil
}
