package kubectlplugin

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	versioncollector "github.com/prometheus/client_golang/prometheus/collectors/version"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/version"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	cachev1alpha1 "github.com/distcache/distcache/api/v1alpha1"
	"github.com/distcache/distcache/internal/metrics"
	"github.com/distcache/distcache/internal/pki"
	"github.com/distcache/distcache/internal/ring"
	"github.com/distcache/distcache/internal/store"
	"github.com/distcache/distcache/internal/testutil"
)

// exposition is what a cache node's /metrics serves for these counts: the
// node's own collectors (internal/metrics), in the text format.
func exposition(t testing.TB, reads map[string]float64, readBytes map[[2]string]float64, st store.Stats, epoch int64) []byte {
	t.Helper()
	reg := prometheus.NewRegistry()
	reg.MustRegister(versioncollector.NewCollector("distcache"))
	m := metrics.NewNode(reg)
	metrics.RegisterStore(reg, func() store.Stats { return st })
	m.RingEpoch.Set(float64(epoch))
	for result, n := range reads {
		m.ChunkReads.WithLabelValues("team-a", result).Add(n)
	}
	for opResult, n := range readBytes {
		m.ResponseBytes.WithLabelValues("team-a", opResult[0], opResult[1]).Add(n)
	}
	fams, err := reg.Gather()
	testutil.Must(t, err)
	var buf bytes.Buffer
	enc := expfmt.NewEncoder(&buf, expfmt.NewFormat(expfmt.TypeTextPlain))
	for _, f := range fams {
		if err := enc.Encode(f); err != nil {
			t.Fatal(err)
		}
	}
	return buf.Bytes()
}

func TestParseNodeMetrics(t *testing.T) {
	old := version.Version
	version.Version = "v1.2.3-test"
	t.Cleanup(func() { version.Version = old })

	text := exposition(t,
		map[string]float64{"hit_ram": 60, "hit_disk": 20, "miss": 15, "forwarded": 40, "error": 5},
		map[[2]string]float64{
			{"get_chunk", "hit_ram"}: 1000, {"get_object", "hit_ram"}: 500, {"get_object", "hit_disk"}: 300,
			{"get_chunk", "miss"}: 200, {"head", "hit_ram"}: 7777, // metadata: not a read of bytes
		},
		store.Stats{
			RAMBytes: 1 << 20, RAMCapacity: 64 << 20, DiskBytes: 3 << 20, DiskUsage: 4 << 20, DiskLimit: 100 << 20,
			DiskCapacity: 128 << 20, Chunks: 12, DiskFree: -1,
			Tenants: map[string]store.TenantStats{"team-a": {Bytes: 2 << 20, Chunks: 8}, "team-b": {Bytes: 1 << 20, Chunks: 4}},
		}, 7)

	m, err := parseNodeMetrics(text)
	testutil.Must(t, err)
	want := NodeMetrics{
		Version: "v1.2.3-test", RingEpoch: 7,
		ChunkReads: Reads{HitRAM: 60, HitDisk: 20, Miss: 15, Forwarded: 40, Error: 5},
		ReadBytes:  Reads{HitRAM: 1500, HitDisk: 300, Miss: 200},
		Store: Store{RAMBytes: 1 << 20, RAMCapacityBytes: 64 << 20, DiskBytes: 3 << 20, DiskUsageBytes: 4 << 20,
			DiskLimitBytes: 100 << 20, DiskCapacityBytes: 128 << 20, Chunks: 12},
		TenantBytes: map[string]int64{"team-a": 2 << 20, "team-b": 1 << 20},
	}
	if fmt.Sprintf("%+v", *m) != fmt.Sprintf("%+v", want) {
		t.Errorf("parsed\n%+v\nwant\n%+v", *m, want)
	}
	if got := *m.ChunkReads.HitRatio(); got != 0.8 {
		t.Errorf("chunk hit ratio %v, want 80/100 (forwarded left out)", got)
	}

	if _, err := parseNodeMetrics([]byte("go_goroutines 12\n")); err == nil {
		t.Error("another process's metrics parsed as a cache node's")
	}
	if _, err := parseNodeMetrics([]byte("<html>not metrics</html>")); err == nil {
		t.Error("HTML parsed as metrics")
	}
}

func TestHitRatio(t *testing.T) {
	for _, tc := range []struct {
		name string
		r    Reads
		want float64 // NaN: none
	}{
		{"no reads", Reads{}, math.NaN()},
		{"forwarded only: the owner counted them", Reads{Forwarded: 10}, math.NaN()},
		{"all hits", Reads{HitRAM: 3, HitDisk: 1, Forwarded: 100}, 1},
		{"errors count as not hits", Reads{HitRAM: 1, Miss: 2, Error: 1}, 0.25},
	} {
		got := tc.r.HitRatio()
		switch {
		case math.IsNaN(tc.want) && got != nil:
			t.Errorf("%s: %v, want none", tc.name, *got)
		case !math.IsNaN(tc.want) && (got == nil || *got != tc.want):
			t.Errorf("%s: %v, want %v", tc.name, got, tc.want)
		}
	}
}

func member(name string, ordinal, weight int, state ring.State) ring.Member {
	return ring.Member{Name: name, Address: name + ".cache.ns.svc:8443", Ordinal: ordinal, Weight: weight, State: state}
}

func mustRing(t *testing.T, s ring.Spec) *ring.Ring {
	t.Helper()
	s.Hash = ring.HashParams{Algorithm: ring.AlgorithmRendezvousXXHash64, Seed: 42}
	r, err := ring.New(s)
	testutil.Must(t, err)
	return r
}

func TestBuildZoneRing(t *testing.T) {
	three := []ring.Member{member("c-0", 0, 100, ring.StateActive), member("c-1", 1, 100, ring.StateActive), member("c-2", 2, 100, ring.StateActive)}
	const tol = 0.015 // about 4 standard errors at 65536 samples

	t.Run("equal weights own equal shares", func(t *testing.T) {
		zr := buildZoneRing(mustRing(t, ring.Spec{Epoch: 3, Zone: "a", Members: three}), DefaultSamples)
		sum := 0.0
		for _, m := range zr.Members {
			if math.Abs(m.ExpectedShare-1.0/3) > 1e-9 || math.Abs(m.SampledShare-1.0/3) > tol {
				t.Errorf("%s: expected %.4f sampled %.4f, want 1/3", m.Name, m.ExpectedShare, m.SampledShare)
			}
			sum += m.SampledShare
		}
		if math.Abs(sum-1) > 1e-9 {
			t.Errorf("sampled shares add up to %v", sum)
		}
		if zr.MovedShare != nil || zr.PreviousEpoch != 0 {
			t.Errorf("no previous epoch, got %d moved %v", zr.PreviousEpoch, *zr.MovedShare)
		}
		if zr.Epoch != 3 || zr.Seed != 42 || zr.Algorithm != ring.AlgorithmRendezvousXXHash64 {
			t.Errorf("ring parameters %+v", zr)
		}
	})

	t.Run("weights set the shares", func(t *testing.T) {
		zr := buildZoneRing(mustRing(t, ring.Spec{Epoch: 1, Members: []ring.Member{
			member("c-0", 0, 100, ring.StateActive), member("c-1", 1, 300, ring.StateActive)}}), DefaultSamples)
		for i, want := range []float64{0.25, 0.75} {
			m := zr.Members[i]
			if m.ExpectedShare != want || math.Abs(m.SampledShare-want) > tol {
				t.Errorf("%s (weight %d): expected %.4f sampled %.4f, want %.2f", m.Name, m.Weight, m.ExpectedShare, m.SampledShare, want)
			}
		}
	})

	t.Run("a member joining takes exactly the chunks that move", func(t *testing.T) {
		four := append(append([]ring.Member(nil), three...), member("c-3", 3, 100, ring.StateActive))
		zr := buildZoneRing(mustRing(t, ring.Spec{Epoch: 5, Members: four, Previous: &ring.PreviousRing{Epoch: 4, Members: three}}), DefaultSamples)
		if zr.PreviousEpoch != 4 || zr.MovedShare == nil {
			t.Fatalf("previous epoch %d, moved %v", zr.PreviousEpoch, zr.MovedShare)
		}
		if math.Abs(*zr.MovedShare-0.25) > tol {
			t.Errorf("moved %.4f of the chunks, want about 1/4", *zr.MovedShare)
		}
		if got := zr.Members[3].SampledShare; got != *zr.MovedShare {
			t.Errorf("the new member owns %.4f, but %.4f moved: chunks moved between old members", got, *zr.MovedShare)
		}
	})

	t.Run("a draining member owns nothing", func(t *testing.T) {
		draining := append(append([]ring.Member(nil), three[:2]...), member("c-2", 2, 100, ring.StateDraining))
		zr := buildZoneRing(mustRing(t, ring.Spec{Epoch: 6, Members: draining, Previous: &ring.PreviousRing{Epoch: 5, Members: three}}), DefaultSamples)
		m := zr.Members[2]
		if m.State != ring.StateDraining || m.ExpectedShare != 0 || m.SampledShare != 0 {
			t.Errorf("draining member: %+v", m)
		}
		if math.Abs(zr.Members[0].ExpectedShare-0.5) > 1e-9 {
			t.Errorf("active members' expected share %.4f, want 1/2", zr.Members[0].ExpectedShare)
		}
		if math.Abs(*zr.MovedShare-1.0/3) > tol {
			t.Errorf("moved %.4f, want about the draining member's third", *zr.MovedShare)
		}
	})

	t.Run("no samples: expected shares only", func(t *testing.T) {
		zr := buildZoneRing(mustRing(t, ring.Spec{Epoch: 2, Members: three, Previous: &ring.PreviousRing{Epoch: 1, Members: three[:1]}}), 0)
		if zr.MovedShare != nil || zr.Members[0].SampledShare != 0 || zr.Members[0].ExpectedShare == 0 {
			t.Errorf("%+v", zr)
		}
	})
}

func node(m *NodeMetrics) scrapeResult { return scrapeResult{metrics: m} }

func TestQuotaUse(t *testing.T) {
	scrapes := map[string]scrapeResult{
		"c-0": node(&NodeMetrics{TenantBytes: map[string]int64{"t": 10, "other": 99}}),
		"c-1": node(&NodeMetrics{TenantBytes: map[string]int64{"t": 30}}),
		"c-2": node(&NodeMetrics{}),
		"c-3": {err: errors.New("connection refused")},
	}
	u, msg := quotaUse("t", scrapes)
	if u == nil || *u != (QuotaUse{MaxNodeBytes: 30, MaxNode: "c-1", TotalBytes: 40, Nodes: 3}) {
		t.Errorf("use %+v", u)
	}
	if !strings.Contains(msg, "c-3: connection refused") {
		t.Errorf("message %q does not name the node not read", msg)
	}
	if u, msg := quotaUse("t", map[string]scrapeResult{"c-3": scrapes["c-3"]}); u != nil || msg == "" {
		t.Errorf("no node read: %+v %q", u, msg)
	}
	if u, msg := quotaUse("t", nil); u != nil || msg != "the cache has no node pods" {
		t.Errorf("no pods: %+v %q", u, msg)
	}
}

func tenantFixture() *cachev1alpha1.CacheTenant {
	return &cachev1alpha1.CacheTenant{
		ObjectMeta: metav1.ObjectMeta{Namespace: "analytics", Name: "ch", Generation: 2},
		Spec: cachev1alpha1.CacheTenantSpec{
			CacheRef: cachev1alpha1.CacheReference{Namespace: "distcache", Name: "demo"},
			Buckets:  []string{"b1", "b2"}, Quota: ptr.To(resource.MustParse("1Gi")),
			Gateway: &cachev1alpha1.GatewaySpec{ReplicasPerZone: ptr.To[int32](2)},
		},
		Status: cachev1alpha1.CacheTenantStatus{
			ObservedGeneration: 2, TenantName: "analytics-ch", Endpoint: "http://ch-gateway.analytics.svc:8099",
			CertificateNotAfter: &metav1.Time{Time: time.Date(2030, 1, 2, 3, 4, 5, 0, time.UTC)},
			Gateways:            []cachev1alpha1.GatewayZoneStatus{{Zone: "a", Replicas: 2, ReadyReplicas: 1}, {Zone: "b", Replicas: 1, ReadyReplicas: 1}},
			Conditions:          []metav1.Condition{{Type: cachev1alpha1.ConditionReady, Status: metav1.ConditionTrue, Reason: "Ready"}},
		},
	}
}

func TestBuildTenantStatus(t *testing.T) {
	ca, err := pki.NewCA("test", 24*time.Hour)
	testutil.Must(t, err)
	notAfter := time.Now().Add(3 * time.Hour).Truncate(time.Second)
	leaf, err := ca.IssueClientWindow(pki.Identity{Kind: pki.KindTenant, Name: "analytics-ch"}, time.Now().Add(-time.Minute), notAfter)
	testutil.Must(t, err)
	secret := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: "analytics", Name: "ch-distcache-client"},
		Data: map[string][]byte{corev1.TLSCertKey: leaf.CertPEM}}
	scrapes := map[string]scrapeResult{"c-0": node(&NodeMetrics{TenantBytes: map[string]int64{"analytics-ch": 5 << 20}})}

	ts := buildTenantStatus(tenantFixture(), secret, nil, scrapes, nil)
	if ts.CertificateSource != "secret" || !ts.CertificateNotAfter.Time.Equal(notAfter) || ts.CertificateError != "" {
		t.Errorf("certificate from the Secret: %v (%s) %q, want %v", ts.CertificateNotAfter, ts.CertificateSource, ts.CertificateError, notAfter)
	}
	if ts.CertificateSecret != "ch-distcache-client" || ts.Cache != "distcache/demo" || ts.QuotaBytes != 1<<30 ||
		ts.GatewayReplicas != 4 || ts.GatewayReady != 2 || ts.Ready != "True" || ts.Endpoint == "" {
		t.Errorf("%+v", ts)
	}
	if ts.Use == nil || ts.Use.MaxNodeBytes != 5<<20 || ts.UseError != "" {
		t.Errorf("use %+v %q", ts.Use, ts.UseError)
	}

	// Without the Secret (the user may not read Secrets there), status's
	// expiry, said to be status's.
	ts = buildTenantStatus(tenantFixture(), nil, errors.New("forbidden"), nil, errors.New("pods: forbidden"))
	if ts.CertificateSource != "status" || ts.CertificateNotAfter.Year() != 2030 || !strings.Contains(ts.CertificateError, "forbidden") {
		t.Errorf("certificate from status: %v (%s) %q", ts.CertificateNotAfter, ts.CertificateSource, ts.CertificateError)
	}
	if ts.Use != nil || !strings.Contains(ts.UseError, "pods: forbidden") {
		t.Errorf("use %+v %q", ts.Use, ts.UseError)
	}

	// A Secret without a certificate is said so.
	bad := secret.DeepCopy()
	bad.Data[corev1.TLSCertKey] = []byte("not PEM")
	ts = buildTenantStatus(tenantFixture(), bad, nil, scrapes, nil)
	if !strings.Contains(ts.CertificateError, "no PEM certificate") || ts.CertificateSource != "status" {
		t.Errorf("bad Secret: %q %s", ts.CertificateError, ts.CertificateSource)
	}
}

func TestBuildCacheStatus(t *testing.T) {
	dc := &cachev1alpha1.DistributedCache{
		ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "demo", Generation: 4},
		Spec:       cachev1alpha1.DistributedCacheSpec{Replicas: ptr.To[int32](3), Zones: []cachev1alpha1.ZoneSpec{{Name: "a"}, {Name: "b"}}},
		Status: cachev1alpha1.DistributedCacheStatus{
			ObservedGeneration: 3, ReadyReplicas: 2, RingEpoch: 9, Selector: "app=x", OperatorVersion: "v1.0.0",
			Zones: []cachev1alpha1.ZoneStatus{
				{Name: "a", StatefulSet: "demo-a", RingConfigMap: "demo-ring", Replicas: 3, ReadyReplicas: 2, RingEpoch: 9},
			},
		},
	}
	spec := ring.Spec{Epoch: 9, Zone: "a", Hash: ring.HashParams{Algorithm: ring.AlgorithmRendezvousXXHash64},
		Members: []ring.Member{member("demo-a-0", 0, 100, ring.StateActive), member("demo-a-1", 1, 100, ring.StateActive), member("demo-a-2", 2, 100, ring.StateDraining)}}
	doc, err := json.Marshal(spec)
	testutil.Must(t, err)
	published := time.Date(2026, 11, 27, 8, 0, 0, 0, time.UTC)
	cm := &corev1.ConfigMap{
		ObjectMeta: metav1.ObjectMeta{Name: "demo-ring", Annotations: map[string]string{cachev1alpha1.AnnotationRingPublishedPrefix + "a": published.Format(time.RFC3339)}},
		Data:       map[string]string{cachev1alpha1.RingConfigMapKey("a"): string(doc)},
	}
	pod := func(name, sts string, running, ready bool) corev1.Pod {
		p := corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: name, OwnerReferences: []metav1.OwnerReference{{Kind: "StatefulSet", Name: sts}}}}
		p.Spec.NodeName = "host-1"
		if running {
			p.Status.Phase = corev1.PodRunning
		}
		cond := corev1.ConditionFalse
		if ready {
			cond = corev1.ConditionTrue
		}
		p.Status.Conditions = []corev1.PodCondition{{Type: corev1.PodReady, Status: cond}}
		return p
	}
	pods := []corev1.Pod{
		pod("demo-a-10", "demo-a", false, false), pod("demo-a-1", "demo-a", true, true),
		pod("demo-a-0", "demo-a", true, true), pod("other-a-0", "other-a", true, true),
	}
	m0 := &NodeMetrics{RingEpoch: 9, ChunkReads: Reads{HitRAM: 3, Miss: 1}, ReadBytes: Reads{HitRAM: 300, Miss: 100}}
	scrapes := map[string]scrapeResult{"demo-a-0": node(m0), "demo-a-1": {err: errors.New("no route")}}

	st := buildCacheStatus(dc, cm, pods, scrapes)
	if len(st.Zones) != 2 {
		t.Fatalf("zones %+v", st.Zones)
	}
	a, b := st.Zones[0], st.Zones[1]
	var got []string
	for _, n := range a.Nodes {
		got = append(got, fmt.Sprintf("%s %s %s %t", n.Name, n.Ring, n.Phase, n.Ready))
	}
	want := []string{"demo-a-0 active Running true", "demo-a-1 active Running true", "demo-a-2 draining Missing false", "demo-a-10  Pending false"}
	if strings.Join(got, "; ") != strings.Join(want, "; ") {
		t.Errorf("zone a nodes\n%s\nwant\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
	if a.Nodes[0].Metrics != m0 || *a.Nodes[0].HitRatio != 0.75 || a.Nodes[1].MetricsError != "no route" {
		t.Errorf("node metrics: %+v / %+v", a.Nodes[0], a.Nodes[1])
	}
	if a.RingEpoch != 9 || !a.RingPublished.Time.Equal(published) || a.Active != 2 || a.Draining != 1 || a.RingError != "" {
		t.Errorf("zone a ring: %+v", a)
	}
	if a.ChunkReads != m0.ChunkReads || st.ReadBytes != m0.ReadBytes || *st.ByteHitRatio != 0.75 {
		t.Errorf("totals: zone %+v cache %+v", a.ChunkReads, st.ReadBytes)
	}
	if !strings.Contains(b.RingError, "no key b.json") || len(b.Nodes) != 0 || b.HitRatio != nil {
		t.Errorf("zone b (no status, no ring yet): %+v", b)
	}
	if len(st.Warnings) != 1 || !strings.Contains(st.Warnings[0], "generation 3") {
		t.Errorf("warnings %q", st.Warnings)
	}
	if st.OperatorVersion != "v1.0.0" || st.Replicas != 3 || st.RingEpoch != 9 {
		t.Errorf("%+v", st)
	}

	// Without the ring ConfigMap every zone says so; the pods are still listed.
	st = buildCacheStatus(dc, nil, pods, scrapes)
	if st.Zones[0].RingError == "" || len(st.Zones[0].Nodes) != 3 || st.Zones[0].Nodes[0].Ring != "" {
		t.Errorf("no ring ConfigMap: %+v", st.Zones[0])
	}
}

func TestIEC(t *testing.T) {
	for n, want := range map[int64]string{0: "0B", 1023: "1023B", 1024: "1.0KiB", 1536: "1.5KiB", 10 << 30: "10GiB", 3 << 40: "3.0TiB"} {
		if got := iec(n); got != want {
			t.Errorf("iec(%d) = %s, want %s", n, got, want)
		}
	}
}
