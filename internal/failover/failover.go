// Package failover is the one place a request fails over from one cache
// node to the next: ask the candidates in order, those that failed a moment
// ago last (or not at all), mark one that fails down, and ask the next,
// until one answers. It is what groupcache's PeerPicker is to groupcache:
// the Go client (internal/client), a node asking its peers (internal/node)
// and the gateway's pass-through (internal/gateway) use it, each with its
// own requests, metrics and errors. What an attempt's outcome means (an
// answer, a healthy node whose S3 failed, a dead node) is the caller's to
// say, as a Verdict; what a Verdict does is decided here.
package failover

import (
	"sync"
	"sync/atomic"
	"time"
)

// DefaultDownFor is how long a candidate that failed stays down when
// Set.For is not set.
const DefaultDownFor = 5 * time.Second

// Set remembers the candidates that failed recently, by key (an address or
// a member name), so that a dead node costs one failed attempt every few
// seconds rather than one per request. The zero Set is empty and ready to
// use; it is safe for concurrent use. Set For and OnDown before first use.
type Set struct {
	// For is how long a candidate stays down after it failed (default
	// DefaultDownFor).
	For time.Duration
	// OnDown, when set, is called after a candidate is marked down (the
	// client refreshes its ring then).
	OnDown func(key string)

	mu    sync.Mutex
	until map[string]time.Time // key -> down until
	since map[string]time.Time // key -> first failure since it last answered
	// marked is len(until): Down and Try need no lock while it is 0,
	// which is nearly always.
	marked atomic.Int32
}

// Down reports whether key failed less than For before now.
func (s *Set) Down(key string, now time.Time) bool {
	if s.marked.Load() == 0 {
		return false
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	return now.Before(s.until[key])
}

// MarkDown marks key down for For from now.
func (s *Set) MarkDown(key string) {
	d := s.For
	if d <= 0 {
		d = DefaultDownFor
	}
	s.mu.Lock()
	if s.until == nil {
		s.until, s.since = map[string]time.Time{}, map[string]time.Time{}
	}
	now := time.Now()
	s.until[key] = now.Add(d)
	if _, ok := s.since[key]; !ok {
		s.since[key] = now
	}
	s.marked.Store(int32(len(s.until)))
	s.mu.Unlock()
	if s.OnDown != nil {
		s.OnDown(key)
	}
}

// MarkUp forgets that key failed: it answered.
func (s *Set) MarkUp(key string) {
	if s.marked.Load() == 0 {
		return
	}
	s.mu.Lock()
	delete(s.until, key)
	delete(s.since, key)
	s.marked.Store(int32(len(s.until)))
	s.mu.Unlock()
}

// FailingSince is when key was first marked down since it last answered
// (MarkUp); ok is false when it has not failed since.
func (s *Set) FailingSince(key string) (since time.Time, ok bool) {
	if s.marked.Load() == 0 {
		return time.Time{}, false
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	since, ok = s.since[key]
	return since, ok
}

// Count is how many keys are down at now.
func (s *Set) Count(now time.Time) int {
	s.mu.Lock()
	defer s.mu.Unlock()
	n := 0
	for _, until := range s.until {
		if now.Before(until) {
			n++
		}
	}
	return n
}

// DownLast returns cands with the candidates that are down after the
// others, each group in its order. cands is left as it is: it is returned
// when none is down, a new slice otherwise.
func DownLast[C any](s *Set, cands []C, key func(C) string) []C {
	if s.marked.Load() == 0 {
		return cands
	}
	now := time.Now()
	s.mu.Lock()
	defer s.mu.Unlock()
	for i, c := range cands {
		if !now.Before(s.until[key(c)]) {
			continue
		}
		// Some are down: up ones first, then down ones.
		out := make([]C, 0, len(cands))
		for _, c := range cands {
			if !now.Before(s.until[key(c)]) {
				out = append(out, c)
			}
		}
		for _, c := range cands[i:] {
			if now.Before(s.until[key(c)]) {
				out = append(out, c)
			}
		}
		return out
	}
	return cands
}

// Verdict is what one attempt's outcome means for the candidate and for
// the candidates after it.
type Verdict uint8

const (
	// Done: the candidate answered. It is marked up; no other is asked.
	Done Verdict = iota
	// Stop: no other is asked (an answer every candidate would give, or
	// the caller gave up); the candidate is marked neither up nor down.
	Stop
	// Next: the candidate is healthy but another may do better (it
	// answered that its S3 failed, it is not to be marked): ask the next.
	Next
	// Skip: the candidate was not asked (it is down, and the caller
	// leaves down candidates out): ask the next.
	Skip
	// Failed: the candidate failed (unreachable, timed out, broke off).
	// It is marked down; the next is asked.
	Failed
	// FailedLast: Failed, but no other may be asked (the request cannot
	// be sent again).
	FailedLast
)

// Try asks cands in order: attempt is called with each candidate and
// whether it is down (as of when Try started), and its Verdict says what
// follows. Try returns true when an attempt stopped it (Done, Stop or
// FailedLast), false when every candidate was asked or skipped. Callers
// that ask down candidates last order cands with DownLast first.
func Try[C any](s *Set, cands []C, key func(C) string, attempt func(c C, down bool) Verdict) bool {
	var now time.Time
	if s.marked.Load() != 0 {
		now = time.Now()
	}
	for _, c := range cands {
		k := key(c)
		down := !now.IsZero() && s.Down(k, now)
		switch attempt(c, down) {
		case Done:
			s.MarkUp(k)
			return true
		case Stop:
			return true
		case Failed:
			s.MarkDown(k)
		case FailedLast:
			s.MarkDown(k)
			return true
		}
	}
	return false
}
