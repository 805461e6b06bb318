package controllers

import (
	"slices"
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"

	cachev1alpha1 "github.com/distcache/distcache/api/v1alpha1"
	"github.com/distcache/distcache/internal/pki"
	"github.com/distcache/distcache/internal/tenancy"
)

func TestTenantName(t *testing.T) {
	tenant := func(ns, name string) *cachev1alpha1.CacheTenant {
		return &cachev1alpha1.CacheTenant{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name}}
	}
	if got := tenantName(tenant("team", "clickhouse")); got != "team-clickhouse" {
		t.Fatalf("short name: %q", got)
	}
	long1 := tenantName(tenant(strings.Repeat("n", 40), strings.Repeat("a", 40)))
	long2 := tenantName(tenant(strings.Repeat("n", 40), strings.Repeat("a", 39)+"b"))
	for _, n := range []string{long1, long2} {
		if err := pki.ValidateName(n); err != nil {
			t.Fatalf("%q: %v", n, err)
		}
	}
	if long1 == long2 {
		t.Fatalf("long names that differ after the cut collide: %q", long1)
	}
	// A cut that lands on '-' must not leave "--" or a trailing '-'.
	if n := tenantName(tenant(strings.Repeat("n", 55), "x-"+strings.Repeat("y", 20))); pki.ValidateName(n) != nil {
		t.Fatalf("%q is not a valid name", n)
	}
}

func TestDecideTenants(t *testing.T) {
	t0 := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	tenant := func(ns, name string, age int, edit ...func(*cachev1alpha1.CacheTenant)) cachev1alpha1.CacheTenant {
		ct := cachev1alpha1.CacheTenant{
			ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name, UID: types.UID(ns + "/" + name),
				CreationTimestamp: metav1.NewTime(t0.Add(-time.Duration(age) * time.Hour))},
			Spec: cachev1alpha1.CacheTenantSpec{CacheRef: cachev1alpha1.CacheReference{Namespace: "ns", Name: "c"}, Buckets: []string{"b1"}},
		}
		for _, e := range edit {
			e(&ct)
		}
		return ct
	}
	admittedAs := func(name string) func(*cachev1alpha1.CacheTenant) {
		return func(ct *cachev1alpha1.CacheTenant) {
			ct.Status.TenantName = name
			ct.Status.Conditions = []metav1.Condition{{Type: cachev1alpha1.ConditionReady, Status: metav1.ConditionTrue}}
		}
	}
	selector := func(dc *cachev1alpha1.DistributedCache) {
		dc.Spec.TenantNamespaceSelector = &metav1.LabelSelector{MatchLabels: map[string]string{"distcache": "yes"}}
	}
	nsLabels := map[string]map[string]string{"team": {"distcache": "yes"}, "team-x": {"distcache": "yes"}}

	for _, tt := range []struct {
		name    string
		edit    func(*cachev1alpha1.DistributedCache)
		tenants []cachev1alpha1.CacheTenant
		want    map[string]string // namespace/name -> reason ("" admitted); absent: left out
	}{
		{"no selector: the cache's namespace only", nil,
			[]cachev1alpha1.CacheTenant{tenant("ns", "local", 1), tenant("team", "remote", 1)},
			map[string]string{"ns/local": "", "team/remote": cachev1alpha1.ReasonNamespaceNotAllowed}},
		{"selector admits labelled namespaces", selector,
			[]cachev1alpha1.CacheTenant{tenant("team", "a", 1), tenant("other", "b", 1)},
			map[string]string{"team/a": "", "other/b": cachev1alpha1.ReasonNamespaceNotAllowed}},
		{"empty selector admits every namespace", func(dc *cachev1alpha1.DistributedCache) {
			dc.Spec.TenantNamespaceSelector = &metav1.LabelSelector{}
		}, []cachev1alpha1.CacheTenant{tenant("other", "b", 1)}, map[string]string{"other/b": ""}},
		{"other caches' tenants and deleted tenants are left out", nil,
			[]cachev1alpha1.CacheTenant{
				tenant("ns", "elsewhere", 1, func(ct *cachev1alpha1.CacheTenant) { ct.Spec.CacheRef.Name = "d" }),
				tenant("ns", "going", 1, func(ct *cachev1alpha1.CacheTenant) { ct.DeletionTimestamp = &metav1.Time{Time: t0} }),
			}, map[string]string{}},
		{"a name collision goes to the older tenant", selector,
			[]cachev1alpha1.CacheTenant{tenant("team-x", "y", 1), tenant("team", "x-y", 2)},
			map[string]string{"team/x-y": "", "team-x/y": ReasonIdentityConflict}},
		{"a tenant admitted under the name keeps it against an older newcomer", selector,
			[]cachev1alpha1.CacheTenant{tenant("team-x", "y", 1, admittedAs("team-x-y")), tenant("team", "x-y", 2)},
			map[string]string{"team/x-y": ReasonIdentityConflict, "team-x/y": ""}},
	} {
		t.Run(tt.name, func(t *testing.T) {
			got := map[string]string{}
			for _, d := range decideTenants(testCache(tt.edit), tt.tenants, nsLabels) {
				got[d.Tenant.Namespace+"/"+d.Tenant.Name] = d.Reason
				if d.Reason != "" && d.Message == "" {
					t.Errorf("%s: reason %s without a message", d.Tenant.Name, d.Reason)
				}
			}
			if len(got) != len(tt.want) {
				t.Fatalf("decisions %v, want %v", got, tt.want)
			}
			for k, v := range tt.want {
				if r, ok := got[k]; !ok || r != v {
					t.Errorf("%s: reason %q (present %v), want %q", k, r, ok, v)
				}
			}
		})
	}
}

func TestRenderTenantsFile(t *testing.T) {
	cfg := tenancy.Config{Tenants: []tenancy.Tenant{{Name: "team-a", Buckets: []string{"bucket-1"}, QuotaBytes: 1 << 30,
		Credentials: &tenancy.Credentials{AccessKeyID: "AK", SecretAccessKey: "SK"}}}}
	doc, err := renderTenantsFile(&cfg)
	if err != nil {
		t.Fatal(err)
	}
	parsed, err := tenancy.Parse(doc)
	if err != nil {
		t.Fatal(err)
	}
	if tt, ok := parsed.Tenant("team-a"); !ok || tt.QuotaBytes != 1<<30 || tt.Credentials.SecretAccessKey != "SK" {
		t.Fatalf("round trip lost data: %+v", parsed.Tenants)
	}
	empty, err := renderTenantsFile(&tenancy.Config{Tenants: []tenancy.Tenant{}})
	if err != nil || !strings.Contains(string(empty), "tenants: []") {
		t.Fatalf("no tenants must render as an explicit empty list: %q, %v", empty, err)
	}
	if _, err := renderTenantsFile(&tenancy.Config{Tenants: []tenancy.Tenant{{Name: "x", Buckets: []string{"*"}}}}); err == nil {
		t.Fatal("a file the nodes would refuse was rendered")
	}
}

// A CacheTenant's write policies reach its entry in the nodes' tenants
// file, which the nodes accept.
func TestTenantEntryPolicies(t *testing.T) {
	ct := cachev1alpha1.CacheTenant{Spec: cachev1alpha1.CacheTenantSpec{Buckets: []string{"data", "logs"},
		Policies: []cachev1alpha1.WritePolicy{
			{Bucket: "data", Prefix: "tmp/", Mode: cachev1alpha1.WriteModeNoCache},
			{Bucket: "logs", Mode: cachev1alpha1.WriteModeReadOnly},
			{Bucket: "data", Prefix: "wb/", Mode: cachev1alpha1.WriteModeWriteBack, Replicas: ptr.To[int32](3)},
			{Bucket: "data", Prefix: "spill/", Mode: cachev1alpha1.WriteModeTransient, Expiry: &metav1.Duration{Duration: 90 * time.Minute}},
		}}}
	entry, raised := tenantEntry(tenantDecision{Name: "team-a", Tenant: &ct}, nil, false)
	if raised != nil {
		t.Fatalf("replicas raised on a cache with durable disks: %v", raised)
	}
	doc, err := renderTenantsFile(&tenancy.Config{Tenants: []tenancy.Tenant{entry}})
	if err != nil {
		t.Fatal(err)
	}
	parsed, err := tenancy.Parse(doc)
	if err != nil {
		t.Fatal(err)
	}
	tn, _ := parsed.Tenant("team-a")
	for _, tc := range []struct {
		bucket, key string
		want        tenancy.Mode
	}{{"data", "tmp/x", tenancy.NoCache}, {"data", "x", tenancy.WriteThrough}, {"logs", "x", tenancy.ReadOnly},
		{"data", "wb/x", tenancy.WriteBack}, {"data", "spill/x", tenancy.Transient}} {
		if got := tn.PolicyFor(tc.bucket, tc.key).Mode; got != tc.want {
			t.Errorf("%s/%s: %s, want %s", tc.bucket, tc.key, got, tc.want)
		}
	}
	if p := tn.PolicyFor("data", "wb/x"); p.ReplicaCount() != 3 {
		t.Errorf("write-back replicas %d, want 3", p.ReplicaCount())
	}
	if p := tn.PolicyFor("data", "spill/x"); p.ReplicaCount() != tenancy.DefaultReplicas || p.ExpiryAfter() != 90*time.Minute {
		t.Errorf("transient replicas %d, expiry %v; want the default and 1h30m", p.ReplicaCount(), p.ExpiryAfter())
	}
}

// On a cache whose disks are emptyDir volumes, a WriteBack policy of one
// copy is rendered with two (a rescheduled pod comes back empty) and
// named; Transient and WriteBack policies of more copies are left alone.
func TestTenantEntryEphemeralReplicas(t *testing.T) {
	ct := cachev1alpha1.CacheTenant{Spec: cachev1alpha1.CacheTenantSpec{Buckets: []string{"data"},
		Policies: []cachev1alpha1.WritePolicy{
			{Bucket: "data", Prefix: "one/", Mode: cachev1alpha1.WriteModeWriteBack, Replicas: ptr.To[int32](1)},
			{Bucket: "data", Prefix: "three/", Mode: cachev1alpha1.WriteModeWriteBack, Replicas: ptr.To[int32](3)},
			{Bucket: "data", Prefix: "spill/", Mode: cachev1alpha1.WriteModeTransient, Replicas: ptr.To[int32](1)},
		}}}
	for _, ephemeral := range []bool{false, true} {
		entry, raised := tenantEntry(tenantDecision{Name: "team-a", Tenant: &ct}, nil, ephemeral)
		want := map[string]int{"one/": 1, "three/": 3, "spill/": 1}
		if ephemeral {
			want["one/"] = 2
			if !slices.Equal(raised, []string{"data/one/"}) {
				t.Errorf("raised %v, want [data/one/]", raised)
			}
		}
		for _, p := range entry.Policies {
			if p.ReplicaCount() != want[p.Prefix] {
				t.Errorf("ephemeral %v: %s has %d replicas, want %d", ephemeral, p.Prefix, p.ReplicaCount(), want[p.Prefix])
			}
		}
	}
}
