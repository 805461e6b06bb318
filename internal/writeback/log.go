package writeback

// The journal's log: numbered segment files to which records are appended
// and made durable in groups (group commit).
//
// A record is a 16-byte header, its meta (JSON, a logRecord) and, for a
// small body, the body itself:
//
//	magic    uint32  recordMagic
//	crc      uint32  CRC-32C of what follows: lengths, meta and body
//	metaLen  uint32
//	bodyLen  uint32
//
// all little-endian. A writer appends its record and waits until a sync
// covers it: the first waiter to find no sync under way syncs everything
// appended so far (the directory if a segment or a body file was created,
// then the segments written, fdatasync) and wakes every waiter it covered;
// the writers that appended meanwhile are covered by the next sync. So
// concurrent writers share their syncs, and a lone writer pays one
// fdatasync. A sync that fails makes the log refuse everything after it
// (what reached the disk is unknown): the journal must be opened again.
//
// Reading a segment stops at the first record that is short, of another
// magic or of a wrong checksum: the torn tail of a write that was never
// acknowledged (a record is acknowledged only once a sync that began after
// it was appended has returned, and that sync covered every record before
// it too).
//
// A segment is removed once it and every older one hold nothing the
// journal still uses (pins, counted per segment): never out of order, so
// that a drop recorded in a later segment is never lost while the version
// it drops is still in an earlier one.

import (
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"
)

const (
	recordMagic  = 0x62776364 // "dcwb"
	headerSize   = 16
	segmentExt   = ".log"
	segmentBytes = 8 << 20 // a segment is sealed once it passes this (smaller for a small limit: segmentSize)
	// inlineBytes is the largest body kept in the log itself (a quarter
	// of a smaller segment: segLog.inlineMax); larger ones (and multipart
	// uploads' parts) stream to files of their own. Inline, a body costs
	// one write into a segment prepared ahead and its share of a group's
	// fdatasync, which flushes data only; a file of its own costs a new
	// file's fdatasync (data and the file system's journal), its rename
	// and a sync of the directory, on every holder. ClickHouse's parts of
	// an INSERT of 10,000 rows are about 1.4 MB.
	inlineBytes = 2 << 20
	// maxBehind is how many sealed segments the oldest one still in use
	// may keep behind it before what it holds is copied forward.
	maxBehind = 4
)

var castagnoli = crc32.MakeTable(crc32.Castagnoli)

// errLogFailed is wrapped around the error that stopped the log.
var errLogFailed = errors.New("the write-back journal's log failed; the node must restart")

type segLog struct {
	dir      string
	segBytes int64 // segmentBytes (tests make it smaller)

	mu       sync.Mutex
	cond     *sync.Cond // on mu: synced moved, or err was set
	f        *os.File   // the segment appended to
	seq      uint64     // its number
	size     int64      // its length
	oldest   uint64     // the oldest segment on disk
	pins     map[uint64]int
	appended uint64 // records appended (a record's lsn is its number)
	synced   uint64 // records durable
	syncing  bool
	sealed   []*os.File // segments sealed since the last sync, to sync and close
	dirDirty bool       // a file was created or renamed since the last sync
	err      error      // sticky
	// next is segment seq+1 prepared ahead (written full of zeros and
	// synced, so that syncing what is written into it later changes no
	// metadata); preparing is set while that is under way.
	next      *os.File
	preparing bool
	// sizes are the lengths of the segment files; disk is their sum, and
	// the length of the one being prepared.
	sizes map[uint64]int64
	disk  int64
	// afterSync, when set, runs in the syncing goroutine once the
	// segments are synced (tests stop a "crash" there).
	afterSync func()
	// observeSync, when set, is told how long each sync took.
	observeSync func(time.Duration)
}

func segmentName(seq uint64) string { return fmt.Sprintf("%020d%s", seq, segmentExt) }

func (l *segLog) path(seq uint64) string { return filepath.Join(l.dir, segmentName(seq)) }

// segments lists the segment numbers in dir, oldest first.
func segments(dir string) ([]uint64, error) {
	names, err := os.ReadDir(dir)
	if err != nil {
		return nil, err
	}
	var out []uint64
	for _, d := range names {
		if base, ok := strings.CutSuffix(d.Name(), segmentExt); ok {
			if n, err := strconv.ParseUint(base, 10, 64); err == nil {
				out = append(out, n)
			}
		}
	}
	slices.Sort(out)
	return out, nil
}

// openLog starts a new segment after the ones in dir (oldest: the oldest
// of them); the older ones are only read and removed.
func openLog(dir string, oldest, last uint64, segBytes int64) (*segLog, error) {
	l := &segLog{dir: dir, segBytes: segBytes, oldest: oldest, seq: last + 1, pins: map[uint64]int{}, sizes: map[uint64]int64{}}
	if oldest == 0 {
		l.oldest = l.seq
	}
	for seq := l.oldest; seq < l.seq; seq++ {
		if fi, err := os.Stat(l.path(seq)); err == nil {
			l.sizes[seq] = fi.Size()
			l.disk += fi.Size()
		}
	}
	l.cond = sync.NewCond(&l.mu)
	f, err := os.OpenFile(l.path(l.seq), os.O_CREATE|os.O_EXCL|os.O_WRONLY, 0o640)
	if err != nil {
		return nil, err
	}
	l.f, l.dirDirty = f, true
	l.mu.Lock()
	l.prepareLocked()
	l.mu.Unlock()
	return l, nil
}

// prepareLocked prepares the next segment in the background: an fdatasync
// of records written over zeros already on disk is a flush of the data
// alone, where one of records appended also commits the file's new length
// (the file system's journal).
func (l *segLog) prepareLocked() {
	if l.next != nil || l.preparing || l.err != nil {
		return
	}
	l.preparing = true
	seq, size := l.seq+1, l.segBytes
	l.disk += size
	go func() {
		tmp := filepath.Join(l.dir, segmentName(seq)+".tmp")
		f, err := os.OpenFile(tmp, os.O_CREATE|os.O_TRUNC|os.O_WRONLY, 0o640)
		if err == nil {
			zeros := make([]byte, min(size, 1<<20))
			for off := int64(0); off < size && err == nil; off += int64(len(zeros)) {
				_, err = f.WriteAt(zeros[:min(int64(len(zeros)), size-off)], off)
			}
			if err == nil {
				err = fdatasync(f)
			}
		}
		l.mu.Lock()
		defer l.mu.Unlock()
		l.preparing = false
		l.cond.Broadcast() // close waits for it
		if err == nil && l.seq+1 == seq && l.err == nil {
			err = os.Rename(tmp, l.path(seq)) // the directory is synced with the first records in it
			if err == nil {
				l.next, l.sizes[seq] = f, size
				return
			}
		}
		l.disk -= size
		if f != nil {
			_ = f.Close()
		}
		_ = os.Remove(tmp) // rotated past it meanwhile, or it failed: the next rotation creates one
	}()
}

// encodeRecord is a record of meta and body.
func encodeRecord(meta, body []byte) []byte {
	b := make([]byte, headerSize+len(meta)+len(body))
	binary.LittleEndian.PutUint32(b[0:], recordMagic)
	binary.LittleEndian.PutUint32(b[8:], uint32(len(meta)))
	binary.LittleEndian.PutUint32(b[12:], uint32(len(body)))
	copy(b[headerSize:], meta)
	copy(b[headerSize+len(meta):], body)
	binary.LittleEndian.PutUint32(b[4:], crc32.Checksum(b[8:], castagnoli))
	return b
}

// appended is where a record went.
type appended struct {
	lsn     uint64
	seg     uint64
	bodyOff int64 // offset of its body in the segment
}

// append writes rec (encodeRecord's, with a meta of metaLen bytes) at the
// end of the log, pinning its segment pins times; dirDirty says the
// directory changed for it (a body file renamed into place) and must be
// synced with it.
func (l *segLog) append(rec []byte, metaLen int, pins int, dirDirty bool) (appended, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.err != nil {
		return appended{}, l.err
	}
	if l.size > 0 && l.size+int64(len(rec)) > l.segBytes {
		if err := l.rotateLocked(); err != nil {
			return appended{}, err
		}
	}
	off := l.size
	if _, err := l.f.WriteAt(rec, off); err != nil {
		l.err = fmt.Errorf("%w: %w", errLogFailed, err)
		l.cond.Broadcast()
		return appended{}, l.err
	}
	l.size += int64(len(rec))
	if l.size > l.sizes[l.seq] { // appended, or past a prepared length
		l.disk += l.size - l.sizes[l.seq]
		l.sizes[l.seq] = l.size
	}
	l.appended++
	l.pins[l.seq] += pins
	l.dirDirty = l.dirDirty || dirDirty
	return appended{lsn: l.appended, seg: l.seq, bodyOff: off + headerSize + int64(metaLen)}, nil
}

func (l *segLog) rotateLocked() error {
	f := l.next
	if f == nil {
		var err error
		if f, err = os.OpenFile(l.path(l.seq+1), os.O_CREATE|os.O_EXCL|os.O_WRONLY, 0o640); err != nil {
			l.err = fmt.Errorf("%w: %w", errLogFailed, err)
			l.cond.Broadcast()
			return l.err
		}
	}
	l.sealed = append(l.sealed, l.f)
	l.f, l.next, l.seq, l.size, l.dirDirty = f, nil, l.seq+1, 0, true
	l.prepareLocked()
	return nil
}

// wait returns once record lsn is durable (or the log failed).
func (l *segLog) wait(lsn uint64) error {
	l.mu.Lock()
	defer l.mu.Unlock()
	for l.synced < lsn && l.err == nil {
		if l.syncing {
			l.cond.Wait()
			continue
		}
		l.syncing = true
		target, sealed, cur, dirDirty, observe := l.appended, l.sealed, l.f, l.dirDirty, l.observeSync
		l.sealed, l.dirDirty = nil, false
		l.mu.Unlock()
		start := time.Now()
		err := syncFiles(l.dir, dirDirty, sealed, cur)
		if observe != nil {
			observe(time.Since(start))
		}
		if err == nil && l.afterSync != nil {
			l.afterSync()
		}
		l.mu.Lock()
		l.syncing = false
		if err != nil && l.err == nil {
			l.err = fmt.Errorf("%w: %w", errLogFailed, err)
		} else if err == nil {
			l.synced = max(l.synced, target)
		}
		l.cond.Broadcast()
	}
	return l.err
}

// syncFiles makes the directory (if it changed), the sealed segments
// (closing them) and the current one durable.
func syncFiles(dir string, dirDirty bool, sealed []*os.File, cur *os.File) error {
	var err error
	if dirDirty {
		err = syncDir(dir)
	}
	for _, f := range sealed {
		if err == nil {
			err = fdatasync(f)
		}
		_ = f.Close()
	}
	if err == nil {
		err = fdatasync(cur)
	}
	return err
}

// pin and unpin count what the journal uses in segment seg; unpin removes
// the segments nothing uses any more, oldest first.
func (l *segLog) pin(seq uint64, n int) {
	if seq == 0 || n == 0 {
		return
	}
	l.mu.Lock()
	l.pins[seq] += n
	l.mu.Unlock()
}

func (l *segLog) unpin(seq uint64, n int) {
	if seq == 0 || n == 0 {
		return
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	l.pins[seq] -= n
	if l.pins[seq] <= 0 {
		delete(l.pins, seq)
	}
	l.collectLocked()
}

func (l *segLog) collectLocked() {
	for l.oldest < l.seq && l.pins[l.oldest] == 0 {
		_ = os.Remove(l.path(l.oldest))
		l.disk -= l.sizes[l.oldest]
		delete(l.sizes, l.oldest)
		l.oldest++
		l.dirDirty = true // with the next sync; a segment that comes back holds only what is dropped
	}
}

// diskBytes is the length of the segment files (and of the one being
// prepared).
func (l *segLog) diskBytes() int64 {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.disk
}

// inlineMax is the largest body appended to this log with its record.
func (l *segLog) inlineMax() int64 { return min(inlineBytes, l.segBytes/4) }

// segmentSize is the segment length for a journal of limit bytes: at most
// a sixteenth of it (what the log's files take beyond the bodies counts in
// the node's disk bound), within 1 and 8 MiB.
func segmentSize(limit int64) int64 {
	return min(segmentBytes, max(1<<20, limit/16))
}

// behind is the oldest segment still used, when more than maxBehind
// sealed segments follow it (its content should be copied forward).
func (l *segLog) behind() (uint64, bool) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.oldest, l.seq-l.oldest > maxBehind && l.pins[l.oldest] > 0
}

// close closes the files (tests; a node's journal lives as long as its
// process).
func (l *segLog) close() error {
	l.mu.Lock()
	defer l.mu.Unlock()
	for l.preparing {
		l.cond.Wait()
	}
	for _, f := range l.sealed {
		_ = f.Close()
	}
	l.sealed = nil
	if l.next != nil {
		_ = l.next.Close()
	}
	if l.err == nil {
		l.err = errors.New("the journal is closed")
	}
	l.cond.Broadcast()
	return l.f.Close()
}

// readSegment calls fn with each whole record of segment seq, in order,
// and the offset of its body; it stops at the first torn or corrupt one
// and returns the length read whole.
func readSegment(path string, fn func(meta []byte, bodyOff int64, bodyLen int64)) (int64, error) {
	f, err := os.Open(path)
	if err != nil {
		return 0, err
	}
	defer f.Close()
	data, err := io.ReadAll(f)
	if err != nil {
		return 0, err
	}
	var off int64
	for int64(len(data))-off >= headerSize {
		h := data[off : off+headerSize]
		if binary.LittleEndian.Uint32(h[0:]) != recordMagic {
			break
		}
		metaLen, bodyLen := int64(binary.LittleEndian.Uint32(h[8:])), int64(binary.LittleEndian.Uint32(h[12:]))
		end := off + headerSize + metaLen + bodyLen
		if end > int64(len(data)) || crc32.Checksum(data[off+8:end], castagnoli) != binary.LittleEndian.Uint32(h[4:]) {
			break
		}
		fn(data[off+headerSize:off+headerSize+metaLen], off+headerSize+metaLen, bodyLen)
		off = end
	}
	return off, nil
}
