package client_test

import (
	"bytes"
	"context"
	"errors"
	"math/rand/v2"
	"reflect"
	"testing"
	"time"

	"github.com/distcache/distcache/internal/client"
	"github.com/distcache/distcache/internal/testutil"
	"github.com/distcache/distcache/internal/testutil/nodecluster"
)

// statRequests is the number of metadata lookups the nodes answered.
func statRequests(c *nodecluster.Cluster) float64 {
	return c.Sum("distcache_requests_total", map[string]string{"op": "head"})
}

// A scan made of many small separate reads (as ClickHouse reads a column
// file) gets the chunks ahead of it fetched into the page cache, so most of
// its reads find their chunk in RAM; random reads get nothing read ahead.
func TestReadAheadAcrossSeparateReads(t *testing.T) {
	c := nodecluster.Start(t, 3)
	cl, reg := newClient(t, c, c.TenantTLS("team-a"), func(cfg *client.Config) { cfg.PageCacheBytes = 64 << 20 })
	ctx := context.Background()
	r := rand.New(rand.NewPCG(21, 22))
	data := testutil.RandomBytes(r, 12*cs)
	m := putStat(t, c, cl, "bucket-a", "column.bin", data)

	ahead := func() float64 {
		return nodecluster.Gather(t, reg, "distcache_client_page_fills_total", map[string]string{"mode": "ahead"})
	}
	// Random single reads of separate chunks: no read-ahead.
	for _, idx := range []int64{9, 2, 6} {
		p := make([]byte, 100)
		_, err := cl.ReadAt(ctx, "bucket-a", "column.bin", m, p, idx*cs+5)
		testutil.Must(t, err)
		if !bytes.Equal(p, data[idx*cs+5:idx*cs+105]) {
			t.Fatalf("read in chunk %d differs", idx)
		}
	}
	if n := ahead(); n != 0 {
		t.Fatalf("random reads read %v chunks ahead, want 0", n)
	}

	// A scan in reads of a quarter chunk, one at a time.
	step := int64(cs / 4)
	for off := int64(0); off < int64(len(data)); off += step {
		p := make([]byte, step)
		_, err := cl.ReadAt(ctx, "bucket-a", "column.bin", m, p, off)
		testutil.Must(t, err)
		if !bytes.Equal(p, data[off:off+step]) {
			t.Fatalf("scan read at %d differs", off)
		}
	}
	if n := ahead(); n < 3 {
		t.Fatalf("a scan of 12 chunks read %v chunks ahead, want at least 3", n)
	}
	// What was read ahead and filled behind the reads ends up in the page
	// cache: once every chunk is there, reading the whole object again
	// costs no node request.
	testutil.WaitFor(t, "every chunk in the page cache", func() bool {
		for idx := int64(0); idx < 12; idx++ {
			v, ok, err := cl.View(ctx, "bucket-a", "column.bin", m, idx*cs, 10)
			if !ok || err != nil {
				return false
			}
			v.Release()
		}
		return true
	})
	before := chunkRequests(c)
	readBack(t, cl, "bucket-a", "column.bin", m, data, "re-read differs")
	if n := chunkRequests(c) - before; n != 0 {
		t.Fatalf("re-read made %v chunk requests, want 0", n)
	}
}

// View hands out the page cache's bytes of a range without a copy: a
// cached chunk, or at least half a chunk (fetched whole); a small part of
// an uncached chunk is left to ReadAt.
func TestView(t *testing.T) {
	c := nodecluster.Start(t, 1)
	cl, _ := newClient(t, c, c.TenantTLS("team-a"), func(cfg *client.Config) { cfg.PageCacheBytes = 64 << 20 })
	ctx := context.Background()
	r := rand.New(rand.NewPCG(23, 24))
	data := testutil.RandomBytes(r, 3*cs+1000)
	m := putStat(t, c, cl, "bucket-a", "v.bin", data)

	if _, ok, err := cl.View(ctx, "bucket-a", "v.bin", m, 10, 100); ok || err != nil {
		t.Fatalf("View of a small part of an uncached chunk: ok %v, err %v; want false, nil", ok, err)
	}
	if _, ok, err := cl.View(ctx, "bucket-a", "v.bin", m, cs-10, 20); ok || err != nil {
		t.Fatalf("View across two chunks: ok %v, err %v; want false, nil", ok, err)
	}
	v, ok, err := cl.View(ctx, "bucket-a", "v.bin", m, cs+7, cs-7)
	if err != nil || !ok || !bytes.Equal(v.Data, data[cs+7:2*cs]) {
		t.Fatalf("View of most of chunk 1: ok %v, err %v, equal %v", ok, err, bytes.Equal(v.Data, data[cs+7:2*cs]))
	}
	v.Release()
	before := chunkRequests(c)
	v, ok, err = cl.View(ctx, "bucket-a", "v.bin", m, cs+100, 50)
	if err != nil || !ok || !bytes.Equal(v.Data, data[cs+100:cs+150]) {
		t.Fatalf("View of a small part of a cached chunk: ok %v, err %v", ok, err)
	}
	if cap(v.Data) != len(v.Data) {
		t.Fatalf("a view has room past its range (cap %d, len %d): an append would write into the page", cap(v.Data), len(v.Data))
	}
	v.Release()
	last := int64(len(data)) - 1000
	v, ok, err = cl.View(ctx, "bucket-a", "v.bin", m, last, 1000)
	if err != nil || !ok || !bytes.Equal(v.Data, data[last:]) {
		t.Fatalf("View of the whole last chunk: ok %v, err %v", ok, err)
	}
	v.Release()
	if got := chunkRequests(c) - before; got != 1 {
		t.Fatalf("views made %v chunk requests, want 1 (the last chunk)", got)
	}

	// A version that is gone: the error, not stale bytes.
	c.PutDirect("bucket-a", "v.bin", testutil.RandomBytes(r, len(data)))
	c.Clock.Advance(2 * time.Minute)
	_, ok, err = cl.View(ctx, "bucket-a", "v.bin", m, 2*cs, cs)
	if ok || !errors.Is(err, client.ErrChanged) {
		t.Fatalf("View of an overwritten version's uncached chunk: ok %v, err %v; want ErrChanged", ok, err)
	}
}

// An immutable cache's metadata is kept by the client (on a lease, as any
// cache's: leases_test.go) however old it is, and not asked again, except
// after the client's own writes and deletes, after Forget, or when a read
// finds the version gone.
func TestImmutableMetadataIsKept(t *testing.T) {
	ctx := context.Background()
	r := rand.New(rand.NewPCG(25, 26))

	c := nodecluster.StartWith(t, 2, nodecluster.Options{Immutable: true})
	cl := leasedClient(t, c)
	v1 := testutil.RandomBytes(r, 2*cs)
	c.PutDirect("bucket-a", "i.bin", v1)
	m1 := statKept(t, c, cl, "bucket-a", "i.bin")
	c.Clock.Advance(24 * time.Hour) // far past any metadata TTL
	kept := statRequests(c)
	for range 5 {
		m, err := cl.Stat(ctx, "bucket-a", "i.bin")
		testutil.Must(t, err)
		if !reflect.DeepEqual(m, m1) {
			t.Fatalf("kept metadata %+v, want %+v", m, m1)
		}
	}
	if n := statRequests(c) - kept; n != 0 {
		t.Fatalf("5 Stats of an immutable cache's kept object a day later made %v metadata requests, want 0", n)
	}
	if _, err := cl.Stat(ctx, "bucket-a", "missing.bin"); !errors.Is(err, client.ErrNotFound) {
		t.Fatalf("Stat of a missing object: %v", err)
	}
	if _, err := cl.Stat(ctx, "bucket-a", "missing.bin"); !errors.Is(err, client.ErrNotFound) {
		t.Fatalf("Stat of a missing object again: %v", err)
	}
	if n := statRequests(c) - kept; n != 2 {
		t.Fatalf("a missing object was kept: %v metadata requests, want 2", n)
	}

	// The client's own write replaces it.
	v2 := testutil.RandomBytes(r, 2*cs)
	m2, err := cl.Put(ctx, "bucket-a", "i.bin", bytes.NewReader(v2), int64(len(v2)), "")
	testutil.Must(t, err)
	if m, err := cl.Stat(ctx, "bucket-a", "i.bin"); err != nil || m.ETag != m2.ETag {
		t.Fatalf("Stat after Put: %+v, %v; want ETag %s", m, err, m2.ETag)
	}
	// Forget drops it (the gateway's passthrough writes).
	before := statRequests(c)
	cl.Forget("bucket-a", "i.bin")
	_, err = cl.Stat(ctx, "bucket-a", "i.bin")
	testutil.Must(t, err)
	if n := statRequests(c) - before; n != 1 {
		t.Fatalf("Stat after Forget made %v metadata requests, want 1", n)
	}
	// Delete drops it.
	testutil.Must(t, cl.Delete(ctx, "bucket-a", "i.bin"))
	if _, err := cl.Stat(ctx, "bucket-a", "i.bin"); !errors.Is(err, client.ErrNotFound) {
		t.Fatalf("Stat after Delete: %v, want ErrNotFound", err)
	}
}

// A read that finds the kept version gone drops it: the next Stat asks a
// node (the gateway's retry of an overwritten object relies on it).
func TestKeptMetadataIsDroppedWhenTheVersionIsGone(t *testing.T) {
	ctx := context.Background()
	r := rand.New(rand.NewPCG(27, 28))
	c := nodecluster.StartWith(t, 1, nodecluster.Options{Immutable: true})
	cl := leasedClient(t, c)
	c.PutDirect("bucket-a", "o.bin", testutil.RandomBytes(r, 2*cs))
	m1 := statKept(t, c, cl, "bucket-a", "o.bin")
	// Overwritten behind the cache (against the immutable contract): the
	// node still has the old metadata but no chunk of it; S3 refuses the
	// old ETag.
	v2 := testutil.RandomBytes(r, 2*cs)
	c.PutDirect("bucket-a", "o.bin", v2)
	p := make([]byte, 10)
	if _, err := cl.ReadAt(ctx, "bucket-a", "o.bin", m1, p, 0); !errors.Is(err, client.ErrChanged) {
		t.Fatalf("read of the overwritten version: %v, want ErrChanged", err)
	}
	before := statRequests(c)
	_, err := cl.Stat(ctx, "bucket-a", "o.bin")
	testutil.Must(t, err)
	if n := statRequests(c) - before; n != 1 {
		t.Fatalf("Stat after ErrChanged made %v metadata requests, want 1 (the kept version was not dropped)", n)
	}
}
