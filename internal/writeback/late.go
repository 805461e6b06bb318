package writeback

// Late uploads. S3 may apply a PUT it received whole after the process
// that sent it gave up on it: the process was killed with the request on
// the wire, or the SDK timed an attempt out and sent another. Conditional
// writes keep such a late upload from replacing anything newer but for one
// case: an upload on the condition that S3 holds nothing of its key
// (If-None-Match: *) that lands after a newer DELETE was applied finds the
// key absent again, and the deleted object would stay in S3 for good. So
// every holder of an applied delete (its tombstone: the one that applied
// it, those it told, and those it is handed to) looks at its key again
// later (LateUploadChecks), while the delete is still the key's newest
// version there: an object the cache persisted (VersionMetadata) of an
// older version is deleted (If-Match on its ETag). One S3 holds without
// the cache's version (written around the cache) or of a newer one stays.
// Every holder looks, not only the key's persister: the ring may have
// moved the key to a member the tombstone was handed to, and a HEAD per
// holder and look is cheap beside a delete lost for good.

import (
	"context"
	"errors"
	"sync"
	"time"
)

// LateUploadChecks are how long after a delete was applied its key is
// looked at again. A late PUT lands within seconds of its sender giving
// up; a CompleteMultipartUpload of many parts may take minutes.
var LateUploadChecks = []time.Duration{30 * time.Second, 2 * time.Minute, 10 * time.Minute}

// lateRetry is how soon a check S3 failed is tried again.
const lateRetry = 30 * time.Second

// lateCheck is one look at a deleted key, due at due.
type lateCheck struct {
	due, applied time.Time
	name         Name
	version      uint64 // the delete's
	step         int    // of the journal's lateSteps
}

func (c lateCheck) Before(o lateCheck) bool { return c.due.Before(o.due) }

// scheduleLateLocked plans the checks of applied delete e (a tombstone:
// applied TombstoneLife before it expires) from the first step not yet
// past; a restarted journal that slept through an earlier step checks at
// once as well.
func (j *Journal) scheduleLateLocked(e *Entry) {
	applied, now := e.Expires.Add(-TombstoneLife), j.now()
	for i, d := range j.lateSteps {
		if due := applied.Add(d); due.After(now) {
			if i > 0 {
				j.late.push(lateCheck{due: now, applied: applied, name: e.Name, version: e.Version, step: i - 1})
			} else {
				j.late.push(lateCheck{due: due, applied: applied, name: e.Name, version: e.Version, step: i})
			}
			return
		}
	}
}

// lateLook is a due check and the delete it checks.
type lateLook struct {
	check lateCheck
	del   Entry
}

// dueLate takes the checks due by now whose delete is still its key's
// newest version (a newer write is persisted over whatever S3 holds).
func (j *Journal) dueLate() []lateLook {
	j.mu.Lock()
	defer j.mu.Unlock()
	now := j.now()
	var out []lateLook
	for j.late.Len() > 0 && !j.late[0].due.After(now) {
		c := j.late.pop()
		if ks := j.keys[c.name]; ks != nil && ks.latest != nil && ks.latest.Version == c.version && ks.latest.Done {
			out = append(out, lateLook{c, *ks.latest})
		}
	}
	return out
}

// lateAgain plans c's next check: the next step, or the same one again
// after lateRetry when S3 could not be asked.
func (j *Journal) lateAgain(c lateCheck, failed bool) {
	j.mu.Lock()
	defer j.mu.Unlock()
	if failed {
		c.due = j.now().Add(lateRetry)
	} else {
		if c.step++; c.step >= len(j.lateSteps) {
			return
		}
		c.due = c.applied.Add(j.lateSteps[c.step])
	}
	j.late.push(c)
}

// checkLateUploads looks at the keys of the applied deletes whose checks
// are due (the persister calls it every Poll).
func (p *Persister) checkLateUploads(ctx context.Context) {
	var wg sync.WaitGroup
	sem := make(chan struct{}, lateLooksAtOnce)
	for _, l := range p.Journal.dueLate() {
		sem <- struct{}{}
		wg.Go(func() {
			defer func() { <-sem }()
			p.Journal.lateAgain(l.check, p.deleteLateUpload(ctx, l.del) != nil)
		})
	}
	wg.Wait()
}

// lateLooksAtOnce bounds the looks in flight: a burst of deletes (a
// ClickHouse merge drops many parts' files) is looked at in seconds, not
// one S3 round trip after another.
const lateLooksAtOnce = 8

// deleteLateUpload deletes what S3 holds of delete e's key if it is an
// older version the cache persisted: an upload that landed after e.
func (p *Persister) deleteLateUpload(ctx context.Context, e Entry) error {
	seen, err := p.S3.Version(ctx, e)
	if err != nil || !seen.Exists || seen.Version == 0 || seen.Version >= e.Version {
		return err
	}
	start := time.Now()
	err = p.S3.Delete(ctx, e, seen)
	if p.Observe != nil {
		p.Observe(OpDelete, err, time.Since(start))
	}
	if errors.Is(err, ErrChanged) {
		return nil // another holder deleted it first, or a newer write replaced it: the next look tells
	}
	if p.Log != nil {
		if err != nil {
			p.Log.Warn("write-back: cannot delete an upload that landed in S3 after a newer delete; looking again later", "delete", e.String(), "landed", seen.Version, "err", err)
		} else {
			p.Log.Warn("write-back: an upload sent before a delete landed in S3 after it: deleted it again", "delete", e.String(), "landed", seen.Version)
		}
	}
	if err == nil && p.LateUpload != nil {
		p.LateUpload(e, seen.Version)
	}
	return err
}
