package embed_test

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/distcache/distcache/internal/embed"
	"github.com/distcache/distcache/internal/pki"
	"github.com/distcache/distcache/internal/ring"
	"github.com/distcache/distcache/internal/s3backend"
	"github.com/distcache/distcache/internal/testutil"
)

// files are the certificates, tenants file and ring file of one node, as
// the operator mounts them.
type files struct {
	dir, ca, ring, tenants string
}

func writeFiles(t *testing.T) files {
	t.Helper()
	f := files{dir: t.TempDir()}
	ca, err := pki.NewCA("embed test CA", time.Hour)
	testutil.Must(t, err)
	f.ca = filepath.Join(f.dir, "ca.crt")
	testutil.Must(t, os.WriteFile(f.ca, ca.CertPEM, 0o600))
	server, err := ca.IssueServer("cache-0", []string{"localhost"}, []net.IP{net.ParseIP("127.0.0.1")}, time.Hour)
	testutil.Must(t, err)
	testutil.Must(t, pki.WriteFiles(f.dir, "server", server))
	for _, id := range []pki.Identity{{Kind: pki.KindPeer, Name: "cache-0"}, {Kind: pki.KindTenant, Name: "team-a"}} {
		leaf, err := ca.IssueClient(id, time.Hour)
		testutil.Must(t, err)
		testutil.Must(t, pki.WriteFiles(f.dir, string(id.Kind), leaf))
	}
	f.tenants = filepath.Join(f.dir, "tenants.yaml")
	testutil.Must(t, os.WriteFile(f.tenants, []byte("tenants:\n  - name: team-a\n    buckets: [bucket-a]\n"), 0o600))
	f.ring = filepath.Join(f.dir, "ring.json")
	return f
}

// writeRing replaces the ring file (by rename, as the kubelet does) with a
// ring of one member, cache-0 at addr.
func (f files) writeRing(t *testing.T, epoch int64, addr string) {
	t.Helper()
	r, err := ring.New(ring.Spec{Epoch: epoch, Zone: "z", Hash: ring.HashParams{Algorithm: ring.AlgorithmRendezvousXXHash64},
		Members: []ring.Member{{Name: "cache-0", Address: addr, Weight: 100, State: ring.StateActive}}})
	testutil.Must(t, err)
	data, err := json.Marshal(r)
	testutil.Must(t, err)
	testutil.Must(t, os.WriteFile(f.ring+".tmp", data, 0o600))
	testutil.Must(t, os.Rename(f.ring+".tmp", f.ring))
}

func (f files) nodeConfig(ln net.Listener) embed.NodeConfig {
	return embed.NodeConfig{
		Listener: ln, MetricsListen: "127.0.0.1:0",
		TLSCert: filepath.Join(f.dir, "server.crt"), TLSKey: filepath.Join(f.dir, "server.key"), ClientCA: f.ca,
		PeerCert: filepath.Join(f.dir, "peer.crt"), PeerKey: filepath.Join(f.dir, "peer.key"),
		DataDir: filepath.Join(f.dir, "data"), DiskBytes: 64 << 20, ChunkSize: 256 << 10,
		TenantsFile: f.tenants, RingFile: f.ring, Self: "cache-0",
		// Never reached: nothing here misses.
		S3: s3backend.Config{Endpoint: "http://127.0.0.1:1", Region: "us-east-1", UsePathStyle: true},
	}
}

// A node assembled from files, as `cachenode serve` assembles one, follows
// its ring file (the ring it serves and the epoch gauge), reports ready on
// its metrics port, and drains on Shutdown.
func TestNodeFromFiles(t *testing.T) {
	f := writeFiles(t)
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	testutil.Must(t, err)
	f.writeRing(t, 1, ln.Addr().String())
	n, err := embed.StartNode(t.Context(), f.nodeConfig(ln))
	testutil.Must(t, err)
	t.Cleanup(n.Close)
	if n.Addr() != ln.Addr().String() || n.Ring() == nil || n.Ring().Load().Epoch() != 1 {
		t.Fatalf("node at %s with ring %v; want %s and epoch 1", n.Addr(), n.Ring(), ln.Addr())
	}
	ops := "http://" + n.MetricsAddr()
	if status, body := get(t, http.DefaultClient, ops+"/readyz"); status != http.StatusOK {
		t.Fatalf("/readyz: %d %s", status, body)
	}

	f.writeRing(t, 2, n.Addr())
	testutil.WaitFor(t, "the ring file's epoch 2 in force and on /metrics", func() bool {
		_, body := get(t, http.DefaultClient, ops+"/metrics")
		return n.Ring().Load().Epoch() == 2 && strings.Contains(body, "\ndistcache_ring_epoch 2\n")
	})
	tlsA, err := pki.ClientTLSConfig(filepath.Join(f.dir, "tenant.crt"), filepath.Join(f.dir, "tenant.key"), f.ca)
	testutil.Must(t, err)
	hc := &http.Client{Transport: &http.Transport{TLSClientConfig: tlsA}}
	defer hc.CloseIdleConnections()
	resp, err := hc.Get(n.URL() + "/v1/ring")
	testutil.Must(t, err)
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK || resp.Header.Get("X-Distcache-Ring-Epoch") != "2" {
		t.Fatalf("/v1/ring: %d, epoch %q; want 200 and 2", resp.StatusCode, resp.Header.Get("X-Distcache-Ring-Epoch"))
	}

	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	testutil.Must(t, n.Shutdown(ctx))
	if err := <-n.Err(); !errors.Is(err, http.ErrServerClosed) {
		t.Fatalf("after Shutdown: %v, want http.ErrServerClosed", err)
	}
}

// A gateway started before any cache node answers 503 on its S3 port and
// is not ready; once a node comes up it connects by itself and serves.
func TestGatewayWaitsForACacheNode(t *testing.T) {
	f := writeFiles(t)
	// The node's address, free until the node starts.
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	testutil.Must(t, err)
	addr := ln.Addr().String()
	testutil.Must(t, ln.Close())

	g, err := embed.StartGateway(t.Context(), embed.GatewayConfig{
		Listen: "127.0.0.1:0", MetricsListen: "127.0.0.1:0", Nodes: []string{"https://" + addr},
		TLSCert: filepath.Join(f.dir, "tenant.crt"), TLSKey: filepath.Join(f.dir, "tenant.key"), CA: f.ca,
		AccessKey: "key", SecretKey: "secret", Domains: []string{"localhost"},
	})
	testutil.Must(t, err)
	t.Cleanup(g.Close)
	if status, body := get(t, http.DefaultClient, g.URL()+"/bucket-a/k"); status != http.StatusServiceUnavailable {
		t.Fatalf("S3 port before a node answered: %d %s, want 503", status, body)
	}
	if status, body := get(t, http.DefaultClient, "http://"+g.MetricsAddr()+"/readyz"); status != http.StatusServiceUnavailable ||
		!strings.Contains(body, "no cache node reached yet") {
		t.Fatalf("/readyz before a node answered: %d %s", status, body)
	}
	if g.Client() != nil {
		t.Fatal("a client before a node answered")
	}

	f.writeRing(t, 1, addr)
	ln, err = net.Listen("tcp", addr)
	testutil.Must(t, err)
	n, err := embed.StartNode(t.Context(), f.nodeConfig(ln))
	testutil.Must(t, err)
	t.Cleanup(n.Close)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute) // a loaded machine; nothing asserts on time
	defer cancel()
	testutil.Must(t, g.WaitReady(ctx))
	if status, body := get(t, http.DefaultClient, "http://"+g.MetricsAddr()+"/readyz"); status != http.StatusOK {
		t.Fatalf("/readyz once connected: %d %s", status, body)
	}
	// Unsigned now reaches the gateway itself, which refuses it as S3 does.
	if status, body := get(t, http.DefaultClient, g.URL()+"/bucket-a/k"); status != http.StatusForbidden {
		t.Fatalf("unsigned request once connected: %d %s, want 403", status, body)
	}
	if g.Client() == nil || g.Client().Ring().Epoch() != 1 {
		t.Fatal("the gateway's client did not learn the ring")
	}
}

func get(t *testing.T, hc *http.Client, url string) (int, string) {
	t.Helper()
	resp, err := hc.Get(url)
	testutil.Must(t, err)
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	testutil.Must(t, err)
	return resp.StatusCode, string(b)
}
