package client_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"net"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/distcache/distcache/internal/client"
	"github.com/distcache/distcache/internal/testutil"
	"github.com/distcache/distcache/internal/testutil/nodecluster"
)

func TestReadAtIsByteExact(t *testing.T) {
	c := nodecluster.Start(t, 3)
	r := rand.New(rand.NewPCG(1, 2))
	sizes := []int{0, 1, cs - 1, cs, cs + 1, 9*cs + 12345}
	for i, size := range sizes {
		c.PutDirect("bucket-a", fmt.Sprintf("obj-%d", i), testutil.RandomBytes(r, size))
	}
	for _, pageCache := range []int64{0, 64 << 20} {
		t.Run(fmt.Sprintf("pageCache=%d", pageCache), func(t *testing.T) {
			cl, _ := newClient(t, c, c.TenantTLS("team-a"), func(cfg *client.Config) {
				cfg.PageCacheBytes = pageCache
				cfg.Parallelism = 3
			})
			ctx := context.Background()
			for i, size := range sizes {
				key := fmt.Sprintf("obj-%d", i)
				m, err := cl.Stat(ctx, "bucket-a", key)
				testutil.Must(t, err)
				if m.Size != int64(size) {
					t.Fatalf("%s: Stat size %d, want %d", key, m.Size, size)
				}
				whole := c.GetDirect("bucket-a", key, "") // MinIO itself is the reference
				type rng struct{ off, n int }
				ranges := []rng{{0, size}, {0, size + 10}, {size, 5}, {size / 2, size}}
				for _, b := range []int{cs, 2 * cs, 5 * cs} { // around chunk boundaries
					if b <= size {
						ranges = append(ranges, rng{b - 1, 2}, rng{b - 3, cs + 6}, rng{b, 1})
					}
				}
				for j := 0; j < 12 && size > 0; j++ {
					off := r.IntN(size)
					ranges = append(ranges, rng{off, 1 + r.IntN(size-off+cs/2)})
				}
				for _, rg := range ranges {
					p := make([]byte, rg.n)
					n, err := cl.ReadAt(ctx, "bucket-a", key, m, p, int64(rg.off))
					end := min(rg.off+rg.n, size)
					want := whole[min(rg.off, size):end]
					if rg.off+rg.n > size {
						if !errors.Is(err, io.EOF) {
							t.Fatalf("%s [%d,+%d) of %d: err %v, want io.EOF", key, rg.off, rg.n, size, err)
						}
					} else if err != nil {
						t.Fatalf("%s [%d,+%d): %v", key, rg.off, rg.n, err)
					}
					if n != len(want) || !bytes.Equal(p[:n], want) {
						t.Fatalf("%s [%d,+%d) of %d: read %d bytes, want %d; equal %v", key, rg.off, rg.n, size, n, len(want), bytes.Equal(p[:n], want))
					}
				}
				if size > 10 { // a ranged GET straight from MinIO agrees too
					direct := c.GetDirect("bucket-a", key, fmt.Sprintf("bytes=%d-%d", 3, size-2))
					p := make([]byte, len(direct))
					_, err := cl.ReadAt(ctx, "bucket-a", key, m, p, 3)
					testutil.Must(t, err)
					if !bytes.Equal(p, direct) {
						t.Fatalf("%s differs from MinIO's ranged GET", key)
					}
				}
			}
		})
	}
}

func TestReadsGoToTheChunkOwners(t *testing.T) {
	c := nodecluster.Start(t, 3)
	cl, _ := newClient(t, c, c.TenantTLS("team-a"), nil)
	ctx := context.Background()
	data := testutil.RandomBytes(rand.New(rand.NewPCG(3, 4)), 30*cs)
	m := putStat(t, c, cl, "bucket-a", "table.bin", data)
	p := make([]byte, len(data))
	_, err := cl.ReadAt(ctx, "bucket-a", "table.bin", m, p, 0)
	testutil.Must(t, err)
	if !bytes.Equal(p, data) {
		t.Fatal("read differs")
	}
	if f := forwards(c); f != 0 {
		t.Fatalf("nodes forwarded %v chunk requests: the client did not send them to their owners", f)
	}
	rg := c.Ring()
	owned := map[string]int{}
	for idx := int64(0); idx < 30; idx++ {
		id := chunkID("team-a", "bucket-a", "table.bin", m.ETag, idx)
		owner := rg.Owner(id).Name
		owned[owner]++
		for _, mb := range c.Members() {
			if got, want := mb.Holds(id), mb.Name == owner; got != want {
				t.Fatalf("chunk %d: %s holds it = %v, want %v (owner %s)", idx, mb.Name, got, want, owner)
			}
		}
	}
	for i, mb := range c.Members() {
		got := c.Counter(i, "distcache_chunk_reads_total", nil)
		if int(got) != owned[mb.Name] {
			t.Fatalf("%s answered %v chunk requests, owns %d of the chunks", mb.Name, got, owned[mb.Name])
		}
		if owned[mb.Name] == 0 {
			t.Fatalf("%s owns none of 30 chunks: placement is not spreading", mb.Name)
		}
	}
	// Sub-chunk reads go to the owners too.
	for i := 0; i < 20; i++ {
		off := rand.IntN(len(data) - 1000)
		_, err := cl.ReadAt(ctx, "bucket-a", "table.bin", m, p[:1000], int64(off))
		testutil.Must(t, err)
		if !bytes.Equal(p[:1000], data[off:off+1000]) {
			t.Fatalf("range at %d differs", off)
		}
	}
	if f := forwards(c); f != 0 {
		t.Fatalf("nodes forwarded %v requests after sub-chunk reads", f)
	}
}

func TestPageCacheServesRepeatedReadsWithoutTheNetwork(t *testing.T) {
	c := nodecluster.Start(t, 3)
	cl, reg := newClient(t, c, c.TenantTLS("team-a"), func(cfg *client.Config) { cfg.PageCacheBytes = 64 << 20 })
	ctx := context.Background()
	r := rand.New(rand.NewPCG(5, 6))
	v1 := testutil.RandomBytes(r, 10*cs+77)
	m1, err := cl.Put(ctx, "bucket-a", "hot.bin", bytes.NewReader(v1), int64(len(v1)), "application/x-test")
	testutil.Must(t, err)
	if m1.Size != int64(len(v1)) || m1.ContentType != "application/x-test" {
		t.Fatalf("Put returned %+v", m1)
	}
	p := make([]byte, len(v1))
	_, err = cl.ReadAt(ctx, "bucket-a", "hot.bin", m1, p, 0)
	testutil.Must(t, err)
	before := chunkRequests(c)
	if before != 11 {
		t.Fatalf("first read made %v chunk requests, want 11 (one per chunk)", before)
	}
	for i := 0; i < 30; i++ {
		off, n := r.IntN(len(v1)), 1+r.IntN(3*cs)
		q := make([]byte, n)
		got, err := cl.ReadAt(ctx, "bucket-a", "hot.bin", m1, q, int64(off))
		if err != nil && !errors.Is(err, io.EOF) {
			t.Fatal(err)
		}
		if !bytes.Equal(q[:got], v1[off:off+got]) {
			t.Fatalf("cached range at %d differs", off)
		}
	}
	if after := chunkRequests(c); after != before {
		t.Fatalf("repeated reads made %v chunk requests to nodes, want 0", after-before)
	}
	if hits := nodecluster.Gather(t, reg, "distcache_client_page_cache_requests_total", map[string]string{"result": "hit"}); hits < 30 {
		t.Fatalf("page cache hits = %v, want >= 30", hits)
	}

	// A new version is a different set of pages: never the old bytes.
	v2 := testutil.RandomBytes(r, len(v1))
	m2, err := cl.Put(ctx, "bucket-a", "hot.bin", bytes.NewReader(v2), int64(len(v2)), "")
	testutil.Must(t, err)
	if m2.ETag == m1.ETag {
		t.Fatal("overwrite kept the ETag")
	}
	st, err := cl.Stat(ctx, "bucket-a", "hot.bin")
	testutil.Must(t, err)
	if st.ETag != m2.ETag {
		t.Fatalf("Stat after Put: ETag %s, want %s", st.ETag, m2.ETag)
	}
	readBack(t, cl, "bucket-a", "hot.bin", st, v2, "read after overwrite served old pages")
}

func TestReadsSurviveAMemberDyingMidRead(t *testing.T) {
	c := nodecluster.Start(t, 3)
	cl, reg := newClient(t, c, c.TenantTLS("team-a"), func(cfg *client.Config) { cfg.Parallelism = 4 })
	ctx := context.Background()
	r := rand.New(rand.NewPCG(7, 8))
	const objects = 12
	var data [objects][]byte
	for i := range data {
		data[i] = testutil.RandomBytes(r, 8*cs)
		c.PutDirect("bucket-a", fmt.Sprintf("part-%d", i), data[i])
	}
	c.Proxy.SetDelay(5 * time.Millisecond) // cold reads stay in flight while the member dies

	killed := make(chan struct{})
	var once sync.Once
	var wg sync.WaitGroup
	errs := make(chan error, 64)
	for g := 0; g < 3; g++ {
		wg.Go(func() {
			for i := 4 * g; i < 4*g+objects; i++ {
				key := fmt.Sprintf("part-%d", i%objects)
				m, err := cl.Stat(ctx, "bucket-a", key)
				if err != nil {
					errs <- fmt.Errorf("stat %s: %w", key, err)
					return
				}
				p := make([]byte, m.Size)
				if _, err := cl.ReadAt(ctx, "bucket-a", key, m, p, 0); err != nil {
					errs <- fmt.Errorf("read %s: %w", key, err)
				} else if !bytes.Equal(p, data[i%objects]) {
					errs <- fmt.Errorf("read %s: wrong bytes", key)
				}
				once.Do(func() { close(killed) })
			}
		})
	}
	<-killed // the first read is done, the others are in flight
	c.Kill(1)
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
	if f := nodecluster.Gather(t, reg, "distcache_client_failovers_total", nil); f == 0 {
		t.Fatal("no request failed over: the test did not exercise the dead member")
	}
	unreachable := nodecluster.Gather(t, reg, "distcache_client_node_requests_total", map[string]string{"result": "unreachable"})
	t.Logf("dead member: %v unreachable node requests, %v failovers", unreachable,
		nodecluster.Gather(t, reg, "distcache_client_failovers_total", nil))

	// Writes and metadata keep working: keys whose metadata member is the
	// dead one fail over too.
	for i := 0; i < 6; i++ {
		key := fmt.Sprintf("new-%d", i)
		body := testutil.RandomBytes(r, 1000+i)
		if _, err := cl.Put(ctx, "bucket-a", key, bytes.NewReader(body), int64(len(body)), ""); err != nil {
			t.Fatalf("put %s with a dead member: %v", key, err)
		}
		if _, err := cl.Stat(ctx, "bucket-a", key); err != nil {
			t.Fatalf("stat %s with a dead member: %v", key, err)
		}
		if err := cl.Delete(ctx, "bucket-a", key); err != nil {
			t.Fatalf("delete %s with a dead member: %v", key, err)
		}
	}
}

func TestRingRefreshSeesANewMember(t *testing.T) {
	c := nodecluster.Start(t, 3)
	cl, reg := newClient(t, c, c.TenantTLS("team-a"), func(cfg *client.Config) { cfg.RingRefresh = 50 * time.Millisecond })
	if e := cl.Ring().Epoch(); e != 1 {
		t.Fatalf("initial epoch %d, want 1", e)
	}
	c.Add()
	c.Publish(true)
	waitForEpoch(t, cl, 2)
	if n := len(cl.Ring().Members()); n != 4 {
		t.Fatalf("ring has %d members, want 4", n)
	}
	if g := nodecluster.Gather(t, reg, "distcache_client_ring_epoch", nil); g != 2 {
		t.Fatalf("ring epoch gauge %v, want 2", g)
	}
	// Reads now go to owners under the new ring, the new member included.
	data := testutil.RandomBytes(rand.New(rand.NewPCG(9, 10)), 24*cs)
	m := putStat(t, c, cl, "bucket-a", "after-growth", data)
	readBack(t, cl, "bucket-a", "after-growth", m, data, "read differs after growth")
	if f := forwards(c); f != 0 {
		t.Fatalf("nodes forwarded %v requests: the client routes by a stale ring", f)
	}
	if n := c.Counter(3, "distcache_chunk_reads_total", nil); n == 0 {
		t.Fatal("the new member got no chunk requests")
	}
}

func TestUnreachableMemberTriggersARingRefresh(t *testing.T) {
	c := nodecluster.Start(t, 3)
	cl, _ := newClient(t, c, c.TenantTLS("team-a"), nil) // RingRefresh: an hour
	ctx := context.Background()
	data := testutil.RandomBytes(rand.New(rand.NewPCG(11, 12)), 12*cs)
	m := putStat(t, c, cl, "bucket-a", "k", data)
	dead := c.Member(1)
	idx := int64(-1)
	for i := int64(0); i < 12; i++ {
		if cl.Ring().Owner(chunkID("team-a", "bucket-a", "k", m.ETag, i)).Name == dead.Name {
			idx = i
			break
		}
	}
	if idx < 0 {
		t.Fatal("cache-1 owns none of 12 chunks; pick another object")
	}
	c.Kill(1)
	c.PublishWithout(false) // epoch 2: the dead member is gone
	if cl.Ring().Epoch() != 1 {
		t.Fatal("the client refreshed before anything triggered it")
	}
	p := make([]byte, cs)
	_, err := cl.ReadAt(ctx, "bucket-a", "k", m, p, idx*cs)
	testutil.Must(t, err)
	if !bytes.Equal(p, data[idx*cs:(idx+1)*cs]) {
		t.Fatal("chunk of the dead member differs")
	}
	waitForEpoch(t, cl, 2)
}

func waitForEpoch(t *testing.T, cl *client.Client, epoch int64) {
	t.Helper()
	deadline := time.Now().Add(20 * time.Second)
	for cl.Ring().Epoch() < epoch {
		if time.Now().After(deadline) {
			t.Fatalf("client still at epoch %d, want %d", cl.Ring().Epoch(), epoch)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

func TestParallelFetchIsBoundedByParallelism(t *testing.T) {
	c := nodecluster.Start(t, 3)
	for _, parallelism := range []int{1, 3} {
		t.Run(fmt.Sprint(parallelism), func(t *testing.T) {
			counter := &inFlight{}
			cl, _ := newClient(t, c, c.TenantTLS("team-a"), func(cfg *client.Config) {
				cfg.Parallelism = parallelism
				cfg.WrapTransport = counter.wrap
			})
			ctx := context.Background()
			data := testutil.RandomBytes(rand.New(rand.NewPCG(13, uint64(parallelism))), 20*cs)
			key := fmt.Sprintf("wide-%d", parallelism)
			m := putStat(t, c, cl, "bucket-a", key, data)
			c.Proxy.SetDelay(20 * time.Millisecond) // cold chunks take a while: requests overlap
			defer c.Proxy.SetDelay(0)
			readBack(t, cl, "bucket-a", key, m, data, "read differs")
			peak, n := counter.stats()
			t.Logf("ReadAt of 20 chunks: %d requests, at most %d in flight (Parallelism %d)", n, peak, parallelism)
			if n != 20 || peak > parallelism || (parallelism > 1 && peak < 2) {
				t.Fatalf("%d requests, %d in flight at most; want 20, between 2 and %d", n, peak, parallelism)
			}

			// A sequential scan through an Object reads ahead within the same bound.
			counter.reset()
			o, err := cl.Open(ctx, "bucket-a", key)
			testutil.Must(t, err)
			defer o.Close()
			got, err := io.ReadAll(o)
			testutil.Must(t, err)
			if !bytes.Equal(got, data) {
				t.Fatal("sequential read differs")
			}
			peak, n = counter.stats()
			t.Logf("sequential read of 20 chunks: %d requests, at most %d in flight", n, peak)
			if n != 20 || peak > parallelism {
				t.Fatalf("sequential read: %d requests, %d in flight at most; want 20, at most %d", n, peak, parallelism)
			}
		})
	}
}

func TestObjectReadSeekReadAt(t *testing.T) {
	c := nodecluster.Start(t, 3)
	cl, _ := newClient(t, c, c.TenantTLS("team-a"), func(cfg *client.Config) { cfg.Parallelism = 3 })
	ctx := context.Background()
	data := testutil.RandomBytes(rand.New(rand.NewPCG(15, 16)), 7*cs+99)
	c.PutDirect("bucket-a", "obj", data)
	o, err := cl.Open(ctx, "bucket-a", "obj")
	testutil.Must(t, err)
	defer o.Close()
	if o.Size() != int64(len(data)) {
		t.Fatalf("Size %d", o.Size())
	}
	for _, pos := range []int64{3*cs - 5, 0, int64(len(data)) - 10, cs} {
		if _, err := o.Seek(pos, io.SeekStart); err != nil {
			t.Fatal(err)
		}
		p := make([]byte, 2*cs)
		n, err := io.ReadFull(o, p)
		want := data[pos:min(pos+2*cs, int64(len(data)))]
		if n != len(want) || !bytes.Equal(p[:n], want) {
			t.Fatalf("read at %d: %d bytes (%v), want %d", pos, n, err, len(want))
		}
	}
	if end, _ := o.Seek(0, io.SeekEnd); end != int64(len(data)) {
		t.Fatalf("SeekEnd = %d", end)
	}
	if n, err := o.Read(make([]byte, 4)); n != 0 || err != io.EOF {
		t.Fatalf("read at the end: %d, %v", n, err)
	}
	p := make([]byte, 1000)
	if _, err := o.ReadAt(p, 5*cs-500); err != nil || !bytes.Equal(p, data[5*cs-500:5*cs+500]) {
		t.Fatalf("ReadAt: %v", err)
	}
	var _ io.ReaderAt = o
	var _ io.ReadSeeker = o
}

func TestErrChangedAfterAnOverwriteBehindTheCache(t *testing.T) {
	c := nodecluster.Start(t, 3)
	cl, _ := newClient(t, c, c.TenantTLS("team-a"), nil)
	ctx := context.Background()
	r := rand.New(rand.NewPCG(17, 18))
	v1, v2 := testutil.RandomBytes(r, 4*cs), testutil.RandomBytes(r, 4*cs)
	m1 := putStat(t, c, cl, "bucket-a", "table.bin", v1)
	p := make([]byte, cs)
	_, err := cl.ReadAt(ctx, "bucket-a", "table.bin", m1, p, 0) // chunk 0 of v1 is cached
	testutil.Must(t, err)
	c.PutDirect("bucket-a", "table.bin", v2)

	q := make([]byte, 3*cs)
	_, err = cl.ReadAt(ctx, "bucket-a", "table.bin", m1, q, cs)
	if !errors.Is(err, client.ErrChanged) {
		t.Fatalf("read of a version overwritten behind the cache: %v, want ErrChanged", err)
	}
	var ce *client.Error
	if !errors.As(err, &ce) || ce.Status != 412 || ce.Code != "PreconditionFailed" {
		t.Fatalf("error %#v does not carry the node's 412 PreconditionFailed", err)
	}
	// Past the metadata TTL, a new Stat finds the new version.
	c.Clock.Advance(2 * time.Minute)
	m2, err := cl.Stat(ctx, "bucket-a", "table.bin")
	testutil.Must(t, err)
	if m2.ETag == m1.ETag {
		t.Fatal("Stat past the TTL still reports the old ETag")
	}
	readBack(t, cl, "bucket-a", "table.bin", m2, v2, "read of the new version differs")
}

func TestTenantsAreIsolated(t *testing.T) {
	c := nodecluster.Start(t, 3)
	ctx := context.Background()
	secret := testutil.RandomBytes(rand.New(rand.NewPCG(19, 20)), 2*cs)
	c.PutDirect("bucket-b", "secret", secret)
	b, _ := newClient(t, c, c.TenantTLS("team-b"), nil)
	mb, err := b.Stat(ctx, "bucket-b", "secret")
	testutil.Must(t, err) // team-b may read its own bucket
	p := make([]byte, len(secret))
	_, err = b.ReadAt(ctx, "bucket-b", "secret", mb, p, 0)
	testutil.Must(t, err)

	a, _ := newClient(t, c, c.TenantTLS("team-a"), func(cfg *client.Config) { cfg.PageCacheBytes = 16 << 20 })
	if _, err := a.Stat(ctx, "bucket-b", "secret"); !errors.Is(err, client.ErrAccessDenied) {
		t.Fatalf("team-a stat of team-b's bucket: %v, want ErrAccessDenied", err)
	}
	if _, err := a.ReadAt(ctx, "bucket-b", "secret", mb, p, 0); !errors.Is(err, client.ErrAccessDenied) {
		t.Fatalf("team-a read of team-b's chunks with team-b's Meta: %v, want ErrAccessDenied", err)
	}
	if _, err := a.Put(ctx, "bucket-b", "x", bytes.NewReader([]byte("x")), 1, ""); !errors.Is(err, client.ErrAccessDenied) {
		t.Fatalf("team-a put into team-b's bucket: %v, want ErrAccessDenied", err)
	}
	if err := a.Delete(ctx, "bucket-b", "secret"); !errors.Is(err, client.ErrAccessDenied) {
		t.Fatalf("team-a delete in team-b's bucket: %v, want ErrAccessDenied", err)
	}

	// A gateway holding a peer certificate acts for one tenant at a time.
	gw, _ := newClient(t, c, c.PeerTLS("gateway-0"), func(cfg *client.Config) { cfg.Tenant = "team-a" })
	if _, err := gw.Stat(ctx, "bucket-b", "secret"); !errors.Is(err, client.ErrAccessDenied) {
		t.Fatalf("gateway for team-a reading team-b's bucket: %v, want ErrAccessDenied", err)
	}
	ma := putStat(t, c, gw, "bucket-a", "mine", secret)
	before := forwards(c)
	readBack(t, gw, "bucket-a", "mine", ma, secret, "gateway read differs")
	if f := forwards(c) - before; f != 0 {
		t.Fatalf("a gateway acting for team-a routed %v chunks to non-owners", f)
	}
}

func TestKeysAreEscaped(t *testing.T) {
	c := nodecluster.Start(t, 3)
	cl, _ := newClient(t, c, c.TenantTLS("team-a"), nil)
	ctx := context.Background()
	r := rand.New(rand.NewPCG(21, 22))
	keys := []string{
		"with space+plus%percent?query#hash.bin", "ünïcødé/日本語/ファイル", "/leading", "trailing/", "%2F", "%",
		"semi;colon=eq&amp@at!bang$'()*,", "~tilde/.hidden", "...", "a/.../b", "tab\there", "new\nline",
	}
	for i, key := range keys {
		data := testutil.RandomBytes(r, cs+i)
		m, err := cl.Put(ctx, "bucket-a", key, bytes.NewReader(data), int64(len(data)), "")
		if err != nil {
			t.Fatalf("put %q: %v", key, err)
		}
		if got := c.GetDirect("bucket-a", key, ""); !bytes.Equal(got, data) {
			t.Fatalf("%q: MinIO holds %d bytes, want the %d written", key, len(got), len(data))
		}
		st, err := cl.Stat(ctx, "bucket-a", key)
		if err != nil || st.ETag != m.ETag || st.Size != int64(len(data)) {
			t.Fatalf("stat %q: %+v, %v; put said %+v", key, st, err, m)
		}
		p := make([]byte, len(data))
		if _, err := cl.ReadAt(ctx, "bucket-a", key, st, p, 0); err != nil || !bytes.Equal(p, data) {
			t.Fatalf("read %q: %v", key, err)
		}
		testutil.Must(t, cl.Delete(ctx, "bucket-a", key))
		if _, err := cl.Stat(ctx, "bucket-a", key); !errors.Is(err, client.ErrNotFound) {
			t.Fatalf("stat %q after delete: %v, want ErrNotFound", key, err)
		}
	}
	if f := forwards(c); f != 0 {
		t.Fatalf("%v forwarded requests: placement of escaped keys differs between client and nodes", f)
	}
	// MinIO refuses dot segments and empty segments (AWS S3 takes them), and
	// the node passes its 400 on.
	// The node must still get the exact key, not one its router cleaned
	// ("x/../y" must not become "y"): MinIO's refusal names the key.
	for _, key := range []string{"a//double/slash", "./dot", "x/./y", "x/../y", "a/..", ".", ".."} {
		_, err := cl.Put(ctx, "bucket-a", key, bytes.NewReader([]byte("x")), 1, "")
		var ce *client.Error
		if !errors.As(err, &ce) || ce.Status != 400 || !strings.Contains(ce.Message, "bucket-a/"+key+":") {
			t.Fatalf("put %q: %v; want MinIO's refusal of exactly that key", key, err)
		}
	}
}

func TestErrors(t *testing.T) {
	c := nodecluster.Start(t, 3)
	cl, _ := newClient(t, c, c.TenantTLS("team-a"), nil)
	ctx := context.Background()
	if _, err := cl.Stat(ctx, "bucket-a", "missing"); !errors.Is(err, client.ErrNotFound) {
		t.Fatalf("stat of a missing key: %v, want ErrNotFound", err)
	}
	m := putStat(t, c, cl, "bucket-a", "small", []byte("hello, world"))
	if _, err := cl.ReadAt(ctx, "bucket-a", "small", m, make([]byte, 1), -1); !errors.Is(err, client.ErrInvalidRange) {
		t.Fatalf("negative offset: %v, want ErrInvalidRange", err)
	}
	if n, err := cl.ReadAt(ctx, "bucket-a", "small", m, make([]byte, 4), 12); n != 0 || err != io.EOF {
		t.Fatalf("read at the end: %d, %v; want 0, io.EOF", n, err)
	}
	fake := client.Meta{Size: 12, ETag: `"not-the-etag"`}
	if _, err := cl.ReadAt(ctx, "bucket-a", "small", fake, make([]byte, 4), 0); !errors.Is(err, client.ErrChanged) {
		t.Fatalf("read of a version that never existed: %v, want ErrChanged", err)
	}

	// New refuses what cannot work.
	if _, err := client.New(ctx, client.Config{Seeds: c.Seeds(), TLS: c.PeerTLS("gw")}); err == nil {
		t.Fatal("New with a peer certificate and no Tenant succeeded")
	}
	if _, err := client.New(ctx, client.Config{Seeds: c.Seeds(), TLS: c.TenantTLS("team-a"), Tenant: "team-b"}); err == nil {
		t.Fatal("New with team-a's certificate acting for team-b succeeded")
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	testutil.Must(t, err)
	closed := ln.Addr().String()
	_ = ln.Close()
	if _, err := client.New(ctx, client.Config{Seeds: []string{"https://" + closed}, TLS: c.TenantTLS("team-a")}); !errors.Is(err, client.ErrUnavailable) {
		t.Fatalf("New with no reachable seed: %v, want ErrUnavailable", err)
	}
	// A dead first seed is skipped.
	cl2, err := client.New(ctx, client.Config{Seeds: append([]string{"https://" + closed}, c.Seeds()...), TLS: c.TenantTLS("team-a")})
	testutil.Must(t, err)
	_ = cl2.Close()

	// With every member dead, reads fail with ErrUnavailable.
	for i := range c.Members() {
		c.Kill(i)
	}
	if _, err := cl.ReadAt(ctx, "bucket-a", "small", m, make([]byte, 4), 0); !errors.Is(err, client.ErrUnavailable) {
		t.Fatalf("read with every member dead: %v, want ErrUnavailable", err)
	}
}

func TestStandaloneNodesWithoutARing(t *testing.T) {
	c := nodecluster.Start(t, 0)
	c.Add() // two nodes that run alone: no ring is ever published
	c.Add()
	cl, _ := newClient(t, c, c.TenantTLS("team-a"), nil)
	if r := cl.Ring(); r.Epoch() != 0 || len(r.Members()) != 2 {
		t.Fatalf("ring over the seeds: epoch %d, %d members; want 0, 2", r.Epoch(), len(r.Members()))
	}
	data := testutil.RandomBytes(rand.New(rand.NewPCG(23, 24)), 6*cs+1)
	m := putStat(t, c, cl, "bucket-a", "alone", data)
	readBack(t, cl, "bucket-a", "alone", m, data, "read differs")
	for i := range c.Members() {
		if c.Counter(i, "distcache_chunk_reads_total", nil) == 0 {
			t.Fatalf("node %d served no chunk: the client is not spreading chunks over the seeds", i)
		}
	}
}

// A client set to another chunk size than the nodes' is refused when it
// connects: the ring's answer carries the nodes' chunk size.
func TestChunkSizeMismatchIsAnError(t *testing.T) {
	c := nodecluster.Start(t, 1)
	cfg := client.Config{Seeds: c.Seeds(), TLS: c.TenantTLS("team-a"), ChunkSize: 2 * cs}
	cl, err := client.New(context.Background(), cfg)
	if err == nil {
		_ = cl.Close()
		t.Fatal("client.New with the wrong chunk size succeeded")
	}
	if want := fmt.Sprintf("chunk size is %d, the client's %d", cs, 2*cs); !strings.Contains(err.Error(), want) {
		t.Fatalf("client.New with the wrong chunk size: %v; want an error naming both chunk sizes", err)
	}
}

// failingReader yields some bytes, then fails, as a client body whose
// checksum turned out wrong does.
type failingReader struct{ n int }

func (f *failingReader) Read(p []byte) (int, error) {
	if f.n <= 0 {
		return 0, errors.New("body checksum mismatch")
	}
	k := min(len(p), f.n)
	f.n -= k
	return k, nil
}

func TestPutBodyErrorIsNotANodeFailure(t *testing.T) {
	c := nodecluster.Start(t, 3)
	ctx := context.Background()
	a, reg := newClient(t, c, c.TenantTLS("team-a"), nil)
	_, err := a.Put(ctx, "bucket-a", "broken", &failingReader{n: 3 * cs}, 4*cs, "")
	if err == nil || errors.Is(err, client.ErrUnavailable) || !strings.Contains(err.Error(), "checksum mismatch") {
		t.Fatalf("put with a failing body: %v; want the body's own error, not unavailability", err)
	}
	if n := gatheredSum(t, reg, "distcache_client_failovers_total"); n != 0 {
		t.Fatalf("a failing body caused %v failovers: the node was blamed", n)
	}
	if _, err := a.Put(ctx, "bucket-a", "fine", bytes.NewReader([]byte("ok")), 2, ""); err != nil {
		t.Fatalf("the next put failed: %v", err)
	}
}

// gatheredSum adds up every sample of a metric family in reg.
func gatheredSum(t *testing.T, reg *prometheus.Registry, name string) float64 {
	t.Helper()
	families, err := reg.Gather()
	testutil.Must(t, err)
	var sum float64
	for _, f := range families {
		if f.GetName() == name {
			for _, m := range f.GetMetric() {
				sum += m.GetCounter().GetValue()
			}
		}
	}
	return sum
}

// TestStaleRingFallsBackToTheSeeds: during a rolling update every member of
// the client's ring can be gone before the new ring reaches it; the seeds
// (the Service in Kubernetes) still lead to a live node.
func TestStaleRingFallsBackToTheSeeds(t *testing.T) {
	c := nodecluster.Start(t, 4)
	spare := c.Member(3)
	c.PublishWithout(false, spare.Name) // the ring: cache-0..2; cache-3 is only a seed
	cl, _ := newClient(t, c, c.TenantTLS("team-a"), func(cfg *client.Config) { cfg.Seeds = []string{spare.URL()} })
	if n := len(cl.Ring().Members()); n != 3 {
		t.Fatalf("client ring has %d members, want 3", n)
	}
	data := testutil.RandomBytes(rand.New(rand.NewPCG(21, 22)), 5*cs)
	m := putStat(t, c, cl, "bucket-a", "rolled", data)
	for i := 0; i < 3; i++ {
		c.Kill(i)
	}
	readBack(t, cl, "bucket-a", "rolled", m, data, "read through the seed differs")
	if n := c.Counter(3, "distcache_chunk_reads_total", nil); n == 0 {
		t.Fatal("the seed node served no chunk")
	}
}
