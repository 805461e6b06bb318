package controllers

import (
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"

	"github.com/distcache/distcache/internal/pki"
)

func TestReissueReason(t *testing.T) {
	ca, err := pki.NewCA("test CA", 24*time.Hour*365)
	if err != nil {
		t.Fatal(err)
	}
	other, err := pki.NewCA("other CA", 24*time.Hour*365)
	if err != nil {
		t.Fatal(err)
	}
	peer := pki.Identity{Kind: pki.KindPeer, Name: "c"}
	names := []string{"*.c-a.ns.svc", "c.ns.svc"}
	issue := func(ca *pki.CA, dns []string, id pki.Identity, validity time.Duration) *corev1.Secret {
		l, err := ca.IssueServer("node", dns, nil, validity, pki.WithIdentity(id))
		if err != nil {
			t.Fatal(err)
		}
		return &corev1.Secret{Data: tlsSecretData(l, ca.CertPEM)}
	}
	now := time.Now()
	want := wantedCert{ca: ca, bundle: ca.CertPEM, dnsNames: names, identity: peer, renewBefore: 30 * 24 * time.Hour, now: now}
	good := issue(ca, names, peer, 90*24*time.Hour)

	for _, tt := range []struct {
		name   string
		secret *corev1.Secret
		want   wantedCert
		reason string // substring; "" = keep
	}{
		{"current", good, want, ""},
		{"missing", nil, want, "missing"},
		{"no certificate", &corev1.Secret{Data: map[string][]byte{}}, want, "no certificate"},
		{"key of another certificate", func() *corev1.Secret {
			s := issue(ca, names, peer, 90*24*time.Hour)
			s.Data[corev1.TLSPrivateKeyKey] = good.Data[corev1.TLSPrivateKeyKey]
			return s
		}(), want, "private key"},
		{"other CA", func() *corev1.Secret {
			s := issue(other, names, peer, 90*24*time.Hour)
			s.Data[caCertKey] = ca.CertPEM
			return s
		}(), want, "not signed by the cache's CA"},
		// A CA rotation changes the bundle first: the certificate stays
		// (bundleUpdate rewrites ca.crt).
		{"stale CA bundle", func() *corev1.Secret {
			s := issue(ca, names, peer, 90*24*time.Hour)
			s.Data[caCertKey] = other.CertPEM
			return s
		}(), want, ""},
		{"other identity", issue(ca, names, pki.Identity{Kind: pki.KindPeer, Name: "d"}, 90*24*time.Hour), want, "identity"},
		{"zone added", good, func() wantedCert {
			w := want
			w.dnsNames = []string{"*.c-a.ns.svc", "*.c-b.ns.svc", "c.ns.svc"}
			return w
		}(), "DNS names"},
		{"inside the renewal window", good, func() wantedCert {
			w := want
			w.now = now.Add(61 * 24 * time.Hour)
			return w
		}(), "renewal window"},
		{"just before the renewal window", good, func() wantedCert {
			w := want
			w.now = now.Add(59 * 24 * time.Hour)
			return w
		}(), ""},
		// renewBefore longer than the lifetime: renew at 2/3 of it, not on
		// every reconcile.
		{"renewBefore beyond the lifetime, early", issue(ca, names, peer, 3*time.Hour), func() wantedCert {
			w := want
			w.now = now.Add(time.Hour)
			return w
		}(), ""},
		{"renewBefore beyond the lifetime, late", issue(ca, names, peer, 3*time.Hour), func() wantedCert {
			w := want
			w.now = now.Add(3 * time.Hour)
			return w
		}(), "renewal window"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			got, _ := reissueReason(tt.secret, tt.want)
			if tt.reason == "" && got != "" || !strings.Contains(got, tt.reason) {
				t.Fatalf("reissueReason = %q, want %q", got, tt.reason)
			}
		})
	}
}

func TestBundleUpdate(t *testing.T) {
	s := &corev1.Secret{Data: map[string][]byte{corev1.TLSCertKey: []byte("cert"), caCertKey: []byte("old")}}
	if got := bundleUpdate(s, []byte("old")); got != nil {
		t.Fatalf("current bundle: got %v, want nil", got)
	}
	got := bundleUpdate(s, []byte("old+new"))
	if string(got[caCertKey]) != "old+new" || string(got[corev1.TLSCertKey]) != "cert" || string(s.Data[caCertKey]) != "old" {
		t.Fatalf("got %q, Secret now %q", got, s.Data)
	}
}

func TestNodeDNSNames(t *testing.T) {
	got := nodeDNSNames(testCache(nil))
	want := []string{
		"*.c-a.ns.svc", "*.c-a.ns.svc.cluster.local", "*.c-b.ns.svc", "*.c-b.ns.svc.cluster.local",
		"c", "c-a.ns.svc", "c-a.ns.svc.cluster.local", "c-b.ns.svc", "c-b.ns.svc.cluster.local",
		"c.ns", "c.ns.svc", "c.ns.svc.cluster.local",
	}
	if strings.Join(got, ",") != strings.Join(want, ",") {
		t.Fatalf("nodeDNSNames = %v, want %v", got, want)
	}
}
