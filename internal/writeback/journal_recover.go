package writeback

// Opening a journal: its segments replayed in order, and the entries of
// the layout before the log (journal.go's package comment).

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
)

// recover reads what was written: the .json entries of the layout before
// the log, then the log's segments in order. Of each key it keeps the
// newest version put that no drop names; it removes the rest, bodies no
// version uses, and anything half-written.
func (j *Journal) recover() error {
	names, err := os.ReadDir(j.dir)
	if err != nil {
		return err
	}
	places := map[*Entry]place{}
	drop := func(e *Entry) {
		if e.Op == OpPut && places[e].seg == 0 {
			// Its body file goes at the end, with the others no entry
			// names, unless a later record names it again: the same
			// version handed back to this node (HandOver).
			_ = os.Remove(j.path(e, ".json"))
		} else {
			j.removeFiles(e, places[e])
		}
		delete(places, e)
	}
	put := func(e *Entry, p place) {
		j.clock = max(j.clock, e.Version)
		ks := j.state(e.Name)
		if e.Version <= ks.dropped || (ks.latest != nil && e.Version <= ks.latest.Version) {
			return // as Write: a late or repeated copy
		}
		if ks.latest != nil {
			drop(ks.latest)
		}
		ks.latest, places[e] = e, p
	}
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
			put(e, place{})
		}
	}
	segs, err := segments(j.dir)
	if err != nil {
		return err
	}
	whole := map[uint64]int64{} // the length of each segment read whole
	for _, seq := range segs {
		n, err := readSegment(filepath.Join(j.dir, segmentName(seq)), func(meta []byte, bodyOff, bodyLen int64) {
			var r logRecord
			if json.Unmarshal(meta, &r) != nil || r.Entry == nil {
				return
			}
			e := r.Entry
			if r.Kind == recDrop {
				j.clock = max(j.clock, e.Version)
				ks := j.state(e.Name)
				if !r.Moved {
					ks.dropped, ks.droppedAt = max(ks.dropped, e.Version), j.now()
				}
				if ks.latest != nil && ks.latest.Version <= e.Version {
					drop(ks.latest)
					ks.latest = nil
				}
				return
			}
			p := place{meta: seq}
			switch {
			case e.Op != OpPut:
			case r.File:
				if fi, err := os.Stat(j.path(e, ".data")); err != nil || fi.Size() != e.Size {
					return // its body never made it to disk: never acknowledged
				}
			case r.Seg != 0:
				if (r.Seg == seq && r.Off+e.Size > bodyOff) || (r.Seg != seq && whole[r.Seg] < r.Off+e.Size) {
					return // a body not read whole, or not before the record naming it
				}
				p.seg, p.off = r.Seg, r.Off
			default:
				if bodyLen != e.Size {
					return
				}
				p.seg, p.off = seq, bodyOff
			}
			switch r.Kind {
			case recPut, recUpdate:
				// An update replaces its version's entry; it is the
				// whole entry, so it stands for the put too once that
				// was copied forward and its segment removed.
				if ks := j.state(e.Name); r.Kind == recUpdate && ks.latest != nil && ks.latest.Version == e.Version {
					delete(places, ks.latest)
					ks.latest, places[e] = e, p
					return
				}
				put(e, p)
			}
		})
		if err != nil {
			return err
		}
		whole[seq] = n
	}
	var oldest, last uint64
	if len(segs) > 0 {
		oldest, last = segs[0], segs[len(segs)-1]
	}
	if j.log, err = openLog(j.dir, oldest, last, segmentSize(j.limit)); err != nil {
		return err
	}
	bodies := map[string]bool{}
	for n, ks := range j.keys {
		if e := ks.latest; e != nil {
			j.enqueueLocked(n, ks)
			if e.Done && e.Op == OpDelete {
				j.scheduleLateLocked(e)
			}
			p := places[e]
			j.places[e] = p
			p.pin(j.log, e.Op)
			if e.Op == OpPut {
				j.used += e.Size
				if p.seg == 0 {
					bodies[fileBase(e)+".data"] = true
				} else {
					j.inline += e.Size
				}
			}
		} else if ks.dropped == 0 {
			delete(j.keys, n)
		}
	}
	// Bodies without an entry were never acknowledged.
	for _, d := range names {
		if strings.HasSuffix(d.Name(), ".data") && !bodies[d.Name()] {
			_ = os.Remove(filepath.Join(j.dir, d.Name()))
		}
	}
	j.log.mu.Lock()
	j.log.collectLocked()
	j.log.mu.Unlock()
	j.relocate()
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
