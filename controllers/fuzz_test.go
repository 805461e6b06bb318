package controllers

import (
	"fmt"
	"reflect"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	cachev1alpha1 "github.com/distcache/distcache/api/v1alpha1"
	"github.com/distcache/distcache/internal/pki"
	"github.com/distcache/distcache/internal/ring"
	"github.com/distcache/distcache/internal/tenancy"
)

// The CRDs' OpenAPI and CEL rules (api/v1alpha1), which the API server
// enforces before the operator sees an object: fuzz inputs that break them
// are skipped, every other input must render.
var (
	dnsLabel      = regexp.MustCompile(`^[a-z0-9]([-a-z0-9]*[a-z0-9])?$`)
	dns1035Label  = regexp.MustCompile(`^[a-z]([-a-z0-9]*[a-z0-9])?$`)
	bucketPattern = regexp.MustCompile(`^[a-z0-9][a-z0-9.-]*[a-z0-9]$`)
	ipLike        = regexp.MustCompile(`^[0-9]+[.][0-9]+[.][0-9]+[.][0-9]+$`)
)

func crdBucket(b string) bool {
	return len(b) >= 3 && len(b) <= 63 && bucketPattern.MatchString(b) && !strings.Contains(b, "..") &&
		!strings.Contains(b, ".-") && !strings.Contains(b, "-.") && !strings.HasPrefix(b, "xn--") &&
		!strings.HasPrefix(b, "sthree-") && !ipLike.MatchString(b)
}

// fuzzTenant builds a CacheTenant of cache ns/c from fuzz input, or nil if
// the API server would refuse it.
func fuzzTenant(ns, name, buckets, quota string, age int) *cachev1alpha1.CacheTenant {
	if len(ns) > 63 || len(name) > 63 || !dnsLabel.MatchString(ns) || !dnsLabel.MatchString(name) {
		return nil
	}
	t := &cachev1alpha1.CacheTenant{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name,
			CreationTimestamp: metav1.NewTime(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC).Add(-time.Duration(age) * time.Hour))},
		Spec: cachev1alpha1.CacheTenantSpec{CacheRef: cachev1alpha1.CacheReference{Namespace: "ns", Name: "c"}},
	}
	for b := range strings.SplitSeq(buckets, ",") {
		if !crdBucket(b) || slices.Contains(t.Spec.Buckets, b) {
			return nil
		}
		t.Spec.Buckets = append(t.Spec.Buckets, b)
	}
	if len(t.Spec.Buckets) > 100 {
		return nil
	}
	if quota != "" {
		q, err := resource.ParseQuantity(quota)
		if err != nil {
			return nil
		}
		if _, ok := q.AsInt64(); !ok || q.Sign() <= 0 {
			return nil
		}
		t.Spec.Quota = &q
	}
	return t
}

// FuzzRenderTenantsFile renders the nodes' tenants file from two
// CacheTenants the API server accepts (any names, buckets, quota and
// credentials Secret values) and parses it back with the nodes' parser.
// The file must always render (one tenant the nodes would refuse would
// block every tenant of the cache), admit each tenant name once, and give
// each admitted tenant exactly its buckets, quota and credentials.
func FuzzRenderTenantsFile(f *testing.F) {
	f.Add("ns", "clickhouse", "ch-data,ch-backups", "100Gi", "AKIA1", "s3cr3t", "team", "x", "events", "", false)
	f.Add("team-x", "y", "a.b.c", "1", "", "", "team", "x-y", "a-b", "1e3", true)
	f.Add(strings.Repeat("n", 40), strings.Repeat("a", 40), "bkt", "9223372036854775807", "AK\n", "SK with spaces ", "ns", "t", "123", "", true)
	f.Add("ns", "a", "1.2.3.4a", "0.5", "ak", "", "ns", "b", "bkt", "1Ki", false)
	f.Add("ns", "a", "bkt", "", "\xff\xfe", "\x00", "ns", "a", "bkt", "", false)
	f.Add("ns", "a", "yes,no,on,off,null,true", "", "1e3", "0x10", "ns", "b", "0777,nan", "", false)
	f.Fuzz(func(t *testing.T, ns1, n1, b1, q1, ak, sk, ns2, n2, b2, q2 string, anyNamespace bool) {
		var tenants []cachev1alpha1.CacheTenant
		for i, in := range [][4]string{{ns1, n1, b1, q1}, {ns2, n2, b2, q2}} {
			ct := fuzzTenant(in[0], in[1], in[2], in[3], i)
			if ct == nil {
				return
			}
			tenants = append(tenants, *ct)
		}
		dc := testCache(func(dc *cachev1alpha1.DistributedCache) {
			if anyNamespace {
				dc.Spec.TenantNamespaceSelector = &metav1.LabelSelector{}
			}
		})
		// Both tenants name a credentials Secret holding ak and sk, read
		// as reconcileTenants reads it; a tenant whose Secret is refused
		// is left out of the file.
		secret := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "creds"},
			Data: map[string][]byte{"AWS_ACCESS_KEY_ID": []byte(ak), "AWS_SECRET_ACCESS_KEY": []byte(sk)}}
		creds, credsErr := credentialsFromSecret(secret, &cachev1alpha1.CredentialsSecretReference{Name: "creds"})
		cfg := tenancy.Config{Tenants: []tenancy.Tenant{}}
		decided := map[string]*cachev1alpha1.CacheTenant{}
		for _, d := range decideTenants(dc, tenants, nil) {
			if d.Reason != "" {
				continue
			}
			if decided[d.Name] != nil {
				t.Fatalf("tenant name %q admitted twice", d.Name)
			}
			if err := pki.ValidateName(d.Name); err != nil {
				t.Fatalf("admitted tenant name %q: %v", d.Name, err)
			}
			if credsErr != nil {
				continue
			}
			decided[d.Name] = d.Tenant
			entry, _ := tenantEntry(d, creds, false)
			cfg.Tenants = append(cfg.Tenants, entry)
		}
		doc, err := renderTenantsFile(&cfg)
		if err != nil {
			t.Fatalf("a tenants file for CacheTenants the API server accepts does not render: %v", err)
		}
		parsed, err := tenancy.Parse(doc)
		if err != nil {
			t.Fatal(err)
		}
		if len(parsed.Tenants) != len(decided) {
			t.Fatalf("%d tenants in the file, %d admitted", len(parsed.Tenants), len(decided))
		}
		for name, ct := range decided {
			got, ok := parsed.Tenant(name)
			if !ok {
				t.Fatalf("admitted tenant %q missing from the file", name)
			}
			want := slices.Sorted(slices.Values(ct.Spec.Buckets))
			if !slices.Equal(got.Buckets, want) {
				t.Fatalf("tenant %q: buckets %q, want %q", name, got.Buckets, want)
			}
			if wantQ := int64(0); ct.Spec.Quota != nil && got.QuotaBytes != ct.Spec.Quota.Value() || ct.Spec.Quota == nil && got.QuotaBytes != wantQ {
				t.Fatalf("tenant %q: quota %d, want %v", name, got.QuotaBytes, ct.Spec.Quota)
			}
			if !reflect.DeepEqual(got.Credentials, creds) {
				t.Fatalf("tenant %q: credentials changed on the way to the nodes: %#v, want %#v",
					name, fmt.Sprintf("%q/%q", got.Credentials.AccessKeyID, got.Credentials.SecretAccessKey), fmt.Sprintf("%q/%q", ak, sk))
			}
		}
	})
}

// FuzzBuildRing publishes a zone's ring from a DistributedCache the API
// server accepts, any set of its pods and any document found in the ring
// ConfigMap (which anyone with access may have edited or mangled). The
// document must always encode (otherwise the reconcile fails until a human
// repairs the ConfigMap), parse back with the nodes' parser to the same
// spec, keep the published seed, never go back in epoch when the
// membership changes, and make exactly the ready pods below spec.replicas
// active when there are any.
func FuzzBuildRing(f *testing.F) {
	valid := `{"epoch":4,"zone":"a","hash":{"algorithm":"rendezvous-xxhash64","seed":7},"members":[` +
		`{"name":"c-a-0","address":"c-a-0.c-a.ns.svc:8443","ordinal":0,"weight":100,"state":"active"},` +
		`{"name":"c-a-1","address":"c-a-1.c-a.ns.svc:8443","ordinal":1,"weight":100,"state":"active"}]}`
	f.Add("c", "a", uint16(3), uint32(0b111), uint32(0b111), valid, int64(4))
	f.Add("c", "a", uint16(2), uint32(0b111), uint32(0b011), valid, int64(0))
	f.Add("c", "a", uint16(3), uint32(0), uint32(0), valid, int64(9))
	f.Add("c", "a", uint16(3), uint32(0b1), uint32(0b1), "", int64(0))
	f.Add("c", "a", uint16(3), uint32(0b11), uint32(0b11), strings.Replace(valid, `"weight":100`, `"weight":0`, 1), int64(4))
	f.Add("c", "a", uint16(3), uint32(0b11), uint32(0b11), strings.Replace(valid, `"epoch":4`, `"epoch":-4`, 1), int64(0))
	f.Add("c", "a", uint16(3), uint32(0b101), uint32(0b101), strings.Replace(valid, `"state":"active"}]`, `"state":"gone"}]`, 1), int64(4))
	f.Add("c", "a", uint16(1), uint32(0b11), uint32(0b11), strings.Replace(valid, `c-a-1.c-a.ns.svc:8443`, `c-a-0.c-a.ns.svc:8443`, 1), int64(4))
	f.Add("c", "a", uint16(3), uint32(0b11), uint32(0b11), `{"epoch":4,"hash":{"algorithm":"rendezvous-xxhash64"},"members":[{"name":"Bad_Name","address":"x"}]}`, int64(0))
	f.Add("cache", "eu-west-1a", uint16(256), uint32(0xffffffff), uint32(0x0f0f0f0f), `{"epoch":9223372036854775807,"hash":{"algorithm":"rendezvous-xxhash64"},"members":[]}`, int64(0))
	f.Fuzz(func(t *testing.T, name, zone string, replicas uint16, exists, ready uint32, published string, minEpoch int64) {
		if !dns1035Label.MatchString(name) || len(name) > 63 || !dnsLabel.MatchString(zone) || len(zone) > 40 ||
			len(name)+len(zone) > 51 || replicas < 1 || replicas > 256 || minEpoch < 0 || minEpoch > 1<<40 {
			return
		}
		dc := testCache(func(dc *cachev1alpha1.DistributedCache) {
			dc.Name = name
			dc.Spec.Replicas = ptr.To(int32(replicas))
			dc.Spec.Zones = []cachev1alpha1.ZoneSpec{{Name: zone}}
		})
		var pods []zonePod
		for i := range 32 {
			if exists&(1<<i) != 0 {
				pods = append(pods, zonePod{Name: fmt.Sprintf("%s-%d", zoneObjectName(dc, zone), i), Ordinal: i, Ready: ready&(1<<i) != 0})
			}
		}
		prev := parsePublishedRing(published)
		next := buildRing(dc, zone, prev, minEpoch, pods)
		doc, err := encodeRing(next)
		if err != nil {
			t.Fatalf("the ring does not encode (the reconcile fails until the ConfigMap is repaired): %v\npublished: %s", err, published)
		}
		r, err := ring.Parse([]byte(doc))
		if err != nil {
			t.Fatalf("the nodes refuse the published ring: %v\n%s", err, doc)
		}
		if !reflect.DeepEqual(r.Spec(), next) {
			t.Fatalf("the nodes read another ring:\n%+v\n%+v", r.Spec(), next)
		}
		if prev != nil {
			if next.Hash.Seed != prev.Hash.Seed {
				t.Fatalf("seed %d became %d", prev.Hash.Seed, next.Hash.Seed)
			}
			if next.Epoch < prev.Epoch || next.Epoch != prev.Epoch && next.Epoch <= max(prev.Epoch, minEpoch) {
				t.Fatalf("epoch %d (status %d) became %d", prev.Epoch, minEpoch, next.Epoch)
			}
		} else if next.Epoch <= minEpoch {
			t.Fatalf("epoch %d after status epoch %d", next.Epoch, minEpoch)
		}
		var wantActive []string
		for _, p := range pods {
			if p.Ready && p.Ordinal < int(replicas) {
				wantActive = append(wantActive, p.Name)
			}
		}
		if len(wantActive) > 0 {
			var active []string
			for _, m := range next.Members {
				if m.State == ring.StateActive {
					active = append(active, m.Name)
				}
			}
			if !slices.Equal(active, wantActive) {
				t.Fatalf("active members %v, ready pods below %d replicas %v", active, replicas, wantActive)
			}
		}
	})
}
