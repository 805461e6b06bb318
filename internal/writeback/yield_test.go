package writeback

import (
	"context"
	"fmt"
	"io"
	"sync"
	"testing"
	"time"

	"github.com/distcache/distcache/internal/testutil"
)

// timedS3 takes every upload and records when each began.
type timedS3 struct {
	mu     sync.Mutex
	starts []time.Time
}

func (s *timedS3) Put(_ context.Context, e Entry, body io.Reader, _ Seen) (string, error) {
	s.mu.Lock()
	s.starts = append(s.starts, time.Now())
	s.mu.Unlock()
	sum, err := copySummed(io.Discard, body, e.Size, e.Parts)
	return sum, err
}

func (s *timedS3) Delete(context.Context, Entry, Seen) error { return nil }

func (s *timedS3) Version(context.Context, Entry) (Seen, error) { return Seen{}, nil }

// before counts the uploads that began before t.
func (s *timedS3) before(t time.Time) int {
	s.mu.Lock()
	defer s.mu.Unlock()
	n := 0
	for _, at := range s.starts {
		if at.Before(t) {
			n++
		}
	}
	return n
}

// writeFor writes a 10 KiB version every 5 ms for d and returns when the
// last write was acknowledged.
func writeFor(t *testing.T, j *Journal, d time.Duration) time.Time {
	t.Helper()
	body := make([]byte, 10<<10)
	end := time.Now().Add(d)
	for i := 0; time.Now().Before(end); i++ {
		put(t, j, fmt.Sprintf("burst/%d", i), body)
		time.Sleep(5 * time.Millisecond)
	}
	return time.Now()
}

// While held writes keep coming, no upload starts (but for one that may
// have been picked as the first write came); once they stop, everything
// is persisted.
func TestPersisterYieldsToWrites(t *testing.T) {
	j, err := Open(t.TempDir(), 1<<30)
	testutil.Must(t, err)
	s3 := &timedS3{}
	run(t, &Persister{Journal: j, S3: s3, Yield: 100 * time.Millisecond, MaxYield: time.Minute})
	end := writeFor(t, j, 400*time.Millisecond)
	if n := s3.before(end); n > 1 {
		t.Fatalf("%d uploads began while writes kept coming, want none (or the first write's)", n)
	}
	drained(t, j, 10*time.Second)
}

// Writes that keep coming for longer than MaxYield are persisted
// meanwhile; and without yielding (Yield < 0) from the start.
func TestPersisterYieldsAtMostMaxYield(t *testing.T) {
	for _, p := range []*Persister{{Yield: 100 * time.Millisecond, MaxYield: 100 * time.Millisecond}, {Yield: -1}} {
		j, err := Open(t.TempDir(), 1<<30)
		testutil.Must(t, err)
		s3 := &timedS3{}
		p.Journal, p.S3 = j, s3
		run(t, p)
		if end := writeFor(t, j, time.Second); s3.before(end) == 0 {
			t.Fatalf("Yield %v, MaxYield %v: no upload began during a second of writes", p.Yield, p.MaxYield)
		}
		drained(t, j, 10*time.Second)
	}
}

// A journal whose pinned space is half used persists without yielding
// (noticed within Yield), so that yielding never makes writes wait for
// space: yielding throughout, these writes would fill it.
func TestPersisterDoesNotYieldWhenHalfFull(t *testing.T) {
	j, err := Open(t.TempDir(), 2<<20) // half used after 100 writes, full after 200
	testutil.Must(t, err)
	s3 := &timedS3{}
	run(t, &Persister{Journal: j, S3: s3, Yield: 100 * time.Millisecond, MaxYield: time.Hour})
	if end := writeFor(t, j, 2*time.Second); s3.before(end) == 0 {
		t.Fatal("no upload began while the pinned space was half used")
	}
	drained(t, j, 10*time.Second)
}
