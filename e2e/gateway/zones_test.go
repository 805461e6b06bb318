package gateway_test

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"math/rand/v2"
	"net/http"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/s3"

	"github.com/distcache/distcache/internal/client"
	"github.com/distcache/distcache/internal/node"
	"github.com/distcache/distcache/internal/testutil"
	"github.com/distcache/distcache/internal/testutil/freeport"
	"github.com/distcache/distcache/internal/testutil/gobin"
	"github.com/distcache/distcache/internal/testutil/nodecluster"
)

// The cache of these tests spans zones a and b, two nodes each; the
// gateway reads in zone b, with zone a as its fallback.
var testZones = []string{"a", "b"}

// zoneSum sums a counter over the members of one zone.
func (e *env) zoneSum(zone, name string, labels map[string]string) float64 {
	e.t.Helper()
	var sum float64
	for _, m := range e.cluster.ZoneMembers(zone) {
		sum += nodecluster.Gather(e.t, m.Registry, name, labels)
	}
	return sum
}

// A gateway of zone b routes by zone b's ring and talks to zone b's nodes
// only: reads, metadata, writes and pass-through never reach zone a, whose
// nodes count no request and serve no byte.
func TestZoneGatewayUsesItsZoneOnly(t *testing.T) {
	e := newEnv(t, envOptions{nodes: 2, zones: testZones, zone: "b"})
	if r := e.cache.Ring(); r.Zone() != "b" || len(r.Members()) != 2 {
		t.Fatalf("the gateway routes by a ring of zone %q with %d members, want zone b's 2", r.Zone(), len(r.Members()))
	}
	data := testutil.RandomBytes(rand.New(rand.NewPCG(31, 1)), 6*chunkSize+77)
	e.cluster.PutDirect("bucket-a", "zones/only-b", data)
	for i := 0; i < 2; i++ {
		if got := e.mustGet("bucket-a", "zones/only-b", ""); !bytes.Equal(got, data) {
			t.Fatalf("read %d differs", i)
		}
	}
	if got := e.mustGet("bucket-a", "zones/only-b", "bytes=1000-300000"); !bytes.Equal(got, data[1000:300001]) {
		t.Fatal("ranged read differs")
	}
	written := testutil.RandomBytes(rand.New(rand.NewPCG(31, 2)), 2*chunkSize+5)
	e.put("bucket-a", "zones/written-in-b", written)
	if got := e.mustGet("bucket-a", "zones/written-in-b", ""); !bytes.Equal(got, written) {
		t.Fatal("read after write differs")
	}
	if n := len(e.mustList("bucket-a", "zones/")); n != 2 {
		t.Errorf("listed %d objects, want 2", n)
	}

	if n := e.zoneSum("a", "distcache_requests_total", nil); n != 0 {
		t.Errorf("zone a's nodes answered %v requests, want 0", n)
	}
	if n := e.zoneSum("a", "distcache_response_bytes_total", nil); n != 0 {
		t.Errorf("zone a's nodes served %v bytes, want 0", n)
	}
	if n := e.zoneSum("b", "distcache_response_bytes_total", map[string]string{"op": "get_chunk"}); n < float64(2*len(data)) {
		t.Errorf("zone b's nodes served %v chunk bytes, want at least the %d read", n, 2*len(data))
	}
	if n := e.counter("distcache_cross_zone_bytes_total", nil); n != 0 {
		t.Errorf("%v bytes crossed zones, want 0", n)
	}
}

// With every node of its zone stopped, a gateway of zone b reads, writes
// and lists through zone a's nodes instead of failing, and counts the
// bytes that crossed zones.
func TestZoneGatewayFallsBackWhenItsZoneIsDown(t *testing.T) {
	e := newEnv(t, envOptions{nodes: 2, zones: testZones, zone: "b", crossZone: node.CrossZoneNever})
	data := testutil.RandomBytes(rand.New(rand.NewPCG(32, 1)), 5*chunkSize+3)
	e.cluster.PutDirect("bucket-a", "zones/outage", data)
	for _, m := range e.cluster.ZoneMembers("b") {
		e.cluster.KillMember(m)
	}

	if got := e.mustGet("bucket-a", "zones/outage", ""); !bytes.Equal(got, data) {
		t.Fatal("read through zone a differs")
	}
	if got := e.mustGet("bucket-a", "zones/outage", "bytes=5-262200"); !bytes.Equal(got, data[5:262201]) {
		t.Fatal("ranged read through zone a differs")
	}
	written := testutil.RandomBytes(rand.New(rand.NewPCG(32, 2)), chunkSize+9)
	e.put("bucket-a", "zones/written-during-outage", written)
	if !e.existsInS3("bucket-a", "zones/written-during-outage") {
		t.Fatal("the write through zone a is not in S3")
	}
	if got := e.mustGet("bucket-a", "zones/written-during-outage", ""); !bytes.Equal(got, written) {
		t.Fatal("read after write through zone a differs")
	}
	if n := len(e.mustList("bucket-a", "zones/")); n != 2 {
		t.Errorf("listed %d objects through zone a, want 2", n)
	}

	read := float64(len(data) + 262196 + len(written))
	if n := e.zoneSum("a", "distcache_response_bytes_total", map[string]string{"op": "get_chunk"}); n < read {
		t.Errorf("zone a's nodes served %v chunk bytes, want at least the %v read", n, read)
	}
	in := e.counter("distcache_cross_zone_bytes_total", map[string]string{"peer_zone": "a", "direction": client.DirectionIn})
	if in < read {
		t.Errorf("%v bytes counted in from zone a, want at least the %v read", in, read)
	}
	out := e.counter("distcache_cross_zone_bytes_total", map[string]string{"peer_zone": "a", "direction": client.DirectionOut})
	if out < float64(len(written)) {
		t.Errorf("%v bytes counted out to zone a, want at least the %d written", out, len(written))
	}
	for _, op := range []string{"stat", "get_chunk", "put"} {
		if n := e.counter("distcache_client_zone_fallbacks_total", map[string]string{"peer_zone": "a", "op": op}); n == 0 {
			t.Errorf("no %s answered by zone a counted", op)
		}
	}
}

// With spec.crossZone OnMiss, the owner in zone b of a chunk it misses asks
// the chunk's owner in zone a, which read it before, and S3 is not asked
// for it at all; with Never, zone b reads every chunk from S3. Either way
// zone b keeps what it read: the next read crosses no zone and reads no S3.
func TestZoneOnMissReadsOtherZoneBeforeS3(t *testing.T) {
	const chunks = 6
	for _, mode := range []node.CrossZone{node.CrossZoneOnMiss, node.CrossZoneNever} {
		t.Run(string(mode), func(t *testing.T) {
			e := newEnv(t, envOptions{nodes: 2, zones: testZones, zone: "b", crossZone: mode})
			data := testutil.RandomBytes(rand.New(rand.NewPCG(33, 1)), chunks*chunkSize)
			const key = "zones/warm-in-a"
			e.cluster.PutDirect("bucket-a", key, data)

			// A reader of zone a fills zone a's owners.
			ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
			defer cancel()
			readerA, err := client.New(ctx, client.Config{Seeds: e.cluster.ZoneSeeds("a"), TLS: e.cluster.TenantTLS("team-a"), Zone: "a"})
			testutil.Must(t, err)
			defer readerA.Close()
			m, err := readerA.Stat(ctx, "bucket-a", key)
			testutil.Must(t, err)
			got := make([]byte, m.Size)
			_, err = readerA.ReadAt(ctx, "bucket-a", key, m, got, 0)
			testutil.Must(t, err)
			if !bytes.Equal(got, data) {
				t.Fatal("zone a's read differs")
			}
			s3Gets := func() int { return e.cluster.Proxy.Count("GET", "/bucket-a/"+key) }
			if n := s3Gets(); n != chunks {
				t.Fatalf("zone a's read made %d S3 GETs, want %d", n, chunks)
			}

			if got := e.mustGet("bucket-a", key, ""); !bytes.Equal(got, data) {
				t.Fatal("zone b's read differs")
			}
			crossed := e.zoneSum("b", "distcache_cross_zone_bytes_total", map[string]string{"peer_zone": "a", "direction": "in"})
			wantGets, wantCrossed := chunks, 0.0
			if mode == node.CrossZoneOnMiss {
				wantGets, wantCrossed = 0, float64(len(data))
			}
			if n := s3Gets() - chunks; n != wantGets {
				t.Errorf("zone b's read made %d S3 GETs, want %d", n, wantGets)
			}
			if crossed != wantCrossed {
				t.Errorf("zone b's nodes received %v bytes from zone a, want %v", crossed, wantCrossed)
			}

			if got := e.mustGet("bucket-a", key, ""); !bytes.Equal(got, data) {
				t.Fatal("zone b's second read differs")
			}
			if n := s3Gets() - chunks; n != wantGets {
				t.Errorf("after zone b's second read: %d S3 GETs for it, want still %d", n, wantGets)
			}
			if n := e.zoneSum("b", "distcache_cross_zone_bytes_total", nil); n != wantCrossed {
				t.Errorf("after zone b's second read: %v bytes from zone a, want still %v", n, wantCrossed)
			}
			if n := e.counter("distcache_cross_zone_bytes_total", nil); n != 0 {
				t.Errorf("the gateway, whose zone was up, counted %v bytes across zones", n)
			}
		})
	}
}

// gatewayProcess runs `cachenode gateway` for team-a against c with args
// added, and returns its S3 and metrics addresses and the process (its
// log, its exit).
func gatewayProcess(t *testing.T, c *nodecluster.Cluster, args ...string) (listen, metricsAddr string, gw *testutil.Process) {
	t.Helper()
	bin := gobin.Cachenode(t)
	c.TenantTLS("team-a") // writes tenant-team-a.crt/.key into c.Dir
	listen, metricsAddr = freeport.Addr(t), freeport.Addr(t)
	cmd := exec.Command(bin, append([]string{"gateway", "--listen", listen, "--metrics-listen", metricsAddr,
		"--access-key", accessKey, "--secret-key", secretKey, "--region", region, "--ca", c.CAFile,
		"--tls-cert", filepath.Join(c.Dir, "tenant-team-a.crt"), "--tls-key", filepath.Join(c.Dir, "tenant-team-a.key"),
		"--page-cache-bytes", "0"}, args...)...)
	return listen, metricsAddr, testutil.StartProcess(t, "gateway", cmd)
}

// `cachenode gateway --zone b` as the operator runs it: given zone a's
// nodes by mistake it never becomes ready and says why; given its own
// zone's nodes and zone a as --fallback-nodes, it reads through zone a once
// zone b's nodes are gone, and its metrics count the bytes.
func TestZoneGatewayProcess(t *testing.T) {
	if testing.Short() {
		t.Skip("builds the cachenode binary")
	}
	c := nodecluster.StartWith(t, 1, nodecluster.Options{ChunkSize: chunkSize, Tenants: tenants, Buckets: buckets, Zones: testZones})

	_, wrongMetrics, wrong := gatewayProcess(t, c, "--zone", "b", "--nodes", c.ZoneSeeds("a")[0])
	for deadline := time.Now().Add(60 * time.Second); !strings.Contains(wrong.Logs.String(), "refused a ring of another zone"); time.Sleep(20 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatal("the gateway given zone a's nodes for zone b did not log the refusal")
		}
	}
	resp, err := http.Get("http://" + wrongMetrics + "/readyz")
	testutil.Must(t, err)
	resp.Body.Close()
	if resp.StatusCode != http.StatusServiceUnavailable {
		t.Errorf("/readyz of the gateway with zone a's nodes: %d, want 503", resp.StatusCode)
	}

	listen, metricsAddr, gw := gatewayProcess(t, c, "--zone", "b", "--nodes", c.ZoneSeeds("b")[0],
		"--fallback-nodes", "a="+c.ZoneSeeds("a")[0])
	testutil.WaitStatus(t, "http://"+metricsAddr+"/readyz", http.StatusOK, gw.Done())
	data := testutil.RandomBytes(rand.New(rand.NewPCG(34, 1)), 3*chunkSize+1)
	c.PutDirect("bucket-a", "zones/process", data)
	c.KillMember(c.ZoneMembers("b")[0])
	out, err := testutil.S3Client("http://"+listen, accessKey, secretKey).GetObject(context.Background(),
		&s3.GetObjectInput{Bucket: aws.String("bucket-a"), Key: aws.String("zones/process")})
	testutil.Must(t, err)
	got, err := io.ReadAll(out.Body)
	out.Body.Close()
	testutil.Must(t, err)
	if !bytes.Equal(got, data) {
		t.Fatal("the read through zone a differs")
	}
	testutil.WantMetrics(t, metricsAddr, fmt.Sprintf(`distcache_cross_zone_bytes_total{direction="in",peer_zone="a"} %d`, len(data)))
}
