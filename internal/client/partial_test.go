package client_test

import (
	"bytes"
	"context"
	"math/rand/v2"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/distcache/distcache/internal/client"
	"github.com/distcache/distcache/internal/testutil"
	"github.com/distcache/distcache/internal/testutil/nodecluster"
)

// gate holds whole-chunk requests (chunk requests without a Range header)
// until it is opened, and counts chunk requests by kind.
type gate struct {
	next          http.RoundTripper
	open          chan struct{}
	once          sync.Once
	mu            sync.Mutex
	whole, ranged int
}

func (g *gate) wrap(rt http.RoundTripper) http.RoundTripper { g.next = rt; return g }

func (g *gate) RoundTrip(req *http.Request) (*http.Response, error) {
	if strings.Contains(req.URL.RawQuery, "chunk=") {
		g.mu.Lock()
		whole := req.Header.Get("Range") == ""
		if whole {
			g.whole++
		} else {
			g.ranged++
		}
		g.mu.Unlock()
		if whole {
			select {
			case <-g.open:
			case <-req.Context().Done():
				return nil, req.Context().Err()
			}
		}
	}
	return g.next.RoundTrip(req)
}

func (g *gate) counts() (whole, ranged int) {
	g.mu.Lock()
	defer g.mu.Unlock()
	return g.whole, g.ranged
}

// A small read of a chunk that is not in the page cache must not wait for
// the whole chunk: it is answered with the bytes asked for (a ranged chunk
// request), while the whole chunk is fetched into the page cache in the
// background, so later reads of that chunk are served from RAM.
func TestSmallReadDoesNotWaitForTheWholeChunk(t *testing.T) {
	c := nodecluster.Start(t, 3)
	g := &gate{open: make(chan struct{})}
	defer g.once.Do(func() { close(g.open) })
	cl, reg := newClient(t, c, c.TenantTLS("team-a"), func(cfg *client.Config) {
		cfg.PageCacheBytes = 64 << 20
		cfg.WrapTransport = g.wrap
	})
	ctx := context.Background()
	data := testutil.RandomBytes(rand.New(rand.NewPCG(7, 8)), 3*cs)
	m, err := cl.Put(ctx, "bucket-a", "small-reads.bin", bytes.NewReader(data), int64(len(data)), "")
	testutil.Must(t, err)

	// Whole-chunk requests are held: the read must be answered anyway.
	rctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	off := int64(cs + 1000)
	p := make([]byte, 4096)
	if _, err := cl.ReadAt(rctx, "bucket-a", "small-reads.bin", m, p, off); err != nil {
		t.Fatalf("small read waited for the whole chunk: %v", err)
	}
	if !bytes.Equal(p, data[off:off+int64(len(p))]) {
		t.Fatal("small read differs")
	}
	// The background fetch starts on its own goroutine (and may first
	// fault in a block of the page pool): wait for it to reach the gate.
	testutil.WaitFor(t, "the whole-chunk fetch behind the read", func() bool { whole, _ := g.counts(); return whole >= 1 })
	if whole, ranged := g.counts(); ranged != 1 || whole != 1 {
		t.Fatalf("chunk requests: %d whole, %d ranged; want the ranged read and one whole fetch in the background", whole, ranged)
	}

	// Once the background fetch is through, the chunk is served from RAM.
	// (A read while the fetch is still in flight joins it: no node request,
	// but not a page cache hit either; wait for a hit.)
	g.once.Do(func() { close(g.open) })
	hits := func() float64 {
		return nodecluster.Gather(t, reg, "distcache_client_page_cache_requests_total", map[string]string{"result": "hit"})
	}
	deadline := time.Now().Add(time.Minute)
	for {
		hitsBefore := hits()
		q := make([]byte, 100)
		_, err := cl.ReadAt(ctx, "bucket-a", "small-reads.bin", m, q, off+5000)
		testutil.Must(t, err)
		if !bytes.Equal(q, data[off+5000:off+5100]) {
			t.Fatal("read from the page cache differs")
		}
		if hits() > hitsBefore {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("the chunk never reached the page cache")
		}
		time.Sleep(20 * time.Millisecond)
	}
	// The chunk the reads touched was filled in the background (once, unless
	// the page cache refused it and a later miss filled it again).
	bg := nodecluster.Gather(t, reg, "distcache_client_page_fills_total", map[string]string{"mode": "background"})
	fg := nodecluster.Gather(t, reg, "distcache_client_page_fills_total", map[string]string{"mode": "read"})
	if bg < 1 || fg != 0 {
		t.Fatalf("page fills: %v background, %v read; want the background fill only", bg, fg)
	}
}
