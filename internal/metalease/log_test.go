package metalease

import (
	"context"
	"errors"
	"slices"
	"testing"
	"time"

	"github.com/distcache/distcache/internal/nodeapi"
	"github.com/distcache/distcache/internal/testutil"
)

// newLog is a log past its start-up wait, so that only watchers hold writes.
func newLog(t *testing.T, lease time.Duration) *Log {
	t.Helper()
	l := New(Config{Lease: lease, Wait: min(lease/10, 200*time.Millisecond), Keep: 4})
	l.started = l.started.Add(-lease)
	return l
}

// first registers a watcher the way a client starts: a poll naming no
// incarnation, answered at once with a reset.
func first(t *testing.T, l *Log, tenant, id string) nodeapi.Invalidations {
	t.Helper()
	ans, err := l.Poll(context.Background(), tenant, id, 0, "")
	testutil.Must(t, err)
	if !ans.Reset || ans.Incarnation != l.Incarnation() || ans.LeaseMillis <= 0 {
		t.Fatalf("first poll: %+v, want a reset naming incarnation %s and a lease", ans, l.Incarnation())
	}
	return ans
}

// TestChangesCountsOneObjectsChanges: the changes of one tenant's object
// after a number, others' not; unknown once forgotten (Keep 4, halves
// forgotten at 8).
func TestChangesCountsOneObjectsChanges(t *testing.T) {
	l := newLog(t, time.Second)
	since := l.Seq()
	l.Changed("a", "b", "k")
	l.Changed("a", "b", "other")
	l.Changed("z", "b", "k") // another tenant's bucket of the same name
	mine := l.Changed("a", "b", "k")
	for _, tc := range []struct {
		since uint64
		want  int
	}{{since, 2}, {mine - 1, 1}, {mine, 0}} {
		if n, known := l.Changes("a", "b", "k", tc.since); n != tc.want || !known {
			t.Errorf("Changes since %d = %d, %v; want %d, true", tc.since, n, known, tc.want)
		}
	}
	for range 8 {
		l.Changed("a", "b", "other")
	}
	if _, known := l.Changes("a", "b", "k", since); known {
		t.Error("changes no longer remembered counted as known")
	}
}

func TestPollAnswersTheTenantsChangesOnly(t *testing.T) {
	l := newLog(t, time.Minute)
	ans := first(t, l, "a", "w1")
	l.Changed("b", "bkt", "theirs")
	l.Changed("a", "bkt", "ours")
	got, err := l.Poll(context.Background(), "a", "w1", ans.Seq, ans.Incarnation)
	testutil.Must(t, err)
	want := []nodeapi.ObjectName{{Bucket: "bkt", Key: "ours"}}
	if got.Reset || !slices.Equal(got.Objects, want) || got.Seq != ans.Seq+2 {
		t.Fatalf("poll after two changes: %+v, want objects %v at seq %d", got, want, ans.Seq+2)
	}
}

func TestPollWaitsForAChangeOfItsTenant(t *testing.T) {
	l := New(Config{Lease: 10 * time.Second, Wait: 5 * time.Second})
	ans := first(t, l, "a", "w1")
	done := make(chan nodeapi.Invalidations)
	go func() {
		got, err := l.Poll(context.Background(), "a", "w1", ans.Seq, ans.Incarnation)
		if err != nil {
			t.Error(err)
		}
		done <- got
	}()
	l.Changed("b", "bkt", "theirs") // does not end the poll
	select {
	case got := <-done:
		t.Fatalf("another tenant's change ended the poll: %+v", got)
	case <-time.After(50 * time.Millisecond):
	}
	l.Changed("a", "bkt", "k")
	got := <-done
	if len(got.Objects) != 1 || got.Objects[0].Key != "k" {
		t.Fatalf("poll answered %+v, want the change of k", got)
	}
}

func TestPollWithoutChangeEndsAfterWait(t *testing.T) {
	l := New(Config{Lease: time.Second, Wait: 20 * time.Millisecond})
	ans := first(t, l, "a", "w1")
	got, err := l.Poll(context.Background(), "a", "w1", ans.Seq, ans.Incarnation)
	testutil.Must(t, err)
	if got.Reset || len(got.Objects) != 0 || got.Seq != ans.Seq {
		t.Fatalf("idle poll: %+v", got)
	}
}

// A client that fell further behind than the log remembers, or that knew
// another incarnation, must drop everything: it gets a reset.
func TestPollResets(t *testing.T) {
	l := newLog(t, time.Minute)
	ans := first(t, l, "a", "w1")
	for i := range 9 { // more than Keep=4, twice over
		l.Changed("a", "bkt", string(rune('a'+i)))
	}
	got, err := l.Poll(context.Background(), "a", "w1", ans.Seq, ans.Incarnation)
	testutil.Must(t, err)
	if !got.Reset || got.Seq != 9 {
		t.Fatalf("poll from before the remembered changes: %+v, want a reset at 9", got)
	}
	got, err = l.Poll(context.Background(), "a", "w1", got.Seq, "another")
	testutil.Must(t, err)
	if !got.Reset {
		t.Fatalf("poll naming another incarnation: %+v, want a reset", got)
	}
	// Within what is remembered: the changes.
	l.Changed("a", "bkt", "x")
	got, err = l.Poll(context.Background(), "a", "w1", 9, l.Incarnation())
	testutil.Must(t, err)
	if got.Reset || len(got.Objects) != 1 {
		t.Fatalf("poll from 9 after one change: %+v", got)
	}
}

func TestWatcherBelongsToOneTenant(t *testing.T) {
	l := newLog(t, time.Minute)
	first(t, l, "a", "w1")
	if _, err := l.Poll(context.Background(), "b", "w1", 0, ""); !errors.Is(err, ErrWatcherTenant) {
		t.Fatalf("another tenant polling as w1: %v, want ErrWatcherTenant", err)
	}
}

// Await holds a write until the watcher polls past the change; another
// tenant's watcher never holds it.
func TestAwaitReturnsWhenTheWatcherPolledPastTheChange(t *testing.T) {
	l := newLog(t, time.Minute)
	ans := first(t, l, "a", "w1")
	first(t, l, "b", "w2") // silent, but of another tenant
	seq := l.Changed("a", "bkt", "k")
	done := make(chan int)
	go func() {
		lapsed, err := l.Await(context.Background(), "a", seq)
		if err != nil {
			t.Error(err)
		}
		done <- lapsed
	}()
	select {
	case <-done:
		t.Fatal("Await returned before the watcher learnt of the change")
	case <-time.After(50 * time.Millisecond):
	}
	got, err := l.Poll(context.Background(), "a", "w1", ans.Seq, ans.Incarnation)
	testutil.Must(t, err)
	if len(got.Objects) != 1 {
		t.Fatalf("poll: %+v", got)
	}
	select {
	case <-done:
		t.Fatal("Await returned when the change was sent, before the watcher said it applied it")
	case <-time.After(50 * time.Millisecond):
	}
	go func() { _, _ = l.Poll(context.Background(), "a", "w1", got.Seq, got.Incarnation) }()
	if lapsed := <-done; lapsed != 0 {
		t.Fatalf("Await: %d watchers waited out, want 0", lapsed)
	}
}

// A watcher that stops polling holds writes until its lease ends, counted
// from its last answered poll's arrival, and then no more.
func TestAwaitWaitsOutASilentWatcher(t *testing.T) {
	const lease = 300 * time.Millisecond
	l := newLog(t, lease)
	first(t, l, "a", "w1")
	granted := time.Now()
	seq := l.Changed("a", "bkt", "k")
	lapsed, err := l.Await(context.Background(), "a", seq)
	testutil.Must(t, err)
	if lapsed != 1 {
		t.Fatalf("Await: %d watchers waited out, want 1", lapsed)
	}
	if since := time.Since(granted); since < lease {
		t.Fatalf("Await returned %v after the lease was granted, before its end (%v)", since, lease)
	}
	// Gone for good: the next write does not wait for it.
	time.Sleep(2 * lease)
	l.Poll(context.Background(), "a", "other", 0, "") // a poll forgets gone watchers
	if n := l.Watchers(); n != 1 {
		t.Fatalf("%d watchers after the silent one's lease ended twice over, want 1", n)
	}
}

// A node that just started waits a lease before it acknowledges a write:
// clients may hold leases from its previous process.
func TestAwaitWaitsALeaseAfterStart(t *testing.T) {
	const lease = 200 * time.Millisecond
	l := New(Config{Lease: lease})
	seq := l.Changed("a", "bkt", "k")
	_, err := l.Await(context.Background(), "a", seq)
	testutil.Must(t, err)
	if since := time.Since(l.started); since < lease {
		t.Fatalf("the first write was acknowledged %v after start, before a lease (%v)", since, lease)
	}
}

func TestAwaitEndsWithItsContext(t *testing.T) {
	l := newLog(t, time.Hour)
	first(t, l, "a", "w1")
	seq := l.Changed("a", "bkt", "k")
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Millisecond)
	defer cancel()
	if _, err := l.Await(ctx, "a", seq); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("Await with an ended context: %v", err)
	}
}

// Revoke resets every client of the tenant (others keep theirs) and
// returns once each has polled again after the reset; a client whose
// tenant is gone acknowledges through Acknowledge.
func TestRevokeResetsTheTenantsClients(t *testing.T) {
	l := newLog(t, time.Minute)
	a := first(t, l, "a", "wa")
	b := first(t, l, "b", "wb")
	done := make(chan error, 1)
	go func() { _, err := l.Revoke(context.Background(), "a"); done <- err }()
	got, err := l.Poll(context.Background(), "a", "wa", a.Seq, a.Incarnation)
	testutil.Must(t, err)
	if !got.Reset {
		t.Fatalf("the revoked tenant's poll: %+v, want a reset", got)
	}
	select {
	case <-done:
		t.Fatal("Revoke returned before the client polled again after its reset")
	case <-time.After(50 * time.Millisecond):
	}
	// The tenant is gone: the node refuses the next poll but records it.
	l.Acknowledge("b", "wa", got.Seq, got.Incarnation) // another tenant's name: ignored
	select {
	case <-done:
		t.Fatal("an acknowledgement naming another tenant counted")
	case <-time.After(50 * time.Millisecond):
	}
	l.Acknowledge("a", "wa", got.Seq, got.Incarnation)
	testutil.Must(t, <-done)
	other, err := l.Poll(context.Background(), "b", "wb", b.Seq, b.Incarnation)
	testutil.Must(t, err)
	if other.Reset {
		t.Fatalf("another tenant's client was reset: %+v", other)
	}
}

// ResetAll answers every tenant's poll with a reset (a waiting one at once:
// without it they would end after Wait, 5 s, with nothing).
func TestResetAllEndsEveryTenantsPollWithAReset(t *testing.T) {
	l := New(Config{Lease: 10 * time.Second, Wait: 5 * time.Second})
	a, b := first(t, l, "a", "w1"), first(t, l, "b", "w2")
	done := make(chan nodeapi.Invalidations, 2)
	for _, w := range []struct {
		tenant, id string
		ans        nodeapi.Invalidations
	}{{"a", "w1", a}, {"b", "w2", b}} {
		go func() {
			got, err := l.Poll(context.Background(), w.tenant, w.id, w.ans.Seq, w.ans.Incarnation)
			if err != nil {
				t.Error(err)
			}
			done <- got
		}()
	}
	time.Sleep(20 * time.Millisecond) // both waiting, usually
	l.ResetAll()
	for range 2 {
		select {
		case got := <-done:
			if !got.Reset {
				t.Fatalf("a poll after ResetAll answered %+v, want a reset", got)
			}
		case <-time.After(time.Minute):
			t.Fatal("the polls did not end")
		}
	}
	if n, known := l.Changes("a", "bkt", "k", a.Seq); !known || n != 1 {
		t.Fatalf("Changes after ResetAll: %d (known %v), want 1 for any object", n, known)
	}
}
