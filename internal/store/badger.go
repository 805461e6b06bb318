package store

import (
	"fmt"
	"log/slog"
	"strings"

	"github.com/dgraph-io/badger/v4"
	"github.com/dgraph-io/badger/v4/options"
)

const (
	valueThreshold = 1 << 10 // chunk payloads go to the value log, metadata stays in the LSM tree
	minVlogFile    = 1 << 20 // badger's lower bound for ValueLogFileSize
	maxVlogFile    = 1 << 30
	minMemTable    = 1 << 20
	maxMemTable    = 64 << 20
)

func clamp(v, lo, hi int64) int64 { return max(lo, min(v, hi)) }

// vlogFileSize: DiskBytes/16, so value-log files rotate often enough that
// garbage is spread over files GC can rewrite (it never touches the file
// being written) and one file is a small share of the bound.
func vlogFileSize(diskBytes int64) int64 { return clamp(diskBytes/16, minVlogFile, maxVlogFile) }

// memTableSize: the LSM tree holds only keys and value pointers, so a small
// memtable is plenty; the store forces flushes itself (see forceFlush).
func memTableSize(diskBytes int64) int64 { return clamp(diskBytes/256, minMemTable, maxMemTable) }

func badgerOptions(dir string, diskBytes int64, log *slog.Logger) badger.Options {
	return badger.DefaultOptions(dir).
		WithLogger(badgerLogger{log}).
		WithValueThreshold(valueThreshold).
		WithNumVersionsToKeep(1).
		WithValueLogFileSize(vlogFileSize(diskBytes)).
		WithMemTableSize(memTableSize(diskBytes)).
		WithNumMemtables(3).
		WithBlockCacheSize(16 << 20).
		WithIndexCacheSize(16 << 20).
		WithNumCompactors(2).
		// ReplaceMeta reads and then writes: a write of the key committed
		// in between makes it fail with ErrConflict (and stand). Other
		// transactions read nothing and never conflict.
		WithDetectConflicts(true).
		WithMetricsEnabled(false). // no process-global expvar registrations
		WithChecksumVerificationMode(options.OnBlockRead).
		WithCompactL0OnClose(true).
		WithSyncWrites(false) // a cache: losing the last writes on a crash only costs refetches
}

// badgerLogger routes badger's logs to slog at warning level and above.
type badgerLogger struct{ l *slog.Logger }

func msg(format string, args []any) string {
	return strings.TrimSpace(fmt.Sprintf(format, args...))
}

func (b badgerLogger) Errorf(format string, args ...any)   { b.l.Error(msg(format, args)) }
func (b badgerLogger) Warningf(format string, args ...any) { b.l.Warn(msg(format, args)) }
func (badgerLogger) Infof(string, ...any)                  {}
func (badgerLogger) Debugf(string, ...any)                 {}
