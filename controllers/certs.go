package controllers

import (
	"bytes"
	"crypto/x509"
	"encoding/pem"
	"errors"
	"fmt"
	"maps"
	"slices"
	"time"

	corev1 "k8s.io/api/core/v1"

	cachev1alpha1 "github.com/distcache/distcache/api/v1alpha1"
	"github.com/distcache/distcache/internal/pki"
)

// Certificates, in the files certs*.go. Every holder of a cache's
// certificates (its nodes, each tenant's clients and gateways) gets a
// kubernetes.io/tls Secret whose ca.crt is the trust bundle. The operator
// signs them with the cache's own CA (certs_ca.go, which also rotates it),
// or with spec.tls.issuerRef writes cert-manager Certificates instead
// (certs_certmanager.go). The reconcile steps: the cache's node certificate
// (certs_node.go) and each CacheTenant's client certificate
// (certs_tenant.go). This file: what a certificate Secret holds and when a
// certificate is issued again.

// Keys of the certificate Secrets the operator writes: the kubernetes.io/tls
// pair plus the CA bundle, as cert-manager writes them.
const caCertKey = "ca.crt"

// EventCertificateIssued is the reason of the event for a (re)issued
// certificate.
const EventCertificateIssued = "CertificateIssued"

// Fallbacks for certificate lifetimes when the API server's defaults are
// absent (objects built in unit tests).
const (
	defaultCertificateDuration = 2160 * time.Hour
	defaultRenewBefore         = 720 * time.Hour
)

// certLifetimes returns spec.tls's certificate duration and renewBefore.
func certLifetimes(dc *cachev1alpha1.DistributedCache) (validity, renewBefore time.Duration) {
	validity, renewBefore = defaultCertificateDuration, defaultRenewBefore
	if d := dc.Spec.TLS.CertificateDuration; d != nil {
		validity = d.Duration
	}
	if d := dc.Spec.TLS.RenewBefore; d != nil {
		renewBefore = d.Duration
	}
	return validity, renewBefore
}

// wantedCert is what a certificate Secret must hold to be kept.
type wantedCert struct {
	ca          *pki.CA  // the signing CA
	bundle      []byte   // the trust bundle the Secret's ca.crt must hold
	dnsNames    []string // sorted; nil for client certificates
	identity    pki.Identity
	renewBefore time.Duration
	now         time.Time
}

// certCheck says why a certificate must be (re)issued, or "" if it passes.
type certCheck func(cert *x509.Certificate, w wantedCert) string

// certChecks are the reasons to reissue, in order; the first that fires
// names the reason in the event. Decisions as data rather than an if-tree.
var certChecks = []certCheck{
	func(c *x509.Certificate, w wantedCert) string {
		if c.CheckSignatureFrom(w.ca.Cert) != nil {
			return "not signed by the cache's CA"
		}
		return ""
	},
	func(c *x509.Certificate, w wantedCert) string {
		if len(c.URIs) != 1 || c.URIs[0].String() != w.identity.String() {
			return "identity is not " + w.identity.String()
		}
		return ""
	},
	func(c *x509.Certificate, w wantedCert) string {
		got := slices.Clone(c.DNSNames)
		slices.Sort(got)
		if !slices.Equal(got, w.dnsNames) {
			return "DNS names changed"
		}
		return ""
	},
	func(c *x509.Certificate, w wantedCert) string {
		if !w.now.Before(renewalTime(c, w.renewBefore)) {
			return fmt.Sprintf("expires at %s, within the renewal window", c.NotAfter.UTC().Format(time.RFC3339))
		}
		return ""
	},
}

// renewalTime is when a certificate is renewed: renewBefore ahead of its
// expiry, but never before two thirds of its lifetime have passed (so a
// renewBefore longer than a CA-clamped lifetime cannot make it renew on
// every reconcile).
func renewalTime(c *x509.Certificate, renewBefore time.Duration) time.Time {
	at := c.NotAfter.Add(-renewBefore)
	if floor := c.NotBefore.Add(c.NotAfter.Sub(c.NotBefore) * 2 / 3); at.Before(floor) {
		at = floor
	}
	return at
}

// renewIn is how long until a just-issued leaf is due for renewal (see
// renewalTime).
func renewIn(leaf *pki.Leaf, renewBefore time.Duration, now time.Time) time.Duration {
	d := leaf.NotAfter.Add(-renewBefore).Sub(now)
	if floor := leaf.NotAfter.Sub(now) * 2 / 3; d < floor {
		d = floor
	}
	return d
}

// reissueReason returns why the certificate Secret's certificate must be
// issued again, or "" when it is current. A Secret that is missing keys or
// holds unparsable PEM or a key that does not match its certificate is
// reissued too. An outdated trust bundle alone is not a reason:
// bundleUpdate replaces it and keeps the certificate.
func reissueReason(s *corev1.Secret, w wantedCert) (string, *x509.Certificate) {
	if s == nil {
		return "missing", nil
	}
	cert, err := parseLeafSecret(s)
	if err != nil {
		return err.Error(), nil
	}
	for _, check := range certChecks {
		if why := check(cert, w); why != "" {
			return why, cert
		}
	}
	return "", cert
}

// bundleUpdate returns the Data of a certificate Secret whose certificate is
// current but whose ca.crt is not bundle, with ca.crt replaced; nil when it
// holds bundle already.
func bundleUpdate(s *corev1.Secret, bundle []byte) map[string][]byte {
	if bytes.Equal(s.Data[caCertKey], bundle) {
		return nil
	}
	data := maps.Clone(s.Data)
	data[caCertKey] = bundle
	return data
}

// parseLeafSecret parses a kubernetes.io/tls Secret's certificate and checks
// that its key belongs to it.
func parseLeafSecret(s *corev1.Secret) (*x509.Certificate, error) {
	block, _ := pem.Decode(s.Data[corev1.TLSCertKey])
	if block == nil || block.Type != "CERTIFICATE" {
		return nil, errors.New("no certificate")
	}
	cert, err := x509.ParseCertificate(block.Bytes)
	if err != nil {
		return nil, fmt.Errorf("unparsable certificate: %v", err)
	}
	if err := pki.CheckKeyPair(cert, s.Data[corev1.TLSPrivateKeyKey]); err != nil {
		return nil, fmt.Errorf("private key: %v", err)
	}
	return cert, nil
}

// tlsSecretData is the Data of a certificate Secret: the leaf and the trust
// bundle.
func tlsSecretData(l *pki.Leaf, bundle []byte) map[string][]byte {
	return map[string][]byte{
		corev1.TLSCertKey:       l.CertPEM,
		corev1.TLSPrivateKeyKey: l.KeyPEM,
		caCertKey:               bundle,
	}
}
