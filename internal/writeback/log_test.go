package writeback

import (
	"bytes"
	"math/rand/v2"
	"os"
	"sync"
	"testing"
	"time"

	"github.com/distcache/distcache/internal/testutil"
)

// A crash mid-append leaves a torn record at the log's end (cut short, or
// with bytes that never reached the disk): opening the journal again
// ignores it and finds every version acknowledged before it, small bodies
// (in the log) and large ones (files of their own), their later entries
// (holders, a done delete) included; what is written after that survives
// the next opening too.
func TestTornTailIsIgnored(t *testing.T) {
	for _, tear := range []string{"cut", "corrupt"} {
		t.Run(tear, func(t *testing.T) {
			dir := t.TempDir()
			r := rand.New(rand.NewPCG(7, 8))
			j, err := Open(dir, 1<<30)
			testutil.Must(t, err)
			small, large := testutil.RandomBytes(r, 10<<10), testutil.RandomBytes(r, inlineBytes+1000)
			a := put(t, j, "a", small)
			b := put(t, j, "b", large)
			testutil.Must(t, j.SetHolders(a, []string{"n1", "n2"}))
			del, err := j.Write(Entry{Name: Name{"team-a", "bucket-a", "c"}, Version: j.NextVersion(), Op: OpDelete}, nil)
			testutil.Must(t, err)
			j.keys[del.Name].inflight = j.keys[del.Name].latest
			j.persisted(j.keys[del.Name].latest) // S3 applied the delete: kept as a tombstone
			dropped := put(t, j, "d", small)
			j.Drop(dropped)

			j.log.mu.Lock()
			seg, end := j.log.path(j.log.seq), j.log.size // where the next record goes (the segment may be longer: prepared)
			j.log.mu.Unlock()
			torn := put(t, j, "torn", testutil.RandomBytes(r, 5000))
			testutil.Must(t, j.Close())
			// The last record, as a crash can leave it.
			switch tear {
			case "cut":
				testutil.Must(t, os.Truncate(seg, end+headerSize+100))
			case "corrupt":
				f, err := os.OpenFile(seg, os.O_RDWR, 0)
				testutil.Must(t, err)
				_, err = f.WriteAt([]byte{0xff, 0x00, 0xff}, end+headerSize+4000)
				testutil.Must(t, err)
				testutil.Must(t, f.Close())
			}

			j2, err := Open(dir, 1<<30)
			testutil.Must(t, err)
			defer j2.Close()
			if e, ok := j2.Get(torn.Name); ok {
				t.Fatalf("the torn record came back: %v", e)
			}
			if e, ok := j2.Get(a.Name); !ok || e.Version != a.Version || !bytes.Equal(readBody(t, j2, e), small) ||
				len(e.Holders) != 2 || e.Holders[1] != "n2" {
				t.Fatalf("a after reopening: %+v %v, want its version with holders n1, n2", e, ok)
			}
			if e, ok := j2.Get(b.Name); !ok || e.Version != b.Version || !bytes.Equal(readBody(t, j2, e), large) {
				t.Fatalf("b after reopening: %+v %v, want its large body", e, ok)
			}
			if e, ok := j2.Get(del.Name); !ok || e.Op != OpDelete || !e.Done {
				t.Fatalf("c after reopening: %+v %v, want its done delete", e, ok)
			}
			if e, ok := j2.Get(dropped.Name); ok {
				t.Fatalf("a dropped version came back: %v", e)
			}
			if s := j2.Stats(); s.Bytes != int64(len(small)+len(large)) {
				t.Fatalf("%d bytes held after reopening, want %d", s.Bytes, len(small)+len(large))
			}
			after := put(t, j2, "after", small)
			testutil.Must(t, j2.Close())
			j3, err := Open(dir, 1<<30)
			testutil.Must(t, err)
			defer j3.Close()
			if e, ok := j3.Get(after.Name); !ok || !bytes.Equal(readBody(t, j3, e), small) {
				t.Fatalf("a write after the torn record did not survive reopening: %+v %v", e, ok)
			}
			if _, ok := j3.Get(a.Name); !ok {
				t.Fatal("a is gone after the second reopening")
			}
		})
	}
}

// Concurrent writers share syncs: while one sync is under way, the writes
// that arrive wait for the next, and one sync covers them all.
func TestConcurrentWritesShareASync(t *testing.T) {
	j, err := Open(t.TempDir(), 1<<30)
	testutil.Must(t, err)
	defer j.Close()
	var mu sync.Mutex
	syncs := 0
	first, release := make(chan struct{}), make(chan struct{})
	j.log.afterSync = func() {
		mu.Lock()
		syncs++
		n := syncs
		mu.Unlock()
		if n == 1 {
			close(first)
			<-release
		}
	}
	body := bytes.Repeat([]byte("x"), 10<<10)
	var wg sync.WaitGroup
	wg.Go(func() { put(t, j, "first", body) })
	<-first // the first write's sync is under way
	const waiting = 8
	for i := range waiting {
		wg.Go(func() { put(t, j, "k"+string(rune('a'+i)), body) })
	}
	for { // until all of them appended their record
		j.log.mu.Lock()
		n := j.log.appended
		j.log.mu.Unlock()
		if n == 1+waiting {
			break
		}
		time.Sleep(time.Millisecond)
	}
	close(release)
	wg.Wait()
	if syncs != 2 {
		t.Fatalf("%d syncs for %d writes, want 2 (the first, then one for the %d that waited)", syncs, 1+waiting, waiting)
	}
	if s := j.Stats(); s.Objects != 1+waiting {
		t.Fatalf("%d objects held, want %d", s.Objects, 1+waiting)
	}
}

// A version held for long does not keep every segment after it: what the
// oldest segment still holds is copied forward, and the segments behind
// it go; the version reads the same after reopening.
func TestLongHeldVersionIsCopiedForward(t *testing.T) {
	dir := t.TempDir()
	j, err := Open(dir, 1<<30)
	testutil.Must(t, err)
	j.log.segBytes = 64 << 10
	r := rand.New(rand.NewPCG(9, 10))
	kept := testutil.RandomBytes(r, 3000)
	long, err := j.Write(Entry{Name: Name{"team-a", "tmp", "spill"}, Version: j.NextVersion(), Op: OpPut, Size: int64(len(kept)),
		Transient: true}, bytes.NewReader(kept))
	testutil.Must(t, err)
	body := testutil.RandomBytes(r, 10<<10)
	for i := range 200 { // ~30 segments, each version dropped again
		j.Drop(put(t, j, "k"+string(rune('a'+i%26))+string(rune('a'+i/26)), body))
	}
	deadline := time.Now().Add(time.Minute) // relocation runs in the background
	for {
		segs, err := segments(dir)
		testutil.Must(t, err)
		if len(segs) <= maxBehind+2 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("%d segments on disk, want at most %d", len(segs), maxBehind+2)
		}
		put(t, j, "nudge", body) // a write starts a relocation when one is due
		time.Sleep(10 * time.Millisecond)
	}
	if e, ok := j.Get(long.Name); !ok || !bytes.Equal(readBody(t, j, e), kept) {
		t.Fatalf("the long-held version after relocation: %+v %v", e, ok)
	}
	testutil.Must(t, j.Close())
	j2, err := Open(dir, 1<<30)
	testutil.Must(t, err)
	defer j2.Close()
	if e, ok := j2.Get(long.Name); !ok || !e.Transient || !bytes.Equal(readBody(t, j2, e), kept) {
		t.Fatalf("the long-held version after reopening: %+v %v", e, ok)
	}
	for i := range 200 {
		if e, ok := j2.Get(Name{"team-a", "bucket-a", "k" + string(rune('a'+i%26)) + string(rune('a'+i/26))}); ok {
			t.Fatalf("a dropped version came back: %v", e)
		}
	}
}

// Used, the journal's share of the node's disk bound, is the length of
// every file the journal keeps: the log's segments (the one prepared
// ahead included, and what they still hold of dropped versions) and the
// large bodies' files.
func TestUsedIsWhatTheFilesTake(t *testing.T) {
	dir := t.TempDir()
	j, err := Open(dir, 1<<30)
	testutil.Must(t, err)
	defer j.Close()
	r := rand.New(rand.NewPCG(11, 12))
	for i := range 50 {
		j.Drop(put(t, j, "gone"+string(rune('a'+i%26))+string(rune('a'+i/26)), testutil.RandomBytes(r, 10<<10)))
	}
	put(t, j, "small", testutil.RandomBytes(r, 10<<10))
	put(t, j, "large", testutil.RandomBytes(r, inlineBytes+1))
	for { // until the next segment is prepared
		j.log.mu.Lock()
		preparing := j.log.preparing
		j.log.mu.Unlock()
		if !preparing {
			break
		}
		time.Sleep(time.Millisecond)
	}
	files, err := os.ReadDir(dir)
	testutil.Must(t, err)
	var total int64
	for _, f := range files {
		fi, err := f.Info()
		testutil.Must(t, err)
		total += fi.Size()
	}
	if u := j.Used(); u != total {
		t.Fatalf("Used %d, the files take %d bytes", u, total)
	}
	if b := j.Stats().Bytes; b != 10<<10+inlineBytes+1 {
		t.Fatalf("Stats.Bytes %d, want the two bodies held (%d)", b, 10<<10+inlineBytes+1)
	}
}

// Each sync a write waits for is reported to ObserveSyncs, with its time.
func TestObserveSyncs(t *testing.T) {
	j, err := Open(t.TempDir(), 1<<30)
	testutil.Must(t, err)
	defer j.Close()
	var syncs []time.Duration
	j.ObserveSyncs(func(d time.Duration) { syncs = append(syncs, d) }) // one writer: no lock needed
	put(t, j, "a", []byte("body"))
	put(t, j, "b", []byte("body"))
	if len(syncs) != 2 || syncs[0] <= 0 || syncs[1] <= 0 {
		t.Errorf("syncs observed for two writes one after the other: %v", syncs)
	}
}
