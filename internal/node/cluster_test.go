package node_test

import (
	"bytes"
	"fmt"
	"math/rand/v2"
	"net/http"
	"sync"
	"testing"
	"time"

	"github.com/distcache/distcache/internal/chunk"
	"github.com/distcache/distcache/internal/ring"
	"github.com/distcache/distcache/internal/testutil"
	"github.com/distcache/distcache/internal/testutil/nodecluster"
)

// member is one cache node of the cluster.
type member = nodecluster.Member

// cluster is the harness over several nodes in one ring (immutable
// metadata), sharing one MinIO (behind the counting proxy), one CA and one
// tenants file, each with its own store and ring holder.
type cluster struct {
	*harness
	members []*member
}

func newCluster(t *testing.T, n int) *cluster {
	h := newHarness(t, options{members: n, immutable: true})
	return &cluster{harness: h, members: h.nc.Members()}
}

// add starts one more node (not yet in the ring: call publish).
func (c *cluster) add() *member {
	m := c.nc.Add()
	c.members = append(c.members, m)
	return m
}

// publish gives every node a new ring epoch with all members; withPrevious
// carries the membership of the epoch before (warm handoff).
func (c *cluster) publish(withPrevious bool) *ring.Ring { return c.nc.Publish(withPrevious) }

func (c *cluster) objectURL(m *member, bucket, key, query string) string {
	u := fmt.Sprintf("https://%s/v1/objects/%s/%s", m.Addr, bucket, key)
	if query != "" {
		u += "?" + query
	}
	return u
}

func (c *cluster) read(cl *http.Client, m *member, bucket, key string) response {
	c.t.Helper()
	return c.do(cl, http.MethodGet, c.objectURL(m, bucket, key, ""), nil, nil)
}

// holds reports whether m has the chunk on disk or in RAM.
func holds(m *member, id chunk.ID) bool { return m.Holds(id) }

func TestClusterReadsThroughAnyNodeAreByteExactAndStoredOnTheOwner(t *testing.T) {
	c := newCluster(t, 3)
	a := c.client(tenant("team-a"))
	r := rand.New(rand.NewPCG(31, 32))
	data := testutil.RandomBytes(r, 12*testChunk+5)
	c.putDirect("bucket-a", "table.bin", data)
	for _, m := range c.members {
		if got := c.read(a, m, "bucket-a", "table.bin"); got.status != http.StatusOK || !bytes.Equal(got.body, data) {
			t.Fatalf("read through %s: status %d, equal %v", m.Name, got.status, bytes.Equal(got.body, data))
		}
	}
	if n := c.proxy.Count(http.MethodGet, "/bucket-a/table.bin"); n != 13 {
		t.Fatalf("3 reads of a 13-chunk object through 3 nodes made %d S3 GETs, want 13 (one per chunk)", n)
	}
	rg := c.members[0].Ring.Load()
	etag := c.read(a, c.members[0], "bucket-a", "table.bin").header.Get("ETag")
	for idx := int64(0); idx < 13; idx++ {
		id := chunk.ID{Object: chunk.Object{Tenant: "team-a", Bucket: "bucket-a", Key: "table.bin"}, ETag: etag, Size: testChunk, Index: idx}
		owner := rg.Owner(id).Name
		for _, m := range c.members {
			if got, want := holds(m, id), m.Name == owner; got != want {
				t.Fatalf("chunk %d: %s holds it = %v, want %v (owner %s)", idx, m.Name, got, want, owner)
			}
		}
	}
	// The ring is served to clients, with its epoch.
	resp := c.do(a, http.MethodGet, "https://"+c.members[1].Addr+"/v1/ring", nil, nil)
	if resp.status != http.StatusOK || resp.header.Get("X-Distcache-Ring-Epoch") != "1" || c.read(a, c.members[0], "bucket-a", "table.bin").header.Get("X-Distcache-Ring-Epoch") != "1" {
		t.Fatalf("/v1/ring: %d epoch %q", resp.status, resp.header.Get("X-Distcache-Ring-Epoch"))
	}
	if _, err := ring.Parse(resp.body); err != nil {
		t.Fatalf("/v1/ring does not parse: %v", err)
	}
}

func TestClusterReadsSurviveAMemberDyingMidRead(t *testing.T) {
	c := newCluster(t, 3)
	a := c.client(tenant("team-a"))
	r := rand.New(rand.NewPCG(33, 34))
	data := testutil.RandomBytes(r, 24*testChunk)
	c.putDirect("bucket-a", "big.bin", data)
	c.read(a, c.members[0], "bucket-a", "big.bin") // warm: chunks spread over all three

	c.proxy.SetDelay(5 * time.Millisecond) // keep reads in flight while the node dies
	var wg sync.WaitGroup
	failures := make(chan string, 16)
	for _, via := range []*member{c.members[0], c.members[2]} {
		wg.Go(func() {
			for i := 0; i < 4; i++ {
				got := c.read(a, via, "bucket-a", "big.bin")
				if got.status != http.StatusOK || !bytes.Equal(got.body, data) {
					failures <- fmt.Sprintf("read %d via %s: status %d, %d bytes", i, via.Name, got.status, len(got.body))
				}
			}
		})
	}
	time.Sleep(20 * time.Millisecond) // let the readers start; correctness does not depend on it
	c.nc.KillMember(c.members[1])
	wg.Wait()
	close(failures)
	for f := range failures {
		t.Error(f)
	}
	unreachable := c.counterOn(c.members[0], "distcache_peer_requests_total", map[string]string{"result": "unreachable"}) +
		c.counterOn(c.members[2], "distcache_peer_requests_total", map[string]string{"result": "unreachable"})
	skipped := c.counterOn(c.members[0], "distcache_peer_requests_total", map[string]string{"result": "skipped_down"}) +
		c.counterOn(c.members[2], "distcache_peer_requests_total", map[string]string{"result": "skipped_down"})
	if unreachable == 0 {
		t.Fatal("no read noticed the dead member: the test did not exercise failover")
	}
	t.Logf("dead member: %v unreachable peer requests, %v skipped while marked down", unreachable, skipped)
}

func (c *cluster) counterOn(m *member, name string, want map[string]string) float64 {
	c.t.Helper()
	return nodecluster.Gather(c.t, m.Registry, name, want)
}

// growAndReread warms a 3-node cluster, adds a 4th and re-reads everything,
// returning the fraction of chunks whose owner changed and the S3 GETs the
// re-read made.
func growAndReread(t *testing.T, handoff bool) (moved float64, gets, chunks int) {
	c := newCluster(t, 3)
	a := c.client(tenant("team-a"))
	r := rand.New(rand.NewPCG(35, 36))
	type object struct {
		key  string
		data []byte
	}
	var objects []object
	for i := 0; i < 10; i++ {
		o := object{key: fmt.Sprintf("part-%d.bin", i), data: testutil.RandomBytes(r, 20*testChunk)}
		c.putDirect("bucket-a", o.key, o.data)
		c.read(a, c.members[i%3], "bucket-a", o.key)
		objects = append(objects, o)
	}
	before := c.members[0].Ring.Load()
	c.add()
	after := c.publish(handoff)
	c.proxy.Reset()
	for i, o := range objects {
		got := c.read(a, c.members[i%4], "bucket-a", o.key)
		if !bytes.Equal(got.body, o.data) {
			t.Fatalf("%s differs after growing the cluster", o.key)
		}
		etag := got.header.Get("ETag")
		for idx := int64(0); idx < 20; idx++ {
			id := chunk.ID{Object: chunk.Object{Tenant: "team-a", Bucket: "bucket-a", Key: o.key}, ETag: etag, Size: testChunk, Index: idx}
			if before.Owner(id).Name != after.Owner(id).Name {
				moved++
			}
			chunks++
		}
	}
	return moved / float64(chunks), c.proxy.Count(http.MethodGet, "/bucket-a/"), chunks
}

func TestClusterGrowthWithWarmHandoffRefetchesAlmostNothing(t *testing.T) {
	moved, gets, chunks := growAndReread(t, true)
	t.Logf("3 -> 4 nodes with warm handoff: %.1f%% of %d chunks changed owner; re-reading everything made %d S3 GETs", 100*moved, chunks, gets)
	if moved < 0.15 || moved > 0.35 {
		t.Fatalf("%.2f of chunks moved, want about 1/4", moved)
	}
	if gets > chunks/50 {
		t.Fatalf("%d S3 GETs for %d chunks after growth; warm handoff should make it close to zero", gets, chunks)
	}
	_, coldGets, _ := growAndReread(t, false)
	t.Logf("same growth without the previous ring: %d S3 GETs", coldGets)
	if coldGets <= gets {
		t.Fatalf("without handoff the re-read made %d GETs, not more than the %d with it: the comparison is not measuring handoff", coldGets, gets)
	}
}

func TestClusterForwardingKeepsTenantsApart(t *testing.T) {
	c := newCluster(t, 3)
	a, b := c.client(tenant("team-a")), c.client(tenant("team-b"))
	data := testutil.RandomBytes(rand.New(rand.NewPCG(37, 38)), 6*testChunk)
	c.putDirect("shared", "x", data)
	c.putDirect("bucket-b", "secret", data)
	c.read(b, c.members[0], "shared", "x") // team-b's chunks now on their owners
	c.proxy.Reset()
	for _, m := range c.members {
		_ = c.read(a, m, "shared", "x")
	}
	if n := c.proxy.Count(http.MethodGet, "/shared/x"); n != 6 {
		t.Fatalf("team-a's reads made %d S3 GETs, want 6 of its own (never team-b's cached chunks)", n)
	}
	c.proxy.Reset()
	for _, m := range c.members {
		if got := c.read(a, m, "bucket-b", "secret"); got.status != http.StatusForbidden {
			t.Fatalf("team-a reading team-b's bucket via %s: %d, want 403", m.Name, got.status)
		}
		if got := c.do(a, http.MethodGet, c.objectURL(m, "bucket-b", "secret", "chunk=0"), nil,
			map[string]string{"X-Distcache-Tenant": "team-b", "X-Distcache-Hop": "1"}); got.status != http.StatusForbidden {
			t.Fatalf("team-a posing as a forwarded request for team-b via %s: %d, want 403", m.Name, got.status)
		}
	}
	if n := c.proxy.Count("", "/"); n != 0 {
		t.Fatalf("refused requests reached S3 %d times", n)
	}
}

func TestClusterWriteThroughHandsChunksToTheirOwners(t *testing.T) {
	c := newCluster(t, 3)
	a := c.client(tenant("team-a"))
	data := testutil.RandomBytes(rand.New(rand.NewPCG(39, 40)), 9*testChunk+1)
	resp := c.do(a, http.MethodPut, c.objectURL(c.members[0], "bucket-a", "written.bin", ""), data, nil)
	if resp.status != http.StatusOK {
		t.Fatalf("put: %d %s", resp.status, resp.body)
	}
	etag := c.read(a, c.members[0], "bucket-a", "written.bin").header.Get("ETag")
	rg := c.members[0].Ring.Load()
	deadline := time.Now().Add(30 * time.Second)
	for idx := int64(0); idx < 10; idx++ {
		id := chunk.ID{Object: chunk.Object{Tenant: "team-a", Bucket: "bucket-a", Key: "written.bin"}, ETag: etag, Size: testChunk, Index: idx}
		owner := c.members[0]
		for _, m := range c.members {
			if m.Name == rg.Owner(id).Name {
				owner = m
			}
		}
		for !holds(owner, id) {
			if time.Now().After(deadline) {
				t.Fatalf("chunk %d never reached its owner %s", idx, owner.Name)
			}
			time.Sleep(20 * time.Millisecond)
		}
	}
	c.proxy.Reset()
	for _, m := range c.members {
		if got := c.read(a, m, "bucket-a", "written.bin"); !bytes.Equal(got.body, data) {
			t.Fatalf("read via %s differs", m.Name)
		}
	}
	if n := c.proxy.Count(http.MethodGet, "/bucket-a/"); n != 0 {
		t.Fatalf("reads after a write-through made %d S3 GETs, want 0", n)
	}
	// Tenants cannot store bytes directly.
	if got := c.do(a, http.MethodPost, c.objectURL(c.members[1], "bucket-a", "written.bin", "chunk=0&etag=x"), []byte("evil"), nil); got.status != http.StatusForbidden {
		t.Fatalf("tenant storing a chunk directly: %d, want 403", got.status)
	}
}

func TestClusterOverwriteThroughAnyNodeIsNeverStaleOnOthers(t *testing.T) {
	c := newCluster(t, 3) // immutable metadata: only invalidation can make a node notice
	a := c.client(tenant("team-a"))
	r := rand.New(rand.NewPCG(43, 44))
	for round := 0; round < 3; round++ {
		data := testutil.RandomBytes(r, 3*testChunk+round)
		writer := c.members[round%3]
		if resp := c.do(a, http.MethodPut, c.objectURL(writer, "bucket-a", "k", ""), data, nil); resp.status != http.StatusOK {
			t.Fatalf("put via %s: %d", writer.Name, resp.status)
		}
		for _, m := range c.members {
			if got := c.read(a, m, "bucket-a", "k"); !bytes.Equal(got.body, data) {
				t.Fatalf("round %d: read via %s after a write via %s is stale", round, m.Name, writer.Name)
			}
		}
	}
	// A copy over the key through one node's pass-through, then a delete
	// through another: every node sees each change at once.
	src := testutil.RandomBytes(r, testChunk)
	c.putDirect("bucket-a", "src", src)
	copyURL := "https://" + c.members[1].Addr + "/v1/s3/bucket-a/k"
	if resp := c.do(a, http.MethodPut, copyURL, nil, map[string]string{"X-Amz-Copy-Source": "bucket-a/src"}); resp.status != http.StatusOK {
		t.Fatalf("copy: %d %s", resp.status, resp.body)
	}
	for _, m := range c.members {
		if got := c.read(a, m, "bucket-a", "k"); !bytes.Equal(got.body, src) {
			t.Fatalf("read via %s after a copy through cache-1 is stale", m.Name)
		}
	}
	if resp := c.do(a, http.MethodDelete, c.objectURL(c.members[2], "bucket-a", "k", ""), nil, nil); resp.status != http.StatusNoContent {
		t.Fatalf("delete: %d", resp.status)
	}
	for _, m := range c.members {
		if got := c.read(a, m, "bucket-a", "k"); got.status != http.StatusNotFound {
			t.Fatalf("read via %s after a delete through cache-2: %d, want 404", m.Name, got.status)
		}
	}
}
