// Package metalease is a cache node's side of metadata leases (see
// internal/nodeapi/leases.go for the protocol): it numbers every change of
// an object's metadata, answers the clients' long polls with the changes of
// their tenant, and holds a write's acknowledgement until every client that
// may keep the old metadata has learnt of the change or lost its lease.
//
// Why the wait is safe: a client's lease ends Lease after it sent its last
// answered poll; the node counts Lease from that poll's arrival, which is
// later. Once a change is numbered, every answer carries it, so the only
// leases that can still cover the old metadata are those granted by answers
// sent before; the node waits for the client's next poll (which says it
// applied the change) or for the end of those leases, whichever is first.
// A node that just started may face leases granted by its previous process,
// so it waits Lease after its start before its first acknowledgement.
package metalease

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"sync"
	"time"

	"github.com/distcache/distcache/internal/nodeapi"
)

// Defaults of Config.
const (
	DefaultLease = 2 * time.Second
	DefaultWait  = 500 * time.Millisecond
	// DefaultKeep is how many changes are kept for polls that come late;
	// a poll older than that gets a reset.
	DefaultKeep = 1 << 14
)

// Config configures a Log.
type Config struct {
	// Lease is how long an answered poll lets a client use what it keeps
	// (default DefaultLease): the longest a dead client delays a write.
	Lease time.Duration
	// Wait is how long a poll is held when there is no change (default
	// DefaultWait); it must be well under Lease.
	Wait time.Duration
	// Keep bounds the changes remembered (default DefaultKeep).
	Keep int
	// Now is the clock (default time.Now).
	Now func() time.Time
}

// Log numbers metadata changes and tracks the clients that watch them.
type Log struct {
	cfg         Config
	incarnation string
	started     time.Time

	mu       sync.Mutex
	seq      uint64
	changes  []change // at least the last Keep changes, oldest first
	watchers map[string]*watcher
	// changed is closed, and replaced, at every change and every poll
	// that moves a watcher on: it wakes polls and waiting writes.
	changed chan struct{}
}

type change struct {
	seq    uint64
	tenant string
	obj    nodeapi.ObjectName
	all    bool // everything the tenant's clients keep (Revoke)
	// everyone: everything every client keeps, whatever its tenant
	// (ResetAll).
	everyone bool
}

// of reports whether c concerns the clients of tenant.
func (c change) of(tenant string) bool { return c.everyone || c.tenant == tenant }

// watcher is one client polling this node.
type watcher struct {
	tenant string
	// applied: the client has applied every change up to this number.
	applied uint64
	// granted is when the last answered poll arrived: the client's lease
	// from it ends before granted + Lease.
	granted time.Time
	polls   int // in progress
}

// New starts a log; its incarnation is random.
func New(cfg Config) *Log {
	if cfg.Lease <= 0 {
		cfg.Lease = DefaultLease
	}
	if cfg.Wait <= 0 || cfg.Wait >= cfg.Lease {
		cfg.Wait = min(DefaultWait, cfg.Lease/4)
	}
	if cfg.Keep <= 0 {
		cfg.Keep = DefaultKeep
	}
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	var b [8]byte
	_, _ = rand.Read(b[:])
	return &Log{cfg: cfg, incarnation: hex.EncodeToString(b[:]), started: cfg.Now(),
		watchers: map[string]*watcher{}, changed: make(chan struct{})}
}

// Incarnation names this process in answers.
func (l *Log) Incarnation() string { return l.incarnation }

// Seq is the number of the latest change. Read it before the metadata an
// answer carries.
func (l *Log) Seq() uint64 {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.seq
}

// Lease is what a client is told it may use kept metadata for.
func (l *Log) Lease() time.Duration { return l.cfg.Lease }

// Changed numbers a change of the tenant's object and returns its number.
// Call it after the change is visible to metadata reads (the store holds
// the new version or none), and Await the number before acknowledging a
// write.
func (l *Log) Changed(tenant, bucket, key string) uint64 {
	return l.record(change{tenant: tenant, obj: nodeapi.ObjectName{Bucket: bucket, Key: key}})
}

// record numbers c, remembers it and wakes polls and waiting writes.
func (l *Log) record(c change) uint64 {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.seq++
	if len(l.changes) == 2*l.cfg.Keep { // forget the older half at once: amortised O(1)
		l.changes = append(l.changes[:0], l.changes[l.cfg.Keep:]...)
	}
	c.seq = l.seq
	l.changes = append(l.changes, c)
	l.wake()
	return l.seq
}

// Changes counts the changes of the tenant's object numbered after since;
// known is false when the changes after since are no longer all
// remembered.
func (l *Log) Changes(tenant, bucket, key string, since uint64) (n int, known bool) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if !l.knows(since) {
		return 0, false
	}
	obj := nodeapi.ObjectName{Bucket: bucket, Key: key}
	for _, c := range l.after(since) {
		if c.of(tenant) && (c.all || c.everyone || c.obj == obj) {
			n++
		}
	}
	return n, true
}

// Revoke makes every client of tenant drop all it keeps from this node (its
// next answer is a reset) and returns once each has polled again after it,
// or its lease has ended: what Await is to a write, Revoke is to a tenant
// removed or changed (its buckets, policies, credentials).
func (l *Log) Revoke(ctx context.Context, tenant string) (lapsed int, err error) {
	return l.Await(ctx, tenant, l.record(change{tenant: tenant, all: true}))
}

// ResetAll makes every client drop all it keeps from this node (its next
// answer is a reset), without waiting for them: when the ring changes,
// objects this node answered for may have another metadata owner, which
// the writes now tell instead, so what a client keeps from this node must
// be asked again. A poll under way is answered at once.
func (l *Log) ResetAll() {
	l.record(change{everyone: true})
}

// Acknowledge records that the client watcherID of tenant has applied the
// changes up to since, from a poll the node refuses (the tenant is gone):
// what a revoked client says it applied counts, nothing is granted.
func (l *Log) Acknowledge(tenant, watcherID string, since uint64, incarnation string) {
	l.mu.Lock()
	defer l.mu.Unlock()
	w := l.watchers[watcherID]
	if w == nil || w.tenant != tenant || incarnation != l.incarnation || since > l.seq || since <= w.applied {
		return
	}
	w.applied = since
	l.wake()
}

func (l *Log) wake() {
	close(l.changed)
	l.changed = make(chan struct{})
}

// Await returns once no client of the tenant can still use metadata older
// than change seq: each has polled past it, or its lease has ended. It
// reports how many clients it waited out rather than heard from (dead or
// partitioned clients, worth a metric).
func (l *Log) Await(ctx context.Context, tenant string, seq uint64) (lapsed int, err error) {
	var late map[*watcher]bool
	for {
		l.mu.Lock()
		now := l.cfg.Now()
		next := time.Time{}
		if until := l.started.Add(l.cfg.Lease); now.Before(until) {
			next = until
		}
		for _, w := range l.watchers {
			if w.tenant != tenant || w.applied >= seq {
				continue
			}
			if until := w.granted.Add(l.cfg.Lease); now.Before(until) {
				if next.IsZero() || until.Before(next) {
					next = until
				}
				continue
			}
			if late == nil {
				late = map[*watcher]bool{}
			}
			late[w] = true
		}
		wake := l.changed
		l.mu.Unlock()
		if next.IsZero() {
			return len(late), nil
		}
		t := time.NewTimer(next.Sub(now))
		select {
		case <-wake:
			t.Stop()
		case <-t.C:
		case <-ctx.Done():
			t.Stop()
			return len(late), ctx.Err()
		}
	}
}

// ErrWatcherTenant is a watcher name used by another tenant.
var ErrWatcherTenant = errors.New("metalease: the watcher belongs to another tenant")

// Poll answers a client's poll: the changes of tenant numbered after since,
// as soon as there are any, else after Wait (or when ctx ends). watcherID
// names the client (unique per client process and node); incarnation is
// the node the client last heard from ("" the first time).
func (l *Log) Poll(ctx context.Context, tenant, watcherID string, since uint64, incarnation string) (nodeapi.Invalidations, error) {
	arrived := l.cfg.Now()
	l.mu.Lock()
	defer l.mu.Unlock()
	l.forgetGone(arrived)
	w := l.watchers[watcherID]
	if w == nil {
		w = &watcher{tenant: tenant, granted: arrived}
		l.watchers[watcherID] = w
	} else if w.tenant != tenant {
		return nodeapi.Invalidations{}, ErrWatcherTenant
	}
	reset := incarnation != l.incarnation || since > l.seq || !l.knows(since)
	if !reset && since > w.applied {
		w.applied = since
		l.wake()
	}
	w.polls++
	defer func() { w.polls-- }()
	if !reset && !l.hasChange(tenant, since) {
		timer := time.NewTimer(l.cfg.Wait)
		defer timer.Stop()
		for waiting := true; waiting && !l.hasChange(tenant, since); {
			wake := l.changed
			l.mu.Unlock()
			select {
			case <-wake:
			case <-timer.C:
				waiting = false
			case <-ctx.Done():
				waiting = false
			}
			l.mu.Lock()
		}
	}
	ans := nodeapi.Invalidations{Incarnation: l.incarnation, Seq: l.seq, Reset: reset, LeaseMillis: l.cfg.Lease.Milliseconds()}
	if !reset {
		for _, c := range l.after(since) {
			if !c.of(tenant) {
				continue
			}
			if c.all || c.everyone {
				ans.Reset, ans.Objects = true, nil
				break
			}
			ans.Objects = append(ans.Objects, c.obj)
		}
	}
	// A reset is applied, as any change, when the client polls again with
	// its number: it says so only then.
	w.granted = arrived
	return ans, nil
}

// knows reports whether every change after since is still remembered.
func (l *Log) knows(since uint64) bool {
	if since == l.seq {
		return true
	}
	return len(l.changes) > 0 && l.changes[0].seq <= since+1
}

// after returns the remembered changes numbered after since.
func (l *Log) after(since uint64) []change {
	if len(l.changes) == 0 || since >= l.seq {
		return nil
	}
	i := int(since + 1 - l.changes[0].seq)
	return l.changes[max(i, 0):]
}

func (l *Log) hasChange(tenant string, since uint64) bool {
	for _, c := range l.after(since) {
		if c.of(tenant) {
			return true
		}
	}
	return false
}

// forgetGone drops watchers that stopped polling and whose lease ended.
func (l *Log) forgetGone(now time.Time) {
	for id, w := range l.watchers {
		if w.polls == 0 && now.Sub(w.granted) > 2*l.cfg.Lease {
			delete(l.watchers, id)
		}
	}
}

// Watchers is the number of clients polling (for a gauge).
func (l *Log) Watchers() int {
	l.mu.Lock()
	defer l.mu.Unlock()
	return len(l.watchers)
}
