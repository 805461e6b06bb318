// Package writeback keeps the objects a node holds for WriteBack and
// Transient policies (issue 27): written to this node's disk and fsync'd
// before the write is acknowledged, never evicted, bounded by a pinned
// limit, and (WriteBack, on the node that persists the key) sent to S3 in
// the background, in order per key (persist.go).
//
// On disk, under the journal's directory, each version of an object is two
// files named by the object and its version:
//
//	<object id>-<version>.data   the body
//	<object id>-<version>.json   the Entry, written once the body is synced
//
// where the object id is the SHA-256 of tenant, bucket and key (hex, 32
// digits). A version whose .json is missing or unreadable was never
// acknowledged and is removed when the journal opens, as are *.tmp files.
// Of the versions of one key only the newest counts; older ones are
// removed once no upload of theirs is under way.
package writeback

import (
	"crypto/md5"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"
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

	mu    sync.Mutex
	used  int64 // bytes of bodies on disk (and reserved for those being written)
	keys  map[Name]*keyState
	clock uint64 // the last version numbered here or seen
	// changed is closed (and replaced) when there may be new work for the
	// persister.
	changed chan struct{}
}

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
}

// Open opens (creating) the journal in dir, bounded by limit bytes of
// bodies, and recovers what a previous process acknowledged.
func Open(dir string, limit int64) (*Journal, error) {
	if err := os.MkdirAll(dir, 0o750); err != nil {
		return nil, err
	}
	j := &Journal{dir: dir, limit: limit, now: time.Now, keys: map[Name]*keyState{}, changed: make(chan struct{})}
	if err := j.recover(); err != nil {
		return nil, err
	}
	return j, nil
}

// recover reads every complete version, keeps the newest of each key and
// removes the rest and anything half-written.
func (j *Journal) recover() error {
	names, err := os.ReadDir(j.dir)
	if err != nil {
		return err
	}
	complete := map[string]bool{}
	for _, d := range names {
		name := d.Name()
		switch {
		case strings.HasSuffix(name, ".tmp"):
			_ = os.Remove(filepath.Join(j.dir, name))
		case strings.HasSuffix(name, ".json"):
			base := strings.TrimSuffix(name, ".json")
			e, err := j.readEntry(base)
			if err != nil {
				_ = os.Remove(filepath.Join(j.dir, name))
				continue
			}
			complete[base] = true
			j.clock = max(j.clock, e.Version)
			ks := j.state(e.Name)
			if ks.latest == nil || e.Version > ks.latest.Version {
				if ks.latest != nil {
					j.removeFiles(ks.latest)
				}
				ks.latest = e
			} else {
				j.removeFiles(e)
			}
		}
	}
	// Bodies without an entry were never acknowledged.
	for _, d := range names {
		if base, ok := strings.CutSuffix(d.Name(), ".data"); ok && !complete[base] {
			_ = os.Remove(filepath.Join(j.dir, d.Name()))
		}
	}
	for _, ks := range j.keys {
		if ks.latest != nil && ks.latest.Op == OpPut {
			j.used += ks.latest.Size
		}
	}
	return nil
}

func (j *Journal) readEntry(base string) (*Entry, error) {
	b, err := os.ReadFile(filepath.Join(j.dir, base+".json"))
	if err != nil {
		return nil, err
	}
	e := &Entry{}
	if err := json.Unmarshal(b, e); err != nil {
		return nil, err
	}
	if base != fileBase(e) {
		return nil, fmt.Errorf("entry %s names another object", base)
	}
	if e.Op == OpPut {
		fi, err := os.Stat(filepath.Join(j.dir, base+".data"))
		if err != nil || fi.Size() != e.Size {
			return nil, fmt.Errorf("entry %s: body missing or of another size", base)
		}
	}
	return e, nil
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
// its key.
func (j *Journal) write(e *Entry, body io.Reader) (Entry, error) {
	if e.Op == OpPut {
		sum, err := j.writeBody(e, body)
		if err != nil {
			return Entry{}, err
		}
		if e.ETag != "" && e.ETag != sum {
			_ = os.Remove(j.path(e, ".data"))
			return Entry{}, ErrBadBody
		}
		e.ETag = sum
	}
	b, err := json.Marshal(e)
	if err != nil {
		return Entry{}, err
	}
	if err := writeSynced(j.path(e, ".json"), b); err != nil {
		_ = os.Remove(j.path(e, ".data"))
		return Entry{}, err
	}
	if err := syncDir(j.dir); err != nil {
		return Entry{}, err
	}
	j.mu.Lock()
	defer j.mu.Unlock()
	j.clock = max(j.clock, e.Version)
	ks := j.state(e.Name)
	switch {
	case ks.latest != nil && ks.latest.Version == e.Version:
		// The same version again (a retried copy): its files are the
		// ones held; only the space reserved for it goes back.
		if e.Op == OpPut {
			j.used -= e.Size
		}
		return *ks.latest, nil
	case ks.latest != nil && ks.latest.Version > e.Version:
		// Older than what is held (a late copy): it goes.
		j.dropLocked(e)
		return *ks.latest, nil
	case ks.latest == nil && ks.dropped >= e.Version:
		// Dropped before it arrived: S3 had it before this copy did (a
		// persister can be faster than the copies of a write).
		j.dropLocked(e)
		return *e, nil
	}
	if prev := ks.latest; prev != nil {
		ks.old = append(ks.old, prev)
	}
	ks.latest = e
	ks.retryAt, ks.failures = time.Time{}, 0
	j.collectLocked(e.Name, ks)
	j.signal()
	return *e, nil
}

// writeBody writes the body to the version's .data file and syncs it,
// returning its MD5.
func (j *Journal) writeBody(e *Entry, body io.Reader) (string, error) {
	f, err := os.CreateTemp(j.dir, fileBase(e)+".data.*.tmp") // copies of one version may arrive together
	if err != nil {
		return "", err
	}
	tmp := f.Name()
	sum, err := copySummed(f, body, e.Size, e.Parts)
	if err == nil {
		err = f.Sync()
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = os.Rename(tmp, j.path(e, ".data"))
	}
	if err != nil {
		_ = os.Remove(tmp)
		return "", err
	}
	return sum, nil
}

// copySummed copies exactly size bytes of body to w and returns the ETag
// S3 gives them: their MD5, or with parts (their sizes, adding up to size)
// the multipart ETag of those parts. Any other length is ErrBadBody.
func copySummed(w io.Writer, body io.Reader, size int64, parts []int64) (string, error) {
	multipart := len(parts) > 0
	if !multipart {
		parts = []int64{size}
	}
	var total int64
	sums := make([][]byte, len(parts))
	for i, n := range parts {
		h := md5.New()
		got, err := io.Copy(io.MultiWriter(w, h), io.LimitReader(body, n))
		if err != nil {
			return "", err
		}
		if got != n {
			return "", ErrBadBody
		}
		total += n
		sums[i] = h.Sum(nil)
	}
	if extra, err := io.Copy(io.Discard, io.LimitReader(body, 1)); err != nil {
		return "", err
	} else if extra != 0 || total != size {
		return "", ErrBadBody
	}
	if !multipart {
		return `"` + hex.EncodeToString(sums[0]) + `"`, nil
	}
	return MultipartETag(sums), nil
}

func writeSynced(path string, b []byte) error {
	f, err := os.CreateTemp(filepath.Dir(path), filepath.Base(path)+".*.tmp")
	if err != nil {
		return err
	}
	tmp := f.Name()
	_, err = f.Write(b)
	if err == nil {
		err = f.Sync()
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = os.Rename(tmp, path)
	}
	if err != nil {
		_ = os.Remove(tmp)
	}
	return err
}

func syncDir(dir string) error {
	d, err := os.Open(dir)
	if err != nil {
		return err
	}
	defer d.Close()
	return d.Sync()
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

// Used is the bytes of bodies on disk (and being written): what the
// journal takes of the node's disk bound.
func (j *Journal) Used() int64 {
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

// Open opens the body of version e for reading. The file stays readable
// after the version is superseded or persisted (it is only unlinked).
func (j *Journal) OpenBody(e Entry) (*os.File, error) {
	if e.Op != OpPut {
		return nil, fmt.Errorf("version %d of %s is a delete", e.Version, e.Key)
	}
	return os.Open(j.path(&e, ".data"))
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

// SetHolders records that version e is kept by holders now (after the
// ring changed and copies moved), if it is still the newest of its key.
func (j *Journal) SetHolders(e Entry, holders []string) error {
	j.mu.Lock()
	defer j.mu.Unlock()
	ks := j.keys[e.Name]
	if ks == nil || ks.latest == nil || ks.latest.Version != e.Version {
		return nil
	}
	if ks.inflight == ks.latest {
		return ErrBusy // the persister reads it now; the caller retries
	}
	next := *ks.latest
	next.Holders = slices.Clone(holders)
	b, err := json.Marshal(&next)
	if err != nil {
		return err
	}
	if err := writeSynced(j.path(&next, ".json"), b); err != nil {
		return err
	}
	ks.latest.Holders = next.Holders
	return nil
}

// Drop removes version e (and older) of its key, if it is still the
// newest: S3 has it now (through this node or another), or a transient
// object was deleted or expired.
func (j *Journal) Drop(e Entry) {
	j.mu.Lock()
	defer j.mu.Unlock()
	ks := j.state(e.Name)
	ks.dropped, ks.droppedAt = max(ks.dropped, e.Version), j.now()
	if ks.latest == nil || ks.latest.Version != e.Version {
		j.collectLocked(e.Name, ks)
		return
	}
	ks.old = append(ks.old, ks.latest)
	ks.latest = nil
	j.collectLocked(e.Name, ks)
}

// collectLocked removes superseded versions no upload uses, and the key's
// state once nothing is left.
func (j *Journal) collectLocked(n Name, ks *keyState) {
	ks.old = slices.DeleteFunc(ks.old, func(o *Entry) bool {
		if ks.inflight == o {
			return false
		}
		j.dropLocked(o)
		return true
	})
	if ks.latest == nil && len(ks.old) == 0 && ks.inflight == nil && (ks.dropped == 0 || j.now().Sub(ks.droppedAt) > droppedLife) {
		delete(j.keys, n)
	}
}

// droppedLife is how long a key's dropped version is remembered after its
// copies are gone: longer than a write's copies can take to arrive.
const droppedLife = 10 * time.Minute

// dropLocked removes e's files and gives back its space.
func (j *Journal) dropLocked(e *Entry) {
	if e.Op == OpPut {
		j.used -= e.Size
	}
	j.removeFiles(e)
}

func (j *Journal) removeFiles(e *Entry) {
	_ = os.Remove(j.path(e, ".json"))
	_ = os.Remove(j.path(e, ".data"))
}

// Expire drops the transient entries whose expiry has passed, returning
// them.
func (j *Journal) Expire() []Entry {
	j.mu.Lock()
	defer j.mu.Unlock()
	var out []Entry
	for n, ks := range j.keys {
		if ks.latest == nil {
			j.collectLocked(n, ks) // forgets a dropped version in time
			continue
		}
		if j.expiredLocked(ks.latest) {
			out = append(out, *ks.latest)
			ks.old = append(ks.old, ks.latest)
			ks.latest = nil
			j.collectLocked(n, ks)
		}
	}
	return out
}

// Stats is what the journal holds.
type Stats struct {
	Objects int   // newest versions held (puts and deletes)
	Dirty   int   // of them, not in S3 yet (WriteBack)
	Bytes   int64 // bodies on disk
	Limit   int64
	// OldestDirty is when the oldest write not in S3 yet was taken (zero
	// if none).
	OldestDirty time.Time
}

// Stats reports what the journal holds now.
func (j *Journal) Stats() Stats {
	s := Stats{Bytes: j.Used(), Limit: j.limit}
	for _, t := range j.TenantStats() {
		s.Objects += t.Objects
		s.Dirty += t.Dirty
		if !t.OldestDirty.IsZero() && (s.OldestDirty.IsZero() || t.OldestDirty.Before(s.OldestDirty)) {
			s.OldestDirty = t.OldestDirty
		}
	}
	return s
}

// TenantStats is Stats per tenant (Limit is the journal's, in each).
func (j *Journal) TenantStats() map[string]Stats {
	j.mu.Lock()
	defer j.mu.Unlock()
	out := map[string]Stats{}
	for _, ks := range j.keys {
		e := ks.latest
		if e == nil || e.Done {
			continue
		}
		s := out[e.Tenant]
		s.Limit = j.limit
		s.Objects++
		if e.Op == OpPut {
			s.Bytes += e.Size
		}
		if !e.Transient {
			s.Dirty++
			if s.OldestDirty.IsZero() || e.LastModified.Before(s.OldestDirty) {
				s.OldestDirty = e.LastModified
			}
		}
		out[e.Tenant] = s
	}
	return out
}

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
