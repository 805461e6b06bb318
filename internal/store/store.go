package store

import (
	"errors"
	"fmt"
	"log/slog"
	"os"
	"sync"
	"sync/atomic"
	"time"

	"github.com/dgraph-io/badger/v4"
	"github.com/dgraph-io/ristretto/v2"
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
	// Pinned, when set, is the bytes others hold under the same bound
	// (the write-back journal, internal/writeback): the store keeps
	// DiskBytes minus them, evicting to make room as they grow. PinnedDir
	// is their subdirectory of Dir, which the store's measurements skip
	// (they are counted through Pinned).
	Pinned    func() int64
	PinnedDir string
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
	// ReplaceMeta found the version it replaces, before its write commits.
	replaceRead func(key string)
}

// Open opens (or creates) the store in opts.Dir and rebuilds its index from
// what is on disk.
func Open(opts Options) (*Store, error) {
	opts, err := opts.withDefaults()
	if err != nil {
		return nil, err
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
		if s.ram, err = newRAMTier(opts.RAMBytes); err != nil {
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

// withDefaults checks opts and fills in the defaults.
func (opts Options) withDefaults() (Options, error) {
	if opts.Dir == "" {
		return opts, errors.New("store: Options.Dir is required")
	}
	if opts.DiskBytes < MinDiskBytes {
		return opts, fmt.Errorf("store: Options.DiskBytes %d is below the minimum %d", opts.DiskBytes, MinDiskBytes)
	}
	if opts.RAMBytes < 0 {
		return opts, fmt.Errorf("store: negative Options.RAMBytes %d", opts.RAMBytes)
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
		return opts, fmt.Errorf("store: Options.LiveFraction %v outside (0, 1)", opts.LiveFraction)
	}
	switch opts.Eviction {
	case "":
		opts.Eviction = EvictS3FIFO
	case EvictS3FIFO, EvictLRU:
	default:
		return opts, fmt.Errorf("store: unknown Options.Eviction %q (want %q or %q)", opts.Eviction, EvictS3FIFO, EvictLRU)
	}
	return opts, nil
}

// newRAMTier returns a RAM tier of the given size in payload bytes.
func newRAMTier(bytes int64) (*ristretto.Cache[string, []byte], error) {
	return ristretto.NewCache(&ristretto.Config[string, []byte]{
		NumCounters:        max(1000, bytes/(32<<10)), // ~10x the chunks that fit
		MaxCost:            bytes,
		BufferItems:        64,
		IgnoreInternalCost: true, // cost is exactly len(payload)
	})
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
