package writeback

import (
	"context"
	"errors"
	"io"
	"log/slog"
	"strconv"
	"sync"
	"time"

	"github.com/distcache/distcache/internal/ctxtime"
)

// S3 is where the persister sends what the journal holds.
type S3 interface {
	// Put uploads version e with its body (e.Size bytes) and returns the
	// ETag S3 gave it, only if S3 still holds seen (what Version
	// returned): ErrChanged, and nothing written, when it holds something
	// else by then.
	Put(ctx context.Context, e Entry, body io.Reader, seen Seen) (etag string, err error)
	// Delete deletes e's key (a missing key is no error), only if S3
	// still holds the object seen, when it held one (ErrChanged
	// otherwise).
	Delete(ctx context.Context, e Entry, seen Seen) error
	// Version is what S3 holds of e's key.
	Version(ctx context.Context, e Entry) (Seen, error)
}

// Seen is what S3 held of a key when the persister looked (the zero Seen:
// it did not look, and S3 holding nothing is the condition).
type Seen struct {
	Looked bool
	Exists bool
	// Version is the VersionMetadata a Put stored (0 for an object the
	// cache did not persist).
	Version uint64
	ETag    string // as S3 gave it
}

// ErrChanged: S3 no longer held what the persister saw when it uploaded
// (another holder persisted a newer version meanwhile, or a write behind
// the cache's back); it looks again.
var ErrChanged = errors.New("S3 changed since the persister looked")

// VersionMetadata is the user metadata (x-amz-meta-distcache-version) a
// persisted object carries: the version it was held as. A holder that
// finds S3 at that version or a newer one knows its copy is done with.
const VersionMetadata = "distcache-version"

// ParseVersion reads a VersionMetadata value (0 when absent or malformed).
func ParseVersion(md map[string]string) uint64 {
	v, _ := strconv.ParseUint(md[VersionMetadata], 10, 64)
	return v
}

// Persister sends the WriteBack versions of the keys this node persists to
// S3, newest version of each key only, one operation per key at a time
// (so S3 ends with the newest: an older upload under way when a newer
// write arrives finishes first, and the newer follows), retrying failures
// with exponential backoff.
type Persister struct {
	Journal *Journal
	S3      S3
	// Owns reports whether this node persists version e now (of its
	// holders, the first in the ring's order); the others keep their copy
	// until told it is in S3, and take over when the ring makes them
	// first. Nil: this node persists everything it holds.
	Owns func(e Entry) bool
	// Persisted is called once S3 has version e (etag: S3's, for a put),
	// before the journal drops it: the node caches it as an ordinary
	// object and tells the other holders.
	Persisted func(e Entry, etag string)
	// Superseded, when set, is called when version e is let go because a
	// newer version of its key is held elsewhere (Confirm): the node tells
	// the other holders of e to drop their copies, which they would
	// otherwise send in turn, late.
	Superseded func(e Entry)
	// Confirm, when set, is asked before a version is sent whether a newer
	// version of its key, or a delete S3 applied, is known elsewhere
	// (newer, nil when none: the version is dropped, never sent). S3 keeps
	// no trace of a delete, so a copy that missed one (its node was down,
	// or could not be copied to) would otherwise bring the key back once
	// its node persists it; only the other holders can tell. It is asked
	// again once S3 has the version: a newer delete may have been applied
	// while the upload was under way, by a holder that found S3 as this
	// one's look did (nothing to delete), and S3 then keeps the older
	// version for good unless it is deleted again (undo). An error leaves
	// the version for a retry after its backoff.
	Confirm func(ctx context.Context, e Entry) (newer *Entry, err error)
	// Observe, when set, is told of every attempt.
	Observe func(op Op, err error, took time.Duration)
	// LateUpload, when set, is told of every upload found in S3 after a
	// newer delete of its key and deleted again (late.go).
	LateUpload func(delete Entry, landed uint64)
	Workers    int // uploads at once (default DefaultWorkers)
	// MinBackoff and MaxBackoff space the retries of a failing key
	// (defaults 100 ms and 30 s).
	MinBackoff, MaxBackoff time.Duration
	// Poll is how often owners are looked at again without a new write
	// (the ring may have made this node the one to persist; default 1 s).
	Poll time.Duration
	// Yield: no upload starts while this node took a held write within
	// Yield (default DefaultYield; negative: never wait), for at most
	// MaxYield in a row (default DefaultMaxYield); yield.go.
	Yield, MaxYield time.Duration
	Log             *slog.Logger

	yieldMu       sync.Mutex
	yieldingSince time.Time // when the persister began to hold back (zero: it does not)
}

// DefaultWorkers is Persister.Workers' default: S3 answers a small PUT in
// tens of milliseconds (and the persister asks S3 for the key's version
// first), so a few workers would persist a few dozen objects a second;
// sixteen keep up with a busy node's small writes and leave most of the
// node's S3 connections (s3backend.DefaultMaxConcurrent) to reads.
const DefaultWorkers = 16

// Run persists until ctx ends; uploads under way are then abandoned (they
// are retried by the next process, from the journal).
func (p *Persister) Run(ctx context.Context) {
	workers := p.Workers
	if workers <= 0 {
		workers = DefaultWorkers
	}
	var wg sync.WaitGroup
	for range workers {
		wg.Go(func() { p.work(ctx) })
	}
	wg.Go(func() { ctxtime.Every(ctx, p.poll(), func() { p.checkLateUploads(ctx) }) })
	wg.Wait()
}

// poll is Poll or its default.
func (p *Persister) poll() time.Duration {
	if p.Poll <= 0 {
		return time.Second
	}
	return p.Poll
}

func (p *Persister) work(ctx context.Context) {
	poll := p.poll()
	for ctx.Err() == nil {
		if d := p.yieldFor(time.Now()); d > 0 {
			select {
			case <-ctx.Done():
			case <-time.After(d):
			}
			continue
		}
		changed := p.Journal.changes() // before looking: no change is missed
		e, ok := p.Journal.next(p.owns)
		if !ok {
			select {
			case <-ctx.Done():
			case <-changed:
			case <-time.After(poll):
			}
			continue
		}
		p.persist(ctx, e)
	}
}

func (p *Persister) owns(e Entry) bool { return p.Owns == nil || p.Owns(e) }

// persist sends one version to S3 and reports the outcome to the journal.
func (p *Persister) persist(ctx context.Context, e *Entry) {
	if p.Confirm != nil {
		newer, ok := p.confirm(ctx, e)
		if !ok {
			return
		}
		if newer != nil {
			if p.Log != nil {
				p.Log.Info("write-back: a newer version of the key is held elsewhere: this one is dropped, not persisted", "object", e.String(), "newer", newer.String())
			}
			// An earlier attempt may have left this version in S3.
			p.undo(ctx, e, *newer)
			p.superseded(e) // the newer version is its holders' to send
			return
		}
	}
	start := time.Now()
	var (
		etag string
		err  error
	)
	for i := range maxLooks {
		var stale bool
		if etag, stale, err = p.send(ctx, e, i > 0); stale {
			p.Journal.persisted(e) // a newer write is in S3
			return
		}
		if !errors.Is(err, ErrChanged) {
			break
		}
	}
	if p.Observe != nil {
		p.Observe(e.Op, err, time.Since(start))
	}
	if err != nil {
		if ctx.Err() == nil && p.Log != nil {
			p.Log.Warn("write-back: S3 refused or failed; retrying with backoff", "object", e.String(), "op", e.Op, "err", err)
		}
		p.Journal.failed(e, p.backoff)
		return
	}
	if del, ok := p.Journal.appliedSince(e); ok {
		p.undo(ctx, e, del)
		p.Journal.persisted(e)
		return
	}
	if p.Confirm != nil {
		newer, ok := p.confirm(ctx, e)
		if !ok {
			return // the next attempt finds e in S3 and asks again
		}
		if newer != nil {
			p.undo(ctx, e, *newer)
			p.superseded(e)
			return
		}
	}
	if p.Persisted != nil {
		p.Persisted(*e, etag)
	}
	p.Journal.persisted(e)
}

// superseded lets e go: a newer version of its key is held elsewhere.
func (p *Persister) superseded(e *Entry) {
	if p.Superseded != nil {
		p.Superseded(*e)
	}
	p.Journal.persisted(e)
}

// confirm asks Confirm about e; ok=false: it could not answer, and e waits
// for its backoff.
func (p *Persister) confirm(ctx context.Context, e *Entry) (newer *Entry, ok bool) {
	newer, err := p.Confirm(ctx, *e)
	if err != nil {
		if ctx.Err() == nil && p.Log != nil {
			p.Log.Warn("write-back: cannot confirm that no newer version of the key is held elsewhere; retrying with backoff", "object", e.String(), "op", e.Op, "err", err)
		}
		p.Journal.failed(e, p.backoff)
		return nil, false
	}
	return newer, true
}

// maxLooks is how many times in a row persist looks at S3 again when it
// changed under an upload, before the version waits its backoff.
const maxLooks = 3

// send looks at what S3 holds of e's key and sends e unless S3 has it
// already, or a newer version (stale: nothing to send, ever). The upload
// is conditional on what was seen, so it never replaces a newer version
// that another holder persisted after the look (around a ring change two
// holders may each take themselves for the one to persist).
//
// A new key's version may go up without a look (S3 that honours
// If-None-Match: *, Backend.PutIfAbsent), unless look: the same decision
// the look at a key S3 holds nothing of leads to, one request sooner.
func (p *Persister) send(ctx context.Context, e *Entry, look bool) (etag string, stale bool, err error) {
	var seen Seen
	if u, ok := p.S3.(interface{ putsUnlooked(Entry) bool }); look || !ok || !u.putsUnlooked(*e) {
		if seen, err = p.S3.Version(ctx, *e); err != nil {
			return "", false, err
		}
	}
	if p.Log != nil {
		p.Log.Debug("write-back: sending to S3", "object", e.String(), "op", e.Op, "looked", seen.Looked,
			"s3Holds", seen.Exists, "s3Version", seen.Version, "s3ETag", seen.ETag)
		defer func() {
			p.Log.Debug("write-back: sent to S3", "object", e.String(), "op", e.Op, "stale", stale, "err", err)
		}()
	}
	switch {
	case seen.Exists && seen.Version > e.Version:
		return "", true, nil
	case e.Op == OpPut && seen.Exists && seen.Version == e.Version:
		return seen.ETag, false, nil // sent already (by another holder, or an upload whose answer was lost)
	case e.Op == OpPut:
		f, err := p.Journal.OpenBody(*e)
		if err != nil {
			return "", false, err
		}
		defer f.Close()
		etag, err = p.S3.Put(ctx, *e, f, seen)
		return etag, false, err
	}
	if !seen.Exists {
		// Nothing to delete. An unconditional DELETE would remove a newer
		// version another holder sends meanwhile (around a ring change);
		// an older holder's upload landing after this is deleted again by
		// that holder (undo), or never sent (Confirm).
		return "", false, nil
	}
	return "", false, p.S3.Delete(ctx, *e, seen)
}

// undo deletes upload e from S3 again when newer is a delete: while it
// was under way, another holder applied that delete of the key (around a
// ring change two holders may each take themselves for the one to
// persist), which S3 forgets, so the upload that landed after it would
// bring the key back for good. Only e itself is deleted (its version, as
// S3 holds it, and If-Match on its ETag): anything newer that S3 holds by
// then stays. A newer put needs nothing: its own upload replaces e. A
// failure is logged; the tombstone keeps reads right meanwhile.
func (p *Persister) undo(ctx context.Context, e *Entry, newer Entry) {
	if e.Op != OpPut || newer.Op != OpDelete {
		return
	}
	seen, err := p.S3.Version(ctx, *e)
	if err == nil && seen.Exists && seen.Version == e.Version {
		if err = p.S3.Delete(ctx, newer, seen); err == nil && p.Log != nil {
			p.Log.Info("write-back: a newer delete of the key was applied while this version was on its way to S3: deleted it again", "object", e.String(), "delete", newer.String())
		}
	}
	if err != nil && p.Log != nil {
		p.Log.Warn("write-back: cannot delete an upload a delete overtook", "object", e.String(), "delete", newer.String(), "err", err)
	}
}

// appliedSince is the delete of e's key that S3 applied (done) while e was
// being uploaded: the key's newest version here, newer than e.
func (j *Journal) appliedSince(e *Entry) (Entry, bool) {
	j.mu.Lock()
	defer j.mu.Unlock()
	ks := j.keys[e.Name]
	if e.Op != OpPut || ks == nil || ks.latest == nil || ks.latest.Version <= e.Version || ks.latest.Op != OpDelete || !ks.latest.Done {
		return Entry{}, false
	}
	return *ks.latest, true
}

// backoff is the wait after the n-th failure in a row.
func (p *Persister) backoff(n int) time.Duration {
	lo, hi := p.MinBackoff, p.MaxBackoff
	if lo <= 0 {
		lo = 100 * time.Millisecond
	}
	if hi <= 0 {
		hi = 30 * time.Second
	}
	d := lo
	for i := 1; i < n && d < hi; i++ {
		d *= 2
	}
	return min(d, hi)
}

// persisted ends the upload of e: S3 has it. If it is still the newest
// version the key leaves the journal; if a newer one came meanwhile, that
// one goes next.
func (j *Journal) persisted(e *Entry) {
	j.mu.Lock()
	ks := j.keys[e.Name]
	if ks == nil {
		j.mu.Unlock()
		return
	}
	ks.inflight = nil
	ks.retryAt, ks.failures = time.Time{}, 0
	if ks.latest == e && e.Op == OpDelete {
		if lsn, ok := j.keepTombstoneLocked(e); ok {
			j.mu.Unlock()
			_ = j.log.wait(lsn) // a failure stops the log: the journal must be opened again
			return
		}
	}
	if ks.latest == e {
		j.logDropLocked(e)
		ks.old = append(ks.old, e)
		ks.latest = nil
	} else {
		j.enqueueLocked(e.Name, ks) // a newer version came meanwhile
	}
	j.collectLocked(e.Name, ks)
	j.signal()
	j.mu.Unlock()
}

// TombstoneLife is how long a WriteBack delete is kept after S3 applied
// it: a holder that was down meanwhile and comes back with an older copy
// of the key learns from it that the copy is older (S3 no longer has the
// key to tell).
const TombstoneLife = 24 * time.Hour

// keepTombstoneLocked marks delete e done (an update record, durable once
// the log has synced the lsn returned), kept until TombstoneLife has
// passed. It reports false if it could not: e is dropped then, as before.
func (j *Journal) keepTombstoneLocked(e *Entry) (uint64, bool) {
	done := *e
	done.Done, done.Expires = true, j.now().Add(TombstoneLife)
	lsn, err := j.updateLocked(e, &done)
	if err != nil {
		return 0, false
	}
	e.Done, e.Expires = true, done.Expires
	j.scheduleLateLocked(e)
	return lsn, true
}

// Applied is told that another holder persisted version e. A delete that
// is still its key's newest version here is kept as a tombstone, as the
// holder that persisted it keeps it (persisted): should that holder go, a
// copy of an older version that comes back with a node that missed the
// delete still learns here that the key was deleted (Persister.Confirm).
// Anything else is dropped (Drop).
func (j *Journal) Applied(e Entry) {
	if e.Op == OpDelete && !e.Transient {
		j.mu.Lock()
		ks := j.keys[e.Name]
		if ks != nil && ks.latest != nil && ks.latest.Version == e.Version && ks.latest.Op == OpDelete {
			if ks.latest.Done {
				j.mu.Unlock()
				return
			}
			if lsn, ok := j.keepTombstoneLocked(ks.latest); ok {
				j.mu.Unlock()
				_ = j.log.wait(lsn) // a failure stops the log: the journal must be opened again
				return
			}
		}
		j.mu.Unlock()
	}
	j.Drop(e)
}

// failed ends a failed upload of e: the key waits out its backoff.
func (j *Journal) failed(e *Entry, backoff func(int) time.Duration) {
	j.mu.Lock()
	defer j.mu.Unlock()
	ks := j.keys[e.Name]
	if ks == nil {
		return
	}
	ks.inflight = nil
	if ks.latest == e {
		ks.failures++
		ks.retryAt = j.now().Add(backoff(ks.failures))
	}
	j.enqueueLocked(e.Name, ks)
	j.collectLocked(e.Name, ks) // e may be superseded meanwhile
	j.signal()
}
