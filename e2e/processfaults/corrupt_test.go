package processfaults_test

import (
	"bytes"
	"fmt"

	"math/rand/v2"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strings"
	"testing"

	"github.com/distcache/distcache/internal/testutil"
)

// corruption damages a stopped node's data directory in one way.
type corruption struct {
	name string
	// kill stops the node with SIGKILL instead of SIGTERM before the damage,
	// so the memtable is still in its write-ahead .mem file.
	kill   bool
	damage func(t *testing.T, dir string, rng *rand.Rand)
	// expect is what the node must do: "crc" (damaged chunks fail their
	// checksum: counted, refetched), "reset" (the store is deleted and
	// starts empty, logged and counted) or "" (badger copes; only the bytes
	// are checked).
	expect string
}

// storeFiles are the store's files in dir matching pattern: not the
// directories in it (the write-back journal's, which is not the store's).
func storeFiles(t *testing.T, dir, pattern string) []string {
	t.Helper()
	files, err := filepath.Glob(filepath.Join(dir, pattern))
	if err != nil {
		t.Fatal(err)
	}
	files = slices.DeleteFunc(files, func(f string) bool {
		fi, err := os.Stat(f)
		return err == nil && fi.IsDir()
	})
	sort.Strings(files)
	return files
}

func truncateFile(t *testing.T, f string, size int64) {
	t.Helper()
	if err := os.Truncate(f, size); err != nil {
		t.Fatal(err)
	}
}

func fileSize(t *testing.T, f string) int64 {
	t.Helper()
	st, err := os.Stat(f)
	if err != nil {
		t.Fatal(err)
	}
	return st.Size()
}

func overwrite(t *testing.T, f string, data []byte) {
	t.Helper()
	if err := os.WriteFile(f, data, 0o600); err != nil {
		t.Fatal(err)
	}
}

func remove(t *testing.T, files ...string) {
	t.Helper()
	if len(files) == 0 {
		t.Fatal("no file to remove")
	}
	for _, f := range files {
		if err := os.Remove(f); err != nil {
			t.Fatal(err)
		}
	}
}

// usedVlog is the value-log file holding the most data (badger creates
// the next one empty).
func usedVlog(t *testing.T, dir string) string {
	t.Helper()
	var best string
	var size int64 = -1
	for _, f := range storeFiles(t, dir, "*.vlog") {
		if s := dataSize(t, f); s > size {
			best, size = f, s
		}
	}
	return best
}

// dataSize is the bytes of a file actually allocated (badger preallocates
// value-log files sparsely).
func dataSize(t *testing.T, f string) int64 {
	t.Helper()
	st, err := os.Stat(f)
	if err != nil {
		t.Fatal(err)
	}
	return blocks(st)
}

var corruptions = []corruption{
	{name: "vlog bytes flipped", expect: "crc", damage: func(t *testing.T, dir string, rng *rand.Rand) {
		testutil.FlipBytes(t, storeFiles(t, dir, "*.vlog"), 20, 64, rng)
	}},
	{name: "vlog zeroed", expect: "crc", damage: func(t *testing.T, dir string, rng *rand.Rand) {
		f := usedVlog(t, dir)
		overwrite(t, f, make([]byte, fileSize(t, f)))
	}},
	{name: "vlog truncated", expect: "crc", damage: func(t *testing.T, dir string, rng *rand.Rand) {
		f := usedVlog(t, dir)
		truncateFile(t, f, dataSize(t, f)/2)
	}},
	{name: "vlog deleted", expect: "crc", damage: func(t *testing.T, dir string, rng *rand.Rand) {
		remove(t, usedVlog(t, dir))
	}},
	{name: "sst bytes flipped", expect: "reset", damage: func(t *testing.T, dir string, rng *rand.Rand) {
		testutil.FlipBytes(t, storeFiles(t, dir, "*.sst"), 0, 16, rng)
	}},
	{name: "sst truncated", expect: "reset", damage: func(t *testing.T, dir string, rng *rand.Rand) {
		for _, f := range storeFiles(t, dir, "*.sst") {
			truncateFile(t, f, fileSize(t, f)/2)
		}
	}},
	{name: "sst deleted", expect: "reset", damage: func(t *testing.T, dir string, rng *rand.Rand) {
		remove(t, storeFiles(t, dir, "*.sst")...)
	}},
	{name: "MANIFEST deleted", damage: func(t *testing.T, dir string, rng *rand.Rand) {
		remove(t, filepath.Join(dir, "MANIFEST"))
	}},
	{name: "MANIFEST garbage", expect: "reset", damage: func(t *testing.T, dir string, rng *rand.Rand) {
		f := filepath.Join(dir, "MANIFEST")
		b := make([]byte, fileSize(t, f))
		for i := range b {
			b[i] = byte(rng.IntN(256))
		}
		overwrite(t, f, b)
	}},
	{name: "MANIFEST truncated", damage: func(t *testing.T, dir string, rng *rand.Rand) {
		f := filepath.Join(dir, "MANIFEST")
		truncateFile(t, f, fileSize(t, f)/2)
	}},
	{name: "KEYREGISTRY garbage", expect: "reset", damage: func(t *testing.T, dir string, rng *rand.Rand) {
		overwrite(t, filepath.Join(dir, "KEYREGISTRY"), bytes.Repeat([]byte{0xa5}, 64))
	}},
	{name: "DISCARD garbage", damage: func(t *testing.T, dir string, rng *rand.Rand) {
		f := filepath.Join(dir, "DISCARD")
		overwrite(t, f, bytes.Repeat([]byte{0xff}, int(fileSize(t, f))))
	}},
	{name: "memtable WAL bytes flipped", kill: true, damage: func(t *testing.T, dir string, rng *rand.Rand) {
		testutil.FlipBytes(t, storeFiles(t, dir, "*.mem"), 0, 64, rng)
	}},
	{name: "memtable WAL truncated", kill: true, damage: func(t *testing.T, dir string, rng *rand.Rand) {
		for _, f := range storeFiles(t, dir, "*.mem") {
			truncateFile(t, f, 4096)
		}
	}},
	{name: "open interrupted", expect: "reset", damage: func(t *testing.T, dir string, rng *rand.Rand) {
		// What a crash inside badger.Open leaves (recover.go).
		overwrite(t, filepath.Join(dir, "DISTCACHE-OPENING"), nil)
	}},
	{name: "everything garbage", expect: "reset", damage: func(t *testing.T, dir string, rng *rand.Rand) {
		for _, f := range storeFiles(t, dir, "*") {
			b := make([]byte, 4096)
			for i := range b {
				b[i] = byte(rng.IntN(256))
			}
			overwrite(t, f, b)
		}
	}},
}

// TestCorruptStoreFiles damages the store of a stopped node in each way of
// corruptions and starts it again: it must come up (never exit, so never
// crash-loop in a pod) and every read must be byte-exact: a damaged chunk is
// detected and refetched from S3, or the store is reset.
func TestCorruptStoreFiles(t *testing.T) {
	e := newEnv(t)
	rng := newRand(t)

	// Objects cached by reads (misses filled from S3) and by write-throughs.
	type object struct {
		key  string
		size int
	}
	var objects []object
	for i := range 6 {
		o := object{fmt.Sprintf("read/%d.bin", i), 2*chunkSz + 1000*i + 17}
		e.putS3(t, o.key, content(o.key, o.size))
		objects = append(objects, o)
	}
	written := []object{{"written/a.bin", 3*chunkSz + 5}, {"written/b.bin", 200 << 10}}
	objects = append(objects, written...)

	readAll := func(t *testing.T, n *node) {
		t.Helper()
		for _, o := range objects {
			r, err := n.get(o.key, "", "")
			if err != nil {
				t.Fatalf("read %s: %v", o.key, err)
			}
			if r.status != 200 || !bytes.Equal(r.body, content(o.key, o.size)) {
				t.Fatalf("read %s: status %d, %d bytes, not the object's bytes (%d)", o.key, r.status, len(r.body), o.size)
			}
		}
	}

	var total struct{ failures, hits, misses float64 }
	resets := 0
	for _, c := range corruptions {
		t.Run(c.name, func(t *testing.T) {
			dir := filepath.Join(t.TempDir(), "store")
			n := e.newNode("node", dir, "--disk-bytes", "64Mi", "--ram-bytes", "0")
			n.start(t)
			for _, o := range written {
				if _, err := n.put(o.key, content(o.key, o.size)); err != nil {
					t.Fatal(err)
				}
			}
			readAll(t, n)
			if c.kill {
				n.kill9(t)
			} else {
				n.stop(t)
			}
			c.damage(t, dir, rng)

			mark := n.logs.len()
			n.start(t)
			readAll(t, n)
			readAll(t, n) // what the first pass refetched is served again, still exact
			m := n.metrics(t)
			failures := m.Sum("distcache_store_checksum_failures_total")
			hits, misses := m.chunkReads("hit_disk"), m.chunkReads("miss")
			total.failures += failures
			total.hits += hits
			total.misses += misses
			if m.Sum("distcache_store_resets_total") > 0 {
				resets++
			}
			reset := strings.Contains(n.logs.since(mark), "starting with an empty store")
			t.Logf("after damage: %v checksum failures, %v disk hits, %v misses, store reset: %v, store errors %v",
				failures, hits, misses, reset, m.Sum("distcache_store_errors_total"))
			switch c.expect {
			case "crc":
				if failures == 0 {
					t.Error("no checksum failure counted for damaged value-log data")
				}
			case "reset":
				if !reset || m.Sum("distcache_store_resets_total") != 1 {
					t.Errorf("store not reset (logged %v, distcache_store_resets_total %v)", reset, m.Sum("distcache_store_resets_total"))
				}
			}
			if !n.running() {
				t.Fatalf("the node exited after serving")
			}
			n.stop(t)
		})
	}
	t.Logf("%d corruptions: %v checksum failures, %d store resets, %v disk hits, %v misses, every read byte-exact",
		len(corruptions), total.failures, resets, total.hits, total.misses)
}
