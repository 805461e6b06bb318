package client_test

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"math/rand/v2"
	"strconv"
	"testing"

	"golang.org/x/sync/errgroup"

	"github.com/distcache/distcache/internal/client"
	"github.com/distcache/distcache/internal/testutil"
	"github.com/distcache/distcache/internal/testutil/nodecluster"
)

// responseBytes is the body bytes all nodes sent.
func responseBytes(c *nodecluster.Cluster) float64 {
	return c.Sum("distcache_response_bytes_total", nil)
}

// With PageBytes a quarter of the chunk size, the page cache fetches,
// keeps and reads ahead quarter chunks: a small read that misses costs one
// page, fetched whole, not the whole chunk (ClickHouse asks for a range to
// the end of each column file and stops within a MiB); a scan still ends
// up with everything in RAM; every byte read is right.
func TestPagesSmallerThanChunks(t *testing.T) {
	const ps = cs / 4
	c := nodecluster.Start(t, 3)
	cl, _ := newClient(t, c, c.TenantTLS("team-a"), func(cfg *client.Config) {
		cfg.PageCacheBytes = 64 << 20
		cfg.PageBytes = ps
	})
	ctx := context.Background()
	r := rand.New(rand.NewPCG(31, 32))
	data := testutil.RandomBytes(r, 6*cs+1000)
	m := putStat(t, c, cl, "bucket-a", "col.bin", data)
	read := func(off, n int64) {
		t.Helper()
		p := make([]byte, n)
		_, err := cl.ReadAt(ctx, "bucket-a", "col.bin", m, p, off)
		testutil.Must(t, err)
		if !bytes.Equal(p, data[off:off+n]) {
			t.Fatalf("read of %d bytes at %d differs", n, off)
		}
	}
	cached := func(page int64) bool { return cl.PageCached("bucket-a", "col.bin", m, page*ps) }

	// 100 bytes in page 5 (the second page of chunk 1): page 5, in one
	// request; no other page of chunk 1.
	before, reqs := responseBytes(c), chunkRequests(c)
	read(5*ps+70, 100)
	if !cached(5) {
		t.Fatal("page 5 is not in the page cache after a read in it")
	}
	testutil.WaitFor(t, "the page's bytes counted", func() bool { return responseBytes(c)-before >= ps })
	if got, n := responseBytes(c)-before, chunkRequests(c)-reqs; got != ps || n != 1 {
		t.Fatalf("a 100-byte read made %v chunk requests for %v bytes, want 1 for %d (one page)", n, got, ps)
	}
	for _, p := range []int64{4, 6, 7} {
		if cached(p) {
			t.Fatalf("page %d of the same chunk is cached after a read of page 5", p)
		}
	}
	reqs = chunkRequests(c)
	read(5*ps+1000, 5000)
	if n := chunkRequests(c) - reqs; n != 0 {
		t.Fatalf("a read within a cached page made %v chunk requests, want 0", n)
	}

	// Any part of a page is viewed from its page, fetched whole.
	before = responseBytes(c)
	v, ok, err := cl.View(ctx, "bucket-a", "col.bin", m, 9*ps+3, 10)
	if err != nil || !ok || !bytes.Equal(v.Data, data[9*ps+3:9*ps+13]) {
		t.Fatalf("View of 10 bytes of page 9: ok %v, err %v", ok, err)
	}
	v.Release()
	if got := responseBytes(c) - before; got != ps {
		t.Fatalf("View of 10 bytes of page 9 sent %v bytes, want %d", got, ps)
	}
	if _, ok, err := cl.View(ctx, "bucket-a", "col.bin", m, 10*ps-10, 20); ok || err != nil {
		t.Fatalf("View across two pages: ok %v, err %v; want false, nil", ok, err)
	}

	// A scan in reads of half a page: read ahead in pages, and then all
	// of it is in RAM.
	for off := int64(0); off < int64(len(data)); off += ps / 2 {
		read(off, min(ps/2, int64(len(data))-off))
	}
	pages := (int64(len(data)) + ps - 1) / ps
	testutil.WaitFor(t, "every page in the page cache", func() bool {
		for p := range pages {
			if !cached(p) {
				return false
			}
		}
		return true
	})
	reqs = chunkRequests(c)
	read(0, int64(len(data)))
	obj, err := cl.OpenVersion(ctx, "bucket-a", "col.bin", m)
	testutil.Must(t, err)
	defer obj.Close()
	all, err := io.ReadAll(obj)
	testutil.Must(t, err)
	if !bytes.Equal(all, data) {
		t.Fatal("a sequential Object read differs")
	}
	if n := chunkRequests(c) - reqs; n != 0 {
		t.Fatalf("re-reads of a cached object made %v chunk requests, want 0", n)
	}
}

// PageBytes must divide the chunk size: refused when the chunk size is
// configured; when it is learnt from the nodes, the page cache keeps whole
// chunks.
func TestPageBytesThatDoNotDivideTheChunkSize(t *testing.T) {
	c := nodecluster.Start(t, 1)
	_, err := client.New(context.Background(), client.Config{Seeds: c.Seeds(), TLS: c.TenantTLS("team-a"),
		ChunkSize: cs, PageCacheBytes: 16 << 20, PageBytes: 100_000})
	if err == nil {
		t.Fatal("client.New accepted PageBytes 100000 with ChunkSize 256Ki")
	}

	cl, _ := newClient(t, c, c.TenantTLS("team-a"), func(cfg *client.Config) {
		cfg.PageCacheBytes = 16 << 20
		cfg.PageBytes = 100_000
	})
	ctx := context.Background()
	data := testutil.RandomBytes(rand.New(rand.NewPCG(33, 34)), 2*cs)
	m := putStat(t, c, cl, "bucket-a", "w.bin", data)
	before := responseBytes(c)
	p := make([]byte, 10)
	_, err = cl.ReadAt(ctx, "bucket-a", "w.bin", m, p, cs+5)
	testutil.Must(t, err)
	if !bytes.Equal(p, data[cs+5:cs+15]) {
		t.Fatal("read differs")
	}
	testutil.WaitFor(t, "chunk 1 in the page cache", func() bool {
		_, ok, err := cl.View(ctx, "bucket-a", "w.bin", m, cs, 1)
		return ok && err == nil
	})
	testutil.WaitFor(t, "the fill's bytes counted", func() bool { return responseBytes(c)-before >= 10+cs })
	if got := responseBytes(c) - before; got != 10+cs {
		t.Fatalf("a 10-byte read sent %v bytes, want %d (the bytes and the whole chunk)", got, 10+cs)
	}
}

// Pages come from a pool of buffers that are reused once evicted. A page
// evicted while a reader still holds it (a View being written to a
// socket, a copy in progress) keeps its bytes until the reader lets go:
// with a page cache of 8 chunks and readers moving over 64, every page is
// evicted and its buffer refilled many times, and every byte read, copied
// or viewed and checked after other reads, must still be right. Once the
// cache is emptied, every buffer is back in the pool.
func TestPagesReusedAfterEviction(t *testing.T) {
	c := nodecluster.Start(t, 3)
	cl, reg := newClient(t, c, c.TenantTLS("team-a"), func(cfg *client.Config) {
		cfg.PageCacheBytes = 8 * cs
	})
	ctx := context.Background()
	r := rand.New(rand.NewPCG(41, 42))
	const objects = 4
	var (
		data  [objects][]byte
		metas [objects]client.Meta
	)
	for i := range objects {
		data[i] = testutil.RandomBytes(r, 16*cs)
		key := "obj-" + strconv.Itoa(i)
		m := putStat(t, c, cl, "bucket-a", key, data[i])
		metas[i] = m
	}

	var g errgroup.Group
	for w := range 8 {
		g.Go(func() error {
			r := rand.New(rand.NewPCG(uint64(w), 7))
			for range 60 {
				i := r.IntN(objects)
				key, want := "obj-"+strconv.Itoa(i), data[i]
				off := r.Int64N(int64(len(want)) - 1)
				n := min(1+r.Int64N(2*cs), int64(len(want))-off)
				if r.IntN(2) == 0 {
					p := make([]byte, n)
					if _, err := cl.ReadAt(ctx, "bucket-a", key, metas[i], p, off); err != nil {
						return err
					}
					if !bytes.Equal(p, want[off:off+n]) {
						return fmt.Errorf("ReadAt of %d bytes at %d of %s differs", n, off, key)
					}
					continue
				}
				// A view held across another object's read, which
				// evicts pages, is checked after it.
				v, ok, err := cl.View(ctx, "bucket-a", key, metas[i], off, min(n, cs-off%cs))
				if err != nil {
					return err
				}
				other := (i + 1) % objects
				p := make([]byte, cs)
				if _, err := cl.ReadAt(ctx, "bucket-a", "obj-"+strconv.Itoa(other), metas[other], p, r.Int64N(15*cs)); err != nil {
					return err
				}
				if ok {
					if !bytes.Equal(v.Data, want[off:off+int64(len(v.Data))]) {
						return fmt.Errorf("a view of %d bytes at %d of %s changed while held", len(v.Data), off, key)
					}
					v.Release()
				}
			}
			return nil
		})
	}
	testutil.Must(t, g.Wait())

	var fills float64
	for _, mode := range []string{"read", "background", "ahead"} {
		fills += nodecluster.Gather(t, reg, "distcache_client_page_fills_total", map[string]string{"mode": mode})
	}
	inUse, refused, _ := cl.PagePool()
	t.Logf("%v page fills; page buffers in use %d, fresh memory taken %d times", fills, inUse, refused)
	// The pool holds 10 buffers (8 chunks and a quarter); a fill that
	// finds them all held (8 readers holding evicted pages) takes fresh
	// memory, every other fill a buffer given back.
	if fromPool := fills - float64(refused); fromPool < 3*10 {
		t.Fatalf("%v page fills, %d of them in fresh memory: the pool's 10 buffers were not reused", fills, refused)
	}
	// Fills behind the reads (and read-ahead) may still be running.
	testutil.WaitFor(t, "the fills in flight", func() bool { return cl.FillsInFlight() == 0 })
	cl.DropPages()
	if inUse, _, _ := cl.PagePool(); inUse != 0 {
		t.Fatalf("%d page buffers still held with the cache empty and no reader: a hold was never released", inUse)
	}
}

// With PrefaultPageCache, the client learns the chunk size with the ring
// and New returns with the page cache's memory (its bound and a quarter)
// already held, before any read; without it, the memory is taken as pages
// are filled.
func TestPrefaultPageCache(t *testing.T) {
	c := nodecluster.Start(t, 1)
	reqs := chunkRequests(c)
	cl, reg := newClient(t, c, c.TenantTLS("team-a"), func(cfg *client.Config) {
		cfg.PageCacheBytes = 8 * cs
		cfg.PrefaultPageCache = true
	})
	const pool = 10 * cs // 8 chunks and a quarter, in whole chunks
	if _, _, held := cl.PagePool(); held != pool {
		t.Fatalf("after New the page pool holds %d bytes, want %d", held, pool)
	}
	if got := nodecluster.Gather(t, reg, "distcache_client_page_memory_bytes", nil); got != pool {
		t.Fatalf("distcache_client_page_memory_bytes = %v, want %d", got, pool)
	}
	if n := chunkRequests(c) - reqs; n != 0 {
		t.Fatalf("New made %v chunk requests; the chunk size comes with the ring", n)
	}

	lazy, _ := newClient(t, c, c.TenantTLS("team-a"), func(cfg *client.Config) { cfg.PageCacheBytes = 8 * cs })
	if _, _, held := lazy.PagePool(); held != 0 {
		t.Fatalf("without PrefaultPageCache the page pool holds %d bytes before any read", held)
	}
	data := testutil.RandomBytes(rand.New(rand.NewPCG(5, 6)), 2*cs)
	c.PutDirect("bucket-a", "k", data)
	ctx := context.Background()
	m, err := lazy.Stat(ctx, "bucket-a", "k")
	testutil.Must(t, err)
	p := make([]byte, len(data))
	_, err = lazy.ReadAt(ctx, "bucket-a", "k", m, p, 0)
	testutil.Must(t, err)
	if !bytes.Equal(p, data) {
		t.Fatal("read differs")
	}
	if _, _, n := lazy.PagePool(); n != 10*cs {
		t.Fatalf("after a read the page pool holds %d bytes, want its bound (%d: a block holds more)", n, 10*cs)
	}
}

// ReadUnits gives the chunk size learnt from the nodes (New waits for the
// ring's answer, which carries it) and the pages reads are split into for
// it: PageBytes where it divides the chunk, else whole chunks, and whole
// chunks without a page cache.
func TestReadUnitsLearntFromTheNodes(t *testing.T) {
	c := nodecluster.Start(t, 1)
	for _, k := range []struct {
		pageCache, pageBytes, wantPage int64
	}{
		{16 << 20, cs / 4, cs / 4},
		{16 << 20, 0, cs},
		{16 << 20, 100_000, cs}, // does not divide it
		{16 << 20, 4 * cs, cs},  // larger than a chunk
		{0, cs / 4, cs},         // no page cache
	} {
		cl, _ := newClient(t, c, c.TenantTLS("team-a"), func(cfg *client.Config) {
			cfg.PageCacheBytes, cfg.PageBytes = k.pageCache, k.pageBytes
		})
		if chunk, page := cl.ReadUnits(); chunk != cs || page != k.wantPage {
			t.Errorf("page cache %d, PageBytes %d: ReadUnits %d, %d; want %d, %d", k.pageCache, k.pageBytes, chunk, page, cs, k.wantPage)
		}
	}
}
