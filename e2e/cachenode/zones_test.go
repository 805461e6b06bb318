package cachenode_test

import (
	"bytes"
	"crypto/rand"
	"encoding/json"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"testing"

	"github.com/distcache/distcache/internal/pki"
	"github.com/distcache/distcache/internal/ring"
	"github.com/distcache/distcache/internal/testutil"
	"github.com/distcache/distcache/internal/testutil/certfiles"
	"github.com/distcache/distcache/internal/testutil/freeport"
	"github.com/distcache/distcache/internal/testutil/miniotest"
	"github.com/distcache/distcache/internal/testutil/s3proxy"
	"github.com/distcache/distcache/tools/benchmark/benchkit"
)

// metricSum sums the samples of name on the node serving ops whose labels
// hold every k="v" of labels.
func metricSum(t *testing.T, ops, name string, labels ...string) float64 {
	t.Helper()
	m, err := benchkit.Scrape(t.Context(), "http://"+ops+"/metrics")
	if err != nil {
		t.Fatal(err)
	}
	return m.Sum(name, labels...)
}

// Two `cachenode serve` processes, one per zone, configured as nodes run
// by hand: each its zone's ring (--ring-file) and the other's
// (--zone-ring-files), --cross-zone=OnMiss. A chunk zone a read is found
// there by zone b's node on its miss: no S3 GET, the bytes counted.
func TestServeCrossZoneOnMiss(t *testing.T) {
	minio := miniotest.Start(t)
	minio.CreateBucket(t, "data")
	proxy := s3proxy.New(t, minio.Endpoint) // counts the nodes' S3 requests
	const chunkSize, chunks = 64 << 10, 5
	payload := make([]byte, chunks*chunkSize)
	_, _ = rand.Read(payload)
	minio.PutObject(t, "data", "zones.bin", payload)

	dir := t.TempDir()
	write := func(name string, data []byte) string {
		t.Helper()
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, data, 0o600); err != nil {
			t.Fatal(err)
		}
		return p
	}
	certfiles.Write(t, dir, "e2e CA", map[string]pki.Identity{
		"tenant": {Kind: pki.KindTenant, Name: "analytics"}, "peer-a": {Kind: pki.KindPeer, Name: "cache-a-0"},
		"peer-b": {Kind: pki.KindPeer, Name: "cache-b-0"},
	})
	tenants := write("tenants.yaml", []byte("tenants:\n  - name: analytics\n    buckets: [data]\n"))

	api := map[string]string{"a": freeport.Addr(t), "b": freeport.Addr(t)}
	ringFile := map[string]string{}
	for zone, addr := range api {
		r, err := ring.New(ring.Spec{Epoch: 1, Zone: zone, Hash: ring.HashParams{Algorithm: ring.AlgorithmRendezvousXXHash64},
			Members: []ring.Member{{Name: "cache-" + zone + "-0", Address: addr, Weight: 100, State: ring.StateActive}}})
		if err != nil {
			t.Fatal(err)
		}
		data, err := json.Marshal(r)
		if err != nil {
			t.Fatal(err)
		}
		ringFile[zone] = write(zone+".json", data)
	}
	ops := map[string]string{}
	for zone, other := range map[string]string{"a": "b", "b": "a"} {
		ops[zone] = freeport.Addr(t)
		cmd := exec.Command(cachenode(t), "serve", "--listen", api[zone], "--metrics-listen", ops[zone],
			"--tls-cert", filepath.Join(dir, "server.crt"), "--tls-key", filepath.Join(dir, "server.key"),
			"--peer-cert", filepath.Join(dir, "peer-"+zone+".crt"), "--peer-key", filepath.Join(dir, "peer-"+zone+".key"),
			"--client-ca", filepath.Join(dir, "ca.crt"), "--tenants-file", tenants,
			"--s3-endpoint", proxy.URL(), "--s3-path-style", "--chunk-size", "64Ki", "--disk-bytes", "256Mi", "--ram-bytes", "16Mi",
			"--data-dir", filepath.Join(dir, "store-"+zone), "--node-name", "cache-"+zone+"-0", "--ring-file", ringFile[zone],
			"--cross-zone", "OnMiss", "--zones", "a,b", "--zone-ring-files", other+"="+ringFile[other])
		cmd.Env = append(os.Environ(), "AWS_ACCESS_KEY_ID="+minio.AccessKey, "AWS_SECRET_ACCESS_KEY="+minio.SecretKey)
		node := testutil.StartProcess(t, "zone "+zone+"'s node", cmd)
		testutil.WaitStatus(t, "http://"+ops[zone]+"/readyz", http.StatusOK, node.Done())
	}

	tlsConfig, err := pki.ClientTLSConfig(filepath.Join(dir, "tenant.crt"), filepath.Join(dir, "tenant.key"), filepath.Join(dir, "ca.crt"))
	if err != nil {
		t.Fatal(err)
	}
	c := &http.Client{Transport: &http.Transport{TLSClientConfig: tlsConfig}}
	read := func(zone string) {
		t.Helper()
		resp, err := c.Get("https://" + api[zone] + "/v1/objects/data/zones.bin")
		if err != nil {
			t.Fatal(err)
		}
		body, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != http.StatusOK || !bytes.Equal(body, payload) {
			t.Fatalf("read through zone %s: status %d, %d bytes", zone, resp.StatusCode, len(body))
		}
	}
	read("a")
	if n := proxy.Count(http.MethodGet, "/data/zones.bin"); n != chunks {
		t.Fatalf("zone a's read made %d S3 GETs, want %d", n, chunks)
	}
	read("b")
	if n := proxy.Count(http.MethodGet, "/data/zones.bin"); n != chunks {
		t.Errorf("zone b's read made %d more S3 GETs, want 0", n-chunks)
	}
	if n := metricSum(t, ops["b"], "distcache_cross_zone_bytes_total", `direction="in"`, `peer_zone="a"`); n != float64(len(payload)) {
		t.Errorf("zone b's node counts %v bytes from zone a, want %d", n, len(payload))
	}
	if n := metricSum(t, ops["b"], "distcache_peer_requests_total", `kind="cross_zone"`, `result="ok"`); n != chunks {
		t.Errorf("zone b's node counts %v chunks found in zone a, want %d", n, chunks)
	}
}
