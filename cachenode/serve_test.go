package main

import (
	"context"
	"encoding/json"
	"log/slog"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/distcache/distcache/internal/kubewatch"
	"github.com/distcache/distcache/internal/node"
	"github.com/distcache/distcache/internal/ring"
	"github.com/distcache/distcache/internal/testutil/logbuf"
)

func TestServeFlagsAPIWatch(t *testing.T) {
	base := []string{"--tls-cert=c", "--tls-key=k", "--client-ca=ca", "--tenants-file=t.yaml", "--node-name=n-0"}
	t.Run("refs with and without keys", func(t *testing.T) {
		f, err := parseServeFlags(append(base, "--ring-file=r.json", "--ring-configmap=ns/c-ring:zone-a.json", "--tenants-secret=ns/c-tenants"))
		if err != nil {
			t.Fatal(err)
		}
		if f.ringRef != (kubewatch.Ref{Namespace: "ns", Name: "c-ring", Key: "zone-a.json"}) {
			t.Errorf("ring ref %+v", f.ringRef)
		}
		if f.tenantsRef != (kubewatch.Ref{Namespace: "ns", Name: "c-tenants", Key: "tenants.yaml"}) {
			t.Errorf("tenants ref %+v", f.tenantsRef)
		}
	})
	t.Run("from the environment", func(t *testing.T) {
		t.Setenv("DISTCACHE_TENANTS_SECRET", "ns/from-env:x.yaml")
		f, err := parseServeFlags(base)
		if err != nil {
			t.Fatal(err)
		}
		if f.tenantsRef != (kubewatch.Ref{Namespace: "ns", Name: "from-env", Key: "x.yaml"}) {
			t.Errorf("tenants ref %+v", f.tenantsRef)
		}
	})
	for _, tc := range []struct {
		name string
		args []string
		want string
	}{
		{"ring ConfigMap without a ring file", []string{"--ring-configmap=ns/c-ring"}, "--ring-configmap needs --ring-file"},
		{"malformed ring ConfigMap", []string{"--ring-file=r.json", "--ring-configmap=c-ring"}, "--ring-configmap"},
		{"malformed tenants Secret", []string{"--tenants-secret=ns/Bad_Name"}, "--tenants-secret"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := parseServeFlags(append(append([]string(nil), base...), tc.args...))
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("error %v, want one mentioning %q", err, tc.want)
			}
		})
	}
}

// --cross-zone=OnMiss follows the other zones' rings: their keys of the
// ring ConfigMap (--zones), and files (--zone-ring-files) as start values
// or, without the ConfigMap, as the only source. The node's own zone is
// never followed as another.
func TestServeFlagsCrossZone(t *testing.T) {
	base := []string{"--tls-cert=c", "--tls-key=k", "--client-ca=ca", "--tenants-file=t.yaml", "--node-name=n-0"}
	f, err := parseServeFlags(base)
	if err != nil || f.crossZoneMode != node.CrossZoneNever {
		t.Fatalf("default: %v, %v", f.crossZoneMode, err)
	}
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"--cross-zone=Sometimes"}, "--cross-zone"},
		{[]string{"--cross-zone=OnMiss"}, "needs --ring-file"},
		{[]string{"--ring-file=r.json", "--cross-zone=OnMiss", "--zone-ring-files=b"}, "zone=path"},
		{[]string{"--ring-file=r.json", "--cross-zone=OnMiss", "--zone-ring-files=b=/x,b=/y"}, "twice"},
	} {
		if _, err := parseServeFlags(append(append([]string(nil), base...), tc.args...)); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%v: %v, want an error mentioning %q", tc.args, err, tc.want)
		}
	}

	f, err = parseServeFlags(append(base, "--ring-file=r.json", "--ring-configmap=ns/c-ring:a.json", "--cross-zone=OnMiss",
		"--zones=a,b,c", "--zone-ring-files=c=/etc/zones/c.json"))
	if err != nil {
		t.Fatal(err)
	}
	srcs, err := zoneRingSources(splitList(f.zones), f.zoneFiles, f.zoneFileOrder, f.ringRef, "a")
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
	f, err = parseServeFlags(append(base, "--ring-file=r.json", "--cross-zone=OnMiss", "--zones=a", "--zone-ring-files=b=/b.json"))
	if err != nil {
		t.Fatal(err)
	}
	srcs, err = zoneRingSources(splitList(f.zones), f.zoneFiles, f.zoneFileOrder, f.ringRef, "a")
	if err != nil || !reflect.DeepEqual(srcs, []zoneRingSource{{zone: "b", file: "/b.json"}}) {
		t.Errorf("sources %+v, %v", srcs, err)
	}
	if _, err := zoneRingSources([]string{"a", "c"}, f.zoneFiles, f.zoneFileOrder, f.ringRef, "a"); err == nil || !strings.Contains(err.Error(), `zone "c" has no ring`) {
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
	waitFor(t, "the refusal to be logged", func() bool { return strings.Contains(logs.String(), `names zone \"a\", not \"b\"`) })
	if r := h.Load(); r != nil {
		t.Fatalf("zone b holds a ring of zone %q", r.Zone())
	}
	write("b", 3)
	waitFor(t, "zone b's ring", func() bool { r := h.Load(); return r != nil && r.Epoch() == 3 })
	if rs := zones.Rings(); len(rs) != 1 || rs[0].Zone() != "b" {
		t.Errorf("rings %v", rs)
	}
}

// waitFor polls cond with a deadline generous enough for a loaded machine.
func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	for deadline := time.Now().Add(30 * time.Second); !cond(); time.Sleep(10 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
	}
}
