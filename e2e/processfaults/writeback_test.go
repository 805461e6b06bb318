package processfaults_test

import (
	"bytes"
	"fmt"
	"math/rand/v2"
	"os"
	"testing"
	"time"
)

// TestKillDuringWriteBack kills the node with SIGKILL while writers put
// objects under a WriteBack prefix (held by the node, one replica: it runs
// alone), in some cycles with MinIO down so that nothing can be persisted
// before the kill; then MinIO comes back, the node restarts on the same
// data directory and, for each of cycles() rounds: every acknowledged
// write is read back exact through the restarted node and reaches MinIO
// byte-exact, with the ETag the node acknowledged (the journal was fsync'd
// before the answer and is resumed after the restart); an unacknowledged
// write is whole or absent, in MinIO and through the node.
func TestKillDuringWriteBack(t *testing.T) {
	e := newEnv(t)
	tenants := "tenants:\n  - name: " + tenant + "\n    buckets: [" + bucket + "]\n" +
		"    policies:\n      - {bucket: " + bucket + ", prefix: wb/, mode: WriteBack, replicas: 1}\n"
	if err := os.WriteFile(e.path("tenants.yaml"), []byte(tenants), 0o600); err != nil {
		t.Fatal(err)
	}
	rng := newRand(t)
	nd := e.newNode("node", t.TempDir(), "--disk-bytes", "512Mi", "--ram-bytes", "16Mi")
	sizes := []int{1, 40 << 10, chunkSz, 3*chunkSz + 777}

	var acked, unacked []write
	var stats struct{ acked, ackedBytes, whole, absent, downCycles int }
	nd.start(t)
	for cycle := range cycles(t) {
		down := cycle%2 == 0 // MinIO down from before the writes to after the kill
		if down {
			e.minio.Stop()
			stats.downCycles++
		}
		cycleAcked, cycleUnacked := writeUntilKilled(t, nd, rng, 2, 8, 24, func(r *rand.Rand, w, i int) write {
			return write{key: fmt.Sprintf("wb/c%d/w%d/%d", cycle, w, i), size: sizes[r.IntN(len(sizes))]}
		})
		if down {
			e.minio.Restart(t)
		}
		nd.start(t)
		for _, wr := range cycleAcked {
			readBackAcked(t, nd, wr)
		}
		deadline := time.Now().Add(2 * time.Minute)
		for _, wr := range cycleAcked {
			want := content(wr.key, wr.size)
			for {
				got, etag, ok := e.getS3(t, wr.key)
				if ok && bytes.Equal(got, want) && etag == wr.etag {
					break
				}
				if time.Now().After(deadline) {
					t.Fatalf("acknowledged write-back %s (%d bytes, ETag %s) in MinIO 2 minutes after the restart: exists %v, %d bytes, ETag %s",
						wr.key, wr.size, wr.etag, ok, len(got), etag)
				}
				time.Sleep(50 * time.Millisecond)
			}
			stats.acked++
			stats.ackedBytes += wr.size
		}
		for _, wr := range cycleUnacked {
			_, r, want := readUnacked(t, e, nd, wr)
			switch {
			case r.status == 200 && !bytes.Equal(r.body, want):
				t.Fatalf("unacknowledged %s read through the node: %d bytes that are not what was written", wr.key, len(r.body))
			case r.status != 200 && r.status != 404:
				t.Fatalf("unacknowledged %s: the node answered %d", wr.key, r.status)
			}
			if r.status == 200 {
				stats.whole++
			} else {
				stats.absent++
			}
		}
		acked = append(acked, cycleAcked...)
		unacked = append(unacked, cycleUnacked...)
	}
	// Later kills and MinIO's outages lost none of the earlier cycles'
	// acknowledged writes.
	for _, wr := range acked {
		if got, etag, ok := e.getS3(t, wr.key); !ok || !bytes.Equal(got, content(wr.key, wr.size)) || etag != wr.etag {
			t.Fatalf("acknowledged write-back %s (%d bytes, ETag %s) at the end: in MinIO %v, %d bytes, ETag %s",
				wr.key, wr.size, wr.etag, ok, len(got), etag)
		}
	}
	nd.stop(t)
	t.Logf("%d kills during write-back writes (%d of them with MinIO down): %d acknowledged writes (%d KiB) all read back and in MinIO byte-exact; "+
		"%d unacknowledged: %d whole, %d absent", cycles(t), stats.downCycles, stats.acked, stats.ackedBytes>>10,
		len(unacked), stats.whole, stats.absent)
}
