package node_test

import (
	"bytes"
	"crypto/tls"
	"errors"
	"fmt"
	"io/fs"
	"math/rand/v2"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/distcache/distcache/internal/pki"
	"github.com/distcache/distcache/internal/testutil"
)

func TestClientCertificatesAreRequiredAtTheHandshake(t *testing.T) {
	h := newHarness(t, options{})
	h.putDirect("bucket-a", "k", []byte("x"))
	roots := h.client(tenant("team-a")).Transport.(*http.Transport).TLSClientConfig.RootCAs

	other, err := pki.NewCA("some other CA", time.Hour)
	testutil.Must(t, err)
	foreign, err := other.IssueClient(tenant("team-a"), time.Hour)
	testutil.Must(t, err)
	foreignCert, err := tls.X509KeyPair(foreign.CertPEM, foreign.KeyPEM)
	testutil.Must(t, err)
	expired, err := h.ca.IssueClientWindow(tenant("team-a"), time.Now().Add(-2*time.Hour), time.Now().Add(-time.Hour))
	testutil.Must(t, err)
	expiredCert, err := tls.X509KeyPair(expired.CertPEM, expired.KeyPEM)
	testutil.Must(t, err)

	for name, certs := range map[string][]tls.Certificate{
		"no certificate":         nil,
		"another CA's cert":      {foreignCert},
		"an expired certificate": {expiredCert},
	} {
		t.Run(name, func(t *testing.T) {
			c := &http.Client{Transport: &http.Transport{TLSClientConfig: &tls.Config{
				RootCAs: roots, Certificates: certs, MinVersion: tls.VersionTLS13,
			}}}
			resp, err := c.Get(h.url("bucket-a", "k", ""))
			if err == nil {
				resp.Body.Close()
				t.Fatalf("request succeeded with status %d; want the handshake refused", resp.StatusCode)
			}
			if !strings.Contains(err.Error(), "tls") {
				t.Fatalf("want a TLS alert, got %v", err)
			}
		})
	}
}

// cachedObjects puts n objects into bucket-a straight to S3, prefix-i of
// size(i) bytes from r, and reads each once through a, so that the node has
// them cached.
func (h *harness) cachedObjects(a *http.Client, r *rand.Rand, prefix string, n int, size func(i int) int) map[string][]byte {
	objects := map[string][]byte{}
	for i := 0; i < n; i++ {
		key := fmt.Sprintf("%s-%d", prefix, i)
		objects[key] = testutil.RandomBytes(r, size(i))
		h.putDirect("bucket-a", key, objects[key])
		h.get(a, "bucket-a", key, "", nil)
	}
	return objects
}

func TestChunksCachedBeforeARestartAreHitsAfter(t *testing.T) {
	h := newHarness(t, options{})
	a := h.client(tenant("team-a"))
	objects := h.cachedObjects(a, rand.New(rand.NewPCG(13, 14)), "warm", 4, func(i int) int { return 2*testChunk + i })
	h.restartNode()
	h.proxy.Reset()
	for key, data := range objects {
		got := h.get(a, "bucket-a", key, "", nil)
		if !bytes.Equal(got.body, data) {
			t.Fatalf("%s differs after restart", key)
		}
		if c := got.header.Get("X-Distcache-Cache"); c != "hit_disk" {
			t.Fatalf("%s after restart: %q, want hit_disk", key, c)
		}
	}
	if n := h.proxy.Count("", "/"); n != 0 {
		t.Fatalf("reads after restart made %d S3 requests, want 0", n)
	}
}

func TestCorruptedStoreFilesNeverReachTheClient(t *testing.T) {
	h := newHarness(t, options{})
	a := h.client(tenant("team-a"))
	objects := h.cachedObjects(a, rand.New(rand.NewPCG(15, 16)), "c", 6, func(int) int { return 3 * testChunk })
	h.stopNode()
	flipped := 0
	testutil.Must(t, filepath.WalkDir(h.dataDir, func(path string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() || !strings.HasSuffix(path, ".vlog") {
			return err
		}
		b, err := os.ReadFile(path)
		if err != nil {
			return err
		}
		// Flip one byte every 4 KiB past the header: every chunk is hit.
		for off := 4096; off < len(b); off += 4096 {
			b[off] ^= 0xFF
			flipped++
		}
		return os.WriteFile(path, b, 0o600)
	}))
	if flipped == 0 {
		t.Fatal("found no value-log bytes to corrupt")
	}
	h.startNode()
	for key, data := range objects {
		if got := h.get(a, "bucket-a", key, "", nil); got.status != http.StatusOK || !bytes.Equal(got.body, data) {
			t.Fatalf("%s after corruption: status %d, bytes equal %v", key, got.status, bytes.Equal(got.body, data))
		}
	}
	if n := h.store.Stats().ChecksumFailures; n == 0 {
		t.Fatal("checksum failure count did not move")
	}
}

// duBytes is what `du` reports for a directory: allocated blocks.
func duBytes(t testing.TB, dir string) int64 {
	var total int64
	testutil.Must(t, filepath.WalkDir(dir, func(path string, d fs.DirEntry, err error) error {
		if errors.Is(err, fs.ErrNotExist) {
			return nil // removed by compaction or GC while we walked
		}
		if err != nil {
			return err
		}
		info, err := d.Info()
		if errors.Is(err, fs.ErrNotExist) {
			return nil
		}
		if err != nil {
			return err
		}
		if st, ok := info.Sys().(*syscall.Stat_t); ok {
			total += st.Blocks * 512
		}
		return nil
	}))
	return total
}

func TestDiskBoundAndQuotaHoldUnderChurn(t *testing.T) {
	const bound = 24 << 20
	h := newHarness(t, options{diskBytes: bound, tenantsYAML: `tenants:
  - name: team-a
    buckets: [bucket-a]
    quotaBytes: 4194304
  - name: team-b
    buckets: [bucket-b]
`})
	a, b := h.client(tenant("team-a")), h.client(tenant("team-b"))
	r := rand.New(rand.NewPCG(17, 18))
	const objSize = 4 * testChunk // 1 MiB
	// Write through and read far more than the bound: 10x for team-b, and
	// team-a far over its 4 MiB quota.
	peak := int64(0)
	for i := 0; i < 10*bound/objSize; i++ {
		data := testutil.RandomBytes(r, objSize)
		key := fmt.Sprintf("churn-%d", i)
		if resp := h.do(b, http.MethodPut, h.url("bucket-b", key, ""), data, nil); resp.status != http.StatusOK {
			t.Fatalf("put %s: %d %s", key, resp.status, resp.body)
		}
		if got := h.get(b, "bucket-b", key, "", nil); !bytes.Equal(got.body, data) {
			t.Fatalf("%s read back differs", key)
		}
		if i%4 == 0 {
			h.putDirect("bucket-a", key, data)
			h.get(a, "bucket-a", key, "", nil)
		}
		if du := duBytes(t, h.dataDir); du > peak {
			peak = du
		}
		if peak > bound {
			t.Fatalf("after %d objects the store uses %d bytes on disk, over its %d bound", i+1, peak, bound)
		}
	}
	st := h.store.Stats()
	t.Logf("peak disk usage %d of %d bytes; cached %d bytes in %d chunks; evictions %d", peak, bound, st.DiskBytes, st.Chunks, st.Evictions)
	if got := st.Tenants["team-a"].Bytes; got > 4<<20 {
		t.Fatalf("team-a holds %d bytes, over its 4 MiB quota", got)
	}
	if st.Evictions == 0 || st.Tenants["team-b"].Bytes == 0 {
		t.Fatalf("churn evicted nothing or kept nothing: %+v", st)
	}
}

func TestS3DownServesHitsAndRefusesMisses(t *testing.T) {
	h := newHarness(t, options{metaTTL: time.Minute, s3Attempts: 2, s3Timeout: 2 * time.Second})
	a := h.client(tenant("team-a"))
	r := rand.New(rand.NewPCG(19, 20))
	cached, cold := testutil.RandomBytes(r, 2*testChunk), testutil.RandomBytes(r, testChunk)
	h.putDirect("bucket-a", "cached", cached)
	h.putDirect("bucket-a", "cold", cold)
	h.get(a, "bucket-a", "cached", "", nil)

	h.minio.Stop()
	if got := h.get(a, "bucket-a", "cached", "", nil); got.status != http.StatusOK || !bytes.Equal(got.body, cached) {
		t.Fatalf("hit with S3 down: %d", got.status)
	}
	// Past the TTL the metadata cannot be revalidated; cached bytes still serve.
	h.clock.Advance(2 * time.Minute)
	if got := h.get(a, "bucket-a", "cached", "chunk=1", nil); got.status != http.StatusOK || !bytes.Equal(got.body, cached[testChunk:]) {
		t.Fatalf("hit past the TTL with S3 down: %d", got.status)
	}
	miss := h.get(a, "bucket-a", "cold", "", nil)
	if miss.status != http.StatusServiceUnavailable || !strings.Contains(string(miss.body), "S3 backend unavailable") {
		t.Fatalf("miss with S3 down: %d %s; want 503 with a clear message", miss.status, miss.body)
	}
	h.minio.Restart(t)
	if got := h.get(a, "bucket-a", "cold", "", nil); got.status != http.StatusOK || !bytes.Equal(got.body, cold) {
		t.Fatalf("after S3 came back: %d", got.status)
	}
}

func TestBrokenStoreFallsBackToS3(t *testing.T) {
	h := newHarness(t, options{})
	a := h.client(tenant("team-a"))
	data := testutil.RandomBytes(rand.New(rand.NewPCG(21, 22)), 2*testChunk)
	h.putDirect("bucket-a", "k", data)
	// Closing the database under the running server makes every store call
	// fail, as a dead disk would.
	testutil.Must(t, h.store.Close())
	for i := 0; i < 2; i++ {
		if got := h.get(a, "bucket-a", "k", "", nil); got.status != http.StatusOK || !bytes.Equal(got.body, data) {
			t.Fatalf("read with a broken store: %d", got.status)
		}
	}
	if n := h.counter("distcache_store_failures_total", map[string]string{"reason": "error"}); n == 0 {
		t.Fatal("store failures were not reported")
	}
}

func TestS3RefusalsKeepTheirStatusAndCode(t *testing.T) {
	h := newHarness(t, options{})
	a := h.client(tenant("team-a"))
	h.putDirect("bucket-a", "k2", []byte("x"))
	h.do(a, http.MethodGet, "https://"+h.addr+"/v1/meta/bucket-a/k2", nil, nil) // metadata cached: the next S3 request is the chunk GET
	h.proxy.FailNext(1, http.StatusBadRequest, "InvalidArgument")
	got := h.get(a, "bucket-a", "k2", "", nil)
	if got.status != http.StatusBadRequest || got.header.Get("X-Distcache-Error") != "InvalidArgument" {
		t.Fatalf("S3's 400 InvalidArgument came back as %d %q", got.status, got.header.Get("X-Distcache-Error"))
	}
}
