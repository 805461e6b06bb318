package embed

import (
	"context"
	"encoding/json"
	"log/slog"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/distcache/distcache/internal/kubewatch"
	"github.com/distcache/distcache/internal/node"
	"github.com/distcache/distcache/internal/ring"
	"github.com/distcache/distcache/internal/testutil"
	"github.com/distcache/distcache/internal/testutil/logbuf"
)

// A node with CrossZone OnMiss follows the other zones' rings: their keys
// of the ring ConfigMap (Zones), and files (ZoneRingFiles) as start values
// or, without the ConfigMap, as the only source. The node's own zone is
// never followed as another.
func TestZoneRingSources(t *testing.T) {
	// --ring-configmap=ns/c-ring:a.json --zones=a,b,c --zone-ring-files=c=/etc/zones/c.json
	ringRef := kubewatch.Ref{Namespace: "ns", Name: "c-ring", Key: "a.json"}
	srcs, err := zoneRingSources([]string{"a", "b", "c"}, []ZoneRingFile{{Zone: "c", Path: "/etc/zones/c.json"}}, ringRef, "a")
	if err != nil {
		t.Fatal(err)
	}
	ref := func(key string) *kubewatch.Ref { return &kubewatch.Ref{Namespace: "ns", Name: "c-ring", Key: key} }
	want := []zoneRingSource{{zone: "b", ref: ref("b.json")}, {zone: "c", file: "/etc/zones/c.json", ref: ref("c.json")}}
	if !reflect.DeepEqual(srcs, want) {
		t.Errorf("sources %+v, want %+v", srcs, want)
	}
	// By hand: files only; the own zone, known from the node's ring, may be
	// listed; another zone without a file has no ring.
	files := []ZoneRingFile{{Zone: "b", Path: "/b.json"}}
	srcs, err = zoneRingSources([]string{"a"}, files, kubewatch.Ref{}, "a")
	if err != nil || !reflect.DeepEqual(srcs, []zoneRingSource{{zone: "b", file: "/b.json"}}) {
		t.Errorf("sources %+v, %v", srcs, err)
	}
	if _, err := zoneRingSources([]string{"a", "c"}, files, kubewatch.Ref{}, "a"); err == nil || !strings.Contains(err.Error(), `zone "c" has no ring`) {
		t.Errorf("a zone without a file nor a ConfigMap: %v", err)
	}
}

// A zone's ring file is followed, absent at start or not, and a document
// that names another zone is never put in force for it.
func TestFollowZoneRingFile(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "b.json")
	write := func(zone string, epoch int64) {
		t.Helper()
		r, err := ring.New(ring.Spec{Epoch: epoch, Zone: zone, Hash: ring.HashParams{Algorithm: ring.AlgorithmRendezvousXXHash64},
			Members: []ring.Member{{Name: "cache-" + zone + "-0", Address: "127.0.0.1:1", Weight: 100, State: ring.StateActive}}})
		if err != nil {
			t.Fatal(err)
		}
		data, err := json.Marshal(r)
		if err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(path+".tmp", data, 0o600); err != nil {
			t.Fatal(err)
		}
		if err := os.Rename(path+".tmp", path); err != nil {
			t.Fatal(err)
		}
	}
	var logs logbuf.Buffer
	log := slog.New(slog.NewTextHandler(&logs, nil))
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	zones := &node.ZoneRings{}
	if err := followZoneRings(ctx, nil, []zoneRingSource{{zone: "b", file: path}}, zones, prometheus.NewRegistry(), log); err != nil {
		t.Fatal(err)
	}
	h := zones.Holder("b")
	write("a", 5) // zone a's document where zone b's belongs
	testutil.WaitFor(t, "the refusal to be logged", func() bool { return strings.Contains(logs.String(), `names zone \"a\", not \"b\"`) })
	if r := h.Load(); r != nil {
		t.Fatalf("zone b holds a ring of zone %q", r.Zone())
	}
	write("b", 3)
	testutil.WaitFor(t, "zone b's ring", func() bool { r := h.Load(); return r != nil && r.Epoch() == 3 })
	if rs := zones.Rings(); len(rs) != 1 || rs[0].Zone() != "b" {
		t.Errorf("rings %v", rs)
	}
}
