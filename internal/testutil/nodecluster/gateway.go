package nodecluster

import (
	"context"
	"path/filepath"
	"time"

	"github.com/distcache/distcache/internal/embed"
	"github.com/distcache/distcache/internal/pki"
	"github.com/distcache/distcache/internal/testutil"
)

// StartGateway runs a gateway (embed.StartGateway, as `cachenode gateway`
// assembles one) in front of the cluster, holding id's certificate, and
// waits until it serves. What cfg leaves empty is the cluster's: Nodes
// (every member), CA, TLSCert/TLSKey (id's), Listen (127.0.0.1:0) and
// Domains (localhost). The gateway stops when the test ends.
func (c *Cluster) StartGateway(id pki.Identity, cfg embed.GatewayConfig) *embed.Gateway {
	c.T.Helper()
	g, err := c.OpenGateway(context.Background(), id, cfg)
	testutil.Must(c.T, err)
	return g
}

// OpenGateway is StartGateway returning its error; the gateway stops with
// the cluster (Close), or before with its own Close.
func (c *Cluster) OpenGateway(ctx context.Context, id pki.Identity, cfg embed.GatewayConfig) (*embed.Gateway, error) {
	if cfg.Nodes == nil {
		cfg.Nodes = c.Seeds()
	}
	if cfg.TLSCert == "" {
		var err error
		if cfg.TLSCert, cfg.TLSKey, err = c.CertFiles(id); err != nil {
			return nil, err
		}
	}
	if cfg.CA == "" {
		cfg.CA = c.CAFile
	}
	if cfg.Listen == "" && cfg.Listener == nil {
		cfg.Listen = "127.0.0.1:0"
	}
	if cfg.Domains == nil {
		cfg.Domains = []string{"localhost"}
	}
	g, err := embed.StartGateway(context.WithoutCancel(ctx), cfg)
	if err != nil {
		return nil, err
	}
	c.cleanups.Add(g.Close)
	wctx, cancel := context.WithTimeout(ctx, time.Minute) // a loaded machine; nothing asserts on time
	defer cancel()
	if err := g.WaitReady(wctx); err != nil {
		g.Close()
		return nil, err
	}
	return g, nil
}

// CertFiles returns the certificate and key files of id (issued by the
// cluster's CA into Dir as KIND-NAME.crt/.key), for configurations that
// read files, as the binaries do.
func (c *Cluster) CertFiles(id pki.Identity) (certFile, keyFile string, err error) {
	if _, err := c.ClientTLSConfig(id); err != nil {
		return "", "", err
	}
	base := filepath.Join(c.Dir, string(id.Kind)+"-"+id.Name)
	return base + ".crt", base + ".key", nil
}
