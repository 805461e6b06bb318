package pki

import (
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/distcache/distcache/internal/testutil"
)

func TestIdentityURIRoundTrip(t *testing.T) {
	for _, id := range []Identity{
		{Kind: KindTenant, Name: "clickhouse-prod"},
		{Kind: KindPeer, Name: "cache-0"},
		{Kind: KindTenant, Name: "a"},
		{Kind: KindPeer, Name: strings.Repeat("x", MaxNameLen)},
	} {
		u, err := url.Parse(id.String())
		testutil.Must(t, err)
		got, err := ParseIdentity(u)
		if err != nil {
			t.Errorf("ParseIdentity(%s): %v", u, err)
			continue
		}
		if got != id {
			t.Errorf("ParseIdentity(%s) = %+v, want %+v", u, got, id)
		}
	}
	if got := (Identity{Kind: KindTenant, Name: "t1"}).String(); got != "spiffe://distcache/tenant/t1" {
		t.Errorf("String() = %q", got)
	}
}

func TestParseIdentityRejects(t *testing.T) {
	for _, s := range []string{
		"https://distcache/tenant/a",
		"spiffe://other/tenant/a",
		"spiffe://distcache:443/tenant/a",
		"spiffe://user@distcache/tenant/a",
		"spiffe://distcache/tenant/a?x=1",
		"spiffe://distcache/tenant/a?",
		"spiffe://distcache/tenant/a#f",
		"spiffe://distcache/tenant/a/b",
		"spiffe://distcache/tenant/a%2Fb",
		"spiffe://distcache/tenant/%61",
		"spiffe://distcache/tenant/",
		"spiffe://distcache/tenant",
		"spiffe://distcache/admin/a",
		"spiffe://distcache//a",
		"spiffe://distcache/tenant/A",
		"spiffe://distcache/tenant/-a",
		"spiffe://distcache/tenant/a-",
		"spiffe://distcache/tenant/a.b",
		"spiffe://distcache/tenant/a_b",
		"spiffe://distcache/tenant/" + strings.Repeat("x", MaxNameLen+1),
		"spiffe:distcache/tenant/a",
	} {
		u, err := url.Parse(s)
		if err != nil {
			continue // unparsable is rejected too
		}
		if id, err := ParseIdentity(u); err == nil {
			t.Errorf("ParseIdentity(%q) = %+v, want error", s, id)
		}
	}
	if _, err := ParseIdentity(nil); err == nil {
		t.Error("nil URI accepted")
	}
}

func TestValidateName(t *testing.T) {
	for name, ok := range map[string]bool{
		"a": true, "a1": true, "1a": true, "a-b": true, "a--b": true,
		strings.Repeat("a", 63): true,
		"":                      false, "-": false, "-a": false, "a-": false, "A": false, "a.b": false,
		"a b": false, "a/b": false, "é": false, strings.Repeat("a", 64): false,
	} {
		if err := ValidateName(name); (err == nil) != ok {
			t.Errorf("ValidateName(%q) = %v, want ok=%v", name, err, ok)
		}
	}
}

// certWithURIs issues a client certificate from ca with exactly the given URI
// SANs, bypassing IssueClient's checks, to build certificates an attacker or
// a buggy issuer could produce.
func certWithURIs(t testing.TB, ca *CA, uris ...string) *Leaf {
	t.Helper()
	var parsed []*url.URL
	for _, s := range uris {
		u, err := url.Parse(s)
		testutil.Must(t, err)
		parsed = append(parsed, u)
	}
	l, err := ca.issue(leafTemplate{
		subject:     pkix.Name{CommonName: "crafted"},
		uris:        parsed,
		extKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth},
	}, time.Hour, issueOptions{})
	testutil.Must(t, err)
	return l
}

func TestIdentityFromState(t *testing.T) {
	ca := newTestCA(t)
	tests := []struct {
		name    string
		uris    []string
		want    Identity
		wantErr string
	}{
		{"tenant", []string{"spiffe://distcache/tenant/ch"}, Identity{KindTenant, "ch"}, ""},
		{"peer", []string{"spiffe://distcache/peer/cache-1"}, Identity{KindPeer, "cache-1"}, ""},
		{"foreign URIs ignored", []string{"https://example.com/x", "spiffe://distcache/tenant/ch", "spiffe://other/tenant/x"}, Identity{KindTenant, "ch"}, ""},
		{"no URI", nil, Identity{}, "no spiffe://distcache/ URI SAN"},
		{"only foreign URI", []string{"spiffe://other/tenant/ch"}, Identity{}, "no spiffe://distcache/ URI SAN"},
		{"two identities", []string{"spiffe://distcache/tenant/a", "spiffe://distcache/tenant/b"}, Identity{}, "several"},
		{"tenant and peer", []string{"spiffe://distcache/tenant/a", "spiffe://distcache/peer/a"}, Identity{}, "several"},
		{"look-alike counts as a second claim", []string{"spiffe://distcache/tenant/a", "SPIFFE://DistCache/peer/b"}, Identity{}, "several"},
		{"bad name", []string{"spiffe://distcache/tenant/Bad_Name"}, Identity{}, "not a DNS label"},
		{"bad kind", []string{"spiffe://distcache/admin/a"}, Identity{}, "unknown identity kind"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			cert := parseLeaf(t, certWithURIs(t, ca, tt.uris...))
			cs := &tls.ConnectionState{PeerCertificates: []*x509.Certificate{cert}, VerifiedChains: [][]*x509.Certificate{{cert, ca.Cert}}}
			got, err := IdentityFromState(cs)
			if tt.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
					t.Fatalf("err = %v, want one containing %q", err, tt.wantErr)
				}
				return
			}
			if err != nil || got != tt.want {
				t.Fatalf("IdentityFromState = %+v, %v; want %+v", got, err, tt.want)
			}
		})
	}
}

// The identity must come from the verified chain only: PeerCertificates are
// whatever the client sent.
func TestIdentityFromStateIgnoresUnverifiedCertificates(t *testing.T) {
	ca := newTestCA(t)
	tenant := parseLeaf(t, certWithURIs(t, ca, "spiffe://distcache/tenant/a"))
	bare := parseLeaf(t, certWithURIs(t, ca))
	for name, cs := range map[string]*tls.ConnectionState{
		"nil state":              nil,
		"peer certs only":        {PeerCertificates: []*x509.Certificate{tenant}},
		"empty verified chain":   {PeerCertificates: []*x509.Certificate{tenant}, VerifiedChains: [][]*x509.Certificate{{}}},
		"verified leaf has none": {PeerCertificates: []*x509.Certificate{tenant}, VerifiedChains: [][]*x509.Certificate{{bare, ca.Cert}}},
	} {
		if id, err := IdentityFromState(cs); err == nil {
			t.Errorf("%s: got %+v, want error", name, id)
		}
	}
}

func TestMiddlewareWithoutTLS(t *testing.T) {
	called := false
	h := Middleware(http.HandlerFunc(func(http.ResponseWriter, *http.Request) { called = true }))
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, httptest.NewRequest(http.MethodGet, "/", nil))
	if rec.Code != http.StatusForbidden || called {
		t.Errorf("status %d, handler called %v; want 403 and not called", rec.Code, called)
	}
	if !strings.Contains(rec.Body.String(), "not a TLS connection") {
		t.Errorf("body %q does not say why", rec.Body.String())
	}
}

func TestContext(t *testing.T) {
	if _, ok := FromContext(t.Context()); ok {
		t.Error("identity in empty context")
	}
	id := Identity{Kind: KindPeer, Name: "p"}
	if got, ok := FromContext(NewContext(t.Context(), id)); !ok || got != id {
		t.Errorf("FromContext = %+v, %v", got, ok)
	}
}
