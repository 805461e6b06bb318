package pki

import (
	"bytes"
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"net"
	"os"
	"sync"
	"sync/atomic"
	"time"
)

// nextProtos is the only ALPN protocol offered and accepted: HTTP/1.1. Go's
// HTTP/2 is much slower for bulk bytes, and cache traffic is bulk bytes.
var nextProtos = []string{"http/1.1"}

// ServerTLSConfig returns the TLS configuration of a cache node: TLS 1.3
// only, client certificates required and verified against clientCAFile, ALPN
// http/1.1 only (even if the http.Server would offer h2).
//
// The key pair and the client CA bundle are re-read when their files change
// (checked on each handshake with a stat of each file; this follows symlinks,
// so Kubernetes' atomic ..data swap in a mounted Secret works), so rotation
// needs no restart. If the new files are unreadable or inconsistent (for
// instance the certificate was replaced but not yet the key), the last good
// configuration stays in use and loading is retried on the next handshake.
//
// TLS session tickets are disabled so that every connection is verified
// against the current client CAs: a rotated-out CA stops working at once.
// Connections are long-lived, so full handshakes cost little.
func ServerTLSConfig(certFile, keyFile, clientCAFile string) (*tls.Config, error) {
	if clientCAFile == "" {
		return nil, errors.New("pki: server TLS needs a client CA file")
	}
	r := &reloader{files: []string{certFile, keyFile, clientCAFile}, parse: parseServerMaterial}
	if _, err := r.get(); err != nil {
		return nil, err
	}
	return &tls.Config{
		MinVersion:             tls.VersionTLS13,
		NextProtos:             nextProtos,
		ClientAuth:             tls.RequireAndVerifyClientCert,
		SessionTicketsDisabled: true,
		// The per-handshake configuration carries the current certificate
		// and client CAs. GetCertificate is set too so that code checking
		// "has a certificate" (http.Server.ServeTLS) is satisfied.
		GetConfigForClient: func(*tls.ClientHelloInfo) (*tls.Config, error) {
			m, err := r.get()
			if err != nil {
				return nil, err
			}
			return m.server, nil
		},
		GetCertificate: r.certificate,
	}, nil
}

// ServingTLSConfig returns the TLS configuration of a server for clients
// without certificates (the gateway's S3 API for S3 SDKs): TLS 1.2 or
// later, the key pair re-read when its files change (the rules of
// ServerTLSConfig), so a renewed certificate is served without a restart.
func ServingTLSConfig(certFile, keyFile string) (*tls.Config, error) {
	r := &reloader{files: []string{certFile, keyFile}, parse: parseKeyPair}
	if _, err := r.get(); err != nil {
		return nil, err
	}
	return &tls.Config{
		MinVersion:     tls.VersionTLS12,
		GetCertificate: r.certificate,
	}, nil
}

func parseKeyPair(files []string, raw [][]byte) (*material, error) {
	cert, err := tls.X509KeyPair(raw[0], raw[1])
	if err != nil {
		return nil, fmt.Errorf("pki: load key pair %s, %s: %w", files[0], files[1], err)
	}
	return &material{cert: &cert}, nil
}

// ClientTLSConfig returns the TLS configuration for calling cache nodes: TLS
// 1.3, ALPN http/1.1, server verified against caFile, and the client
// certificate from certFile/keyFile, re-read when those files change (same
// rules as ServerTLSConfig). Its RootCAs are the CA bundle as it was when
// it was built; a process that must follow a CA rotation dials with
// NewClientTLS's Config instead.
func ClientTLSConfig(certFile, keyFile, caFile string) (*tls.Config, error) {
	c, err := NewClientTLS(certFile, keyFile, caFile)
	if err != nil {
		return nil, err
	}
	cfg := c.Config().Clone()
	cfg.GetClientCertificate = func(*tls.CertificateRequestInfo) (*tls.Certificate, error) {
		return c.Config().GetClientCertificate(nil)
	}
	return cfg, nil
}

// ClientTLS follows a client's key pair and CA bundle on disk. A CA
// rotation changes the bundle under running processes (the operator first
// adds the new CA, then reissues every certificate from it, then drops the
// old one), and tls.Config's RootCAs cannot change once in use, so callers
// take Config for each new connection.
type ClientTLS struct{ r *reloader }

// NewClientTLS loads certFile, keyFile and caFile.
func NewClientTLS(certFile, keyFile, caFile string) (*ClientTLS, error) {
	r := &reloader{files: []string{certFile, keyFile, caFile}, parse: parseClientMaterial}
	if _, err := r.get(); err != nil {
		return nil, err
	}
	return &ClientTLS{r: r}, nil
}

// Config is the configuration for a connection made now: TLS 1.3, ALPN
// http/1.1, the current CA bundle as RootCAs and the current certificate.
// Files that became unreadable or inconsistent leave the last good ones in
// use. The result is shared: clone it before changing anything.
func (c *ClientTLS) Config() *tls.Config {
	m, _ := c.r.get() // never fails once NewClientTLS loaded the files
	return m.client
}

// ContextDialer dials plain connections: a net.Dialer, or one that
// resolves names its own way (internal/dnsfallback).
type ContextDialer interface {
	DialContext(ctx context.Context, network, addr string) (net.Conn, error)
}

// DialTLSContext returns an http.Transport.DialTLSContext that dials each
// new connection with current() (such as ClientTLS.Config, so a CA bundle
// replaced on disk is used from the next connection on), offering HTTP/1.1
// only as every configuration here does, dialing and handshaking within
// timeout.
func DialTLSContext(current func() *tls.Config, d ContextDialer, timeout time.Duration) func(ctx context.Context, network, addr string) (net.Conn, error) {
	return func(ctx context.Context, network, addr string) (net.Conn, error) {
		ctx, cancel := context.WithTimeout(ctx, timeout)
		defer cancel()
		cfg := current().Clone()
		cfg.NextProtos = nextProtos
		return DialTLS(ctx, d, network, addr, cfg)
	}
}

// DialTLS dials addr with d and completes a TLS handshake with cfg, as
// tls.Dialer does: a cfg without a ServerName verifies the address's host.
func DialTLS(ctx context.Context, d ContextDialer, network, addr string, cfg *tls.Config) (*tls.Conn, error) {
	if cfg.ServerName == "" {
		host, _, err := net.SplitHostPort(addr)
		if err != nil {
			host = addr
		}
		cfg = cfg.Clone()
		cfg.ServerName = host
	}
	raw, err := d.DialContext(ctx, network, addr)
	if err != nil {
		return nil, err
	}
	c := tls.Client(raw, cfg)
	if err := c.HandshakeContext(ctx); err != nil {
		raw.Close()
		return nil, err
	}
	return c, nil
}

// Leaf is the certificate this configuration presents now.
func (c *ClientTLS) Leaf() *x509.Certificate {
	m, _ := c.r.get()
	return leafOf(m.cert)
}

// ServingLeaf is the certificate a ServerTLSConfig presents now, nil if it
// cannot tell.
func ServingLeaf(cfg *tls.Config) *x509.Certificate {
	if cfg.GetCertificate == nil {
		return nil
	}
	c, err := cfg.GetCertificate(&tls.ClientHelloInfo{})
	if err != nil {
		return nil
	}
	return leafOf(c)
}

// leafOf is c's parsed leaf (tls.X509KeyPair fills it in).
func leafOf(c *tls.Certificate) *x509.Certificate {
	if c == nil || len(c.Certificate) == 0 {
		return nil
	}
	if c.Leaf != nil {
		return c.Leaf
	}
	l, err := x509.ParseCertificate(c.Certificate[0])
	if err != nil {
		return nil
	}
	return l
}

func parseClientMaterial(files []string, raw [][]byte) (*material, error) {
	m, pool, err := parseKeyPairAndPool(files, raw)
	if err != nil {
		return nil, err
	}
	cert := m.cert
	m.client = &tls.Config{
		MinVersion: tls.VersionTLS13,
		NextProtos: nextProtos,
		RootCAs:    pool,
		GetClientCertificate: func(*tls.CertificateRequestInfo) (*tls.Certificate, error) {
			return cert, nil
		},
	}
	return m, nil
}

func parsePool(file string, data []byte) (*x509.CertPool, error) {
	pool := x509.NewCertPool()
	if !pool.AppendCertsFromPEM(data) {
		return nil, fmt.Errorf("pki: no certificates in CA file %s", file)
	}
	return pool, nil
}

// material is one consistent load of a set of files.
type material struct {
	raw    [][]byte
	stamps []os.FileInfo
	// checked is when stamps were taken; a file modified shortly before
	// may be modified again with an identical stamp (coarse timestamps),
	// so such "racy" files are re-read until they are old enough.
	checked time.Time

	cert   *tls.Certificate
	server *tls.Config // for ServerTLSConfig only
	client *tls.Config // for ClientTLS only
}

// racyWindow bounds file timestamp granularity plus the lag of the file
// system clock behind time.Now.
const racyWindow = 2 * time.Second

// parseKeyPairAndPool parses files (certificate, key, CA bundle).
func parseKeyPairAndPool(files []string, raw [][]byte) (*material, *x509.CertPool, error) {
	m, err := parseKeyPair(files, raw)
	if err != nil {
		return nil, nil, err
	}
	pool, err := parsePool(files[2], raw[2])
	if err != nil {
		return nil, nil, err
	}
	return m, pool, nil
}

func parseServerMaterial(files []string, raw [][]byte) (*material, error) {
	m, pool, err := parseKeyPairAndPool(files, raw)
	if err != nil {
		return nil, err
	}
	m.server = &tls.Config{
		MinVersion:             tls.VersionTLS13,
		NextProtos:             nextProtos,
		ClientAuth:             tls.RequireAndVerifyClientCert,
		ClientCAs:              pool,
		Certificates:           []tls.Certificate{*m.cert},
		SessionTicketsDisabled: true,
		// Cache responses are bulk bytes: full 16 KiB records from the
		// first byte, not the small records tuned for web page latency.
		DynamicRecordSizingDisabled: true,
	}
	return m, nil
}

// reloader keeps the parsed contents of a set of files current. get costs
// one stat per file when nothing changed.
type reloader struct {
	files []string
	parse func(files []string, raw [][]byte) (*material, error)

	mu  sync.Mutex // serializes loads
	cur atomic.Pointer[material]
}

func (r *reloader) get() (*material, error) {
	if m := r.cur.Load(); m != nil && r.fresh(m) {
		return m, nil
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	old := r.cur.Load()
	if old != nil && r.fresh(old) {
		return old, nil
	}
	m, err := r.load(old)
	if err != nil {
		if old != nil {
			return old, nil // keep the last good material; retry next time
		}
		return nil, err
	}
	r.cur.Store(m)
	return m, nil
}

// fresh reports whether m still reflects the files on disk.
// certificate is a tls.Config's GetCertificate: the current key pair.
func (r *reloader) certificate(*tls.ClientHelloInfo) (*tls.Certificate, error) {
	m, err := r.get()
	if err != nil {
		return nil, err
	}
	return m.cert, nil
}

func (r *reloader) fresh(m *material) bool {
	limit := m.checked.Add(-racyWindow)
	for i, f := range r.files {
		fi, err := os.Stat(f)
		if err != nil {
			return false
		}
		prev := m.stamps[i]
		if !os.SameFile(prev, fi) || !fi.ModTime().Equal(prev.ModTime()) ||
			fi.Size() != prev.Size() || fi.ModTime().After(limit) {
			return false
		}
	}
	return true
}

// load reads and parses the files. If their bytes equal old's, old's parsed
// contents are reused with new stamps.
func (r *reloader) load(old *material) (*material, error) {
	checked := time.Now()
	stamps := make([]os.FileInfo, len(r.files))
	raw := make([][]byte, len(r.files))
	for i, f := range r.files {
		fi, err := os.Stat(f)
		if err != nil {
			return nil, fmt.Errorf("pki: %w", err)
		}
		data, err := os.ReadFile(f)
		if err != nil {
			return nil, fmt.Errorf("pki: %w", err)
		}
		stamps[i], raw[i] = fi, data
	}
	if old != nil && equalAll(old.raw, raw) {
		m := *old
		m.stamps, m.checked = stamps, checked
		return &m, nil
	}
	m, err := r.parse(r.files, raw)
	if err != nil {
		return nil, err
	}
	m.raw, m.stamps, m.checked = raw, stamps, checked
	return m, nil
}

func equalAll(a, b [][]byte) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if !bytes.Equal(a[i], b[i]) {
			return false
		}
	}
	return true
}
