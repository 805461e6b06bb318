package main

import (
	"context"
	"crypto/tls"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/distcache/distcache/internal/client"
	"github.com/distcache/distcache/internal/gateway"
)

// --page-bytes must divide a given --chunk-size; its default (1 MiB) applies
// where it does and yields to whole chunks where it does not. GetObject
// reads in pages, with --parallelism chunks' worth of them ahead.
func TestGatewayPageBytes(t *testing.T) {
	base := []string{"--nodes", "https://n:1", "--tls-cert", "c", "--tls-key", "k", "--ca", "a", "--access-key", "a", "--secret-key", "s"}
	for _, args := range [][]string{
		{"--chunk-size", "4Mi", "--page-bytes", "3Mi"},
		{"--chunk-size", "2560Ki", "--page-bytes", "1Mi"}, // given, so it must fit
	} {
		if _, err := parseGatewayFlags(append(base, args...)); err == nil || !strings.Contains(err.Error(), "--page-bytes") {
			t.Fatalf("%v: %v, want an error naming --page-bytes", args, err)
		}
	}
	for _, c := range []struct {
		args  []string
		piece int64
		ahead int
	}{
		{nil, 1 << 20, 32},                          // the default: 1 MiB pages of 4 MiB chunks
		{[]string{"--page-bytes", "0"}, 4 << 20, 8}, // whole chunks
		{[]string{"--page-bytes", "1Mi"}, 1 << 20, 32},
		{[]string{"--chunk-size", "8Mi", "--page-bytes", "1Mi", "--parallelism", "2"}, 1 << 20, 16},
		{[]string{"--page-bytes", "1Mi", "--page-cache-bytes", "0"}, 4 << 20, 8}, // no page cache: chunks
		{[]string{"--chunk-size", "512Ki", "--page-bytes", "1Mi"}, 512 << 10, 8},
		{[]string{"--chunk-size", "3Mi"}, 1 << 20, 24},
		{[]string{"--chunk-size", "2560Ki"}, 2560 << 10, 8}, // the default does not divide it: whole chunks
		{[]string{"--chunk-size", "256Ki"}, 256 << 10, 8},   // nor is it smaller than it
	} {
		f, err := parseGatewayFlags(append(base, c.args...))
		if err != nil {
			t.Fatalf("%v: %v", c.args, err)
		}
		if piece, ahead := f.gatewayConfig(nil, nil).ReadGeometry(0, 0); piece != c.piece || ahead != c.ahead {
			t.Errorf("%v: pieces of %d, %d ahead; want %d, %d", c.args, piece, ahead, c.piece, c.ahead)
		}
		// The cache client takes the same pages (it refuses pages that
		// do not divide a chunk size it is given).
		// (It stops at the missing client certificate otherwise.)
		if _, err := client.New(context.Background(), client.Config{Seeds: []string{"https://127.0.0.1:1"},
			TLS: &tls.Config{}, ChunkSize: int64(f.chunkSize), PageBytes: int64(f.pageBytes.byteSize)}); err == nil || strings.Contains(err.Error(), "PageBytes") {
			t.Errorf("%v: the cache client refuses the pages: %v", c.args, err)
		}
	}
	// A chunk size learnt from the nodes sets the pieces and the read-ahead,
	// in the cache client's pages for it (Client.ReadUnits).
	f, err := parseGatewayFlags(append(base, "--parallelism", "4"))
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		chunk, page, piece int64
		ahead              int
	}{
		{256 << 10, 256 << 10, 256 << 10, 4},
		{8 << 20, 1 << 20, 1 << 20, 32},
		{4 << 20, 4 << 20, 4 << 20, 4},
	} {
		if piece, ahead := f.gatewayConfig(nil, nil).ReadGeometry(c.chunk, c.page); piece != c.piece || ahead != c.ahead {
			t.Errorf("chunks of %d in pages of %d: pieces of %d, %d ahead; want %d, %d", c.chunk, c.page, piece, ahead, c.piece, c.ahead)
		}
	}
	// Given in the environment counts as given.
	t.Setenv("DISTCACHE_PAGE_BYTES", "3Mi")
	if _, err := parseGatewayFlags(append(base, "--chunk-size", "4Mi")); err == nil || !strings.Contains(err.Error(), "--page-bytes") {
		t.Fatalf("DISTCACHE_PAGE_BYTES=3Mi with --chunk-size 4Mi: %v, want an error naming --page-bytes", err)
	}
}

// --read-buffer-bytes bounds all GetObjects' fetched chunks; by default the
// page pool's slack, at least the gateway's default.
func TestGatewayReadBufferBytes(t *testing.T) {
	base := []string{"--nodes", "https://n:1", "--tls-cert", "c", "--tls-key", "k", "--ca", "a", "--access-key", "a", "--secret-key", "s"}
	for _, c := range []struct {
		args []string
		want int64
	}{
		{nil, 256 << 20},
		{[]string{"--page-cache-bytes", "4Gi"}, 1 << 30},
		{[]string{"--page-cache-bytes", "0"}, 256 << 20},
		{[]string{"--page-cache-bytes", "4Gi", "--read-buffer-bytes", "64Mi"}, 64 << 20},
	} {
		f, err := parseGatewayFlags(append(base, c.args...))
		if err != nil {
			t.Fatalf("%v: %v", c.args, err)
		}
		if got := f.gatewayConfig(nil, nil).ReadBuffers(); got != c.want {
			t.Errorf("%v: %d bytes of read buffers, want %d", c.args, got, c.want)
		}
	}
}

// --client-write-timeout 0 turns the timeout off (gateway.Config's 0 is its
// default).
func TestGatewayClientWriteTimeout(t *testing.T) {
	base := []string{"--nodes", "https://n:1", "--tls-cert", "c", "--tls-key", "k", "--ca", "a", "--access-key", "a", "--secret-key", "s"}
	for _, c := range []struct {
		args []string
		want time.Duration
	}{
		{nil, gateway.DefaultClientWriteTimeout},
		{[]string{"--client-write-timeout", "5s"}, 5 * time.Second},
		{[]string{"--client-write-timeout", "0"}, -1},
	} {
		f, err := parseGatewayFlags(append(base, c.args...))
		if err != nil {
			t.Fatalf("%v: %v", c.args, err)
		}
		if got := f.clientWriteTimeoutOrNone(); got != c.want {
			t.Errorf("%v: %v, want %v", c.args, got, c.want)
		}
	}
}

// The gateway's S3 port is not ClickHouse's native 9000 by default; --zone
// and --fallback-nodes give the client its zone and the other zones' seeds,
// grouped by zone in the order they first appear.
func TestGatewayZoneFlags(t *testing.T) {
	base := []string{"--nodes", "https://cache-b.ns.svc:8443", "--tls-cert", "c", "--tls-key", "k", "--ca", "a", "--access-key", "a", "--secret-key", "s"}
	f, err := parseGatewayFlags(base)
	if err != nil {
		t.Fatal(err)
	}
	if f.listen != "127.0.0.1:8099" || f.zone != "" || f.fallback != nil {
		t.Errorf("defaults: listen %q, zone %q, fallback %v", f.listen, f.zone, f.fallback)
	}
	f, err = parseGatewayFlags(append(base, "--zone", "b",
		"--fallback-nodes", "a=https://cache-a.ns.svc:8443, c=https://cache-c.ns.svc:8443,a=https://cache-a-0.cache-a.ns.svc:8443"))
	if err != nil {
		t.Fatal(err)
	}
	want := []client.ZoneSeeds{
		{Zone: "a", Seeds: []string{"https://cache-a.ns.svc:8443", "https://cache-a-0.cache-a.ns.svc:8443"}},
		{Zone: "c", Seeds: []string{"https://cache-c.ns.svc:8443"}},
	}
	if f.zone != "b" || !reflect.DeepEqual(f.fallback, want) {
		t.Errorf("zone %q, fallback %+v; want b, %+v", f.zone, f.fallback, want)
	}
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"--zone", "", "--fallback-nodes", "a=https://x:1"}, "needs --zone"},
		{[]string{"--zone", "b", "--fallback-nodes", "b=https://x:1"}, "own zone"},
		{[]string{"--zone", "b", "--fallback-nodes", "https://x:1"}, "zone=https://host:port"},
		{[]string{"--zone", "b", "--fallback-nodes", "a="}, "zone=https://host:port"},
	} {
		if _, err := parseGatewayFlags(append(append([]string(nil), base...), tc.args...)); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%v: %v, want an error mentioning %q", tc.args, err, tc.want)
		}
	}
	t.Setenv("DISTCACHE_FALLBACK_NODES", "a=https://x:1")
	t.Setenv("DISTCACHE_ZONE", "b")
	if f, err = parseGatewayFlags(base); err != nil || len(f.fallback) != 1 || f.zone != "b" {
		t.Errorf("from the environment: %+v, %v", f, err)
	}
}
