package processfaults_test

import (
	"bytes"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"
)

// smallFilesystem mounts a tmpfs of size bytes on a new directory and
// unmounts it when the test ends. It needs root: not root, the test is
// skipped, unless CI is set, when it fails instead (as e2e/cluster does).
func smallFilesystem(t *testing.T, size string) string {
	t.Helper()
	if os.Geteuid() != 0 {
		const why = "the disk-full test mounts a small tmpfs, which needs root"
		if os.Getenv("CI") != "" {
			t.Fatal(why + "; CI is set, so this is a failure, not a skip: run the tests as root on CI")
		}
		t.Skip(why + "; run as root to include it (with CI set, not being root fails instead)")
	}
	dir := filepath.Join(t.TempDir(), "small")
	if err := os.Mkdir(dir, 0o750); err != nil {
		t.Fatal(err)
	}
	if out, err := exec.Command("mount", "-t", "tmpfs", "-o", "size="+size, "tmpfs", dir).CombinedOutput(); err != nil {
		t.Fatalf("mount a %s tmpfs on %s: %v: %s", size, dir, err, out)
	}
	t.Cleanup(func() {
		if out, err := exec.Command("umount", dir).CombinedOutput(); err != nil {
			t.Errorf("umount %s: %v: %s", dir, err, out)
		}
	})
	return dir
}

// TestDiskFull puts a node's data directory on a 96 MiB filesystem:
//
//  1. with --disk-bytes 256Mi, larger than the filesystem (a
//     misconfiguration), so without the store's own check badger would meet
//     the real ENOSPC, which it turns into SIGBUS (it writes through mmap);
//  2. then with another writer filling the filesystem up to the last MiB;
//  3. then with that space freed again.
//
// Throughout, every read and write-through succeeds byte-exact (from S3 when
// the disk cannot take the chunk) and the node keeps running; it says so in
// its log and metrics; and it caches again once there is room.
func TestDiskFull(t *testing.T) {
	fsDir := smallFilesystem(t, "96m")
	e := newEnv(t)
	n := e.newNode("node", filepath.Join(fsDir, "store"), "--disk-bytes", "256Mi", "--ram-bytes", "0")
	n.start(t)

	const size = 2*chunkSz + 12345 // 3 chunks
	next := 0
	// round writes (through the node) or uploads (to S3) count objects and
	// reads each twice; it returns how many second reads were disk hits.
	round := func(t *testing.T, count int) (hits int) {
		t.Helper()
		for range count {
			key := fmt.Sprintf("full/%d.bin", next)
			data := content(key, size)
			if next%2 == 0 {
				if _, err := n.put(key, data); err != nil {
					t.Fatalf("write-through %s: %v", key, err)
				}
			} else {
				e.putS3(t, key, data)
			}
			next++
			for pass := range 2 {
				r, err := n.get(key, "", "")
				if err != nil || r.status != 200 || !bytes.Equal(r.body, data) {
					t.Fatalf("read %s (pass %d): %v, status %d, %d bytes", key, pass, err, r.status, len(r.body))
				}
				if pass == 1 && r.header.Get("X-Distcache-Cache") == "hit_disk" {
					hits++
				}
			}
			if !n.running() {
				t.Fatalf("the node exited at %s", key)
			}
		}
		return hits
	}
	report := func(phase string, hits, count int) metricSet {
		m := n.metrics(t)
		t.Logf("%s: %d of %d re-reads were disk hits; chunks on disk %v, disk limit %v of capacity %v, filesystem free %v, rejected %v, evictions %v, store errors %v",
			phase, hits, count, m.Sum("distcache_store_chunks"), m.Sum("distcache_store_disk_limit_bytes"),
			m.Sum("distcache_store_disk_capacity_bytes"), m.Sum("distcache_store_filesystem_free_bytes"),
			m.Sum("distcache_store_rejected_total"), m.Sum("distcache_store_evictions_total"), m.Sum("distcache_store_errors_total"))
		return m
	}

	// 1. The bound is larger than the filesystem: 120 MiB of chunks.
	hits := round(t, 40)
	m := report("bound larger than the filesystem", hits, 40)
	if limit := m.Sum("distcache_store_disk_limit_bytes"); limit >= 96<<20 {
		t.Errorf("distcache_store_disk_limit_bytes %v: the store did not notice the 96 MiB filesystem", limit)
	}
	if !strings.Contains(n.logs.String(), "less room than the disk bound") {
		t.Error("the node did not log that the filesystem is smaller than its disk bound")
	}
	if hits == 0 {
		t.Error("nothing was cached on a filesystem with room for some of it")
	}

	// 2. Another writer takes all but the last MiB.
	filler := filepath.Join(fsDir, "filler")
	free := fsFree(t, fsDir)
	if err := os.WriteFile(filler, make([]byte, max(0, free-1<<20)), 0o600); err != nil {
		t.Fatalf("fill the filesystem: %v", err)
	}
	rejected := m.Sum("distcache_store_rejected_total")
	hits = round(t, 10)
	m = report("filesystem filled by another writer", hits, 10)
	if m.Sum("distcache_store_rejected_total") == rejected && hits == 10 {
		t.Error("the store cached everything on a full filesystem")
	}

	// 3. The space is freed: the node caches again. It sees the room at its
	// next usage measurement and may first have to reclaim the value-log
	// garbage phase 2's evictions left (every 10 s, sooner when garbage
	// piles up), so a round may still be refused: give it a few.
	if err := os.Remove(filler); err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(45 * time.Second)
	for {
		hits = round(t, 10)
		report("space freed", hits, 10)
		if hits >= 5 || time.Now().After(deadline) {
			break
		}
		time.Sleep(2 * time.Second)
	}
	if hits < 5 {
		t.Errorf("only %d of 10 re-reads were disk hits 45 s after the filesystem had room again", hits)
	}
}

// fsFree is the free space on the filesystem holding dir.
func fsFree(t *testing.T, dir string) int64 {
	t.Helper()
	var st syscall.Statfs_t
	if err := syscall.Statfs(dir, &st); err != nil {
		t.Fatal(err)
	}
	return int64(st.Bavail) * int64(st.Bsize)
}
