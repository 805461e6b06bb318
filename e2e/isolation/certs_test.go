package isolation_test

import (
	"crypto"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"math/big"
	"net/url"
	"testing"
	"time"

	"github.com/distcache/distcache/internal/pki"
	"github.com/distcache/distcache/internal/testutil"
)

// certSpec describes a client certificate made by hand.
type certSpec struct {
	cn        string
	uris      []string
	dns       []string
	notBefore time.Time
	notAfter  time.Time
	// issuer signs it; nil means the cluster's CA.
	issuer    *x509.Certificate
	issuerKey crypto.Signer
	// chain is sent after the leaf (intermediates).
	chain [][]byte
	isCA  bool
}

// handMade issues a client certificate as spec says and returns a TLS
// configuration presenting it (and trusting the nodes).
func (e *env) handMade(t *testing.T, spec certSpec) (*tls.Config, *x509.Certificate, crypto.Signer) {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	testutil.Must(t, err)
	if spec.issuer == nil {
		spec.issuer, spec.issuerKey = e.c.CA.Cert, e.c.CA.Key
	}
	if spec.notBefore.IsZero() {
		spec.notBefore, spec.notAfter = time.Now().Add(-time.Minute), time.Now().Add(time.Hour)
	}
	var uris []*url.URL
	for _, s := range spec.uris {
		u, err := url.Parse(s)
		testutil.Must(t, err)
		uris = append(uris, u)
	}
	serial, _ := rand.Int(rand.Reader, big.NewInt(1<<62))
	tmpl := &x509.Certificate{
		SerialNumber: serial, Subject: pkix.Name{CommonName: spec.cn, Organization: []string{"distcache"}},
		NotBefore: spec.notBefore, NotAfter: spec.notAfter,
		KeyUsage:    x509.KeyUsageDigitalSignature | x509.KeyUsageCertSign,
		ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth}, BasicConstraintsValid: true, IsCA: spec.isCA,
		URIs: uris, DNSNames: spec.dns,
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, spec.issuer, key.Public(), spec.issuerKey)
	testutil.Must(t, err)
	cert, err := x509.ParseCertificate(der)
	testutil.Must(t, err)
	cfg := &tls.Config{
		MinVersion: tls.VersionTLS13, NextProtos: []string{"http/1.1"}, RootCAs: e.c.CA.CertPool(),
		Certificates: []tls.Certificate{{Certificate: append([][]byte{der}, spec.chain...), PrivateKey: key, Leaf: cert}},
	}
	return cfg, cert, key
}

const (
	uriA = "spiffe://distcache/tenant/team-a"
	uriB = "spiffe://distcache/tenant/team-b"
)

// certificateAttacks: identities that are not what they claim.
func certificateAttacks(e *env) []attack {
	const door = "certificate"
	t := e.t
	forbidden, rejected := []int{403}, []int{refused}
	target := "/v1/objects/bucket-b/secret.bin?chunk=0"
	other, err := pki.NewCA("another CA", time.Hour)
	testutil.Must(t, err)
	past := time.Now().Add(-48 * time.Hour)
	_, certA, keyA := e.handMade(t, certSpec{cn: "team-a", uris: []string{uriA}})
	// A certificate that tries to be a CA itself: team-a's, with CA rights
	// it should never have had, is not trusted either (the CA issues
	// leaves only, path length 0).
	_, certACA, keyACA := e.handMade(t, certSpec{cn: "team-a", uris: []string{uriA}, isCA: true})

	var out []attack
	add := func(name string, want []int, spec *certSpec) {
		var cfg *tls.Config
		if spec == nil { // no certificate at all
			cfg = &tls.Config{MinVersion: tls.VersionTLS13, NextProtos: []string{"http/1.1"}, RootCAs: e.c.CA.CertPool()}
		} else {
			cfg, _, _ = e.handMade(t, *spec)
		}
		out = append(out, attack{door: door, name: name, want: want, do: onAll(e, cfg, want, "GET", target, nil, nil)})
	}
	add("no client certificate", rejected, nil)
	add("team-b's name from another CA", rejected, &certSpec{cn: "team-b", uris: []string{uriB}, issuer: other.Cert, issuerKey: other.Key})
	add("team-b's expired certificate", rejected, &certSpec{cn: "team-b", uris: []string{uriB}, notBefore: past, notAfter: past.Add(time.Hour)})
	add("team-a's expired certificate", rejected, &certSpec{cn: "team-a", uris: []string{uriA}, notBefore: past, notAfter: past.Add(time.Hour)})
	add("team-b's certificate, not valid yet", rejected, &certSpec{cn: "team-b", uris: []string{uriB},
		notBefore: time.Now().Add(time.Hour), notAfter: time.Now().Add(2 * time.Hour)})
	add("team-b's name issued by team-a's certificate", rejected, &certSpec{cn: "team-b", uris: []string{uriB},
		issuer: certA, issuerKey: keyA, chain: [][]byte{certA.Raw}})
	add("team-b's name issued by a team-a certificate marked CA", rejected, &certSpec{cn: "team-b", uris: []string{uriB},
		issuer: certACA, issuerKey: keyACA, chain: [][]byte{certACA.Raw}})
	add("CN team-b, URI SAN team-a", forbidden, &certSpec{cn: "team-b", uris: []string{uriA}})
	add("CN team-b, no URI SAN", forbidden, &certSpec{cn: "team-b"})
	add("DNS SAN team-b, URI SAN team-a", forbidden, &certSpec{cn: "team-a", uris: []string{uriA}, dns: []string{"team-b", "spiffe.distcache.team-b"}})
	add("two URI SANs: team-a and team-b", forbidden, &certSpec{cn: "team-a", uris: []string{uriA, uriB}})
	add("two URI SANs: team-b and team-a", forbidden, &certSpec{cn: "team-a", uris: []string{uriB, uriA}})
	add("URI SANs team-a and SPIFFE://DISTCACHE/tenant/team-b", forbidden, &certSpec{cn: "team-a", uris: []string{uriA, "SPIFFE://DISTCACHE/tenant/team-b"}})
	add("URI SAN team-b in another trust domain, plus team-a", forbidden, &certSpec{cn: "team-a", uris: []string{"spiffe://evil/tenant/team-b", uriA}})
	add("URI SAN team-b in another trust domain only", forbidden, &certSpec{cn: "team-b", uris: []string{"spiffe://evil/tenant/team-b"}})
	add("URI SAN with escaped name (%74eam-b)", forbidden, &certSpec{cn: "team-b", uris: []string{"spiffe://distcache/tenant/%74eam-b"}})
	add("URI SAN tenant/team-b/ (trailing slash)", forbidden, &certSpec{cn: "team-b", uris: []string{"spiffe://distcache/tenant/team-b/"}})
	add("URI SAN tenant/team-a/../team-b", forbidden, &certSpec{cn: "team-b", uris: []string{"spiffe://distcache/tenant/team-a/../team-b"}})
	add("URI SAN TENANT/TEAM-B (upper case)", forbidden, &certSpec{cn: "team-b", uris: []string{"spiffe://distcache/TENANT/TEAM-B"}})
	add("URI SAN with user team-b@", forbidden, &certSpec{cn: "team-b", uris: []string{"spiffe://team-b@distcache/tenant/team-a"}})
	return out
}
