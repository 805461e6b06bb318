package nodecluster

import (
	"bytes"
	"context"
	"crypto/tls"
	"io"
	"net/http"
	"path/filepath"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/s3"

	"github.com/distcache/distcache/internal/pki"
	"github.com/distcache/distcache/internal/testutil"
)

// TenantTLS returns a client TLS configuration holding a certificate for the
// tenant (cached per name).
func (c *Cluster) TenantTLS(name string) *tls.Config {
	return c.ClientTLS(pki.Identity{Kind: pki.KindTenant, Name: name})
}

// PeerTLS returns a client TLS configuration holding a peer certificate
// (what cache nodes and gateways acting for tenants use).
func (c *Cluster) PeerTLS(name string) *tls.Config {
	return c.ClientTLS(pki.Identity{Kind: pki.KindPeer, Name: name})
}

// ClientTLS returns a client TLS configuration for the identity, issued by
// the cluster's CA and trusting the nodes' certificate.
func (c *Cluster) ClientTLS(id pki.Identity) *tls.Config {
	c.T.Helper()
	cfg, err := c.ClientTLSConfig(id)
	testutil.Must(c.T, err)
	return cfg
}

// ClientTLSConfig is ClientTLS returning its error.
func (c *Cluster) ClientTLSConfig(id pki.Identity) (*tls.Config, error) {
	key := string(id.Kind) + "-" + id.Name
	c.mu.Lock()
	defer c.mu.Unlock()
	if cfg, ok := c.tls[key]; ok {
		return cfg, nil
	}
	leaf, err := c.CA.IssueClient(id, time.Hour)
	if err != nil {
		return nil, err
	}
	if err := pki.WriteFiles(c.Dir, key, leaf); err != nil {
		return nil, err
	}
	cfg, err := pki.ClientTLSConfig(filepath.Join(c.Dir, key+".crt"), filepath.Join(c.Dir, key+".key"), c.CAFile)
	if err != nil {
		return nil, err
	}
	c.tls[key] = cfg
	return cfg, nil
}

// HTTPClient is an HTTP/1.1 client holding the identity's certificate.
func (c *Cluster) HTTPClient(id pki.Identity) *http.Client {
	return &http.Client{Transport: &http.Transport{TLSClientConfig: c.ClientTLS(id), MaxIdleConnsPerHost: 64}}
}

// PutDirect writes an object straight to MinIO, behind the cache's back,
// and returns its ETag.
func (c *Cluster) PutDirect(bucket, key string, data []byte) string {
	c.T.Helper()
	out, err := c.Direct.PutObject(context.Background(), &s3.PutObjectInput{
		Bucket: aws.String(bucket), Key: aws.String(key), Body: bytes.NewReader(data),
	})
	testutil.Must(c.T, err)
	return aws.ToString(out.ETag)
}

// GetDirect reads an object, or a range of it ("bytes=a-b"; "" for all),
// from MinIO itself.
func (c *Cluster) GetDirect(bucket, key, rng string) []byte {
	c.T.Helper()
	in := &s3.GetObjectInput{Bucket: aws.String(bucket), Key: aws.String(key)}
	if rng != "" {
		in.Range = aws.String(rng)
	}
	out, err := c.Direct.GetObject(context.Background(), in)
	testutil.Must(c.T, err)
	defer out.Body.Close()
	b, err := io.ReadAll(out.Body)
	testutil.Must(c.T, err)
	return b
}
