package main

import (
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/distcache/distcache/internal/embed"
	"github.com/distcache/distcache/internal/kubewatch"
	"github.com/distcache/distcache/internal/node"
	"github.com/distcache/distcache/internal/writeback"
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

	// The zones and their files map onto the node's configuration, in
	// flag order (internal/embed's zone tests take it from there).
	f, err = parseServeFlags(append(base, "--ring-file=r.json", "--ring-configmap=ns/c-ring:a.json", "--cross-zone=OnMiss",
		"--zones=a,b,c", "--zone-ring-files=c=/etc/zones/c.json"))
	if err != nil {
		t.Fatal(err)
	}
	cfg := f.nodeConfig(nil, nil)
	if cfg.CrossZone != node.CrossZoneOnMiss || !reflect.DeepEqual(cfg.Zones, []string{"a", "b", "c"}) ||
		!reflect.DeepEqual(cfg.ZoneRingFiles, []embed.ZoneRingFile{{Zone: "c", Path: "/etc/zones/c.json"}}) ||
		cfg.RingConfigMap != (kubewatch.Ref{Namespace: "ns", Name: "c-ring", Key: "a.json"}) {
		t.Errorf("node configuration: cross-zone %v, zones %v, files %+v, ring ConfigMap %+v", cfg.CrossZone, cfg.Zones, cfg.ZoneRingFiles, cfg.RingConfigMap)
	}
	f, err = parseServeFlags(append(base, "--ring-file=r.json", "--cross-zone=OnMiss", "--zones=a", "--zone-ring-files=b=/b.json"))
	if err != nil {
		t.Fatal(err)
	}
	if cfg := f.nodeConfig(nil, nil); !reflect.DeepEqual(cfg.ZoneRingFiles, []embed.ZoneRingFile{{Zone: "b", Path: "/b.json"}}) || cfg.RingConfigMap.Name != "" {
		t.Errorf("node configuration: files %+v, ring ConfigMap %+v", cfg.ZoneRingFiles, cfg.RingConfigMap)
	}
}

// --writeback-yield and --writeback-max-yield reach the persister: the
// defaults as the defaults, 0 as "never wait", and nonsense is refused.
func TestServeFlagsWriteBackYield(t *testing.T) {
	base := []string{"--tls-cert=c", "--tls-key=k", "--client-ca=ca", "--tenants-file=t.yaml", "--node-name=n-0"}
	for _, tc := range []struct {
		args            []string
		yield, maxYield time.Duration
	}{
		{nil, writeback.DefaultYield, writeback.DefaultMaxYield},
		{[]string{"--writeback-yield=0"}, -1, writeback.DefaultMaxYield},
		{[]string{"--writeback-yield=20ms", "--writeback-max-yield=500ms"}, 20 * time.Millisecond, 500 * time.Millisecond},
	} {
		f, err := parseServeFlags(append(append([]string(nil), base...), tc.args...))
		if err != nil {
			t.Fatalf("%v: %v", tc.args, err)
		}
		if cfg := f.nodeConfig(nil, nil); cfg.WriteBackYield != tc.yield || cfg.WriteBackMaxYield != tc.maxYield {
			t.Errorf("%v: yield %v, max %v; want %v, %v", tc.args, cfg.WriteBackYield, cfg.WriteBackMaxYield, tc.yield, tc.maxYield)
		}
	}
	for _, args := range [][]string{{"--writeback-yield=-1s"}, {"--writeback-max-yield=0"}} {
		if _, err := parseServeFlags(append(append([]string(nil), base...), args...)); err == nil || !strings.Contains(err.Error(), "--writeback-") {
			t.Errorf("%v: error %v, want one naming the flag", args, err)
		}
	}
}

// --writeback-put-if-absent: auto trusts If-None-Match: * on AWS S3's own
// endpoints only; true and false say so for any S3.
func TestServeFlagsPutIfAbsent(t *testing.T) {
	base := []string{"--tls-cert=c", "--tls-key=k", "--client-ca=ca", "--tenants-file=t.yaml", "--node-name=n-0"}
	for _, tc := range []struct {
		args []string
		want bool
	}{
		{nil, true}, // the SDK's default endpoint: AWS
		{[]string{"--s3-endpoint=https://s3.eu-west-1.amazonaws.com"}, true},
		{[]string{"--s3-endpoint=https://s3.cn-north-1.amazonaws.com.cn"}, true},
		{[]string{"--s3-endpoint=http://minio.minio.svc:9000"}, false},
		{[]string{"--s3-endpoint=https://evil-amazonaws.com.example"}, false},
		{[]string{"--s3-endpoint=http://minio.minio.svc:9000", "--writeback-put-if-absent=true"}, true},
		{[]string{"--writeback-put-if-absent=false"}, false},
	} {
		f, err := parseServeFlags(append(append([]string(nil), base...), tc.args...))
		if err != nil {
			t.Fatalf("%v: %v", tc.args, err)
		}
		if got := f.nodeConfig(nil, nil).WriteBackPutIfAbsent; got != tc.want {
			t.Errorf("%v: WriteBackPutIfAbsent %v, want %v", tc.args, got, tc.want)
		}
	}
	if _, err := parseServeFlags(append(base, "--writeback-put-if-absent=yes")); err == nil || !strings.Contains(err.Error(), "--writeback-put-if-absent") {
		t.Fatalf("--writeback-put-if-absent=yes: %v, want an error naming the flag", err)
	}
}
