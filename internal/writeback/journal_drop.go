package writeback

// How held versions go: holders changed, copies dropped, older versions
// collected, Transient objects expired, long-held versions moved to newer
// segments so old ones can be removed.

import (
	"encoding/json"
	"os"
	"slices"
)

// SetHolders records that version e is kept by holders now (after the
// ring changed and copies moved), if it is still the newest of its key.
// It returns once that is durable.
func (j *Journal) SetHolders(e Entry, holders []string) error {
	j.mu.Lock()
	ks := j.keys[e.Name]
	if ks == nil || ks.latest == nil || ks.latest.Version != e.Version {
		j.mu.Unlock()
		return nil
	}
	if ks.inflight == ks.latest {
		j.mu.Unlock()
		return ErrBusy // the persister reads it now; the caller retries
	}
	next := *ks.latest
	next.Holders = slices.Clone(holders)
	lsn, err := j.updateLocked(ks.latest, &next)
	if err == nil {
		ks.latest.Holders = next.Holders
		j.enqueueLocked(e.Name, ks) // who persists it may have changed
	}
	j.mu.Unlock()
	if err != nil {
		return err
	}
	return j.log.wait(lsn)
}

// updateLocked appends a record giving held version e the entry next
// (same object and version), e moving its place's record there; it
// returns the record's lsn, durable once the log has synced it.
func (j *Journal) updateLocked(e, next *Entry) (uint64, error) {
	p := j.places[e]
	r := logRecord{Kind: recUpdate, Entry: next}
	if e.Op == OpPut {
		r.File, r.Seg, r.Off = p.seg == 0, p.seg, p.off
	}
	meta, err := json.Marshal(r)
	if err != nil {
		return 0, err
	}
	a, err := j.log.append(encodeRecord(meta, nil), len(meta), 1, false)
	if err != nil {
		return 0, err
	}
	j.log.unpin(p.meta, 1) // the older record is not needed once this one is there, synced with it or before
	p.meta = a.seg
	j.places[e] = p
	return a.lsn, nil
}

// logDropLocked records that version e of its key (and older) is done
// with, so that it does not come back when the journal is opened again.
// Not waited for: like a file unlinked, a drop lost in a crash leaves a
// copy the node checks again (held_handoff.go), never a lost write.
func (j *Journal) logDropLocked(e *Entry) { j.logRemovedLocked(e, false) }

// logRemovedLocked records that version e of its key (and older) is gone
// from this node: done with, or moved to other holders (HandOver).
func (j *Journal) logRemovedLocked(e *Entry, moved bool) {
	meta, err := json.Marshal(logRecord{Kind: recDrop, Entry: &Entry{Name: e.Name, Version: e.Version}, Moved: moved})
	if err == nil {
		_, _ = j.log.append(encodeRecord(meta, nil), len(meta), 0, false)
	}
}

// Drop removes version e (and older) of its key, if it is still the
// newest: S3 has it now (through this node or another), or a transient
// object was deleted or expired.
func (j *Journal) Drop(e Entry) {
	j.mu.Lock()
	defer j.mu.Unlock()
	ks := j.state(e.Name)
	ks.dropped, ks.droppedAt = max(ks.dropped, e.Version), j.now()
	j.logDropLocked(&e)
	if ks.latest == nil || ks.latest.Version != e.Version {
		j.collectLocked(e.Name, ks)
		return
	}
	ks.old = append(ks.old, ks.latest)
	ks.latest = nil
	j.collectLocked(e.Name, ks)
}

// HandOver removes version e (and older) of its key, if it is still the
// newest, once it was copied to the holders the ring wants now. Unlike
// Drop it is not done with: should the ring give the key back to this
// node, a copy of the same version that comes back is kept (Drop's memory
// would take it for a late copy and let it go, while its sender, told it
// is held here, drops its own).
// It returns ErrBusy while the version is being persisted here (its files
// must be gone before a copy of it can come back): the caller tries again.
func (j *Journal) HandOver(e Entry) error {
	j.mu.Lock()
	defer j.mu.Unlock()
	ks := j.keys[e.Name]
	if ks == nil || ks.latest == nil || ks.latest.Version != e.Version {
		return nil
	}
	if ks.inflight == ks.latest {
		return ErrBusy
	}
	j.logRemovedLocked(&e, true)
	ks.old = append(ks.old, ks.latest)
	ks.latest = nil
	j.collectLocked(e.Name, ks)
	return nil
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

// dropLocked removes held version e from disk and gives back its space.
func (j *Journal) dropLocked(e *Entry) {
	p, ok := j.places[e]
	delete(j.places, e)
	if ok {
		p.unpin(j.log, e.Op)
		if e.Op == OpPut && p.seg != 0 {
			j.inline -= e.Size
		}
	}
	j.dropUnheldLocked(e, p)
}

// dropUnheldLocked removes the files of a version at p that is not held
// (its segments unpinned) and gives back its space.
func (j *Journal) dropUnheldLocked(e *Entry, p place) {
	if e.Op == OpPut {
		j.used -= e.Size
	}
	j.removeFiles(e, p)
}

// removeFiles removes the files of e not in the log: its body file, and
// the .json of the layout before the log.
func (j *Journal) removeFiles(e *Entry, p place) {
	if e.Op == OpPut && p.seg != 0 {
		return // all in the log
	}
	_ = os.Remove(j.path(e, ".json"))
	if e.Op == OpPut {
		_ = os.Remove(j.path(e, ".data"))
	}
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
			j.logDropLocked(ks.latest)
			out = append(out, *ks.latest)
			ks.old = append(ks.old, ks.latest)
			ks.latest = nil
			j.collectLocked(n, ks)
		}
	}
	return out
}

// relocate copies forward, in the background, the versions the oldest
// segment still holds when more than maxBehind sealed segments follow it,
// so that a version held for long (a transient object without expiry, S3
// down) does not keep every segment written after it on disk.
func (j *Journal) relocate() {
	seg, ok := j.log.behind()
	if !ok {
		return
	}
	j.mu.Lock()
	defer j.mu.Unlock()
	if j.relocating {
		return
	}
	j.relocating = true
	j.background.Go(func() {
		j.relocateSegment(seg)
		j.mu.Lock()
		j.relocating = false
		j.mu.Unlock()
	})
}

// relocateSegment writes an update record for every version held in
// segment seg (with its body, when the body is there), and lets go of
// seg's pins once those records are durable.
func (j *Journal) relocateSegment(seg uint64) {
	type move struct {
		e    *Entry
		p    place
		body []byte
	}
	var moves []move
	j.mu.Lock()
	for _, ks := range j.keys {
		for _, e := range append([]*Entry{ks.latest}, ks.old...) {
			if p, ok := j.places[e]; e != nil && ok && (p.meta == seg || (e.Op == OpPut && p.seg == seg)) {
				moves = append(moves, move{e: e, p: p})
			}
		}
	}
	f, err := os.Open(j.log.path(seg)) // pinned by the versions above
	j.mu.Unlock()
	if err != nil {
		return
	}
	for i, m := range moves {
		if m.e.Op == OpPut && m.p.seg == seg {
			moves[i].body = make([]byte, m.e.Size)
			if _, err := f.ReadAt(moves[i].body, m.p.off); err != nil {
				_ = f.Close()
				return
			}
		}
	}
	_ = f.Close()
	var lsn uint64
	var moved []move
	j.mu.Lock()
	for _, m := range moves {
		if cur, ok := j.places[m.e]; !ok || cur != m.p {
			continue // dropped or moved meanwhile
		}
		r, pins := logRecord{Kind: recUpdate, Entry: m.e}, 1
		switch {
		case m.e.Op != OpPut:
		case m.body != nil:
			pins++
		default:
			r.File, r.Seg, r.Off = m.p.seg == 0, m.p.seg, m.p.off
		}
		meta, err := json.Marshal(r)
		if err != nil {
			break
		}
		a, err := j.log.append(encodeRecord(meta, m.body), len(meta), pins, false)
		if err != nil {
			break
		}
		next := m.p
		next.meta = a.seg
		if m.body != nil {
			next.seg, next.off = a.seg, a.bodyOff
		}
		j.places[m.e], lsn = next, a.lsn
		moved = append(moved, m)
	}
	j.mu.Unlock()
	if len(moved) == 0 || j.log.wait(lsn) != nil {
		return // seg stays pinned: its records are still the durable ones
	}
	for _, m := range moved {
		m.p.unpin(j.log, m.e.Op)
	}
}
