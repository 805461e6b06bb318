package pki

import (
	"bytes"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/x509"
	"encoding/pem"
	"net"
	"os"
	"path/filepath"
	"slices"
	"testing"
	"time"

	"github.com/distcache/distcache/internal/testutil"
)

func newTestCA(t testing.TB) *CA {
	t.Helper()
	ca, err := NewCA("distcache test CA", 24*time.Hour)
	testutil.Must(t, err)
	return ca
}

func parseLeaf(t testing.TB, l *Leaf) *x509.Certificate {
	t.Helper()
	cert, err := firstCertificate(l.CertPEM)
	testutil.Must(t, err)
	return cert
}

func TestNewCA(t *testing.T) {
	before := time.Now()
	ca := newTestCA(t)
	c := ca.Cert
	if !c.IsCA || !c.BasicConstraintsValid || c.MaxPathLen != 0 || !c.MaxPathLenZero {
		t.Errorf("basic constraints: IsCA=%v valid=%v maxPathLen=%d zero=%v", c.IsCA, c.BasicConstraintsValid, c.MaxPathLen, c.MaxPathLenZero)
	}
	if c.KeyUsage&x509.KeyUsageCertSign == 0 || c.KeyUsage&x509.KeyUsageCRLSign == 0 {
		t.Errorf("key usage %b lacks certSign or cRLSign", c.KeyUsage)
	}
	pub, ok := c.PublicKey.(*ecdsa.PublicKey)
	if !ok || pub.Curve != elliptic.P256() {
		t.Errorf("public key %T is not ECDSA P-256", c.PublicKey)
	}
	if len(c.SubjectKeyId) != 20 || !bytes.Equal(c.SubjectKeyId, c.AuthorityKeyId) {
		t.Errorf("SKID %x AKID %x", c.SubjectKeyId, c.AuthorityKeyId)
	}
	if c.SerialNumber.Sign() <= 0 || c.SerialNumber.BitLen() > 128 {
		t.Errorf("serial %v", c.SerialNumber)
	}
	if skew := before.Sub(c.NotBefore); skew < ClockSkew-time.Second {
		t.Errorf("NotBefore backdated by %v, want about %v", skew, ClockSkew)
	}
	if err := c.CheckSignatureFrom(c); err != nil {
		t.Errorf("not self-signed: %v", err)
	}
	if _, err := LoadCA(ca.CertPEM, ca.KeyPEM); err != nil {
		t.Errorf("LoadCA of NewCA output: %v", err)
	}
}

func TestNewCARejectsBadArguments(t *testing.T) {
	if _, err := NewCA("", time.Hour); err == nil {
		t.Error("empty common name accepted")
	}
	if _, err := NewCA("x", 0); err == nil {
		t.Error("zero validity accepted")
	}
}

func TestIssueServer(t *testing.T) {
	ca := newTestCA(t)
	peer := Identity{Kind: KindPeer, Name: "cache-0"}
	l, err := ca.IssueServer("cache-0", []string{"cache-0.cache.ns.svc"}, []net.IP{net.IPv4(127, 0, 0, 1)}, time.Hour, WithIdentity(peer))
	testutil.Must(t, err)
	c := parseLeaf(t, l)
	if c.IsCA {
		t.Error("leaf is a CA")
	}
	if c.KeyUsage != x509.KeyUsageDigitalSignature {
		t.Errorf("key usage %b, want digitalSignature", c.KeyUsage)
	}
	if want := []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth, x509.ExtKeyUsageClientAuth}; !slices.Equal(c.ExtKeyUsage, want) {
		t.Errorf("ext key usage %v, want %v", c.ExtKeyUsage, want)
	}
	if !bytes.Equal(c.AuthorityKeyId, ca.Cert.SubjectKeyId) || len(c.SubjectKeyId) == 0 {
		t.Errorf("AKID %x (CA SKID %x), SKID %x", c.AuthorityKeyId, ca.Cert.SubjectKeyId, c.SubjectKeyId)
	}
	if len(c.URIs) != 1 || c.URIs[0].String() != "spiffe://distcache/peer/cache-0" {
		t.Errorf("URIs %v", c.URIs)
	}
	if !l.NotAfter.Equal(c.NotAfter) {
		t.Errorf("Leaf.NotAfter %v, certificate %v", l.NotAfter, c.NotAfter)
	}
	for _, usage := range []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth, x509.ExtKeyUsageClientAuth} {
		if _, err := c.Verify(x509.VerifyOptions{Roots: ca.CertPool(), DNSName: "cache-0.cache.ns.svc", KeyUsages: []x509.ExtKeyUsage{usage}}); err != nil {
			t.Errorf("verify for %v: %v", usage, err)
		}
	}
	if err := c.VerifyHostname("127.0.0.1"); err != nil {
		t.Error(err)
	}

	if _, err := ca.IssueServer("x", nil, nil, time.Hour); err == nil {
		t.Error("server certificate without names accepted")
	}
}

func TestIssueClient(t *testing.T) {
	ca := newTestCA(t)
	l, err := ca.IssueClient(Identity{Kind: KindTenant, Name: "clickhouse-prod"}, time.Hour)
	testutil.Must(t, err)
	c := parseLeaf(t, l)
	if len(c.URIs) != 1 || c.URIs[0].String() != "spiffe://distcache/tenant/clickhouse-prod" {
		t.Errorf("URIs %v", c.URIs)
	}
	if !slices.Equal(c.ExtKeyUsage, []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth}) {
		t.Errorf("ext key usage %v, want client auth only", c.ExtKeyUsage)
	}
	if _, err := c.Verify(x509.VerifyOptions{Roots: ca.CertPool(), KeyUsages: []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth}}); err != nil {
		t.Error(err)
	}
	if _, err := c.Verify(x509.VerifyOptions{Roots: ca.CertPool(), KeyUsages: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth}}); err == nil {
		t.Error("client certificate verifies for server auth")
	}

	for _, id := range []Identity{{Kind: "admin", Name: "x"}, {Kind: KindTenant, Name: "Bad_Name"}, {Kind: KindPeer}} {
		if _, err := ca.IssueClient(id, time.Hour); err == nil {
			t.Errorf("IssueClient(%+v) accepted", id)
		}
	}
	if _, err := ca.IssueClient(Identity{Kind: KindTenant, Name: "a"}, time.Hour, WithIdentity(Identity{Kind: KindPeer, Name: "b"})); err == nil {
		t.Error("IssueClient with WithIdentity accepted")
	}
}

func TestSerialsAreRandom(t *testing.T) {
	ca := newTestCA(t)
	seen := map[string]bool{ca.Cert.SerialNumber.String(): true}
	for range 20 {
		l, err := ca.IssueClient(Identity{Kind: KindTenant, Name: "t"}, time.Hour)
		testutil.Must(t, err)
		s := parseLeaf(t, l).SerialNumber
		if seen[s.String()] {
			t.Fatalf("serial %v issued twice", s)
		}
		seen[s.String()] = true
	}
}

func TestValidityWindow(t *testing.T) {
	ca := newTestCA(t) // valid for 24h
	id := Identity{Kind: KindTenant, Name: "t"}

	l, err := ca.IssueClient(id, 365*24*time.Hour)
	testutil.Must(t, err)
	if c := parseLeaf(t, l); !c.NotAfter.Equal(ca.Cert.NotAfter) || !l.NotAfter.Equal(ca.Cert.NotAfter) {
		t.Errorf("NotAfter %v not clamped to the CA's %v", c.NotAfter, ca.Cert.NotAfter)
	}

	nb := time.Now().Add(-time.Hour).Truncate(time.Second)
	na := nb.Add(30 * time.Minute)
	l, err = ca.IssueClientWindow(id, nb, na)
	testutil.Must(t, err)
	if c := parseLeaf(t, l); !c.NotBefore.Equal(nb) || !c.NotAfter.Equal(na) {
		t.Errorf("window %v..%v, want %v..%v", c.NotBefore, c.NotAfter, nb, na)
	}

	if _, err := ca.IssueClientWindow(id, na, nb); err == nil {
		t.Error("inverted window accepted")
	}
	if _, err := ca.IssueClient(id, 0); err == nil {
		t.Error("zero validity accepted")
	}
}

func TestLoadCA(t *testing.T) {
	ca := newTestCA(t)
	other := newTestCA(t)

	loaded, err := LoadCA(ca.CertPEM, ca.KeyPEM)
	testutil.Must(t, err)
	l, err := loaded.IssueClient(Identity{Kind: KindTenant, Name: "t"}, time.Hour)
	testutil.Must(t, err)
	if err := parseLeaf(t, l).CheckSignatureFrom(ca.Cert); err != nil {
		t.Errorf("leaf from loaded CA: %v", err)
	}

	// SEC 1 ("EC PRIVATE KEY") as cert-manager writes it.
	der, err := x509.MarshalECPrivateKey(ca.Key.(*ecdsa.PrivateKey))
	testutil.Must(t, err)
	if _, err := LoadCA(ca.CertPEM, pem.EncodeToMemory(&pem.Block{Type: "EC PRIVATE KEY", Bytes: der})); err != nil {
		t.Errorf("SEC 1 key: %v", err)
	}

	if _, err := LoadCA(ca.CertPEM, other.KeyPEM); err == nil {
		t.Error("mismatched key accepted")
	}
	leaf, err := ca.IssueServer("s", []string{"s"}, nil, time.Hour)
	testutil.Must(t, err)
	if _, err := LoadCA(leaf.CertPEM, leaf.KeyPEM); err == nil {
		t.Error("non-CA certificate accepted as CA")
	}
	if _, err := LoadCA([]byte("garbage"), ca.KeyPEM); err == nil {
		t.Error("garbage certificate accepted")
	}
	if _, err := LoadCA(ca.CertPEM, []byte("garbage")); err == nil {
		t.Error("garbage key accepted")
	}
}

func TestWriteFiles(t *testing.T) {
	ca := newTestCA(t)
	l, err := ca.IssueClient(Identity{Kind: KindTenant, Name: "t"}, time.Hour)
	testutil.Must(t, err)
	dir := filepath.Join(t.TempDir(), "certs")
	if err := WriteFiles(dir, "tenant", l); err != nil {
		t.Fatal(err)
	}
	for file, want := range map[string]struct {
		data []byte
		perm os.FileMode
	}{
		"tenant.crt": {l.CertPEM, 0o644},
		"tenant.key": {l.KeyPEM, 0o600},
	} {
		path := filepath.Join(dir, file)
		fi, err := os.Stat(path)
		testutil.Must(t, err)
		if fi.Mode().Perm() != want.perm {
			t.Errorf("%s mode %v, want %v", file, fi.Mode().Perm(), want.perm)
		}
		if got, _ := os.ReadFile(path); !bytes.Equal(got, want.data) {
			t.Errorf("%s content differs", file)
		}
	}
	entries, err := os.ReadDir(dir)
	testutil.Must(t, err)
	if len(entries) != 2 {
		t.Errorf("%d files in dir, want 2 (no temporary files left)", len(entries))
	}
	for _, bad := range []string{"", "..", "a/b"} {
		if err := WriteFiles(dir, bad, l); err == nil {
			t.Errorf("name %q accepted", bad)
		}
	}
}
