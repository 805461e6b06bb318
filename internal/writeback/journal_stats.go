package writeback

import "time"

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
	s := Stats{Bytes: j.Pinned(), Limit: j.limit}
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
