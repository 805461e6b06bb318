package node_test

import (
	"bytes"
	"io"
	"math/rand/v2"
	"net/http"
	"testing"

	"github.com/distcache/distcache/internal/node"
	"github.com/distcache/distcache/internal/pki"
	"github.com/distcache/distcache/internal/testutil"
	"github.com/distcache/distcache/internal/testutil/nodecluster"
)

// readObject reads a whole object through member m.
func readObject(t *testing.T, c *nodecluster.Cluster, m *nodecluster.Member, bucket, key string) []byte {
	t.Helper()
	cl := c.HTTPClient(pki.Identity{Kind: pki.KindTenant, Name: "team-a"})
	resp, err := cl.Get(m.URL() + "/v1/objects/" + bucket + "/" + key)
	testutil.Must(t, err)
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	testutil.Must(t, err)
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("GET %s/%s via %s: %d %s", bucket, key, m.Name, resp.StatusCode, body)
	}
	return body
}

// With OnMiss, another zone that does not hold a chunk, or cannot be
// reached at all, costs a probe and never a read: the chunk comes from S3.
func TestOnMissOtherZoneMissingOrDownFallsToS3(t *testing.T) {
	const chunks = 4
	c := nodecluster.StartWith(t, 1, nodecluster.Options{ChunkSize: testChunk, Zones: []string{"a", "b"}, CrossZone: node.CrossZoneOnMiss})
	a, b := c.ZoneMembers("a")[0], c.ZoneMembers("b")[0]
	crossZone := func(result string) float64 {
		return c.Counter(1, "distcache_peer_requests_total", map[string]string{"kind": "cross_zone", "result": result})
	}
	r := rand.New(rand.NewPCG(41, 42))

	cold := testutil.RandomBytes(r, chunks*testChunk)
	c.PutDirect("bucket-a", "cold.bin", cold)
	if got := readObject(t, c, b, "bucket-a", "cold.bin"); !bytes.Equal(got, cold) {
		t.Fatal("read of an object zone a never read differs")
	}
	if n := crossZone("miss"); n != chunks {
		t.Errorf("%v probes of zone a missed, want %d", n, chunks)
	}
	if n := c.Proxy.Count(http.MethodGet, "/bucket-a/cold.bin"); n != chunks {
		t.Errorf("%d S3 GETs, want %d", n, chunks)
	}

	down := testutil.RandomBytes(r, chunks*testChunk)
	c.PutDirect("bucket-a", "down.bin", down)
	c.KillMember(a)
	if got := readObject(t, c, b, "bucket-a", "down.bin"); !bytes.Equal(got, down) {
		t.Fatal("read with zone a down differs")
	}
	if n := c.Proxy.Count(http.MethodGet, "/bucket-a/down.bin"); n != chunks {
		t.Errorf("%d S3 GETs with zone a down, want %d", n, chunks)
	}
	if u, s := crossZone("unreachable"), crossZone("skipped_down"); u < 1 || u+s != chunks {
		t.Errorf("zone a down: %v probes unreachable and %v skipped, want at least one unreachable and %d in all", u, s, chunks)
	}
	if n := c.Counter(1, "distcache_cross_zone_bytes_total", nil); n != 0 {
		t.Errorf("%v bytes counted from zone a, which sent none", n)
	}
}
