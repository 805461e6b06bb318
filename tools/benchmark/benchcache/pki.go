package benchcache

import (
	"crypto/tls"
	"net"
	"os"
	"path/filepath"
	"time"

	"github.com/distcache/distcache/internal/pki"
)

// PKI is a bench cache's certificates, as files in Dir (ca.crt,
// server.crt/.key for 127.0.0.1 and localhost, tenant.crt/.key, and
// peer-NAME.crt/.key per node, IssuePeer) and as TLS configurations.
type PKI struct {
	Dir, CAFile string
	ServerTLS   *tls.Config // every node's (mTLS: client certificates required)
	TenantTLS   *tls.Config // the tenant's client certificate

	ca *pki.CA
}

// certLife is long enough for any bench run.
const certLife = 24 * time.Hour

// NewPKI issues a CA, the server certificate and the tenant's client
// certificate into dir.
func NewPKI(dir, tenant string) (*PKI, error) {
	ca, err := pki.NewCA("distcache bench CA", certLife)
	if err != nil {
		return nil, err
	}
	p := &PKI{Dir: dir, CAFile: filepath.Join(dir, "ca.crt"), ca: ca}
	server, err := ca.IssueServer("localhost", []string{"localhost"}, []net.IP{net.IPv4(127, 0, 0, 1)}, certLife)
	if err != nil {
		return nil, err
	}
	if err := pki.WriteFiles(dir, "server", server); err != nil {
		return nil, err
	}
	if err := p.issue("tenant", pki.Identity{Kind: pki.KindTenant, Name: tenant}); err != nil {
		return nil, err
	}
	if err := os.WriteFile(p.CAFile, ca.CertPEM, 0o600); err != nil {
		return nil, err
	}
	if p.ServerTLS, err = pki.ServerTLSConfig(p.file("server.crt"), p.file("server.key"), p.CAFile); err != nil {
		return nil, err
	}
	if p.TenantTLS, err = pki.ClientTLSConfig(p.file("tenant.crt"), p.file("tenant.key"), p.CAFile); err != nil {
		return nil, err
	}
	return p, nil
}

// IssuePeer writes the peer certificate of node (peer-NODE.crt/.key).
func (p *PKI) IssuePeer(node string) error {
	return p.issue("peer-"+node, pki.Identity{Kind: pki.KindPeer, Name: node})
}

func (p *PKI) issue(name string, id pki.Identity) error {
	leaf, err := p.ca.IssueClient(id, certLife)
	if err != nil {
		return err
	}
	return pki.WriteFiles(p.Dir, name, leaf)
}

func (p *PKI) file(name string) string { return filepath.Join(p.Dir, name) }
