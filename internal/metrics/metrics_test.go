package metrics_test

import (
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/distcache/distcache/internal/metrics"
	"github.com/distcache/distcache/internal/ring"
	"github.com/distcache/distcache/internal/store"
	"github.com/distcache/distcache/internal/testutil"
)

// gauge is the value of the series name{labels}; ok=false when the
// registry has no such series.
func gauge(t *testing.T, g prometheus.Gatherer, name string, labels map[string]string) (float64, bool) {
	t.Helper()
	families, err := g.Gather()
	testutil.Must(t, err)
	for _, f := range families {
		if f.GetName() != name {
			continue
		}
	series:
		for _, m := range f.GetMetric() {
			got := map[string]string{}
			for _, l := range m.GetLabel() {
				got[l.GetName()] = l.GetValue()
			}
			if len(got) != len(labels) {
				continue
			}
			for k, v := range labels {
				if got[k] != v {
					continue series
				}
			}
			return m.GetGauge().GetValue(), true
		}
	}
	return 0, false
}

func TestStoreCapacityGauges(t *testing.T) {
	for _, ram := range []int64{8 << 20, 0} {
		st, err := store.Open(store.Options{Dir: t.TempDir(), DiskBytes: 48 << 20, RAMBytes: ram, Logger: slog.New(slog.DiscardHandler)})
		testutil.Must(t, err)
		t.Cleanup(func() { _ = st.Close() })
		reg := prometheus.NewRegistry()
		metrics.RegisterStore(reg, st.Stats)
		for name, want := range map[string]int64{
			"distcache_store_ram_capacity_bytes":  ram,
			"distcache_store_disk_capacity_bytes": 48 << 20,
		} {
			if got, ok := gauge(t, reg, name, nil); !ok || got != float64(want) {
				t.Errorf("RAM tier of %d bytes: %s = %v (present %v), want %d", ram, name, got, ok, want)
			}
		}
	}
}

// spec is a ring of the given numbers of active and draining members.
func spec(epoch int64, active, draining int) ring.Spec {
	s := ring.Spec{Epoch: epoch, Zone: "a", Hash: ring.HashParams{Algorithm: ring.AlgorithmRendezvousXXHash64}}
	for i := range active + draining {
		state := ring.StateActive
		if i >= active {
			state = ring.StateDraining
		}
		name := fmt.Sprintf("cache-a-%d", i)
		s.Members = append(s.Members, ring.Member{Name: name, Address: name + ".cache-a:8443", Ordinal: i, Weight: 100, State: state})
	}
	return s
}

func writeRing(t *testing.T, path string, s ring.Spec) {
	t.Helper()
	data, err := json.Marshal(s)
	testutil.Must(t, err)
	// Write then rename, as the kubelet swaps a ConfigMap's files.
	tmp := path + ".tmp"
	if err := os.WriteFile(tmp, data, 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.Rename(tmp, path); err != nil {
		t.Fatal(err)
	}
}

func members(t *testing.T, g prometheus.Gatherer) (active, draining float64) {
	t.Helper()
	a, okA := gauge(t, g, "distcache_ring_members", map[string]string{"state": "active"})
	d, okD := gauge(t, g, "distcache_ring_members", map[string]string{"state": "draining"})
	if !okA || !okD {
		t.Fatalf("distcache_ring_members lacks a state: active present %v, draining present %v", okA, okD)
	}
	return a, d
}

func TestRingMembersFollowTheRingFile(t *testing.T) {
	reg := prometheus.NewRegistry()
	m := metrics.NewNode(reg)
	if a, d := members(t, reg); a != 0 || d != 0 {
		t.Fatalf("a node without a ring reports %v active and %v draining members, want 0 and 0", a, d)
	}

	// As `cachenode serve` starts: load the file, then watch it.
	path := filepath.Join(t.TempDir(), "ring.json")
	writeRing(t, path, spec(1, 3, 0))
	r, err := ring.LoadFile(path)
	testutil.Must(t, err)
	h := &ring.Holder{}
	h.Store(r)
	m.ReportRing(h)
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	go func() { _ = ring.WatchFile(ctx, path, h, nil) }()
	if a, d := members(t, reg); a != 3 || d != 0 {
		t.Fatalf("after start: %v active and %v draining members, want 3 and 0", a, d)
	}

	// A member drains, then one is added: the gauge follows each new epoch.
	for _, want := range []struct {
		epoch            int64
		active, draining int
	}{{2, 2, 1}, {3, 4, 0}} {
		writeRing(t, path, spec(want.epoch, want.active, want.draining))
		wantActive, wantDraining := float64(want.active), float64(want.draining)
		deadline := time.Now().Add(30 * time.Second) // bounds a wait; nothing asserts on time
		for {
			a, d := members(t, reg)
			if a == wantActive && d == wantDraining {
				break
			}
			if time.Now().After(deadline) {
				t.Fatalf("epoch %d written: the gauge still reports %v active and %v draining members, want %v and %v",
					want.epoch, a, d, wantActive, wantDraining)
			}
			time.Sleep(10 * time.Millisecond)
		}
	}
}
