// Package pki issues and checks the certificates that carry distcache
// identities.
//
// Every connection to a cache node is mutual TLS 1.3. Who is calling is
// decided only by the client certificate's verified chain: its leaf carries
// exactly one SPIFFE-style URI SAN,
//
//	spiffe://distcache/tenant/<name>   a tenant (e.g. a ClickHouse cluster)
//	spiffe://distcache/peer/<name>     another cache node or a gateway
//
// The CA helpers here are used by tests, by the local stack and by the
// operator: ECDSA P-256 keys, random 128-bit serial numbers, NotBefore
// backdated for clock skew, explicit key usages and key identifiers.
package pki

import (
	"crypto"
	"crypto/ecdsa"
	"crypto/ed25519"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/rsa"
	"crypto/sha256"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/asn1"
	"encoding/pem"
	"errors"
	"fmt"
	"math/big"
	"net"
	"net/url"
	"slices"
	"time"
)

// ClockSkew is how far NotBefore is backdated on every certificate issued
// here, so a peer whose clock is slightly behind still accepts it.
const ClockSkew = 5 * time.Minute

// organization is the Subject O of every certificate issued here.
const organization = "distcache"

// CA is a certificate authority: a self-signed (or loaded) CA certificate and
// its signing key, with their PEM encodings.
type CA struct {
	Cert    *x509.Certificate
	Key     crypto.Signer
	CertPEM []byte
	KeyPEM  []byte // PKCS#8 for CAs created by NewCA; as given for LoadCA
}

// Leaf is an issued certificate with its private key, PEM encoded. KeyPEM is
// PKCS#8. NotAfter may be earlier than requested: a leaf never outlives its
// CA.
type Leaf struct {
	CertPEM  []byte
	KeyPEM   []byte
	NotAfter time.Time
}

// NewCA creates a self-signed root CA with an ECDSA P-256 key. It may sign
// leaf certificates only (path length 0).
func NewCA(commonName string, validity time.Duration) (*CA, error) {
	if commonName == "" {
		return nil, errors.New("pki: CA common name is empty")
	}
	if validity <= 0 {
		return nil, fmt.Errorf("pki: CA validity %v is not positive", validity)
	}
	key, serial, skid, err := newKey()
	if err != nil {
		return nil, err
	}
	now := time.Now()
	tmpl := &x509.Certificate{
		SerialNumber:          serial,
		Subject:               pkix.Name{CommonName: commonName, Organization: []string{organization}},
		NotBefore:             now.Add(-ClockSkew),
		NotAfter:              now.Add(validity),
		KeyUsage:              x509.KeyUsageCertSign | x509.KeyUsageCRLSign | x509.KeyUsageDigitalSignature,
		BasicConstraintsValid: true,
		IsCA:                  true,
		MaxPathLen:            0,
		MaxPathLenZero:        true,
		SubjectKeyId:          skid,
		AuthorityKeyId:        skid,
	}
	cert, certPEM, keyPEM, err := sign(tmpl, tmpl, key, key)
	if err != nil {
		return nil, err
	}
	return &CA{Cert: cert, Key: key, CertPEM: certPEM, KeyPEM: keyPEM}, nil
}

// LoadCA loads a CA from PEM: the first CERTIFICATE block of certPEM and a
// PKCS#8, SEC 1 (EC) or PKCS#1 (RSA) private key. The certificate must be a
// CA allowed to sign certificates, and the key must match it.
func LoadCA(certPEM, keyPEM []byte) (*CA, error) {
	cert, err := firstCertificate(certPEM)
	if err != nil {
		return nil, err
	}
	if !cert.BasicConstraintsValid || !cert.IsCA {
		return nil, errors.New("pki: certificate is not a CA (basic constraints)")
	}
	if cert.KeyUsage != 0 && cert.KeyUsage&x509.KeyUsageCertSign == 0 {
		return nil, errors.New("pki: CA certificate lacks the certSign key usage")
	}
	if err := CheckKeyPair(cert, keyPEM); err != nil {
		return nil, fmt.Errorf("CA: %w", err)
	}
	key, err := parsePrivateKey(keyPEM)
	if err != nil {
		return nil, err
	}
	return &CA{
		Cert:    cert,
		Key:     key,
		CertPEM: pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: cert.Raw}),
		KeyPEM:  slices.Clone(keyPEM),
	}, nil
}

// CertPool returns a pool holding only this CA, for RootCAs or ClientCAs.
func (ca *CA) CertPool() *x509.CertPool {
	p := x509.NewCertPool()
	p.AddCert(ca.Cert)
	return p
}

// IssueOption adjusts one issuance.
type IssueOption func(*issueOptions)

type issueOptions struct {
	notBefore, notAfter time.Time
	identity            *Identity
}

// WithWindow sets NotBefore and NotAfter exactly (no backdating, no
// clamping to the CA's validity) instead of deriving them from the validity
// argument. Meant for tests of expired and not-yet-valid certificates.
func WithWindow(notBefore, notAfter time.Time) IssueOption {
	return func(o *issueOptions) { o.notBefore, o.notAfter = notBefore, notAfter }
}

// WithIdentity adds the identity's URI SAN to a server certificate, so that a
// cache node can present its serving certificate as a client certificate in
// peer calls (IssueServer certificates also allow client auth). It is an
// error with IssueClient, whose identity is already given.
func WithIdentity(id Identity) IssueOption {
	return func(o *issueOptions) { o.identity = &id }
}

// IssueServer issues a serving certificate for the given DNS names and IP
// addresses (at least one of them). Its extended key usages are server auth
// and client auth, so nodes can use it for peer calls too; add the node's
// peer identity with WithIdentity.
func (ca *CA) IssueServer(commonName string, dnsNames []string, ips []net.IP, validity time.Duration, opts ...IssueOption) (*Leaf, error) {
	if len(dnsNames) == 0 && len(ips) == 0 {
		return nil, errors.New("pki: server certificate needs at least one DNS name or IP address")
	}
	for _, n := range dnsNames {
		if n == "" {
			return nil, errors.New("pki: empty DNS name")
		}
	}
	o := collect(opts)
	var uris []*url.URL
	if o.identity != nil {
		if err := o.identity.Validate(); err != nil {
			return nil, err
		}
		uris = []*url.URL{o.identity.URI()}
	}
	return ca.issue(leafTemplate{
		subject:     pkix.Name{CommonName: commonName, Organization: []string{organization}},
		dnsNames:    slices.Clone(dnsNames),
		ips:         slices.Clone(ips),
		uris:        uris,
		extKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth, x509.ExtKeyUsageClientAuth},
	}, validity, o)
}

// IssueClient issues a client certificate (client auth only) whose only URI
// SAN is id.URI(). The Subject CN is the identity's name, for logs; it is
// never used for authorization.
func (ca *CA) IssueClient(id Identity, validity time.Duration, opts ...IssueOption) (*Leaf, error) {
	if err := id.Validate(); err != nil {
		return nil, err
	}
	o := collect(opts)
	if o.identity != nil {
		return nil, errors.New("pki: WithIdentity cannot be used with IssueClient")
	}
	return ca.issue(leafTemplate{
		subject: pkix.Name{
			CommonName:         id.Name,
			Organization:       []string{organization},
			OrganizationalUnit: []string{string(id.Kind)},
		},
		uris:        []*url.URL{id.URI()},
		extKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth},
	}, validity, o)
}

// IssueClientWindow is IssueClient with an explicit validity window; see
// WithWindow.
func (ca *CA) IssueClientWindow(id Identity, notBefore, notAfter time.Time) (*Leaf, error) {
	return ca.IssueClient(id, notAfter.Sub(notBefore), WithWindow(notBefore, notAfter))
}

func collect(opts []IssueOption) issueOptions {
	var o issueOptions
	for _, opt := range opts {
		opt(&o)
	}
	return o
}

// leafTemplate is what differs between kinds of leaf certificates.
type leafTemplate struct {
	subject     pkix.Name
	dnsNames    []string
	ips         []net.IP
	uris        []*url.URL
	extKeyUsage []x509.ExtKeyUsage
}

func (ca *CA) issue(lt leafTemplate, validity time.Duration, o issueOptions) (*Leaf, error) {
	notBefore, notAfter, err := ca.window(validity, o)
	if err != nil {
		return nil, err
	}
	key, serial, skid, err := newKey()
	if err != nil {
		return nil, err
	}
	tmpl := &x509.Certificate{
		SerialNumber:          serial,
		Subject:               lt.subject,
		NotBefore:             notBefore,
		NotAfter:              notAfter,
		KeyUsage:              x509.KeyUsageDigitalSignature,
		ExtKeyUsage:           lt.extKeyUsage,
		BasicConstraintsValid: true,
		IsCA:                  false,
		DNSNames:              lt.dnsNames,
		IPAddresses:           lt.ips,
		URIs:                  lt.uris,
		SubjectKeyId:          skid,
		AuthorityKeyId:        ca.Cert.SubjectKeyId,
	}
	cert, certPEM, keyPEM, err := sign(tmpl, ca.Cert, key, ca.Key)
	if err != nil {
		return nil, err
	}
	return &Leaf{
		CertPEM:  certPEM,
		KeyPEM:   keyPEM,
		NotAfter: cert.NotAfter, // as encoded: whole seconds
	}, nil
}

// newKey makes the key of a new certificate (ECDSA P-256), its serial and
// its subject key ID.
func newKey() (key *ecdsa.PrivateKey, serial *big.Int, skid []byte, err error) {
	if key, err = ecdsa.GenerateKey(elliptic.P256(), rand.Reader); err != nil {
		return nil, nil, nil, fmt.Errorf("pki: generate key: %w", err)
	}
	if serial, err = newSerial(); err != nil {
		return nil, nil, nil, err
	}
	if skid, err = subjectKeyID(key.Public()); err != nil {
		return nil, nil, nil, err
	}
	return key, serial, skid, nil
}

// sign makes the certificate tmpl for key, signed by parent's signer (the
// same for a self-signed one), and PEM-encodes it and key.
func sign(tmpl, parent *x509.Certificate, key *ecdsa.PrivateKey, signer crypto.Signer) (cert *x509.Certificate, certPEM, keyPEM []byte, err error) {
	der, err := x509.CreateCertificate(rand.Reader, tmpl, parent, key.Public(), signer)
	if err != nil {
		return nil, nil, nil, fmt.Errorf("pki: sign certificate %q: %w", tmpl.Subject.CommonName, err)
	}
	if cert, err = x509.ParseCertificate(der); err != nil {
		return nil, nil, nil, fmt.Errorf("pki: parse certificate %q: %w", tmpl.Subject.CommonName, err)
	}
	if keyPEM, err = encodeKey(key); err != nil {
		return nil, nil, nil, err
	}
	return cert, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}), keyPEM, nil
}

// window computes a leaf's validity: by default backdated by ClockSkew and
// clamped to the CA's NotAfter; with WithWindow exactly as given.
func (ca *CA) window(validity time.Duration, o issueOptions) (time.Time, time.Time, error) {
	if !o.notBefore.IsZero() || !o.notAfter.IsZero() {
		nb, na := o.notBefore, o.notAfter
		if !na.After(nb) {
			return nb, na, fmt.Errorf("pki: NotAfter %v is not after NotBefore %v", na, nb)
		}
		return nb, na, nil
	}
	if validity <= 0 {
		return time.Time{}, time.Time{}, fmt.Errorf("pki: validity %v is not positive", validity)
	}
	now := time.Now()
	nb, na := now.Add(-ClockSkew), now.Add(validity)
	if nb.Before(ca.Cert.NotBefore) {
		nb = ca.Cert.NotBefore
	}
	if na.After(ca.Cert.NotAfter) {
		na = ca.Cert.NotAfter
	}
	if !na.After(now) {
		return nb, na, fmt.Errorf("pki: CA %q expired at %v", ca.Cert.Subject.CommonName, ca.Cert.NotAfter)
	}
	return nb, na, nil
}

// newSerial returns a uniformly random, non-zero 128-bit serial number.
func newSerial() (*big.Int, error) {
	limit := new(big.Int).Lsh(big.NewInt(1), 128)
	for {
		n, err := rand.Int(rand.Reader, limit)
		if err != nil {
			return nil, fmt.Errorf("pki: serial number: %w", err)
		}
		if n.Sign() > 0 {
			return n, nil
		}
	}
}

// subjectKeyID is RFC 7093 method 1: the leftmost 160 bits of the SHA-256 of
// the subjectPublicKey bit string.
func subjectKeyID(pub crypto.PublicKey) ([]byte, error) {
	der, err := x509.MarshalPKIXPublicKey(pub)
	if err != nil {
		return nil, fmt.Errorf("pki: marshal public key: %w", err)
	}
	var spki struct {
		Algorithm        pkix.AlgorithmIdentifier
		SubjectPublicKey asn1.BitString
	}
	if _, err := asn1.Unmarshal(der, &spki); err != nil {
		return nil, fmt.Errorf("pki: parse public key: %w", err)
	}
	sum := sha256.Sum256(spki.SubjectPublicKey.Bytes)
	return sum[:20], nil
}

func encodeKey(key crypto.Signer) ([]byte, error) {
	der, err := x509.MarshalPKCS8PrivateKey(key)
	if err != nil {
		return nil, fmt.Errorf("pki: marshal private key: %w", err)
	}
	return pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: der}), nil
}

func firstCertificate(data []byte) (*x509.Certificate, error) {
	for {
		var block *pem.Block
		block, data = pem.Decode(data)
		if block == nil {
			return nil, errors.New("pki: no CERTIFICATE PEM block found")
		}
		if block.Type != "CERTIFICATE" {
			continue
		}
		cert, err := x509.ParseCertificate(block.Bytes)
		if err != nil {
			return nil, fmt.Errorf("pki: parse certificate: %w", err)
		}
		return cert, nil
	}
}

func parsePrivateKey(data []byte) (crypto.Signer, error) {
	for {
		var block *pem.Block
		block, data = pem.Decode(data)
		if block == nil {
			return nil, errors.New("pki: no private key PEM block found")
		}
		var (
			key any
			err error
		)
		switch block.Type {
		case "PRIVATE KEY":
			key, err = x509.ParsePKCS8PrivateKey(block.Bytes)
		case "EC PRIVATE KEY":
			key, err = x509.ParseECPrivateKey(block.Bytes)
		case "RSA PRIVATE KEY":
			key, err = x509.ParsePKCS1PrivateKey(block.Bytes)
		default:
			continue
		}
		if err != nil {
			return nil, fmt.Errorf("pki: parse %s: %w", block.Type, err)
		}
		switch k := key.(type) {
		case *ecdsa.PrivateKey, *rsa.PrivateKey, ed25519.PrivateKey:
			return k.(crypto.Signer), nil
		default:
			return nil, fmt.Errorf("pki: unsupported private key type %T", key)
		}
	}
}

// CheckKeyPair checks that keyPEM holds the private key of cert.
func CheckKeyPair(cert *x509.Certificate, keyPEM []byte) error {
	key, err := parsePrivateKey(keyPEM)
	if err != nil {
		return err
	}
	pub, ok := key.Public().(interface{ Equal(crypto.PublicKey) bool })
	if !ok || !pub.Equal(cert.PublicKey) {
		return errors.New("pki: private key does not match the certificate")
	}
	return nil
}
