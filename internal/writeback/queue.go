package writeback

// The persister's queue: which key's newest version goes to S3 next.
//
// A pick must not cost a pass over every key held: while S3 is down a node
// can hold millions of small dirty objects, and each of its workers picks
// again for every upload. So the keys that may be ready wait in a heap by
// version (oldest write first); a key is queued again whenever its state
// changes (a new version, an upload ended, new holders), and an entry that
// no longer matches its key's state is discarded when it comes up. Keys
// this node does not persist (another holder does) and keys waiting out a
// backoff are parked, and looked at again after a while or when the ring
// may have changed who persists them (Reconsider).

import (
	"slices"
	"time"
)

// Intervals after which parked keys are looked at again.
const (
	// retryRecheck bounds how late a key is picked after its backoff.
	retryRecheck = 100 * time.Millisecond
	// ownerRecheck is how often keys another holder persists are asked
	// about again without a Reconsider: the ring's changes call it.
	ownerRecheck = 10 * time.Second
)

// queued is a key that may be ready at version.
type queued struct {
	version uint64
	name    Name
}

func (q queued) Before(o queued) bool { return q.version < o.version }

// pickQueue is the Journal's queue; j.mu guards it.
type pickQueue struct {
	ready minHeap[queued]
	// retrying are keys waiting out a backoff, notMine keys another
	// holder persists; each is moved back to ready at its recheck time.
	retrying, notMine []Name
	retryAt, mineAt   time.Time
}

// enqueueLocked queues n if its newest version is one to persist.
func (j *Journal) enqueueLocked(n Name, ks *keyState) {
	if e := ks.latest; e != nil && !e.Transient && !e.Done {
		j.queue.ready.push(queued{e.Version, n})
	}
}

// Reconsider looks again at once at the keys another holder persisted: the
// ring changed, or this node took a version over.
func (j *Journal) Reconsider() {
	j.mu.Lock()
	defer j.mu.Unlock()
	j.queue.mineAt = time.Time{}
	j.signal()
}

// unparkLocked moves parked keys whose recheck time has come back to ready.
func (j *Journal) unparkLocked(now time.Time) {
	q := &j.queue
	if len(q.retrying) > 0 && !now.Before(q.retryAt) {
		for _, n := range q.retrying {
			j.unparkKeyLocked(n)
		}
		q.retrying = q.retrying[:0]
	}
	if len(q.notMine) > 0 && !now.Before(q.mineAt) {
		for _, n := range q.notMine {
			j.unparkKeyLocked(n)
		}
		q.notMine = q.notMine[:0]
		q.mineAt = now.Add(ownerRecheck)
	}
}

func (j *Journal) unparkKeyLocked(n Name) {
	if ks := j.keys[n]; ks != nil {
		ks.parked = false
		j.enqueueLocked(n, ks)
	}
}

// next picks the oldest newest-version to persist: not transient, owned,
// not under way, not waiting out a backoff. It marks it under way. owns is
// asked without the lock, about a copy (SetHolders changes an entry's
// holders meanwhile), and the pick is checked again under it.
func (j *Journal) next(owns func(Entry) bool) (*Entry, bool) {
	j.mu.Lock()
	defer j.mu.Unlock()
	now := j.now()
	j.unparkLocked(now)
	q := &j.queue
	for q.ready.Len() > 0 {
		it := q.ready.pop()
		ks := j.keys[it.name]
		if ks == nil || ks.latest == nil || ks.latest.Version != it.version || ks.latest.Transient || ks.latest.Done ||
			ks.inflight != nil {
			continue // stale: the key is queued again when its state changes
		}
		if now.Before(ks.retryAt) {
			if ks.parked {
				continue // parked already: looked at again with the others
			}
			ks.parked = true
			if len(q.retrying) == 0 || ks.retryAt.Before(q.retryAt) {
				q.retryAt = ks.retryAt
				if soonest := now.Add(retryRecheck); q.retryAt.Before(soonest) {
					q.retryAt = soonest
				}
			}
			q.retrying = append(q.retrying, it.name)
			continue
		}
		e, copied := ks.latest, *ks.latest
		j.mu.Unlock()
		mine := owns(copied)
		j.mu.Lock()
		switch {
		case ks.latest != e || ks.inflight != nil || !slices.Equal(e.Holders, copied.Holders):
			// Changed meanwhile: queued again by that change.
		case !mine && ks.parked:
		case !mine:
			ks.parked = true
			if len(q.notMine) == 0 && q.mineAt.IsZero() {
				q.mineAt = now.Add(ownerRecheck)
			}
			q.notMine = append(q.notMine, it.name)
		default:
			ks.inflight, ks.parked = e, false // a parked copy of its name is then stale
			return e, true
		}
	}
	return nil, false
}
