package failover

import (
	"slices"
	"strings"
	"testing"
	"time"
)

func self(s string) string { return s }

// TestTry runs each Verdict through Try: which candidates are asked, which
// end up down, and whether Try says it was stopped.
func TestTry(t *testing.T) {
	tests := []struct {
		name     string
		verdicts map[string]Verdict // by candidate; Failed when not listed
		down     []string           // marked down before Try
		skip     bool               // the attempt skips down candidates
		asked    string
		downAt   string // down after Try
		stopped  bool
	}{
		{name: "first answers", verdicts: map[string]Verdict{"a": Done}, asked: "a", stopped: true},
		{name: "dead one marked, next answers", verdicts: map[string]Verdict{"b": Done}, asked: "ab", downAt: "a", stopped: true},
		{name: "answer that stops, no mark", verdicts: map[string]Verdict{"a": Stop}, asked: "a", stopped: true},
		{name: "healthy but next", verdicts: map[string]Verdict{"a": Next, "b": Next, "c": Next}, asked: "abc"},
		{name: "all dead", asked: "abc", downAt: "abc"},
		{name: "failed, cannot resend", verdicts: map[string]Verdict{"a": FailedLast}, asked: "a", downAt: "a", stopped: true},
		{name: "down skipped", verdicts: map[string]Verdict{"b": Done}, down: []string{"a"}, skip: true, asked: "b", downAt: "a", stopped: true},
		{name: "down asked, answers, marked up", verdicts: map[string]Verdict{"a": Done}, down: []string{"a"}, asked: "a", stopped: true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var s Set
			for _, k := range tt.down {
				s.MarkDown(k)
			}
			var asked strings.Builder
			stopped := Try(&s, []string{"a", "b", "c"}, self, func(c string, down bool) Verdict {
				if down != slices.Contains(tt.down, c) {
					t.Errorf("%s: down=%v", c, down)
				}
				if down && tt.skip {
					return Skip
				}
				asked.WriteString(c)
				if v, ok := tt.verdicts[c]; ok {
					return v
				}
				return Failed
			})
			var downAt strings.Builder
			for _, c := range []string{"a", "b", "c"} {
				if s.Down(c, time.Now()) {
					downAt.WriteString(c)
				}
			}
			if asked.String() != tt.asked || downAt.String() != tt.downAt || stopped != tt.stopped {
				t.Errorf("asked %q, down %q, stopped %v; want %q, %q, %v", asked.String(), downAt.String(), stopped, tt.asked, tt.downAt, tt.stopped)
			}
		})
	}
}

func TestDownLast(t *testing.T) {
	var s Set
	if got := DownLast(&s, []string{"a", "b", "c", "d"}, self); !slices.Equal(got, []string{"a", "b", "c", "d"}) {
		t.Errorf("none down: %v", got)
	}
	s.MarkDown("a")
	s.MarkDown("c")
	if got := DownLast(&s, []string{"a", "b", "c", "d"}, self); !slices.Equal(got, []string{"b", "d", "a", "c"}) {
		t.Errorf("a and c down: %v, want b d a c", got)
	}
	s.MarkUp("a")
	if got := DownLast(&s, []string{"a", "b", "c", "d"}, self); !slices.Equal(got, []string{"a", "b", "d", "c"}) {
		t.Errorf("c down: %v, want a b d c", got)
	}
}

func TestSetExpires(t *testing.T) {
	var downs []string
	s := Set{For: time.Minute, OnDown: func(k string) { downs = append(downs, k) }}
	s.MarkDown("a")
	now := time.Now()
	if !s.Down("a", now) || s.Down("b", now) || s.Count(now) != 1 {
		t.Fatalf("after marking a: a %v, b %v, count %d", s.Down("a", now), s.Down("b", now), s.Count(now))
	}
	if later := now.Add(time.Minute + time.Second); s.Down("a", later) || s.Count(later) != 0 {
		t.Errorf("a still down after For")
	}
	if !slices.Equal(downs, []string{"a"}) {
		t.Errorf("OnDown told %v", downs)
	}
}

func TestDownLastLeavesItsArgumentAlone(t *testing.T) {
	var s Set
	s.MarkDown("a")
	in := []string{"a", "b"}
	if got := DownLast(&s, in, self); !slices.Equal(got, []string{"b", "a"}) || !slices.Equal(in, []string{"a", "b"}) {
		t.Errorf("DownLast(%v) = %v, argument now %v", []string{"a", "b"}, got, in)
	}
}

// FailingSince is the first failure since the key last answered, however
// often it failed after.
func TestFailingSince(t *testing.T) {
	var s Set
	if _, ok := s.FailingSince("a"); ok {
		t.Fatal("a key that never failed has a FailingSince")
	}
	s.MarkDown("a")
	first, ok := s.FailingSince("a")
	if !ok {
		t.Fatal("no FailingSince after MarkDown")
	}
	time.Sleep(time.Millisecond)
	s.MarkDown("a")
	if again, _ := s.FailingSince("a"); !again.Equal(first) {
		t.Fatalf("FailingSince moved from %v to %v on a second failure", first, again)
	}
	s.MarkUp("a")
	if _, ok := s.FailingSince("a"); ok {
		t.Fatal("FailingSince kept after MarkUp")
	}
}
