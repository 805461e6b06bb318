package node_test

import (
	"bytes"
	"fmt"
	"math/rand/v2"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/distcache/distcache/internal/node"
	"github.com/distcache/distcache/internal/pki"
	"github.com/distcache/distcache/internal/testutil"
	"github.com/distcache/distcache/internal/testutil/s3proxy"
)

// Every size class that has tripped chunking code: empty, one byte, around
// one chunk, and several chunks with a ragged tail.
var objectSizes = []int{0, 1, testChunk - 1, testChunk, testChunk + 1, 3*testChunk + 17}

func TestReadsAreByteExactAgainstMinIO(t *testing.T) {
	h := newHarness(t, options{})
	a := h.client(tenant("team-a"))
	r := rand.New(rand.NewPCG(1, 2))
	for _, size := range objectSizes {
		key := fmt.Sprintf("obj-%d", size)
		h.putDirect("bucket-a", key, testutil.RandomBytes(r, size))
	}
	for _, size := range objectSizes {
		key := fmt.Sprintf("obj-%d", size)
		t.Run(key, func(t *testing.T) {
			whole := h.get(a, "bucket-a", key, "", nil)
			if whole.status != http.StatusOK || !bytes.Equal(whole.body, h.getDirect("bucket-a", key, "")) {
				t.Fatalf("whole object: status %d, %d bytes, differs from MinIO", whole.status, len(whole.body))
			}
			if got := whole.header.Get("ETag"); got == "" {
				t.Fatal("no ETag on object read")
			}
			if size == 0 {
				if resp := h.get(a, "bucket-a", key, "chunk=0", nil); resp.status != http.StatusRequestedRangeNotSatisfiable {
					t.Fatalf("chunk 0 of an empty object: status %d, want 416", resp.status)
				}
				return
			}
			for i := 0; i < 25; i++ {
				off := r.IntN(size)
				n := 1 + r.IntN(size-off)
				rng := fmt.Sprintf("bytes=%d-%d", off, off+n-1)
				want := h.getDirect("bucket-a", key, rng)
				got := h.get(a, "bucket-a", key, "", map[string]string{"Range": rng})
				if got.status != http.StatusPartialContent || !bytes.Equal(got.body, want) {
					t.Fatalf("object %s: status %d, %d bytes, want 206 with %d bytes equal to MinIO", rng, got.status, len(got.body), len(want))
				}
				// The same bytes through the chunk API: chunk + range within it.
				idx := off / testChunk
				within := off - idx*testChunk
				end := min(off+n, (idx+1)*testChunk, size) - 1 - idx*testChunk
				crng := fmt.Sprintf("bytes=%d-%d", within, end)
				cgot := h.get(a, "bucket-a", key, "chunk="+strconv.Itoa(idx), map[string]string{"Range": crng})
				cwant := want[:end-within+1]
				if cgot.status != http.StatusPartialContent || !bytes.Equal(cgot.body, cwant) {
					t.Fatalf("chunk %d %s: status %d, %d bytes, want %d bytes equal to MinIO", idx, crng, cgot.status, len(cgot.body), len(cwant))
				}
			}
			suffix := h.get(a, "bucket-a", key, "", map[string]string{"Range": "bytes=-7"})
			if !bytes.Equal(suffix.body, h.getDirect("bucket-a", key, "bytes=-7")) {
				t.Fatal("suffix range differs from MinIO")
			}
		})
	}
}

func TestMalformedRequests(t *testing.T) {
	h := newHarness(t, options{})
	a := h.client(tenant("team-a"))
	h.putDirect("bucket-a", "k", []byte("0123456789"))
	tests := []struct {
		name, query, rng string
		want             int
	}{
		{"chunk is not a number", "chunk=x", "", http.StatusBadRequest},
		{"negative chunk", "chunk=-1", "", http.StatusBadRequest},
		{"chunk past the end", "chunk=5", "", http.StatusRequestedRangeNotSatisfiable},
		{"range syntax", "", "bytes=a-b", http.StatusBadRequest},
		{"multiple ranges", "", "bytes=0-1,3-4", http.StatusBadRequest},
		{"range past the end", "", "bytes=10-", http.StatusRequestedRangeNotSatisfiable},
		{"range end before start", "", "bytes=5-2", http.StatusBadRequest},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			hdr := map[string]string{}
			if tt.rng != "" {
				hdr["Range"] = tt.rng
			}
			resp := h.get(a, "bucket-a", "k", tt.query, hdr)
			if resp.status != tt.want || !strings.Contains(string(resp.body), `"message"`) {
				t.Fatalf("status %d body %s; want %d with a message", resp.status, resp.body, tt.want)
			}
		})
	}
	if resp := h.get(a, "bucket-a", "missing", "", nil); resp.status != http.StatusNotFound {
		t.Fatalf("missing object: %d, want 404", resp.status)
	}
}

func TestWriteThroughThenReadBackIsAHit(t *testing.T) {
	h := newHarness(t, options{})
	a := h.client(tenant("team-a"))
	r := rand.New(rand.NewPCG(3, 4))
	for _, size := range []int{1, testChunk + 5, 11 << 20} { // the last one is a multipart upload
		key := fmt.Sprintf("wt-%d", size)
		data := testutil.RandomBytes(r, size)
		resp := h.do(a, http.MethodPut, h.url("bucket-a", key, ""), data, map[string]string{"Content-Type": "application/x-test"})
		if resp.status != http.StatusOK {
			t.Fatalf("put %s: %d %s", key, resp.status, resp.body)
		}
		if !bytes.Equal(h.getDirect("bucket-a", key, ""), data) {
			t.Fatalf("S3 does not hold what was acknowledged for %s", key)
		}
		h.proxy.Reset()
		got := h.get(a, "bucket-a", key, "", nil)
		if !bytes.Equal(got.body, data) {
			t.Fatalf("read-back of %s differs", key)
		}
		if c := got.header.Get("X-Distcache-Cache"); !strings.HasPrefix(c, "hit") {
			t.Fatalf("read-back of %s was %q, want a hit", key, c)
		}
		if n := h.proxy.Count(http.MethodGet, "/"); n != 0 {
			t.Fatalf("read-back of %s made %d S3 GETs, want 0", key, n)
		}
	}
}

// TestWriteThroughAsksS3NothingBeforeItAnswers: the metadata of a
// write-through comes from S3's answer to the upload, so the PUT is
// answered after that one round trip and its read-back needs S3 for
// nothing, even while every HEAD to S3 fails (which the confirmation after
// the answer then shrugs off). Before, every PUT waited for a HEAD, and
// with HEADs failing it cached nothing and its read-back failed.
func TestWriteThroughAsksS3NothingBeforeItAnswers(t *testing.T) {
	h := newHarness(t, options{})
	a := h.client(tenant("team-a"))
	data := testutil.RandomBytes(rand.New(rand.NewPCG(41, 42)), 2*testChunk+17)
	h.proxy.Reset()
	h.proxy.Inject(s3proxy.Rule{Method: http.MethodHead, Fault: s3proxy.InternalError})
	t.Cleanup(h.proxy.ClearFaults)
	resp := h.do(a, http.MethodPut, h.url("bucket-a", "no-head", ""), data, map[string]string{"Content-Type": "application/x-test"})
	if resp.status != http.StatusOK {
		t.Fatalf("put: %d %s", resp.status, resp.body)
	}
	if n := h.proxy.Count(http.MethodPut, "/bucket-a/no-head"); n != 1 {
		t.Fatalf("the upload made %d PUTs, want 1", n)
	}
	got := h.get(a, "bucket-a", "no-head", "", nil)
	if got.status != http.StatusOK || !bytes.Equal(got.body, data) {
		t.Fatalf("read-back: %d, %d bytes; want the %d bytes written", got.status, len(got.body), len(data))
	}
	if c := got.header.Get("X-Distcache-Cache"); !strings.HasPrefix(c, "hit") {
		t.Fatalf("read-back was %q, want a hit", c)
	}
	if n := h.proxy.Count(http.MethodGet, "/"); n != 0 {
		t.Fatalf("read-back made %d S3 GETs, want 0", n)
	}
	if ct := got.header.Get("X-Distcache-Content-Type"); ct != "application/x-test" {
		t.Errorf("read-back's content type %q, want the one written", ct)
	}
	if n := h.proxy.Count(http.MethodHead, "/"); n > 0 {
		t.Logf("the confirmation's HEADs (failing): %d", n)
	}
}

// TestWriteThroughConfirmsOnlyWhenInDoubt: a quick write-through that no
// other change of its key overlapped asks S3 nothing after its PUT (the
// answer's metadata is current; before, every write was followed by a
// HEAD, doubling small writes' S3 requests); one that a delete through the
// node overlapped, or a slow one, is confirmed with a HEAD, and what is
// read is what S3 holds.
func TestWriteThroughConfirmsOnlyWhenInDoubt(t *testing.T) {
	h := newHarness(t, options{})
	a := h.client(tenant("team-a"))
	r := rand.New(rand.NewPCG(43, 44))
	heads := func(key string) int { return h.proxy.Count(http.MethodHead, "/bucket-a/"+key) }
	settle := func() { time.Sleep(4 * node.ConfirmSettle) }

	data := testutil.RandomBytes(r, testChunk+3)
	if resp := h.do(a, http.MethodPut, h.url("bucket-a", "alone", ""), data, nil); resp.status != http.StatusOK {
		t.Fatalf("put: %d %s", resp.status, resp.body)
	}
	settle()
	if n := heads("alone"); n != 0 {
		t.Errorf("a write-through nothing overlapped made %d HEADs after it, want 0", n)
	}

	// A delete of the key through the node while the PUT is on its way to
	// S3 (held by the proxy until the delete is done).
	var once sync.Once
	h.proxy.OnRequest(func(rec s3proxy.Record) {
		if rec.Method == http.MethodPut && rec.Path == "/bucket-a/overlapped" {
			once.Do(func() {
				if resp := h.do(a, http.MethodDelete, h.url("bucket-a", "overlapped", ""), nil, nil); resp.status != http.StatusNoContent {
					t.Errorf("delete: %d %s", resp.status, resp.body)
				}
			})
		}
	})
	t.Cleanup(func() { h.proxy.OnRequest(nil) })
	data = testutil.RandomBytes(r, 100)
	if resp := h.do(a, http.MethodPut, h.url("bucket-a", "overlapped", ""), data, nil); resp.status != http.StatusOK {
		t.Fatalf("put: %d %s", resp.status, resp.body)
	}
	deadline := time.Now().Add(10 * time.Second)
	for heads("overlapped") == 0 && time.Now().Before(deadline) {
		time.Sleep(10 * time.Millisecond)
	}
	if heads("overlapped") == 0 {
		t.Error("a write-through a delete overlapped was not confirmed with a HEAD")
	}
	if got := h.get(a, "bucket-a", "overlapped", "", nil); !bytes.Equal(got.body, h.getDirect("bucket-a", "overlapped", "")) {
		t.Error("read after the overlapped write differs from what S3 holds")
	}

	h.proxy.Inject(s3proxy.Rule{Method: http.MethodPut, PathPrefix: "/bucket-a/slow", Fault: s3proxy.Spike(node.ConfirmSlowUpload)})
	t.Cleanup(h.proxy.ClearFaults)
	if resp := h.do(a, http.MethodPut, h.url("bucket-a", "slow", ""), data, nil); resp.status != http.StatusOK {
		t.Fatalf("put: %d %s", resp.status, resp.body)
	}
	deadline = time.Now().Add(10 * time.Second)
	for heads("slow") == 0 && time.Now().Before(deadline) {
		time.Sleep(10 * time.Millisecond)
	}
	if heads("slow") == 0 {
		t.Error("a write-through that took a second was not confirmed with a HEAD")
	}
}

func TestOverwriteThroughTheCacheIsNeverStale(t *testing.T) {
	h := newHarness(t, options{immutable: true}) // even in immutable mode
	a := h.client(tenant("team-a"))
	r := rand.New(rand.NewPCG(5, 6))
	for round := 0; round < 3; round++ {
		data := testutil.RandomBytes(r, 2*testChunk+round*1000)
		if resp := h.do(a, http.MethodPut, h.url("bucket-a", "k", ""), data, nil); resp.status != http.StatusOK {
			t.Fatalf("put: %d %s", resp.status, resp.body)
		}
		if got := h.get(a, "bucket-a", "k", "", nil); !bytes.Equal(got.body, data) {
			t.Fatalf("round %d: read after overwrite returned old bytes", round)
		}
		if got := h.get(a, "bucket-a", "k", "chunk=1", nil); !bytes.Equal(got.body, data[testChunk:2*testChunk]) {
			t.Fatalf("round %d: chunk 1 after overwrite returned old bytes", round)
		}
	}
	if resp := h.do(a, http.MethodDelete, h.url("bucket-a", "k", ""), nil, nil); resp.status != http.StatusNoContent {
		t.Fatalf("delete: %d", resp.status)
	}
	if got := h.get(a, "bucket-a", "k", "", nil); got.status != http.StatusNotFound {
		t.Fatalf("read after delete: %d, want 404", got.status)
	}
}

func TestOverwriteBehindTheCacheIsStaleAtMostTheTTL(t *testing.T) {
	const ttl = 30 * time.Second
	h := newHarness(t, options{metaTTL: ttl})
	a := h.client(tenant("team-a"))
	r := rand.New(rand.NewPCG(7, 8))
	v1, v2 := testutil.RandomBytes(r, 3*testChunk), testutil.RandomBytes(r, 3*testChunk+99)
	h.putDirect("bucket-a", "k", v1)
	if got := h.get(a, "bucket-a", "k", "", nil); !bytes.Equal(got.body, v1) {
		t.Fatal("first read differs")
	}
	h.putDirect("bucket-a", "k", v2)
	h.clock.Advance(ttl / 2)
	if got := h.get(a, "bucket-a", "k", "", nil); !bytes.Equal(got.body, v1) && !bytes.Equal(got.body, v2) {
		t.Fatal("within the TTL a read must be one whole version, got a mix")
	}
	h.clock.Advance(ttl)
	if got := h.get(a, "bucket-a", "k", "", nil); !bytes.Equal(got.body, v2) {
		t.Fatalf("past the TTL the read is still stale (%d bytes)", len(got.body))
	}

	// A chunk that was never cached, of an object changed behind our back
	// while its metadata is fresh: S3's If-Match catches it; never mixed.
	v3 := testutil.RandomBytes(r, 3*testChunk)
	h.putDirect("bucket-a", "k", v3)
	got := h.get(a, "bucket-a", "k", "chunk=2", nil) // metadata fresh (v2), chunk 2 cached for v2
	if !bytes.Equal(got.body, v2[2*testChunk:3*testChunk]) && !bytes.Equal(got.body, v3[2*testChunk:]) {
		t.Fatal("chunk 2 is neither v2 nor v3")
	}
	h.putDirect("bucket-a", "k2", v1)
	_ = h.get(a, "bucket-a", "k2", "chunk=0", nil) // caches k2's metadata and chunk 0 only
	h.putDirect("bucket-a", "k2", v3)
	got = h.get(a, "bucket-a", "k2", "chunk=1", nil)
	if !bytes.Equal(got.body, v3[testChunk:2*testChunk]) {
		t.Fatal("uncached chunk of an object overwritten behind the cache was not the new version")
	}
	if got.header.Get("ETag") != h.get(a, "bucket-a", "k2", "chunk=1", nil).header.Get("ETag") || got.header.Get("ETag") == "" {
		t.Fatal("ETag header does not name the version served")
	}
	// Pinning the old version is refused rather than answered with new bytes.
	pinned := h.get(a, "bucket-a", "k2", "chunk=0&etag="+"%22stale%22", nil)
	if pinned.status != http.StatusPreconditionFailed {
		t.Fatalf("read pinned to a stale ETag: %d, want 412", pinned.status)
	}
}

// A GET of a whole object (or a Range of it) whose metadata is still
// trusted but names a version S3 no longer has, none of its chunks cached,
// answers the new version rather than S3's 412: nothing went out yet.
func TestObjectReadOfAVersionGoneBehindTheCacheStartsOver(t *testing.T) {
	h := newHarness(t, options{metaTTL: time.Minute})
	a := h.client(tenant("team-a"))
	r := rand.New(rand.NewPCG(17, 18))
	v1, v2 := testutil.RandomBytes(r, 2*testChunk), testutil.RandomBytes(r, 3*testChunk+5)
	for _, c := range []struct{ key, rng string }{{"whole", ""}, {"range", "bytes=10-" + strconv.Itoa(2*testChunk)}} {
		h.putDirect("bucket-a", c.key, v1)
		if resp := h.do(a, http.MethodHead, h.url("bucket-a", c.key, ""), nil, nil); resp.status != http.StatusOK {
			t.Fatalf("%s: head: %d", c.key, resp.status) // metadata cached, no chunk
		}
		h.putDirect("bucket-a", c.key, v2)
		want, status := v2, http.StatusOK
		var hdr map[string]string
		if c.rng != "" {
			want, status, hdr = v2[10:2*testChunk+1], http.StatusPartialContent, map[string]string{"Range": c.rng}
		}
		got := h.get(a, "bucket-a", c.key, "", hdr)
		if got.status != status || !bytes.Equal(got.body, want) {
			t.Fatalf("%s: read after an overwrite behind the cache: %d (%d bytes), want %d and the new version", c.key, got.status, len(got.body), status)
		}
	}
}

func TestHundredConcurrentReadersOfAColdChunkMakeOneS3Get(t *testing.T) {
	h := newHarness(t, options{})
	a := h.client(tenant("team-a"))
	data := testutil.RandomBytes(rand.New(rand.NewPCG(9, 10)), 2*testChunk)
	h.putDirect("bucket-a", "hot", data)
	h.proxy.Reset()
	h.proxy.SetDelay(50 * time.Millisecond) // widen the window in which readers overlap
	var wg sync.WaitGroup
	errs := make(chan string, 100)
	for i := 0; i < 100; i++ {
		wg.Go(func() {
			got := h.get(a, "bucket-a", "hot", "chunk=1", nil)
			if got.status != http.StatusOK || !bytes.Equal(got.body, data[testChunk:]) {
				errs <- fmt.Sprintf("status %d, %d bytes", got.status, len(got.body))
			}
		})
	}
	wg.Wait()
	close(errs)
	for e := range errs {
		t.Fatal("a reader got a bad answer:", e)
	}
	if n := h.proxy.Count(http.MethodGet, "/bucket-a/hot"); n != 1 {
		t.Fatalf("S3 saw %d GETs for one cold chunk, want exactly 1", n)
	}
	if n := h.proxy.Count(http.MethodHead, "/bucket-a/hot"); n != 1 {
		t.Fatalf("S3 saw %d HEADs, want exactly 1", n)
	}
	if j := h.counter("distcache_singleflight_joins_total", nil); j == 0 {
		t.Fatal("singleflight joins metric did not move")
	}
}

func TestTenantsAreIsolated(t *testing.T) {
	h := newHarness(t, options{})
	a, b := h.client(tenant("team-a")), h.client(tenant("team-b"))
	data := testutil.RandomBytes(rand.New(rand.NewPCG(11, 12)), testChunk)
	h.putDirect("shared", "x", data)
	h.putDirect("bucket-b", "secret", data)

	if got := h.get(b, "shared", "x", "chunk=0", nil); got.status != http.StatusOK {
		t.Fatalf("team-b read: %d", got.status)
	}
	h.proxy.Reset()
	// team-a reading the same object must not be answered from team-b's entry.
	got := h.get(a, "shared", "x", "chunk=0", nil)
	if got.status != http.StatusOK || got.header.Get("X-Distcache-Cache") != "miss" {
		t.Fatalf("team-a read of an object team-b cached: %d %q, want a miss of its own", got.status, got.header.Get("X-Distcache-Cache"))
	}
	if h.proxy.Count(http.MethodGet, "/shared/x") != 1 {
		t.Fatal("team-a's read did not go to S3 with its own request")
	}
	// A bucket not on the tenant's list: 403 before anything touches S3.
	h.proxy.Reset()
	for _, method := range []string{http.MethodGet, http.MethodHead, http.MethodPut, http.MethodDelete} {
		resp := h.do(a, method, h.url("bucket-b", "secret", ""), nil, nil)
		if resp.status != http.StatusForbidden {
			t.Fatalf("%s on another tenant's bucket: %d, want 403", method, resp.status)
		}
	}
	// A tenant certificate cannot act for another tenant.
	if resp := h.get(a, "bucket-b", "secret", "", map[string]string{"X-Distcache-Tenant": "team-b"}); resp.status != http.StatusForbidden {
		t.Fatalf("tenant acting for another tenant: %d, want 403", resp.status)
	}
	// A tenant that is not configured at all.
	if resp := h.get(h.client(tenant("team-z")), "shared", "x", "", nil); resp.status != http.StatusForbidden {
		t.Fatalf("unknown tenant: %d, want 403", resp.status)
	}
	if n := h.proxy.Count("", "/"); n != 0 {
		t.Fatalf("refused requests reached S3 %d times", n)
	}
	// A peer may act for a tenant, and gets that tenant's view.
	peer := h.client(pki.Identity{Kind: pki.KindPeer, Name: "cache-1"})
	if resp := h.get(peer, "bucket-b", "secret", "", map[string]string{"X-Distcache-Tenant": "team-b"}); resp.status != http.StatusOK {
		t.Fatalf("peer acting for team-b: %d", resp.status)
	}
	if resp := h.get(peer, "bucket-b", "secret", "", map[string]string{"X-Distcache-Tenant": "team-a"}); resp.status != http.StatusForbidden {
		t.Fatalf("peer acting for team-a on team-b's bucket: %d, want 403", resp.status)
	}
}
