// Package writeback keeps the objects a node holds for WriteBack and
// Transient policies (issue 27): written to this node's disk and fsync'd
// before the write is acknowledged, never evicted, bounded by a pinned
// limit, and (WriteBack, on the node that persists the key) sent to S3 in
// the background, in order per key (persist.go).
//
// On disk, under the journal's directory, versions are records in a log
// of numbered segments (log.go), appended and made durable in groups: a
// write is acknowledged once one sync covered its record, and concurrent
// writers share that sync. A version's record holds its Entry and, up to
// inlineBytes (2 MiB, less for small segments), its body; a larger body
// streams to a file of its own,
//
//	<object id>-<version>.data
//
// synced before its record is appended (the directory with the record),
// where the object id is the SHA-256 of tenant, bucket and key (hex, 32
// digits). Later records change a version's entry (holders, a done
// delete) or drop it. Opening the journal replays the segments in order:
// of each key the newest version put and not dropped counts; a torn
// record at a segment's end (a write never acknowledged) ends its replay,
// and bodies no version uses are removed, as are *.tmp files. Entries of
// the layout before the log (<object id>-<version>.json beside the .data)
// are read too. Of the versions of one key only the newest counts; older
// ones are removed once no upload of theirs is under way.
package writeback

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/distcache/distcache/internal/chunk"
)

// Name is an object of a tenant.
type Name struct {
	Tenant string `json:"tenant"`
	Bucket string `json:"bucket"`
	Key    string `json:"key"`
}

// Op is what a version does to its key.
type Op string

const (
	OpPut    Op = "put"
	OpDelete Op = "delete" // a delete of a key S3 may hold (WriteBack)
)

// Entry is one version of an object in the journal.
type Entry struct {
	Name
	// Version orders the writes of one key: the node that took the write
	// numbers it (NextVersion); a higher version always wins.
	Version uint64 `json:"version"`
	Op      Op     `json:"op"`
	Size    int64  `json:"size"`
	// ETag is the body's MD5 (hex, in quotes), as S3 gives it for a
	// single PUT (ETags are passed around as S3 returns them), or for a
	// multipart upload S3's multipart ETag (MultipartETag).
	ETag string `json:"etag,omitempty"`
	// Parts are the sizes of a multipart upload's parts, in order: the
	// body is sent to S3 in the same parts, so S3 gives the same ETag.
	Parts        []int64   `json:"parts,omitempty"`
	ContentType  string    `json:"contentType,omitempty"`
	LastModified time.Time `json:"lastModified"`
	// Headers are the other headers S3 is to store with the version
	// (user metadata, Cache-Control, ...).
	Headers chunk.Headers `json:"headers,omitempty"`
	// Transient entries never go to S3; Expires, when set, ends them.
	Transient bool      `json:"transient,omitempty"`
	Expires   time.Time `json:"expires,omitzero"`
	// Done marks a WriteBack delete S3 has applied, kept until Expires so
	// a late copy of an older version of the key is known to be older.
	Done bool `json:"done,omitempty"`
	// Holders are the nodes that keep this version (by member name), the
	// one that took the write first.
	Holders []string `json:"holders,omitempty"`
}

// StoredHeaders are the headers S3 answers for the version once it has
// it: the writer's, and for a version that goes to S3 the cache's own
// user metadata (VersionMetadata), so that a read before and after the
// upload sees the same.
func (e Entry) StoredHeaders() chunk.Headers {
	if e.Transient || e.Op != OpPut {
		return e.Headers
	}
	h := make(chunk.Headers, len(e.Headers)+1)
	maps.Copy(h, e.Headers)
	return h.WithUserMetadata(map[string]string{VersionMetadata: strconv.FormatUint(e.Version, 10)})
}

// Errors of Write.
var (
	// ErrFull: the pinned limit would be passed (S3 SlowDown to the client).
	ErrFull = errors.New("write-back space is full")
	// ErrBadBody: the body was not Size bytes, or not of the ETag given.
	ErrBadBody = errors.New("write-back body does not match its size or ETag")
)

// Journal is the dirty and transient objects of one node.
type Journal struct {
	dir   string
	limit int64
	now   func() time.Time
	log   *segLog

	mu   sync.Mutex
	used int64 // bytes of bodies on disk (and reserved for those being written)
	// inline is the bytes of the bodies held in the log's segments (of
	// used, those the segments' length counts already).
	inline int64
	keys   map[Name]*keyState
	clock  uint64 // the last version numbered here or seen
	// places are where the versions held (latest and old) are on disk.
	places map[*Entry]place
	// changed is closed (and replaced) when there may be new work for the
	// persister.
	changed chan struct{}
	// queue is the keys that may have a version to persist (queue.go).
	queue pickQueue
	// relocating is set while a segment's content is copied forward.
	relocating bool
	// lastWrite is when the last held write was taken (yield.go).
	lastWrite  time.Time
	background sync.WaitGroup
	// late are the looks at applied deletes' keys still to come, at
	// lateSteps after each was applied (late.go).
	late      minHeap[lateCheck]
	lateSteps []time.Duration
}

// place is where a version is on disk.
type place struct {
	seg uint64 // the segment holding its body; 0: the body's own file (<base>.data)
	off int64  // the body's offset in seg
	// meta is the segment of the version's newest record; 0: a .json file
	// of the layout before the log.
	meta uint64
}

// pins is how many times p pins each of its segments.
func (p place) pin(l *segLog, op Op) {
	if op == OpPut {
		l.pin(p.seg, 1)
	}
	l.pin(p.meta, 1)
}

func (p place) unpin(l *segLog, op Op) {
	if op == OpPut {
		l.unpin(p.seg, 1)
	}
	l.unpin(p.meta, 1)
}

// logRecord is a record's meta (log.go).
type logRecord struct {
	Kind  recordKind `json:"k"`
	Entry *Entry     `json:"e"`
	// Where an update's body is when it is not in the record: its own
	// file, or Off in segment Seg.
	File bool   `json:"file,omitempty"`
	Seg  uint64 `json:"seg,omitempty"`
	Off  int64  `json:"off,omitempty"`
	// Moved marks a drop of a version handed to other holders (HandOver):
	// not done with, so a copy of it that comes back later is kept.
	Moved bool `json:"moved,omitempty"`
}

type recordKind string

const (
	recPut    recordKind = "put"    // a version written (Write)
	recUpdate recordKind = "update" // a version's entry changed, or its record copied forward
	recDrop   recordKind = "drop"   // the version (and older) dropped
)

type keyState struct {
	latest *Entry
	// old are superseded versions still on disk: an upload of one of
	// them is under way (inflight), or readers hold their file.
	old []*Entry
	// dropped is the newest version Drop was told of: a copy of it (or
	// an older one) that arrives later is done with already.
	dropped   uint64
	droppedAt time.Time
	// inflight is the version being sent to S3, if any.
	inflight *Entry
	// retryAt holds back the next attempt after a failure.
	retryAt  time.Time
	failures int
	// parked: the key waits in one of the queue's parked lists (queue.go).
	parked bool
}

// Open opens (creating) the journal in dir, bounded by limit bytes of
// bodies, and recovers what a previous process acknowledged.
func Open(dir string, limit int64) (*Journal, error) {
	if err := os.MkdirAll(dir, 0o750); err != nil {
		return nil, err
	}
	j := &Journal{dir: dir, limit: limit, now: time.Now, keys: map[Name]*keyState{}, places: map[*Entry]place{},
		changed: make(chan struct{}), lateSteps: LateUploadChecks}
	if err := j.recover(); err != nil {
		return nil, err
	}
	return j, nil
}

// ObserveSyncs has observe told how long each of the log's syncs takes
// (an fdatasync a group of writes waits for: the disk's flush latency).
func (j *Journal) ObserveSyncs(observe func(time.Duration)) {
	j.log.mu.Lock()
	j.log.observeSync = observe
	j.log.mu.Unlock()
}

// Close closes the journal's files once its background work is done;
// Write fails after it.
func (j *Journal) Close() error {
	j.background.Wait()
	return j.log.close()
}

func (j *Journal) state(n Name) *keyState {
	ks := j.keys[n]
	if ks == nil {
		ks = &keyState{}
		j.keys[n] = ks
	}
	return ks
}

func fileBase(e *Entry) string {
	h := sha256.Sum256([]byte(e.Tenant + "\x00" + e.Bucket + "\x00" + e.Key))
	return hex.EncodeToString(h[:16]) + "-" + fmt.Sprintf("%020d", e.Version)
}

func (j *Journal) path(e *Entry, ext string) string { return filepath.Join(j.dir, fileBase(e)+ext) }

// NextVersion numbers a write this node takes: above every version it
// numbered or stored, and above the clock (in nanoseconds), so versions
// from one node only grow and those of a node that took over a key carry
// on above what it holds.
func (j *Journal) NextVersion() uint64 {
	j.mu.Lock()
	defer j.mu.Unlock()
	j.clock = max(j.clock+1, uint64(j.now().UnixNano()))
	return j.clock
}

// Write stores version e of an object with its body (Size bytes) or, for
// OpDelete, the delete, durably: when it returns nil the version survives
// a crash. A version not newer than the one held is accepted and dropped
// (a retried or late copy). The ETag is computed; if e carries one (a
// copy from another node) the body must match it. It returns the entry as
// stored.
func (j *Journal) Write(e Entry, body io.Reader) (Entry, error) {
	j.noteWrite()
	if e.Op == OpDelete {
		e.Size, e.ETag = 0, ""
	}
	if e.Op == OpPut {
		if err := j.reserve(e.Size); err != nil {
			return Entry{}, err
		}
	}
	stored, err := j.write(&e, body)
	if err != nil {
		if e.Op == OpPut {
			j.release(e.Size)
		}
		return Entry{}, err
	}
	return stored, nil
}

// write stores e and returns, copied under the lock, the entry held for
// its key. A small body goes into the log with its entry, in one record;
// a larger one to a file of its own (synced) and its entry into the log.
func (j *Journal) write(e *Entry, body io.Reader) (Entry, error) {
	j.relocate()
	if held, ok := j.superseded(e); ok {
		// A late or repeated copy: nothing to write (its body is read
		// and checked all the same, as the caller expects).
		if e.Op == OpPut {
			sum, err := copySummed(io.Discard, body, e.Size, e.Parts)
			if err == nil && e.ETag != "" && e.ETag != sum {
				err = ErrBadBody
			}
			if err != nil {
				return Entry{}, err
			}
			if held.Version == e.Version && held.Name == e.Name && held.ETag == "" {
				held.ETag = sum
			}
			j.release(e.Size)
		}
		return held, nil
	}
	var inline []byte
	file := e.Op == OpPut && e.Size > j.log.inlineMax()
	switch {
	case file:
		sum, err := j.writeBody(e, body)
		if err != nil {
			return Entry{}, err
		}
		if e.ETag != "" && e.ETag != sum {
			_ = os.Remove(j.path(e, ".data"))
			return Entry{}, ErrBadBody
		}
		e.ETag = sum
	case e.Op == OpPut:
		buf := bytes.NewBuffer(make([]byte, 0, e.Size))
		sum, err := copySummed(buf, body, e.Size, e.Parts)
		if err != nil {
			return Entry{}, err
		}
		if e.ETag != "" && e.ETag != sum {
			return Entry{}, ErrBadBody
		}
		e.ETag, inline = sum, buf.Bytes()
	}
	meta, err := json.Marshal(logRecord{Kind: recPut, Entry: e, File: file})
	if err != nil {
		return Entry{}, err
	}
	p := place{}
	pins := 1 // the record, as e's newest
	if e.Op == OpPut && !file {
		pins = 2 // and its body
	}
	a, err := j.log.append(encodeRecord(meta, inline), len(meta), pins, file)
	if err == nil {
		err = j.log.wait(a.lsn)
	}
	if err != nil {
		if file {
			_ = os.Remove(j.path(e, ".data"))
		}
		if a.seg != 0 {
			j.log.unpin(a.seg, pins)
		}
		return Entry{}, err
	}
	p.meta = a.seg
	if e.Op == OpPut && !file {
		p.seg, p.off = a.seg, a.bodyOff
	}
	j.mu.Lock()
	defer j.mu.Unlock()
	j.clock = max(j.clock, e.Version)
	ks := j.state(e.Name)
	switch {
	case ks.latest != nil && ks.latest.Version == e.Version:
		// The same version again (a retried copy): the version held
		// keeps its place (a body file was replaced by the same bytes);
		// only the space reserved for it goes back.
		p.unpin(j.log, e.Op)
		if e.Op == OpPut {
			j.used -= e.Size
		}
		return *ks.latest, nil
	case ks.latest != nil && ks.latest.Version > e.Version:
		// Older than what is held (a late copy): it goes.
		j.dropUnheldLocked(e, p)
		return *ks.latest, nil
	case ks.latest == nil && ks.dropped >= e.Version:
		// Dropped before it arrived: S3 had it before this copy did (a
		// persister can be faster than the copies of a write).
		j.dropUnheldLocked(e, p)
		return *e, nil
	}
	if prev := ks.latest; prev != nil {
		ks.old = append(ks.old, prev)
	}
	ks.latest = e
	j.places[e] = p
	if e.Op == OpPut && p.seg != 0 {
		j.inline += e.Size
	}
	ks.retryAt, ks.failures = time.Time{}, 0
	j.enqueueLocked(e.Name, ks)
	if e.Done && e.Op == OpDelete {
		// An applied delete handed over: its new holder looks for late
		// uploads too (late.go).
		j.scheduleLateLocked(e)
	}
	j.collectLocked(e.Name, ks)
	j.signal()
	return *e, nil
}

// superseded reports the entry held for e's key when e would be dropped
// on arrival (a version not newer than the one held, or dropped already),
// so that nothing is written for it.
func (j *Journal) superseded(e *Entry) (Entry, bool) {
	j.mu.Lock()
	defer j.mu.Unlock()
	ks := j.keys[e.Name]
	switch {
	case ks == nil:
		return Entry{}, false
	case ks.latest != nil && ks.latest.Version >= e.Version:
		return *ks.latest, true
	case ks.latest == nil && ks.dropped >= e.Version:
		return *e, true
	}
	return Entry{}, false
}

func (j *Journal) reserve(n int64) error {
	j.mu.Lock()
	defer j.mu.Unlock()
	if j.used+n > j.limit {
		return ErrFull
	}
	j.used += n
	return nil
}

func (j *Journal) release(n int64) {
	j.mu.Lock()
	j.used -= n
	j.mu.Unlock()
}

// Used is what the journal takes of the node's disk bound: the log's
// segment files (records, small bodies, and what they still hold of
// versions dropped), the large bodies' files and the bodies being written.
func (j *Journal) Used() int64 {
	j.mu.Lock()
	defer j.mu.Unlock()
	return j.used - j.inline + j.log.diskBytes()
}

// Pinned is the bytes of the bodies held (and being written): what the
// pinned limit bounds. Used is what the journal's files take on disk.
func (j *Journal) Pinned() int64 {
	j.mu.Lock()
	defer j.mu.Unlock()
	return j.used
}

// Get is the newest version of n held here: a put, or a delete (S3 may
// still hold an older object; the cache serves it as gone).
func (j *Journal) Get(n Name) (Entry, bool) {
	j.mu.Lock()
	defer j.mu.Unlock()
	ks := j.keys[n]
	if ks == nil || ks.latest == nil || j.expiredLocked(ks.latest) {
		return Entry{}, false
	}
	return *ks.latest, true
}

func (j *Journal) expiredLocked(e *Entry) bool {
	return (e.Transient || e.Done) && !e.Expires.IsZero() && !j.now().Before(e.Expires)
}

// Close closes the file the body is read from.
func (b *Body) Close() error { return b.f.Close() }

// heldLocked finds version v of n among the versions on disk.
func (j *Journal) heldLocked(n Name, v uint64) (*Entry, place, bool) {
	ks := j.keys[n]
	if ks == nil {
		return nil, place{}, false
	}
	for _, e := range append([]*Entry{ks.latest}, ks.old...) {
		if e != nil && e.Version == v {
			p, ok := j.places[e]
			return e, p, ok
		}
	}
	return nil, place{}, false
}

// List is the newest version of every key of tenant's bucket under prefix
// (deletes included: a listing hides the key), sorted by key.
func (j *Journal) List(tenant, bucket, prefix string) []Entry {
	j.mu.Lock()
	defer j.mu.Unlock()
	var out []Entry
	for n, ks := range j.keys {
		if n.Tenant == tenant && n.Bucket == bucket && strings.HasPrefix(n.Key, prefix) && ks.latest != nil && !j.expiredLocked(ks.latest) {
			out = append(out, *ks.latest)
		}
	}
	slices.SortFunc(out, func(a, b Entry) int { return strings.Compare(a.Key, b.Key) })
	return out
}

// Entries is every newest version held, for handing to other nodes.
func (j *Journal) Entries() []Entry {
	j.mu.Lock()
	defer j.mu.Unlock()
	out := make([]Entry, 0, len(j.keys))
	for _, ks := range j.keys {
		if ks.latest != nil {
			out = append(out, *ks.latest)
		}
	}
	slices.SortFunc(out, func(a, b Entry) int { return compareVersions(a.Version, b.Version) })
	return out
}

func compareVersions(a, b uint64) int {
	switch {
	case a < b:
		return -1
	case a > b:
		return 1
	}
	return 0
}

// ErrBusy: SetHolders found the version being persisted.
var ErrBusy = errors.New("the version is being persisted; try again")

// droppedLife is how long a key's dropped version is remembered after its
// copies are gone: longer than a write's copies can take to arrive.
const droppedLife = 10 * time.Minute

// String names a version in logs.
func (e Entry) String() string {
	return e.Tenant + "/" + e.Bucket + "/" + e.Key + "@" + strconv.FormatUint(e.Version, 10)
}

// signal wakes the persister's idle workers; j.mu is held.
func (j *Journal) signal() {
	close(j.changed)
	j.changed = make(chan struct{})
}

// changes is closed at the next signal.
func (j *Journal) changes() <-chan struct{} {
	j.mu.Lock()
	defer j.mu.Unlock()
	return j.changed
}
