package pki

import (
	"crypto/tls"
	"crypto/x509"
	"fmt"
	"io"
	"log"
	"math/big"
	"net"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/distcache/distcache/internal/testutil"
)

// waitTimeout bounds every wait for an event. It is generous on purpose:
// tests wait for behaviour, they never assert on timing.
const waitTimeout = 20 * time.Second

// testPKI is a CA with a server key pair on disk.
type testPKI struct {
	dir    string
	ca     *CA
	caFile string
	// server key pair files
	crt, key string
}

func newTestPKI(t *testing.T) *testPKI {
	t.Helper()
	p := &testPKI{dir: t.TempDir(), ca: newTestCA(t)}
	p.caFile = filepath.Join(p.dir, "ca.crt")
	if err := os.WriteFile(p.caFile, p.ca.CertPEM, 0o644); err != nil {
		t.Fatal(err)
	}
	p.crt, p.key = p.writeServer(t)
	return p
}

// writeServer issues a new server certificate for 127.0.0.1 and writes it
// over the server key pair files. It returns the files.
func (p *testPKI) writeServer(t *testing.T) (crt, key string) {
	t.Helper()
	l, err := p.ca.IssueServer("cache-0", []string{"localhost"}, []net.IP{net.IPv4(127, 0, 0, 1)}, time.Hour,
		WithIdentity(Identity{Kind: KindPeer, Name: "cache-0"}))
	testutil.Must(t, err)
	p.writeLeaf(t, "server", l)
	return filepath.Join(p.dir, "server.crt"), filepath.Join(p.dir, "server.key")
}

func (p *testPKI) writeLeaf(t *testing.T, name string, l *Leaf) (crt, key string) {
	t.Helper()
	if err := WriteFiles(p.dir, name, l); err != nil {
		t.Fatal(err)
	}
	return filepath.Join(p.dir, name+".crt"), filepath.Join(p.dir, name+".key")
}

// clientConfig writes l and returns a ClientTLSConfig using it.
func (p *testPKI) clientConfig(t *testing.T, name string, l *Leaf) *tls.Config {
	t.Helper()
	crt, key := p.writeLeaf(t, name, l)
	cfg, err := ClientTLSConfig(crt, key, p.caFile)
	testutil.Must(t, err)
	return cfg
}

func (p *testPKI) tenantConfig(t *testing.T, name string) *tls.Config {
	t.Helper()
	l, err := p.ca.IssueClient(Identity{Kind: KindTenant, Name: name}, time.Hour)
	testutil.Must(t, err)
	return p.clientConfig(t, "tenant-"+name, l)
}

// testServer is an HTTPS server using a ServerTLSConfig and Middleware. Its
// handler answers "<kind> <name> <tls version> <alpn>".
type testServer struct {
	url       string
	tlsErrors chan string // TLS handshake errors logged by the http.Server
}

func startServer(t *testing.T, cfg *tls.Config) *testServer {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	testutil.Must(t, err)
	s := &testServer{url: "https://" + ln.Addr().String() + "/", tlsErrors: make(chan string, 64)}
	srv := &http.Server{
		Handler: Middleware(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			id, ok := FromContext(r.Context())
			if !ok {
				http.Error(w, "no identity in context", http.StatusInternalServerError)
				return
			}
			fmt.Fprintf(w, "%s %s %x %s", id.Kind, id.Name, r.TLS.Version, r.TLS.NegotiatedProtocol)
		})),
		TLSConfig:         cfg,
		ReadHeaderTimeout: waitTimeout,
		ErrorLog:          log.New(chanWriter(s.tlsErrors), "", 0),
	}
	go func() { _ = srv.ServeTLS(ln, "", "") }()
	t.Cleanup(func() { _ = srv.Close() })
	return s
}

type chanWriter chan string

func (c chanWriter) Write(p []byte) (int, error) {
	select {
	case c <- string(p):
	default:
	}
	return len(p), nil
}

// get makes one request on a new connection and returns the body, the status
// and the server's certificate.
func get(t *testing.T, s *testServer, cfg *tls.Config) (string, int, *x509.Certificate, error) {
	t.Helper()
	tr := &http.Transport{TLSClientConfig: cfg, DisableKeepAlives: true}
	defer tr.CloseIdleConnections()
	c := &http.Client{Transport: tr, Timeout: waitTimeout}
	resp, err := c.Get(s.url)
	if err != nil {
		return "", 0, nil, err
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		return "", 0, nil, err
	}
	return strings.TrimSpace(string(body)), resp.StatusCode, resp.TLS.PeerCertificates[0], nil
}

// wantHandshakeError checks that a request fails and that the server logged
// a TLS handshake error containing want.
func wantHandshakeError(t *testing.T, s *testServer, cfg *tls.Config, want string) {
	t.Helper()
	if body, code, _, err := get(t, s, cfg); err == nil {
		t.Fatalf("request succeeded (%d %q), want a failed handshake", code, body)
	}
	deadline := time.After(waitTimeout)
	for {
		select {
		case msg := <-s.tlsErrors:
			if strings.Contains(msg, "TLS handshake error") && strings.Contains(msg, want) {
				return
			}
			t.Logf("server log: %s", msg)
		case <-deadline:
			t.Fatalf("no server TLS handshake error containing %q", want)
		}
	}
}

func newServer(t *testing.T, p *testPKI) *testServer {
	t.Helper()
	cfg, err := ServerTLSConfig(p.crt, p.key, p.caFile)
	testutil.Must(t, err)
	return startServer(t, cfg)
}

func TestTenantAndPeerAccepted(t *testing.T) {
	p := newTestPKI(t)
	s := newServer(t, p)

	peerLeaf, err := p.ca.IssueClient(Identity{Kind: KindPeer, Name: "gateway-a"}, time.Hour)
	testutil.Must(t, err)
	// A node's serving certificate doubles as its peer client certificate.
	nodeCfg, err := ClientTLSConfig(p.crt, p.key, p.caFile)
	testutil.Must(t, err)
	for cfg, want := range map[*tls.Config]string{
		p.tenantConfig(t, "clickhouse-prod"): "tenant clickhouse-prod",
		p.clientConfig(t, "peer", peerLeaf):  "peer gateway-a",
		nodeCfg:                              "peer cache-0",
	} {
		body, code, _, err := get(t, s, cfg)
		if err != nil {
			t.Fatalf("%s: %v", want, err)
		}
		if code != http.StatusOK || !strings.HasPrefix(body, want+" ") {
			t.Errorf("got %d %q, want 200 %q", code, body, want)
		}
	}
}

func TestTLS13AndHTTP11Only(t *testing.T) {
	p := newTestPKI(t)
	s := newServer(t, p)

	cfg := p.tenantConfig(t, "t")
	cfg.NextProtos = []string{"h2", "http/1.1"} // the server must still pick http/1.1
	body, _, _, err := get(t, s, cfg)
	testutil.Must(t, err)
	if want := fmt.Sprintf("tenant t %x http/1.1", tls.VersionTLS13); body != want {
		t.Errorf("got %q, want %q", body, want)
	}

	old := p.tenantConfig(t, "t")
	old.MinVersion, old.MaxVersion = tls.VersionTLS12, tls.VersionTLS12
	wantHandshakeError(t, s, old, "unsupported versions")
}

func TestHandshakeRejections(t *testing.T) {
	p := newTestPKI(t)
	s := newServer(t, p)

	t.Run("no client certificate", func(t *testing.T) {
		cfg := &tls.Config{RootCAs: p.ca.CertPool(), MinVersion: tls.VersionTLS13}
		wantHandshakeError(t, s, cfg, "client didn't provide a certificate")
	})
	t.Run("other CA", func(t *testing.T) {
		other := newTestCA(t)
		l, err := other.IssueClient(Identity{Kind: KindTenant, Name: "t"}, time.Hour)
		testutil.Must(t, err)
		wantHandshakeError(t, s, p.clientConfig(t, "foreign", l), "certificate signed by unknown authority")
	})
	t.Run("expired", func(t *testing.T) {
		l, err := p.ca.IssueClientWindow(Identity{Kind: KindTenant, Name: "t"}, time.Now().Add(-2*time.Hour), time.Now().Add(-time.Hour))
		testutil.Must(t, err)
		wantHandshakeError(t, s, p.clientConfig(t, "expired", l), "expired or is not yet valid")
	})
	t.Run("not yet valid", func(t *testing.T) {
		l, err := p.ca.IssueClientWindow(Identity{Kind: KindTenant, Name: "t"}, time.Now().Add(time.Hour), time.Now().Add(2*time.Hour))
		testutil.Must(t, err)
		wantHandshakeError(t, s, p.clientConfig(t, "future", l), "expired or is not yet valid")
	})
	t.Run("server-auth-only certificate", func(t *testing.T) {
		l := p.leafWithUsage(t, x509.ExtKeyUsageServerAuth)
		wantHandshakeError(t, s, p.clientConfig(t, "serveronly", l), "incompatible key usage")
	})
}

// leafWithUsage issues a tenant certificate with only the given ext key usage.
func (p *testPKI) leafWithUsage(t *testing.T, usage x509.ExtKeyUsage) *Leaf {
	t.Helper()
	id := Identity{Kind: KindTenant, Name: "t"}
	l, err := p.ca.issue(leafTemplate{uris: []*url.URL{id.URI()}, extKeyUsage: []x509.ExtKeyUsage{usage}}, time.Hour, issueOptions{})
	testutil.Must(t, err)
	return l
}

func TestForbiddenWithoutValidIdentity(t *testing.T) {
	p := newTestPKI(t)
	s := newServer(t, p)
	for name, uris := range map[string][]string{
		"no URI SAN":       nil,
		"two identities":   {"spiffe://distcache/tenant/a", "spiffe://distcache/tenant/b"},
		"invalid name":     {"spiffe://distcache/tenant/Not_A_Label"},
		"other trust root": {"spiffe://example.org/tenant/a"},
	} {
		t.Run(name, func(t *testing.T) {
			cfg := p.clientConfig(t, "crafted", certWithURIs(t, p.ca, uris...))
			body, code, _, err := get(t, s, cfg)
			testutil.Must(t, err)
			if code != http.StatusForbidden || !strings.Contains(body, "no valid distcache client identity") {
				t.Errorf("got %d %q, want 403 with a reason", code, body)
			}
		})
	}
}

// waitForSerial polls new connections until the server presents want.
func waitForSerial(t *testing.T, s *testServer, cfg *tls.Config, want *big.Int) {
	t.Helper()
	deadline := time.Now().Add(waitTimeout)
	for {
		_, _, cert, err := get(t, s, cfg)
		var got *big.Int
		if err == nil {
			got = cert.SerialNumber
		}
		if got != nil && got.Cmp(want) == 0 {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("server never presented serial %v (last: serial %v, err %v)", want, got, err)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

func serialOf(t *testing.T, file string) *big.Int {
	t.Helper()
	data, err := os.ReadFile(file)
	testutil.Must(t, err)
	c, err := firstCertificate(data)
	testutil.Must(t, err)
	return c.SerialNumber
}

func TestServerCertificateRotation(t *testing.T) {
	p := newTestPKI(t)
	s := newServer(t, p)
	client := p.tenantConfig(t, "t")
	first := serialOf(t, p.crt)
	waitForSerial(t, s, client, first)

	// Atomic replacement (rename), as WriteFiles does.
	p.writeServer(t)
	second := serialOf(t, p.crt)
	waitForSerial(t, s, client, second)

	// Broken files keep the last good certificate.
	if err := os.WriteFile(p.crt, []byte("not a certificate"), 0o644); err != nil {
		t.Fatal(err)
	}
	waitForSerial(t, s, client, second)

	// In-place rewrite, possibly within one file timestamp tick.
	l, err := p.ca.IssueServer("cache-0", nil, []net.IP{net.IPv4(127, 0, 0, 1)}, time.Hour)
	testutil.Must(t, err)
	if err := os.WriteFile(p.key, l.KeyPEM, 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(p.crt, l.CertPEM, 0o644); err != nil {
		t.Fatal(err)
	}
	waitForSerial(t, s, client, parseLeaf(t, l).SerialNumber)
}

// A mounted Kubernetes Secret: the files are symlinks through ..data, which
// the kubelet swaps atomically to a new timestamped directory.
func TestServerCertificateRotationKubernetesSecret(t *testing.T) {
	p := newTestPKI(t)
	secret := t.TempDir()
	gen := 0
	publish := func(l *Leaf) {
		gen++
		ts := fmt.Sprintf("..2026_01_01_00_00_%02d.%d", gen, gen)
		if err := os.Mkdir(filepath.Join(secret, ts), 0o755); err != nil {
			t.Fatal(err)
		}
		for name, data := range map[string][]byte{"tls.crt": l.CertPEM, "tls.key": l.KeyPEM, "ca.crt": p.ca.CertPEM} {
			if err := os.WriteFile(filepath.Join(secret, ts, name), data, 0o644); err != nil {
				t.Fatal(err)
			}
		}
		if err := os.Symlink(ts, filepath.Join(secret, "..data_tmp")); err != nil {
			t.Fatal(err)
		}
		if err := os.Rename(filepath.Join(secret, "..data_tmp"), filepath.Join(secret, "..data")); err != nil {
			t.Fatal(err)
		}
		if gen == 1 {
			for _, name := range []string{"tls.crt", "tls.key", "ca.crt"} {
				if err := os.Symlink(filepath.Join("..data", name), filepath.Join(secret, name)); err != nil {
					t.Fatal(err)
				}
			}
		}
	}
	issue := func() *Leaf {
		l, err := p.ca.IssueServer("cache-0", nil, []net.IP{net.IPv4(127, 0, 0, 1)}, time.Hour)
		testutil.Must(t, err)
		return l
	}

	l1 := issue()
	publish(l1)
	cfg, err := ServerTLSConfig(filepath.Join(secret, "tls.crt"), filepath.Join(secret, "tls.key"), filepath.Join(secret, "ca.crt"))
	testutil.Must(t, err)
	s := startServer(t, cfg)
	client := p.tenantConfig(t, "t")
	waitForSerial(t, s, client, parseLeaf(t, l1).SerialNumber)

	l2 := issue()
	publish(l2)
	if err := os.RemoveAll(filepath.Join(secret, "..2026_01_01_00_00_01.1")); err != nil {
		t.Fatal(err)
	}
	waitForSerial(t, s, client, parseLeaf(t, l2).SerialNumber)
}

func TestClientCARotation(t *testing.T) {
	p := newTestPKI(t)
	s := newServer(t, p)
	oldClient := p.tenantConfig(t, "t")
	if _, code, _, err := get(t, s, oldClient); err != nil || code != http.StatusOK {
		t.Fatalf("before rotation: %d %v", code, err)
	}

	newCA := newTestCA(t)
	l, err := newCA.IssueClient(Identity{Kind: KindTenant, Name: "t"}, time.Hour)
	testutil.Must(t, err)
	newClient := p.clientConfig(t, "new-ca-client", l)
	// The client CA file now trusts only the new CA.
	if err := writeFileAtomic(p.caFile, newCA.CertPEM, 0o644); err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(waitTimeout)
	for {
		_, code, _, err := get(t, s, newClient)
		if err == nil && code == http.StatusOK {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("client of the new CA never accepted: %d %v", code, err)
		}
		time.Sleep(10 * time.Millisecond)
	}
	wantHandshakeError(t, s, oldClient, "certificate signed by unknown authority")
}

func TestClientCertificateRotation(t *testing.T) {
	p := newTestPKI(t)
	s := newServer(t, p)
	issue := func(name string) *Leaf {
		l, err := p.ca.IssueClient(Identity{Kind: KindTenant, Name: name}, time.Hour)
		testutil.Must(t, err)
		return l
	}
	cfg := p.clientConfig(t, "client", issue("first"))
	if body, _, _, err := get(t, s, cfg); err != nil || !strings.HasPrefix(body, "tenant first ") {
		t.Fatalf("got %q, %v", body, err)
	}
	p.writeLeaf(t, "client", issue("second"))
	deadline := time.Now().Add(waitTimeout)
	for {
		body, _, _, err := get(t, s, cfg)
		if err == nil && strings.HasPrefix(body, "tenant second ") {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("rotated client certificate never used: %q, %v", body, err)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

func TestTLSConfigLoadErrors(t *testing.T) {
	p := newTestPKI(t)
	missing := filepath.Join(p.dir, "missing")
	other := newTestCA(t)
	otherKey := filepath.Join(p.dir, "other.key")
	if err := os.WriteFile(otherKey, other.KeyPEM, 0o600); err != nil {
		t.Fatal(err)
	}
	for name, files := range map[string][3]string{
		"missing cert":      {missing, p.key, p.caFile},
		"missing key":       {p.crt, missing, p.caFile},
		"missing CA":        {p.crt, p.key, missing},
		"mismatched key":    {p.crt, otherKey, p.caFile},
		"CA file not a PEM": {p.crt, p.key, p.key},
	} {
		if _, err := ServerTLSConfig(files[0], files[1], files[2]); err == nil {
			t.Errorf("ServerTLSConfig with %s: no error", name)
		}
		if _, err := ClientTLSConfig(files[0], files[1], files[2]); err == nil {
			t.Errorf("ClientTLSConfig with %s: no error", name)
		}
	}
	if _, err := ServerTLSConfig(p.crt, p.key, ""); err == nil {
		t.Error("ServerTLSConfig without client CA: no error")
	}
}

// A CA rotation as the operator runs it: the bundle gains the new CA, every
// certificate is reissued from it, the old CA leaves the bundle. A ClientTLS
// follows each step without a restart; a configuration built before the
// rotation cannot verify the reissued server.
func TestClientTLSFollowsCARotation(t *testing.T) {
	p := newTestPKI(t)
	s := newServer(t, p)
	issueTenant := func(ca *CA) (crt, key string) {
		l, err := ca.IssueClient(Identity{Kind: KindTenant, Name: "t"}, time.Hour)
		testutil.Must(t, err)
		return p.writeLeaf(t, "tenant", l)
	}
	crt, key := issueTenant(p.ca)
	c, err := NewClientTLS(crt, key, p.caFile)
	testutil.Must(t, err)
	built, err := ClientTLSConfig(crt, key, p.caFile)
	testutil.Must(t, err)
	for _, cfg := range []*tls.Config{c.Config(), built} {
		if _, code, _, err := get(t, s, cfg); err != nil || code != http.StatusOK {
			t.Fatalf("before rotation: %d %v", code, err)
		}
	}
	// getFrom asks until the server answers with a certificate of ca.
	getFrom := func(step string, ca *CA) {
		t.Helper()
		deadline := time.Now().Add(waitTimeout)
		for {
			_, code, cert, err := get(t, s, c.Config())
			if err == nil && code == http.StatusOK && cert.CheckSignatureFrom(ca.Cert) == nil {
				return
			}
			if time.Now().After(deadline) {
				t.Fatalf("%s: %d %v", step, code, err)
			}
			time.Sleep(10 * time.Millisecond)
		}
	}

	newCA := newTestCA(t)
	if err := writeFileAtomic(p.caFile, append(append([]byte{}, p.ca.CertPEM...), newCA.CertPEM...), 0o644); err != nil {
		t.Fatal(err)
	}
	getFrom("both CAs trusted, certificates of the old", p.ca)
	p.ca = newCA
	p.writeServer(t)
	issueTenant(newCA)
	getFrom("both CAs trusted, certificates of the new", newCA)
	if _, _, _, err := get(t, s, built); err == nil || !strings.Contains(err.Error(), "unknown authority") {
		t.Fatalf("a configuration built before the rotation verified the new CA's server: %v", err)
	}
	if err := writeFileAtomic(p.caFile, newCA.CertPEM, 0o644); err != nil {
		t.Fatal(err)
	}
	getFrom("only the new CA trusted", newCA)
}
