package processfaults_test

import (
	"bytes"
	"fmt"
	"math/rand/v2"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// killAfter waits until progress() reaches n, then a seeded 0-300 ms more,
// calls before (if not nil) and kills the node with SIGKILL.
func killAfter(t *testing.T, nd *node, rng *rand.Rand, n int64, progress func() int64, before func()) {
	t.Helper()
	deadline := time.Now().Add(2 * time.Minute)
	for progress() < n {
		if time.Now().After(deadline) {
			t.Fatalf("no progress before the kill (%d of %d)", progress(), n)
		}
		time.Sleep(5 * time.Millisecond)
	}
	time.Sleep(time.Duration(rng.IntN(300)) * time.Millisecond)
	if before != nil {
		before()
	}
	nd.kill9(t)
}

// write is a put through a node of content(key, size); etag is the ETag
// the node acknowledged it with, "" if it did not.
type write struct {
	key  string
	size int
	etag string
}

// readBackAcked fails t unless the acknowledged write wr reads back exact
// through nd.
func readBackAcked(t *testing.T, nd *node, wr write) {
	t.Helper()
	want := content(wr.key, wr.size)
	r, err := nd.get(wr.key, "", "")
	if err != nil || r.status != 200 || !bytes.Equal(r.body, want) {
		t.Fatalf("read of acknowledged %s through the restarted node: %v, status %d, %d bytes", wr.key, err, r.status, len(r.body))
	}
}

// readUnacked is what became of the unacknowledged write wr: whether MinIO
// holds it (a part of it fails t: it is whole or absent there), nd's answer
// to a read of it (an error fails t) and the content it was to have.
func readUnacked(t *testing.T, e *env, nd *node, wr write) (inS3 bool, r reply, want []byte) {
	t.Helper()
	want = content(wr.key, wr.size)
	got, _, inS3 := e.getS3(t, wr.key)
	if inS3 && !bytes.Equal(got, want) {
		t.Fatalf("unacknowledged write %s is in MinIO but not whole: %d of %d bytes", wr.key, len(got), wr.size)
	}
	r, err := nd.get(wr.key, "", "")
	if err != nil {
		t.Fatalf("read of unacknowledged %s: %v", wr.key, err)
	}
	return inS3, r, want
}

// writeUntilKilled runs four writers putting through nd the writes next
// draws (writer w's i-th, from the writer's own generator, seeded by a
// draw of rng and stream), kills nd with killAfter once
// minAcked+rng.IntN(spread) writes were acknowledged, and returns the
// writes the node acknowledged and those it did not. A writer stops at its
// first failure: the node is gone.
func writeUntilKilled(t *testing.T, nd *node, rng *rand.Rand, stream uint64, minAcked, spread int,
	next func(r *rand.Rand, w, i int) write) (acked, unacked []write) {
	t.Helper()
	var mu sync.Mutex
	var done atomic.Int64
	var wg sync.WaitGroup
	stop := make(chan struct{})
	for w := range 4 {
		seed := rng.Uint64()
		wg.Go(func() {
			r := rand.New(rand.NewPCG(seed, stream))
			for i := 0; ; i++ {
				select {
				case <-stop:
					return
				default:
				}
				wr := next(r, w, i)
				etag, err := nd.put(wr.key, content(wr.key, wr.size))
				mu.Lock()
				if err == nil {
					wr.etag = etag
					acked = append(acked, wr)
					done.Add(1)
				} else {
					unacked = append(unacked, wr)
				}
				mu.Unlock()
				if err != nil {
					return // the node is gone
				}
			}
		})
	}
	killAfter(t, nd, rng, int64(minAcked+rng.IntN(spread)), done.Load, nil)
	close(stop)
	wg.Wait()
	return acked, unacked
}

// TestKillDuringWriteThroughs kills the node with SIGKILL while writers put
// objects through it (single-chunk, multi-chunk and multipart, over 16 MiB),
// restarts it on the same data directory and checks, for each of cycles()
// rounds: every acknowledged write is in MinIO byte-exact with the ETag the
// node acknowledged, and reads through the restarted node are byte-exact;
// an unacknowledged write is either absent from MinIO or whole there, and
// the node serves it whole or not at all.
func TestKillDuringWriteThroughs(t *testing.T) {
	e := newEnv(t)
	rng := newRand(t)
	nd := e.newNode("node", t.TempDir(), "--disk-bytes", "512Mi", "--ram-bytes", "16Mi")
	sizes := []int{40 << 10, chunkSz, 3*chunkSz + 777, 5*chunkSz - 1, 17<<20 + 4321}

	var stats struct{ puts, ackedBytes, hits, misses, s3Gets, lostUnacked, wholeUnacked int }
	nd.start(t)
	for cycle := range cycles(t) {
		acked, unacked := writeUntilKilled(t, nd, rng, 1, 2, 8, func(r *rand.Rand, w, i int) write {
			size := sizes[r.IntN(len(sizes)-1)]
			if r.IntN(6) == 0 {
				size = sizes[len(sizes)-1] // multipart
			}
			return write{key: fmt.Sprintf("c%d/w%d/%d", cycle, w, i), size: size}
		})
		nd.start(t)
		for _, wr := range acked {
			want := content(wr.key, wr.size)
			got, etag, ok := e.getS3(t, wr.key)
			if !ok || !bytes.Equal(got, want) || etag != wr.etag {
				t.Fatalf("acknowledged write %s (%d bytes, ETag %s) in MinIO: exists %v, %d bytes, ETag %s, exact %v",
					wr.key, wr.size, wr.etag, ok, len(got), etag, bytes.Equal(got, want))
			}
			readBackAcked(t, nd, wr)
			stats.puts++
			stats.ackedBytes += wr.size
		}
		for _, wr := range unacked {
			ok, r, want := readUnacked(t, e, nd, wr)
			switch {
			case ok && (r.status != 200 || !bytes.Equal(r.body, want)):
				t.Fatalf("unacknowledged %s is in MinIO, the node answered %d with %d bytes", wr.key, r.status, len(r.body))
			case !ok && r.status != 404:
				t.Fatalf("unacknowledged %s is not in MinIO, the node answered %d", wr.key, r.status)
			}
			if ok {
				stats.wholeUnacked++
			} else {
				stats.lostUnacked++
			}
		}
		m := nd.metrics(t)
		stats.hits += int(m.chunkReads("hit_disk") + m.chunkReads("hit_ram"))
		stats.misses += int(m.chunkReads("miss"))
		stats.s3Gets += int(m.s3Gets())
	}
	nd.stop(t)
	t.Logf("%d kills during write-throughs: %d acknowledged writes (%d MiB) all in MinIO byte-exact and read back exact; "+
		"%d unacknowledged: %d whole in MinIO, %d absent; reads after restarts: %d chunk hits, %d misses (%d S3 GETs); "+
		"%d multipart uploads left pending in MinIO",
		cycles(t), stats.puts, stats.ackedBytes>>20, stats.wholeUnacked+stats.lostUnacked, stats.wholeUnacked, stats.lostUnacked,
		stats.hits, stats.misses, stats.s3Gets, e.pendingUploads(t))
}

// TestKillDuringReads kills the node with SIGKILL while readers read warm
// (cached) and cold objects as whole objects, single chunks and ranges,
// restarts it and checks, for each of cycles() rounds: every answer before
// and after the kill is byte-exact (compared with what MinIO holds), and the
// cache is still warm: re-reading what was cached before the kill is served
// from disk, not S3.
func TestKillDuringReads(t *testing.T) {
	e := newEnv(t)
	rng := newRand(t)
	nd := e.newNode("node", t.TempDir(), "--disk-bytes", "512Mi", "--ram-bytes", "8Mi")

	type object struct {
		key  string
		data []byte
	}
	var objects []object
	for i := range 24 {
		key := fmt.Sprintf("obj/%d.bin", i)
		o := object{key, content(key, 2*chunkSz+chunkSz/2+i*1000)}
		e.putS3(t, key, o.data)
		if got, _, ok := e.getS3(t, key); !ok || !bytes.Equal(got, o.data) {
			t.Fatalf("MinIO does not hold %s as written", key)
		}
		objects = append(objects, o)
	}
	check := func(o object, r reply, err error, lo, hi int) error {
		if err != nil {
			return err
		}
		if r.status != 200 && r.status != 206 {
			return fmt.Errorf("%s: status %d: %s", o.key, r.status, r.body)
		}
		if !bytes.Equal(r.body, o.data[lo:hi]) {
			return fmt.Errorf("%s [%d,%d): WRONG BYTES (%d bytes)", o.key, lo, hi, len(r.body))
		}
		return nil
	}
	// read reads o in one of three ways; a transport error is returned,
	// wrong bytes fail the test.
	var verified atomic.Int64
	read := func(t *testing.T, r *rand.Rand, o object) error {
		var lo, hi int
		var rep reply
		var err error
		switch r.IntN(3) {
		case 0:
			lo, hi = 0, len(o.data)
			rep, err = nd.get(o.key, "", "")
		case 1:
			idx := r.IntN((len(o.data) + chunkSz - 1) / chunkSz)
			lo, hi = idx*chunkSz, min((idx+1)*chunkSz, len(o.data))
			rep, err = nd.get(o.key, fmt.Sprintf("chunk=%d", idx), "")
		default:
			lo = r.IntN(len(o.data) - 1)
			hi = lo + 1 + r.IntN(len(o.data)-lo)
			rep, err = nd.get(o.key, "", fmt.Sprintf("bytes=%d-%d", lo, hi-1))
		}
		if err == nil {
			if cerr := check(o, rep, nil, lo, hi); cerr != nil {
				t.Error(cerr)
				return cerr
			}
			verified.Add(int64(hi - lo))
		}
		return err
	}

	var totals struct {
		reads, warmChunks, warmHits, warmS3Gets int
	}
	warm := map[string]bool{}
	nd.start(t)
	for cycle := range cycles(t) {
		// Warm a third more of the objects before the readers start.
		for _, o := range objects[cycle*4 : cycle*4+8] {
			if r, err := nd.get(o.key, "", ""); check(o, r, err, 0, len(o.data)) != nil {
				t.Fatalf("warming %s: %v", o.key, check(o, r, err, 0, len(o.data)))
			}
			warm[o.key] = true
		}
		var reads atomic.Int64
		var wg sync.WaitGroup
		for range 4 {
			seed := rng.Uint64()
			wg.Add(1)
			go func() {
				defer wg.Done()
				r := rand.New(rand.NewPCG(seed, 2))
				for {
					if err := read(t, r, objects[r.IntN(len(objects))]); err != nil {
						return // the node is gone (or wrong bytes, reported)
					}
					reads.Add(1)
				}
			}()
		}
		cachedBefore := 0
		killAfter(t, nd, rng, int64(20+rng.IntN(80)), reads.Load, func() {
			// How many chunks the store held just before the kill.
			cachedBefore = int(nd.metrics(t).Sum("distcache_store_chunks"))
		})
		wg.Wait()
		if t.Failed() {
			t.FailNow()
		}
		totals.reads += int(reads.Load())

		nd.start(t)
		m := nd.metrics(t)
		onDiskAfter := int(m.Sum("distcache_store_chunks"))
		// The warm set again, whole: from disk, not S3.
		before := m.s3Gets()
		chunks := 0
		for _, o := range objects {
			if !warm[o.key] {
				continue
			}
			r, err := nd.get(o.key, "", "")
			if err := check(o, r, err, 0, len(o.data)); err != nil {
				t.Fatalf("after restart: %v", err)
			}
			chunks += (len(o.data) + chunkSz - 1) / chunkSz
		}
		m = nd.metrics(t)
		gets := int(m.s3Gets() - before)
		totals.warmChunks += chunks
		totals.warmS3Gets += gets
		totals.warmHits += int(m.chunkReads("hit_disk"))
		t.Logf("cycle %d: killed after %d reads; %d chunks on disk shortly before the kill, %d after restart; re-reading %d warm chunks made %d S3 GETs",
			cycle, reads.Load(), cachedBefore, onDiskAfter, chunks, gets)
		if onDiskAfter < cachedBefore {
			t.Errorf("cycle %d: %d chunks on disk before the kill, %d after the restart", cycle, cachedBefore, onDiskAfter)
		}
		if gets > chunks/10 {
			t.Errorf("cycle %d: re-reading %d chunks cached before the kill made %d S3 GETs: the cache did not stay warm", cycle, chunks, gets)
		}
		// Every object, warm or cold, still reads exact.
		r := rand.New(rand.NewPCG(rng.Uint64(), 3))
		for _, o := range objects {
			if err := read(t, r, o); err != nil {
				t.Fatalf("after restart: %v", err)
			}
		}
	}
	nd.stop(t)
	t.Logf("%d kills during reads: %d reads before the kills, %d MiB verified byte-exact in all; after restarts %d warm chunks re-read: %d disk hits, %d S3 GETs",
		cycles(t), totals.reads, verified.Load()>>20, totals.warmChunks, totals.warmHits, totals.warmS3Gets)
}
