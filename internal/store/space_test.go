package store

import (
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

func TestDiskBoundUnderChurn(t *testing.T) {
	const (
		bound     = 64 << 20
		chunkSize = 1 << 20
		puts      = 10 * bound / chunkSize // 10x the capacity
	)
	s := newTestStore(t, func(o *Options) {
		o.DiskBytes = bound
		o.RAMBytes = 0
		o.MaintenanceInterval = 20 * time.Millisecond
	})
	dir := s.opts.Dir

	// A sampler watches du between the test's own samples, to catch
	// transient peaks (a GC rewrite, a compaction).
	var peak atomic.Int64
	stop := make(chan struct{})
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		for {
			select {
			case <-stop:
				return
			case <-time.After(5 * time.Millisecond):
			}
			if u := du(t, dir); u > peak.Load() {
				peak.Store(u)
			}
		}
	}()
	sample := func(i int) {
		u := du(t, dir)
		if u > peak.Load() {
			peak.Store(u)
		}
		if u > bound {
			t.Errorf("after put %d: du %d > bound %d", i, u, bound)
		}
	}

	var admittedLate, rejectedLate int
	var fillSum float64
	var fillN int
	for i := range puts {
		id := testID("t", "b", fmt.Sprintf("obj-%d", i), "e1", 0)
		err := s.PutChunk(id, payload(id, chunkSize))
		switch {
		case err == nil:
			if i >= puts*3/4 {
				admittedLate++
			}
		case errors.Is(err, ErrNoSpace):
			if i >= puts*3/4 {
				rejectedLate++
			}
		default:
			t.Fatalf("put %d: %v", i, err)
		}
		if i%2 == 0 {
			sample(i)
		}
		if i >= puts/2 {
			fillSum += float64(s.Stats().DiskBytes) / bound
			fillN++
		}
	}
	close(stop)
	wg.Wait()
	st := s.Stats()
	t.Logf("bound %d MiB: peak du %.1f MiB (%.0f%%), steady-state live fill %.0f%%, final du %.1f MiB, last quarter admitted %d rejected %d, evictions %d, rejected %d",
		bound>>20, float64(peak.Load())/(1<<20), 100*float64(peak.Load())/bound, 100*fillSum/float64(fillN),
		float64(du(t, dir))/(1<<20), admittedLate, rejectedLate, st.Evictions, st.Rejected)
	if peak.Load() > bound {
		t.Errorf("peak du %d > bound %d", peak.Load(), bound)
	}
	if admittedLate < (admittedLate+rejectedLate)*9/10 {
		t.Errorf("late in the churn only %d of %d puts were admitted", admittedLate, admittedLate+rejectedLate)
	}
}
