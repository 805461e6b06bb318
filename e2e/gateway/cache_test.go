package gateway_test

import (
	"bytes"
	"context"
	"fmt"
	"math/rand/v2"
	"net/http"
	"sync"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/s3"

	"github.com/distcache/distcache/internal/testutil"
)

// TestReadsComeFromTheCache checks the point of the gateway: a second read
// of an object makes no S3 request (the nodes have it), a third no node
// request either (the gateway's page cache has it), and the metrics say so.
func TestReadsComeFromTheCache(t *testing.T) {
	e := newEnv(t, envOptions{pageCache: 16 << 20})
	data := testutil.RandomBytes(rand.New(rand.NewPCG(15, 16)), 8*chunkSize+3)
	e.cluster.PutDirect("bucket-a", "warm.bin", data)
	e.cluster.Proxy.Reset()
	if got := e.mustGet("bucket-a", "warm.bin", ""); !bytes.Equal(got, data) {
		t.Fatal("first read differs")
	}
	s3Gets := e.cluster.Proxy.Count(http.MethodGet, "/bucket-a/warm.bin")
	if s3Gets == 0 {
		t.Fatal("the first read made no S3 request: the test's premise is wrong")
	}
	chunkRequests := func() float64 {
		return e.counter("distcache_client_node_requests_total", map[string]string{"op": "get_chunk"})
	}
	before := chunkRequests()
	for i := 0; i < 3; i++ {
		if got := e.mustGet("bucket-a", "warm.bin", fmt.Sprintf("bytes=%d-", i*1000)); !bytes.Equal(got, data[i*1000:]) {
			t.Fatalf("read %d differs", i)
		}
	}
	if n := e.cluster.Proxy.Count(http.MethodGet, "/bucket-a/warm.bin"); n != s3Gets {
		t.Errorf("repeated reads made %d more S3 GETs", n-s3Gets)
	}
	if d := chunkRequests() - before; d != 0 {
		t.Errorf("repeated reads made %v chunk requests to nodes; the page cache should have answered", d)
	}
	if hits := e.counter("distcache_client_page_cache_requests_total", map[string]string{"result": "hit"}); hits < 27 {
		t.Errorf("page cache hits %v, want at least 27 (3 reads of 9 chunks)", hits)
	}
	if n := e.counter("distcache_gateway_requests_total", map[string]string{"operation": "GetObject", "status": "206"}); n != 3 {
		t.Errorf("gateway counted %v ranged GetObjects, want 3", n)
	}
	if n := e.counter("distcache_gateway_response_bytes_total", map[string]string{"operation": "GetObject"}); n < float64(4*len(data)-3000) {
		t.Errorf("gateway counted %v response bytes", n)
	}
}

// TestConcurrentReadersAndWriters runs SDK readers and writers at once on
// overlapping keys; every read returns one complete version that was
// written, never a mix.
func TestConcurrentReadersAndWriters(t *testing.T) {
	e := newEnv(t, envOptions{pageCache: 16 << 20})
	ctx := context.Background()
	versions := map[string]bool{}
	var mu sync.Mutex
	r := rand.New(rand.NewPCG(17, 18))
	var payloads [][]byte
	for i := 0; i < 4; i++ {
		p := testutil.RandomBytes(r, 2*chunkSize+100)
		payloads = append(payloads, p)
		versions[string(p)] = true
	}
	e.put("bucket-a", "race/key", payloads[0])
	var wg sync.WaitGroup
	errs := make(chan error, 64)
	for w := 0; w < 2; w++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := 0; i < 6; i++ {
				_, err := e.s3.PutObject(ctx, &s3.PutObjectInput{Bucket: aws.String("bucket-a"), Key: aws.String("race/key"),
					Body: bytes.NewReader(payloads[(i+w)%len(payloads)])})
				if err != nil {
					errs <- err
				}
			}
		}()
	}
	for rd := 0; rd < 4; rd++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := 0; i < 8; i++ {
				got, _, err := e.get("bucket-a", "race/key", "")
				if err != nil {
					if apiCode(err) == "SlowDown" {
						continue // overwritten twice while being read: S3 clients retry
					}
					errs <- err
					continue
				}
				mu.Lock()
				ok := versions[string(got)]
				mu.Unlock()
				if !ok {
					errs <- fmt.Errorf("read %d bytes that are no version ever written", len(got))
				}
			}
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
}

// TestNodeFailure kills a cache node: reads, writes and passed-through
// operations keep working through the others.
func TestNodeFailure(t *testing.T) {
	e := newEnv(t, envOptions{})
	ctx := context.Background()
	data := testutil.RandomBytes(rand.New(rand.NewPCG(19, 20)), 6*chunkSize)
	e.put("bucket-a", "ha/obj", data)
	e.cluster.Kill(1)
	for i := 0; i < 5; i++ {
		if got := e.mustGet("bucket-a", "ha/obj", ""); !bytes.Equal(got, data) {
			t.Fatalf("read %d after a node died differs", i)
		}
		_, err := e.s3.ListObjectsV2(ctx, &s3.ListObjectsV2Input{Bucket: aws.String("bucket-a"), Prefix: aws.String("ha/")})
		testutil.Must(t, err)
		e.put("bucket-a", fmt.Sprintf("ha/new-%d", i), []byte("written with a node down"))
		_, err = e.s3.DeleteObject(ctx, &s3.DeleteObjectInput{Bucket: aws.String("bucket-a"), Key: aws.String(fmt.Sprintf("ha/new-%d", i))})
		testutil.Must(t, err)
	}
	if n := e.counter("distcache_gateway_passthrough_attempts_total", map[string]string{"result": "failed"}); n != 0 {
		t.Errorf("%v pass-through requests failed with two nodes alive", n)
	}
}

// TestRangeReadsFetchOnlyTheirChunks: a range read of a cold object makes
// S3 requests for the chunks the range covers and no others (no read-ahead
// past the range).
func TestRangeReadsFetchOnlyTheirChunks(t *testing.T) {
	e := newEnv(t, envOptions{pageCache: 8 << 20})
	data := testutil.RandomBytes(rand.New(rand.NewPCG(25, 26)), 12*chunkSize)
	e.cluster.PutDirect("bucket-a", "cold.bin", data)
	e.cluster.Proxy.Reset()
	s3Gets := func() int { return e.cluster.Proxy.Count(http.MethodGet, "/bucket-a/cold.bin") }
	steps := []struct {
		rng  string
		want []byte
		gets int // S3 GETs so far
	}{
		{"bytes=0-999", data[:1000], 1},
		{fmt.Sprintf("bytes=%d-%d", 2*chunkSize+10, 3*chunkSize+10), data[2*chunkSize+10 : 3*chunkSize+11], 3},
		{"bytes=-10", data[len(data)-10:], 4},
		{"", data, 12},
	}
	for _, s := range steps {
		if got := e.mustGet("bucket-a", "cold.bin", s.rng); !bytes.Equal(got, s.want) {
			t.Fatalf("%q: bytes differ", s.rng)
		}
		if n := s3Gets(); n != s.gets {
			t.Errorf("after %q: %d S3 GETs, want %d (one per chunk the reads covered)", s.rng, n, s.gets)
		}
	}
	// Metadata is cached: at most one HEAD per node (each node that
	// fills a chunk resolves the object once).
	if n := e.cluster.Proxy.Count(http.MethodHead, "/bucket-a/cold.bin"); n > len(e.cluster.Members()) {
		t.Errorf("%d S3 HEADs for %d nodes", n, len(e.cluster.Members()))
	}
}

// TestPeerCertificateActingForATenant: a gateway holding a peer
// certificate acts for the tenant it is given, with that tenant's buckets
// only.
func TestPeerCertificateActingForATenant(t *testing.T) {
	e := newEnv(t, envOptions{peer: true})
	ctx := context.Background()
	data := testutil.RandomBytes(rand.New(rand.NewPCG(27, 28)), 2*chunkSize+1)
	e.put("bucket-a", "peer/obj", data)
	if got := e.mustGet("bucket-a", "peer/obj", "bytes=100-"); !bytes.Equal(got, data[100:]) {
		t.Error("read differs")
	}
	if n := len(e.mustList("bucket-a", "peer/")); n != 1 {
		t.Errorf("listing: %d objects", n)
	}
	_, _, err := e.get("bucket-b", "anything", "")
	wantCode(t, "team-b's bucket", err, "AccessDenied", http.StatusForbidden)
	_, err = e.s3.ListObjectsV2(ctx, &s3.ListObjectsV2Input{Bucket: aws.String("bucket-b")})
	wantCode(t, "list team-b's bucket", err, "AccessDenied", http.StatusForbidden)
}

// TestSeparateGetsOfAScanAreReadAhead: GETs that walk through an object a
// chunk at a time, as ClickHouse reads a column file, get the next chunks
// read into the gateway's page cache before they are asked for.
func TestSeparateGetsOfAScanAreReadAhead(t *testing.T) {
	e := newEnv(t, envOptions{pageCache: 8 << 20})
	data := testutil.RandomBytes(rand.New(rand.NewPCG(27, 28)), 8*chunkSize)
	e.cluster.PutDirect("bucket-a", "scan.bin", data)
	get := func(idx int) {
		t.Helper()
		lo, hi := idx*chunkSize, (idx+1)*chunkSize
		if got := e.mustGet("bucket-a", "scan.bin", fmt.Sprintf("bytes=%d-%d", lo, hi-1)); !bytes.Equal(got, data[lo:hi]) {
			t.Fatalf("chunk %d differs", idx)
		}
	}
	ahead := func() float64 {
		return e.counter("distcache_client_page_fills_total", map[string]string{"mode": "ahead"})
	}
	get(0)
	if n := ahead(); n != 0 {
		t.Fatalf("one GET read %v chunks ahead", n)
	}
	get(1)
	get(2)
	deadline := time.Now().Add(time.Minute)
	for ahead() < 2 {
		if time.Now().After(deadline) {
			t.Fatalf("GETs of chunks 0, 1, 2 read %v chunks ahead, want at least 2", ahead())
		}
		time.Sleep(20 * time.Millisecond)
	}
	// Chunk 3 reaches the page cache without a GET of it (a View of a few
	// bytes only answers from RAM, joining a fill in flight).
	m, err := e.cache.Stat(context.Background(), "bucket-a", "scan.bin")
	testutil.Must(t, err)
	for {
		if v, ok, err := e.cache.View(context.Background(), "bucket-a", "scan.bin", m, 3*chunkSize, 10); err != nil {
			t.Fatal(err)
		} else if ok {
			v.Release()
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("chunk 3 never reached the page cache")
		}
		time.Sleep(20 * time.Millisecond)
	}
	hits := func() float64 {
		return e.counter("distcache_client_page_cache_requests_total", map[string]string{"result": "hit"})
	}
	before := hits()
	get(3)
	if hits() <= before {
		t.Error("the chunk read ahead was not a page cache hit")
	}
}

// TestOverwriteBehindTheCache overwrites objects in S3 directly, where the
// cache cannot see it. Within the metadata TTL a read returns the old or
// the new version, complete, never a mix; once the TTL passed, the new one.
func TestOverwriteBehindTheCache(t *testing.T) {
	e := newEnv(t, envOptions{pageCache: 8 << 20})
	ctx := context.Background()
	r := rand.New(rand.NewPCG(23, 24))
	v1, v2 := testutil.RandomBytes(r, 4*chunkSize), testutil.RandomBytes(r, 4*chunkSize)

	// Read before: the chunks of v1 are cached.
	e.cluster.PutDirect("bucket-a", "behind/read", v1)
	e.mustGet("bucket-a", "behind/read", "")
	// Only HEAD before: v1's metadata is cached, none of its chunks.
	e.cluster.PutDirect("bucket-a", "behind/headed", v1)
	_, err := e.s3.HeadObject(ctx, &s3.HeadObjectInput{Bucket: aws.String("bucket-a"), Key: aws.String("behind/headed")})
	testutil.Must(t, err)

	e.cluster.PutDirect("bucket-a", "behind/read", v2)
	e.cluster.PutDirect("bucket-a", "behind/headed", v2)
	for _, key := range []string{"behind/read", "behind/headed"} {
		got, _, err := e.get("bucket-a", key, "")
		switch {
		case err != nil:
			t.Errorf("%s within the TTL: %v", key, err)
		case !bytes.Equal(got, v1) && !bytes.Equal(got, v2):
			t.Errorf("%s within the TTL: %d bytes of neither version", key, len(got))
		}
	}
	e.cluster.Clock.Advance(2 * time.Minute)
	for _, key := range []string{"behind/read", "behind/headed"} {
		if got := e.mustGet("bucket-a", key, ""); !bytes.Equal(got, v2) {
			t.Errorf("%s after the TTL: still the old version", key)
		}
	}
}
