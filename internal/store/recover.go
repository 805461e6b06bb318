package store

// Opening the store: a damaged store is reset, then the index is rebuilt
// from the keys on disk (rebuildIndex, at the end of this file).
//
// A damaged store.
//
// The store is a cache: everything in it can be fetched from S3 again, so a
// store that cannot be opened is not worth a node that cannot start. Open
// therefore resets such a store (deletes badger's files in Dir and starts
// empty) and logs why at error level, rather than failing: in a pod, failing
// means a crash loop that only a human deleting files can end. What was
// found (e2e/processfaults TestCorruptStoreFiles runs each case against the
// real binary):
//
//   - damaged value-log files: badger opens; the damaged chunks fail their
//     CRC-32C on read and are refetched (no reset needed);
//   - a damaged, truncated or missing LSM table (.sst), a MANIFEST with bad
//     magic, a damaged KEYREGISTRY: badger.Open returns an error, or, for a
//     truncated table, panics in one of its own goroutines, which no recover
//     can catch and which kills the process. So before badger.Open every
//     table is opened and checksummed here, in this goroutine, with panics
//     recovered (tables hold only keys and value pointers, so this reads
//     little); a bad table resets the store;
//   - anything else that kills the process during Open (a badger panic or
//     log.Fatal not foreseen above): Open writes openMarker before
//     badger.Open and removes it once the store is open, so the next start
//     finds it and resets the store. The price: a node killed while opening
//     its store starts cold.
//
// The store is not reset when badger says another process holds the
// directory (its LOCK file), nor when the reset itself fails (permissions):
// then Open fails as before.

import (
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"sort"
	"strings"

	"github.com/dgraph-io/badger/v4"
	"github.com/dgraph-io/badger/v4/options"
	"github.com/dgraph-io/badger/v4/table"
	"github.com/dgraph-io/ristretto/v2/z"
)

// openMarker exists in Dir while Open runs (badger ignores other files).
const openMarker = "DISTCACHE-OPENING"

// badgerFile reports whether name is one of badger's files.
func badgerFile(name string) bool {
	switch name {
	case "MANIFEST", "MANIFEST-REWRITE", "KEYREGISTRY", "REWRITE-KEYREGISTRY", "DISCARD", "LOCK", openMarker:
		return true
	}
	for _, ext := range []string{".sst", ".vlog", ".mem"} {
		if strings.HasSuffix(name, ext) {
			return true
		}
	}
	return false
}

// openBadger opens badger in opts.Dir, resetting the store first or after
// a failed open when it is damaged (see above). reset says whether it did.
func openBadger(opts Options, log *slog.Logger) (db *badger.DB, reset bool, err error) {
	dir := opts.Dir
	bopts := badgerOptions(dir, opts.DiskBytes, opts.Logger.With("component", "badger"))
	marker := filepath.Join(dir, openMarker)
	why := ""
	if _, err := os.Stat(marker); err == nil {
		why = "the previous start did not finish opening it (the process crashed or was killed while opening)"
	} else if err := checkTables(dir, bopts); err != nil {
		why = err.Error()
	}
	if why == "" {
		if err := os.WriteFile(marker, nil, 0o600); err != nil {
			return nil, false, fmt.Errorf("store: %w", err)
		}
		db, err = openRecovered(bopts)
		if err == nil {
			return db, false, nil
		}
		if strings.Contains(err.Error(), "Cannot acquire directory lock") {
			_ = os.Remove(marker) // another process's store: leave it alone
			return nil, false, fmt.Errorf("store: open badger in %s: %w", dir, err)
		}
		why = err.Error()
	}
	log.Error("store cannot be opened; deleting it and starting with an empty store (a cache: every chunk can be fetched from S3 again)",
		"dir", dir, "reason", why)
	if err := resetDir(dir); err != nil {
		return nil, false, fmt.Errorf("store: reset damaged store in %s (%s): %w", dir, why, err)
	}
	if err := os.WriteFile(marker, nil, 0o600); err != nil {
		return nil, false, fmt.Errorf("store: %w", err)
	}
	db, err = openRecovered(bopts)
	if err != nil {
		return nil, false, fmt.Errorf("store: open badger in %s after reset: %w", dir, err)
	}
	return db, true, nil
}

// openDone removes the marker once the store is open and indexed.
func openDone(dir string, log *slog.Logger) {
	if err := os.Remove(filepath.Join(dir, openMarker)); err != nil {
		log.Warn("remove open marker", "err", err)
	}
}

// openRecovered is badger.Open with a panic in the calling goroutine turned
// into an error.
func openRecovered(opts badger.Options) (db *badger.DB, err error) {
	defer func() {
		if r := recover(); r != nil {
			db, err = nil, fmt.Errorf("badger panicked: %v", r)
		}
	}()
	return badger.Open(opts)
}

// checkTables opens and checksums every LSM table in dir as badger.Open
// would, in this goroutine, so a damaged table is an error here instead of
// a panic in one of badger's goroutines.
func checkTables(dir string, bopts badger.Options) error {
	tables, err := filepath.Glob(filepath.Join(dir, "*.sst"))
	if err != nil {
		return err
	}
	topts := table.Options{
		ReadOnly: true, BlockSize: bopts.BlockSize, BloomFalsePositive: bopts.BloomFalsePositive,
		ChkMode: options.OnTableAndBlockRead, Compression: bopts.Compression, ZSTDCompressionLevel: bopts.ZSTDCompressionLevel,
	}
	for _, f := range tables {
		if err := checkTable(f, topts); err != nil {
			return fmt.Errorf("LSM table %s is damaged: %w", filepath.Base(f), err)
		}
	}
	return nil
}

func checkTable(path string, topts table.Options) (err error) {
	mf, err := z.OpenMmapFile(path, os.O_RDONLY, 0)
	if err != nil && !errors.Is(err, z.NewFile) {
		return err
	}
	defer func() {
		if r := recover(); r != nil {
			err = fmt.Errorf("panic reading it: %v", r)
			_ = mf.Close(-1)
		}
	}()
	t, err := table.OpenTable(mf, topts)
	if err != nil {
		_ = mf.Close(-1)
		return err
	}
	return t.Close(-1) // the mapping, not DecrRef: that deletes the file
}

// resetDir deletes badger's files in dir (nothing else).
func resetDir(dir string) error {
	entries, err := os.ReadDir(dir)
	if err != nil {
		return err
	}
	var errs []error
	for _, e := range entries {
		if !e.IsDir() && badgerFile(e.Name()) {
			if err := os.Remove(filepath.Join(dir, e.Name())); err != nil && !errors.Is(err, os.ErrNotExist) {
				errs = append(errs, err)
			}
		}
	}
	return errors.Join(errs...)
}

// rebuildIndex indexes every chunk on disk with a key-only iteration,
// ordered by badger version so the eviction order after a restart follows
// write order (chunks moved by value-log GC got a new version and count as
// recent; reads since the last write are not remembered).
func (s *Store) rebuildIndex() error {
	recs, bad, err := s.scanChunks()
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

// diskChunk is a chunk scanChunks found on disk.
type diskChunk struct {
	key       string
	prefixLen int
	tenant    string
	version   uint64
	size      int64 // payload bytes, -1 if unknown
	parts     int
}

// scanChunks lists the chunks on disk in key order with a key-only
// iteration, their sizes worked out from what badger tells of each entry
// (-1 where that does not fit badger's format as we know it), and the keys
// to delete: malformed ones and stray parts.
func (s *Store) scanChunks() (recs []diskChunk, bad [][]byte, err error) {
	err = s.db.View(func(txn *badger.Txn) error {
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
				// Parts follow their chunk key in order (keys.go); the
				// payload is theirs. A stray part (its chunk deleted by a
				// delete cut short) goes; a chunk missing parts fails its
				// read.
				last := len(recs) - 1
				if last < 0 || recs[last].key != string(partChunkKey(k)) || recs[last].parts != p.part || !ok {
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
			recs = append(recs, diskChunk{string(k), p.prefixLen, p.id.Tenant, item.Version(), size, 0})
		}
		return nil
	})
	return recs, bad, err
}

// readValueLen reads the chunk value under key and returns the length of
// its verified payload.
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
