package store

// How the disk bound is kept.
//
// Two budgets are enforced on every PutChunk:
//
//  1. Live bytes. The index accounts the payload of every chunk; a put first
//     evicts chunks (the eviction policy's victims, index.go) until
//     live+new <= LiveFraction * DiskBytes (after evicting the tenant's own
//     chunks down to its quota).
//
//  2. Real usage. The store keeps an estimate of what du would report for
//     Dir: the last measurement (st_blocks of every file) plus every byte it
//     has written since that measurement started (value-log entry, WAL entry
//     and its later LSM copy, tombstones, metadata) plus a reserve for writes
//     it does not see one by one: one value-log GC rewrite (a file plus one
//     entry), a compaction rewriting the whole LSM tree, a memtable flush and
//     slack. A put is admitted only if estimate+its bytes <= DiskBytes, so the
//     measured usage cannot exceed DiskBytes. If it does not fit, the put
//     reclaims synchronously (below); if that is not enough it evicts
//     chunks worth a value-log file and reclaims again, and
//     is refused with ErrNoSpace only if it still does not fit.
//
// Reclaiming value-log garbage in badger v4. RunValueLogGC only rewrites a
// value-log file whose discard statistics show enough garbage, and those
// statistics are only updated by LSM compactions that drop a stale version
// of a key whose value is in the value log (levels.go subcompact,
// updateDiscardStats). With payloads in the value log the memtable only
// holds small keys and pointers, so it may not fill and flush for a long
// time, the tombstones of evicted chunks never meet the values they shadow
// in a compaction, and no file is ever picked: deleted chunks would never be
// reclaimed. The store therefore forces it (forceFlush): it writes a
// sentinel key and calls DB.DropPrefix on the sentinel's prefix, which (see
// db.go DropPrefix and levels.go dropPrefixes) flushes every memtable to L0
// and then compacts all of L0 into the base level together with the
// overlapping tables there. The tombstones and the shadowed pointers meet in
// that compaction, the stale versions are dropped and the discard stats of
// their value-log files are updated; RunValueLogGC then picks those files.
// DropPrefix makes concurrent badger writes fail with ErrBlockedWrites, so
// every write holds writeGate shared and forceFlush holds it exclusively;
// RunValueLogGC holds it exclusively too (see runGC). Disk reads take
// writeGate shared as well (see view: a badger deadlock otherwise), so a
// disk hit can wait for one GC rewrite or memtable flush; RAM hits never
// do.
// If the LSM tree has grown past a single level, tombstones can sit above
// the values they shadow; under pressure the store then also runs
// DB.Flatten (at most once a minute).
//
// The maintenance goroutine measures usage every MaintenanceInterval and
// when kicked (after a value-log file's worth of garbage), and then runs
// forceFlush and RunValueLogGC in a loop while GC reclaims files (on a
// plain tick only once there is a quarter file of garbage, so an idle or
// lightly loaded store is not flushed needlessly). TestDiskBoundUnderChurn
// proves the bound and the continued admission.

import (
	"errors"
	"io/fs"
	"path/filepath"
	"strings"
	"time"

	"github.com/dgraph-io/badger/v4"
)

const (
	slackBytes   = 1 << 20 // page rounding, MANIFEST, DISCARD, KEYREGISTRY, directories
	maxGCRounds  = 256     // RunValueLogGC calls per reclaim and ratio
	flattenEvery = time.Minute
	// maxEntryOverhead bounds badger's per-entry bytes beyond key and value:
	// value-log header (<= 22) and crc (4), WAL header, skiplist/table overhead.
	maxEntryOverhead = 64
)

// usage is the estimate of bytes on disk; guarded by Store.mu.
type usage struct {
	measured int64 // du of Dir at the last measurement
	lsm      int64 // bytes of LSM tables (.sst) at the last measurement
	// pending is charged bytes a measurement has not seen: writes in flight
	// (admitted, perhaps still waiting for badger) and writes that finished
	// after the last measurement started.
	pending int64
	// done is the part of pending whose writes have finished: only those are
	// on disk for the next measurement to see.
	done   int64
	fsFree int64 // free bytes on the filesystem at the last measurement, -1 unknown (fsroom.go)
}

// putCost is what a chunk put can add on disk: the value-log entry, the WAL
// entry and the key's later copy in an LSM table.
func putCost(keyLen, valLen int) int64 {
	return int64(valLen) + 3*int64(keyLen+8) + 3*maxEntryOverhead
}

// deleteCost is what a tombstone can add: WAL entry and LSM table entry.
func deleteCost(keyLen int) int64 { return 2 * int64(keyLen+8+maxEntryOverhead) }

// metaCost is what an inline metadata entry can add: WAL and LSM table.
func metaCost(keyLen, valLen int) int64 { return 2 * int64(keyLen+8+valLen+maxEntryOverhead) }

// reserveLocked is the room kept free for writes that are not charged one by
// one: one value-log GC rewrite (at most a file, which may overshoot the
// file size by one entry), a compaction rewriting the LSM tree, a memtable
// being flushed, and slack.
func (s *Store) reserveLocked() int64 {
	return s.vlogFile + s.maxChunk.Load() + s.usage.lsm + s.memTable + slackBytes
}

func (s *Store) estimateLocked() int64 {
	return s.usage.measured + s.usage.pending + s.reserveLocked()
}

// charge adds bytes about to be written to the estimate, unconditionally
// (deletes and metadata are never refused).
func (s *Store) charge(n int64) {
	s.mu.Lock()
	s.usage.pending += n
	s.mu.Unlock()
}

// wrote says the write charged n has finished (or failed): from now on a
// measurement sees whatever it put on disk.
func (s *Store) wrote(n int64) {
	s.mu.Lock()
	s.usage.done += n
	s.mu.Unlock()
}

// tryCharge charges cost if the estimate stays within the bound.
func (s *Store) tryCharge(cost int64) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.estimateLocked()+cost > s.limitLocked() {
		return false
	}
	s.usage.pending += cost
	return true
}

// admit charges cost for a put, reclaiming space synchronously if needed.
func (s *Store) admit(cost int64) bool {
	if !s.fsRoom(cost + s.reserve()) {
		return false
	}
	if s.tryCharge(cost) {
		return true
	}
	s.gcMu.Lock()
	defer s.gcMu.Unlock()
	if s.tryCharge(cost) { // someone reclaimed while we waited
		return true
	}
	s.measure()
	if s.tryCharge(cost) {
		return true
	}
	s.reclaimLocked(true, cost)
	return s.tryCharge(cost)
}

func (s *Store) notePut(valLen int) {
	for {
		cur := s.maxChunk.Load()
		if int64(valLen) <= cur || s.maxChunk.CompareAndSwap(cur, int64(valLen)) {
			return
		}
	}
}

// noteGarbage records payload bytes that became value-log garbage and kicks
// maintenance once there is a value-log file's worth of it.
func (s *Store) noteGarbage(n int64) {
	if s.garbage.Add(n) >= s.vlogFile {
		s.poke()
	}
}

func (s *Store) poke() {
	select {
	case s.kick <- struct{}{}:
	default:
	}
}

// measure sums st_blocks of every file under Dir. gcMu must be held.
func (s *Store) measure() {
	// Only writes finished before the walk starts are surely in it; writes
	// still in flight (admitted puts queued behind badger's writer or a GC
	// holding writeGate, many under load) stay charged. Dropping them was
	// how a busy store went past its bound.
	s.mu.Lock()
	before := s.usage.done
	s.mu.Unlock()
	total, lsm, err := dirUsage(s.opts.Dir, s.opts.PinnedDir)
	free, ferr := fsAvailable(s.opts.Dir)
	if err != nil {
		// Keep the old measurement: pending keeps growing, which errs on the
		// side of refusing puts.
		s.errors.Add(1)
		s.log.Error("measure disk usage", "dir", s.opts.Dir, "err", err)
		return
	}
	s.mu.Lock()
	s.usage.measured = total
	s.usage.lsm = lsm
	s.usage.pending -= before // writes finishing during the walk stay charged
	s.usage.done -= before
	s.noteFilesystemLocked(free, ferr)
	s.mu.Unlock()
}

// dirUsage is du for dir: allocated bytes of every file and directory, and
// of the LSM tables among them. Files deleted during the walk are skipped.
func dirUsage(dir, skip string) (total, lsm int64, err error) {
	skipPath := ""
	if skip != "" {
		skipPath = filepath.Join(dir, skip)
	}
	err = filepath.WalkDir(dir, func(path string, d fs.DirEntry, err error) error {
		if skipPath != "" && path == skipPath {
			return filepath.SkipDir
		}
		var fi fs.FileInfo
		if err == nil {
			fi, err = d.Info()
		}
		if errors.Is(err, fs.ErrNotExist) {
			return nil
		}
		if err != nil {
			return err
		}
		n := allocated(fi)
		total += n
		if strings.HasSuffix(d.Name(), ".sst") {
			lsm += n
		}
		return nil
	})
	return total, lsm, err
}

func (s *Store) maintenance() {
	defer s.wg.Done()
	t := time.NewTicker(s.opts.MaintenanceInterval)
	defer t.Stop()
	for {
		select {
		case <-s.done:
			return
		case <-t.C:
			s.maintain(true)
		case <-s.kick:
			s.maintain(false)
		}
	}
}

// maintain applies hot-reloaded quotas, measures usage and reclaims
// value-log garbage when there is some (periodic) or enough (kicked).
func (s *Store) maintain(periodic bool) {
	s.enforceQuotas()
	s.gcMu.Lock()
	defer s.gcMu.Unlock()
	s.measure()
	s.mu.Lock()
	high := s.estimateLocked() > s.limitLocked()/10*9
	s.mu.Unlock()
	g := s.garbage.Load()
	if high || g >= s.vlogFile || (periodic && g >= s.vlogFile/4) {
		s.reclaimLocked(high, 0)
	}
}

// reclaimLocked turns value-log garbage into free space: a forced flush and
// compaction so the discard stats know about every delete, then value-log
// GC for as long as it rewrites files. Under pressure it also accepts files
// with less garbage, and as a last resort flattens the LSM tree. need is the
// size of the put waiting for room (0 for none). gcMu must be held.
func (s *Store) reclaimLocked(pressure bool, need int64) {
	if s.garbage.Load() > 0 {
		if err := s.forceFlush(); err != nil {
			s.errors.Add(1)
			s.log.Error("force memtable flush", "err", err)
		}
	}
	ratios := []float64{0.5}
	if pressure {
		ratios = []float64{0.5, 0.25, 0.1}
	}
	for _, r := range ratios {
		s.runGC(r)
		if !pressure || s.fits(need) {
			return
		}
	}
	if s.flattenIfSplit() {
		for _, r := range ratios {
			s.runGC(r)
			if s.fits(need) {
				return
			}
		}
	}
}

func (s *Store) fits(need int64) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.estimateLocked()+need <= s.limitLocked()
}

// runGC runs value-log GC while it rewrites files and there is room for the
// rewrite (at most 1-ratio of a file is copied before the file is deleted).
func (s *Store) runGC(ratio float64) {
	for range maxGCRounds {
		s.mu.Lock()
		rewrite := int64((1 - ratio) * float64(s.vlogFile+s.maxChunk.Load()))
		room := s.usage.measured+s.usage.pending+rewrite+slackBytes <= s.limitLocked()
		s.mu.Unlock()
		if !room || !s.fsRoom(rewrite+slackBytes) {
			return
		}
		// Writes are held off during GC: badger v4.9.6's rewrite reads
		// DB.MaxVersion, which reads the memtable's maxVersion while the
		// write goroutine updates it without a lock (memTable.Put), a data
		// race the race detector reports. GC's own rewrites are unaffected.
		s.writeGate.Lock()
		err := s.db.RunValueLogGC(ratio)
		s.writeGate.Unlock()
		if err != nil {
			if !errors.Is(err, badger.ErrNoRewrite) && !errors.Is(err, badger.ErrRejected) {
				s.errors.Add(1)
				s.log.Error("value log gc", "err", err)
			}
			return
		}
		s.gcs.Add(1)
		s.measure()
	}
}

// forceFlush flushes the memtables and compacts L0 into the base level, so
// that tombstones meet the values they shadow and the value-log discard
// stats are updated. See the comment at the top of this file.
func (s *Store) forceFlush() error {
	sentinel := []byte{typeFlush}
	s.writeGate.Lock()
	defer s.writeGate.Unlock()
	s.garbage.Store(0)
	if err := s.db.Update(func(txn *badger.Txn) error { return txn.Set(sentinel, nil) }); err != nil {
		return err
	}
	s.flushes.Add(1)
	return s.db.DropPrefix(sentinel)
}

// flattenIfSplit runs DB.Flatten when tables sit in more than one level
// below L0 (so tombstones may not meet the values they shadow in the next
// compaction), at most once per flattenEvery.
func (s *Store) flattenIfSplit() bool {
	if time.Since(s.lastFlatten) < flattenEvery {
		return false
	}
	n := 0
	for _, l := range s.db.Levels() {
		if l.Level > 0 && l.NumTables > 0 {
			n++
		}
	}
	if n <= 1 {
		return false
	}
	s.lastFlatten = time.Now()
	if err := s.db.Flatten(2); err != nil {
		s.errors.Add(1)
		s.log.Error("flatten lsm tree", "err", err)
		return false
	}
	return true
}
