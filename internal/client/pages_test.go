package client_test

import (
	"bytes"
	"context"
	"io"
	"math/rand/v2"
	"testing"

	"github.com/distcache/distcache/internal/client"
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
	data := randomBytes(r, 6*cs+1000)
	c.PutDirect("bucket-a", "col.bin", data)
	m, err := cl.Stat(ctx, "bucket-a", "col.bin")
	must(t, err)
	read := func(off, n int64) {
		t.Helper()
		p := make([]byte, n)
		_, err := cl.ReadAt(ctx, "bucket-a", "col.bin", m, p, off)
		must(t, err)
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
	waitFor(t, "the page's bytes counted", func() bool { return responseBytes(c)-before >= ps })
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
	if err != nil || !ok || !bytes.Equal(v, data[9*ps+3:9*ps+13]) {
		t.Fatalf("View of 10 bytes of page 9: ok %v, err %v", ok, err)
	}
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
	waitFor(t, "every page in the page cache", func() bool {
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
	must(t, err)
	defer obj.Close()
	all, err := io.ReadAll(obj)
	must(t, err)
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
	data := randomBytes(rand.New(rand.NewPCG(33, 34)), 2*cs)
	c.PutDirect("bucket-a", "w.bin", data)
	m, err := cl.Stat(ctx, "bucket-a", "w.bin")
	must(t, err)
	before := responseBytes(c)
	p := make([]byte, 10)
	_, err = cl.ReadAt(ctx, "bucket-a", "w.bin", m, p, cs+5)
	must(t, err)
	if !bytes.Equal(p, data[cs+5:cs+15]) {
		t.Fatal("read differs")
	}
	waitFor(t, "chunk 1 in the page cache", func() bool {
		_, ok, err := cl.View(ctx, "bucket-a", "w.bin", m, cs, 1)
		return ok && err == nil
	})
	waitFor(t, "the fill's bytes counted", func() bool { return responseBytes(c)-before >= 10+cs })
	if got := responseBytes(c) - before; got != 10+cs {
		t.Fatalf("a 10-byte read sent %v bytes, want %d (the bytes and the whole chunk)", got, 10+cs)
	}
}
