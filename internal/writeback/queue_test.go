package writeback

import (
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/distcache/distcache/internal/testutil"
)

// picks takes everything next gives until it gives nothing, leaving each
// under way.
func picks(j *Journal, owns func(Entry) bool) []string {
	var out []string
	for {
		e, ok := j.next(owns)
		if !ok {
			return out
		}
		out = append(out, e.Key)
	}
}

func all(Entry) bool { return true }

// The persister takes the oldest write first, one upload per key at a time:
// a key under way is not picked again, and its newer version comes next
// once the upload ends; a failed key waits out its backoff.
func TestPickOrder(t *testing.T) {
	j, err := Open(t.TempDir(), 1<<30)
	testutil.Must(t, err)
	now := time.Now()
	j.now = func() time.Time { return now }
	for _, k := range []string{"c", "a", "b"} {
		put(t, j, k, []byte(k))
	}
	if got := strings.Join(picks(j, all), ","); got != "c,a,b" {
		t.Fatalf("picked %s, want the writes' order c,a,b", got)
	}
	a, _ := j.Get(Name{"team-a", "bucket-a", "a"})
	b, _ := j.Get(Name{"team-a", "bucket-a", "b"})
	c, _ := j.Get(Name{"team-a", "bucket-a", "c"})
	put(t, j, "a", []byte("a2")) // while a's first version is under way
	if got := picks(j, all); len(got) != 0 {
		t.Fatalf("picked %v while every key is under way", got)
	}
	j.persisted(j.keys[a.Name].old[0])
	if got := strings.Join(picks(j, all), ","); got != "a" {
		t.Fatalf("after a's upload ended, picked %q, want its newer version", got)
	}
	j.persisted(j.keys[c.Name].inflight)
	j.failed(j.keys[b.Name].inflight, func(int) time.Duration { return time.Minute })
	if got := picks(j, all); len(got) != 0 {
		t.Fatalf("picked %v during b's backoff", got)
	}
	now = now.Add(time.Minute)
	if got := strings.Join(picks(j, all), ","); got != "b" {
		t.Fatalf("after b's backoff, picked %q, want b", got)
	}
}

// Keys another holder persists are not picked; once the ring makes this
// node their persister (Reconsider), they are, and a change of a key's
// holders is looked at without waiting.
func TestPickOnlyOwned(t *testing.T) {
	j, err := Open(t.TempDir(), 1<<30)
	testutil.Must(t, err)
	for i := range 10 {
		put(t, j, fmt.Sprintf("k%d", i), []byte{byte(i)})
	}
	var mu sync.Mutex
	mine := map[string]bool{"k1": true, "k3": true}
	owns := func(e Entry) bool {
		mu.Lock()
		defer mu.Unlock()
		return mine[e.Key] || len(e.Holders) > 0 && e.Holders[0] == "self"
	}
	if got := strings.Join(picks(j, owns), ","); got != "k1,k3" {
		t.Fatalf("picked %s, want k1,k3", got)
	}
	k5, _ := j.Get(Name{"team-a", "bucket-a", "k5"})
	testutil.Must(t, j.SetHolders(k5, []string{"self"}))
	if got := strings.Join(picks(j, owns), ","); got != "k5" {
		t.Fatalf("after k5's holders changed, picked %q, want k5", got)
	}
	mu.Lock()
	mine["k7"], mine["k8"] = true, true
	mu.Unlock()
	if got := picks(j, owns); len(got) != 0 {
		t.Fatalf("picked %v before the journal was told to reconsider", got)
	}
	j.Reconsider()
	if got := strings.Join(picks(j, owns), ","); got != "k7,k8" {
		t.Fatalf("after Reconsider, picked %q, want k7,k8", got)
	}
}

// BenchmarkPick is one pick (and the failed upload that queues the key
// again) on a journal holding many dirty keys, half of them persisted by
// another holder: what each persister worker pays per upload.
func BenchmarkPick(b *testing.B) {
	for _, n := range []int{1_000, 100_000} {
		b.Run(fmt.Sprintf("keys=%d", n), func(b *testing.B) {
			j, err := Open(b.TempDir(), 1<<30)
			testutil.Must(b, err)
			j.mu.Lock()
			for i := range n {
				name := Name{"team-a", "bucket-a", fmt.Sprintf("key/%08d", i)}
				holder := []string{"self", "other"}[i%2]
				ks := j.state(name)
				ks.latest = &Entry{Name: name, Version: uint64(i + 1), Op: OpPut, Holders: []string{holder}}
				j.enqueueLocked(name, ks)
			}
			j.mu.Unlock()
			owns := func(e Entry) bool { return e.Holders[0] == "self" }
			retryAtOnce := func(int) time.Duration { return 0 }
			b.ResetTimer()
			for range b.N {
				e, ok := j.next(owns)
				if !ok {
					b.Fatal("nothing to pick")
				}
				j.failed(e, retryAtOnce)
			}
		})
	}
}
