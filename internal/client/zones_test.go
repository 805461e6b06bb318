package client_test

import (
	"context"
	"errors"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/distcache/distcache/internal/client"
	"github.com/distcache/distcache/internal/ring"
	"github.com/distcache/distcache/internal/testutil"
	"github.com/distcache/distcache/internal/testutil/nodecluster"
)

// waitUntil polls cond until it holds, failing the test after a deadline
// generous enough for a loaded machine; it never asserts on time.
func waitUntil(t *testing.T, what string, cond func() bool) {
	t.Helper()
	for deadline := time.Now().Add(30 * time.Second); !cond(); time.Sleep(10 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
	}
}

func wrongZoneRings(t *testing.T, reg *prometheus.Registry) float64 {
	return nodecluster.Gather(t, reg, "distcache_client_node_requests_total", map[string]string{"op": "ring", "result": "wrong_zone"})
}

// A client of zone b never routes by another zone's ring: seeds of zone a
// are refused at start, and a ring of zone a served later by a node of
// zone b is refused at refresh; the ring of zone b stays in force.
func TestZoneClientRefusesRingOfAnotherZone(t *testing.T) {
	c := nodecluster.StartWith(t, 1, nodecluster.Options{Zones: []string{"a", "b"}})
	tlsA := c.TenantTLS("team-a")

	_, err := client.New(context.Background(), client.Config{Seeds: c.ZoneSeeds("a"), TLS: tlsA, Zone: "b"})
	if !errors.Is(err, client.ErrUnavailable) || !strings.Contains(err.Error(), `zone "a", not "b"`) {
		t.Fatalf("New with zone a's seeds for zone b: %v, want ErrUnavailable naming both zones", err)
	}

	cl, reg := newClient(t, c, tlsA, func(cfg *client.Config) {
		cfg.Seeds, cfg.Zone, cfg.RingRefresh = c.ZoneSeeds("b"), "b", 20*time.Millisecond
	})
	first := cl.Ring()
	if first.Zone() != "b" {
		t.Fatalf("the client routes by the ring of zone %q", first.Zone())
	}
	// Zone b's node now serves a newer ring naming zone a (a node given the
	// wrong ConfigMap key).
	foreign := c.ZoneRing("a").Spec()
	foreign.Epoch = first.Epoch() + 10
	r, err := ring.New(foreign)
	testutil.Must(t, err)
	c.ZoneMembers("b")[0].Ring.Store(r)
	waitUntil(t, "a refresh to refuse the ring of zone a", func() bool { return wrongZoneRings(t, reg) > 0 })
	if got := cl.Ring(); got != first {
		t.Errorf("after the refresh the client routes by the ring of zone %q, epoch %d; want zone b's, epoch %d",
			got.Zone(), got.Epoch(), first.Epoch())
	}
}

// The fallback zones' rings are checked too: seeds given for zone c that
// answer with zone a's ring lead to those seeds only, never to zone a's
// members by a ring that is not c's.
func TestZoneClientRefusesFallbackRingOfAnotherZone(t *testing.T) {
	c := nodecluster.StartWith(t, 2, nodecluster.Options{Zones: []string{"a", "b"}})
	cl, reg := newClient(t, c, c.TenantTLS("team-a"), func(cfg *client.Config) {
		cfg.Seeds, cfg.Zone = c.ZoneSeeds("b"), "b"
		cfg.Fallback = []client.ZoneSeeds{{Zone: "c", Seeds: c.ZoneSeeds("a")[:1]}}
	})
	waitUntil(t, "the fallback ring fetch to be refused", func() bool { return wrongZoneRings(t, reg) > 0 })
	want := []client.ZoneNode{{Zone: "c", URL: c.ZoneSeeds("a")[0]}}
	if got := cl.FallbackNodes(); !slices.Equal(got, want) {
		t.Errorf("fallback nodes %v, want the seed only %v", got, want)
	}
}

// Fallback zones only make sense for a client that knows its own zone, and
// never name it.
func TestZoneClientConfig(t *testing.T) {
	c := nodecluster.StartWith(t, 1, nodecluster.Options{Zones: []string{"a", "b"}})
	tlsA := c.TenantTLS("team-a")
	for name, tc := range map[string]struct {
		zone     string
		fallback []client.ZoneSeeds
		want     string
	}{
		"fallback without a zone":  {"", []client.ZoneSeeds{{Zone: "a", Seeds: c.ZoneSeeds("a")}}, "needs Zone"},
		"fallback of the own zone": {"b", []client.ZoneSeeds{{Zone: "b", Seeds: c.ZoneSeeds("a")}}, "own zone"},
		"a zone twice":             {"b", []client.ZoneSeeds{{Zone: "a", Seeds: c.ZoneSeeds("a")}, {Zone: "a", Seeds: c.ZoneSeeds("a")}}, "twice"},
		"a zone without seeds":     {"b", []client.ZoneSeeds{{Zone: "a"}}, "no seeds"},
		"a bad seed":               {"b", []client.ZoneSeeds{{Zone: "a", Seeds: []string{"http://x:1"}}}, "https only"},
	} {
		t.Run(name, func(t *testing.T) {
			_, err := client.New(context.Background(), client.Config{Seeds: c.ZoneSeeds("b"), TLS: tlsA, Zone: tc.zone, Fallback: tc.fallback})
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("New: %v, want an error mentioning %q", err, tc.want)
			}
		})
	}
}
