package pki

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"strings"
)

// Kind is the kind of principal an identity names.
type Kind string

const (
	// KindTenant is a tenant of the cache (e.g. one ClickHouse cluster).
	KindTenant Kind = "tenant"
	// KindPeer is another cache node, or a gateway acting for a tenant.
	KindPeer Kind = "peer"
)

// Scheme and TrustDomain make up the prefix of every distcache identity URI.
const (
	Scheme      = "spiffe"
	TrustDomain = "distcache"
)

// MaxNameLen is the longest identity name (a DNS label).
const MaxNameLen = 63

// Identity is who is calling: a tenant or a peer, by name. It lives in the
// client certificate as the URI SAN spiffe://distcache/<kind>/<name>.
type Identity struct {
	Kind Kind
	Name string
}

// URI returns spiffe://distcache/<kind>/<name>. It does not validate; see
// Validate.
func (id Identity) URI() *url.URL {
	return &url.URL{Scheme: Scheme, Host: TrustDomain, Path: "/" + string(id.Kind) + "/" + id.Name}
}

// String returns the URI form.
func (id Identity) String() string { return id.URI().String() }

// Validate checks the kind and the name.
func (id Identity) Validate() error {
	switch id.Kind {
	case KindTenant, KindPeer:
	default:
		return fmt.Errorf("pki: unknown identity kind %q (want %q or %q)", id.Kind, KindTenant, KindPeer)
	}
	if err := ValidateName(id.Name); err != nil {
		return err
	}
	return nil
}

// ValidateName checks that name is a valid identity (and tenant) name: a DNS
// label, [a-z0-9]([-a-z0-9]*[a-z0-9])?, at most 63 characters.
func ValidateName(name string) error {
	if name == "" {
		return errors.New("pki: name is empty")
	}
	if len(name) > MaxNameLen {
		return fmt.Errorf("pki: name %q is longer than %d characters", name, MaxNameLen)
	}
	for i := 0; i < len(name); i++ {
		c := name[i]
		switch {
		case c >= 'a' && c <= 'z', c >= '0' && c <= '9':
		case c == '-' && i > 0 && i < len(name)-1:
		default:
			return fmt.Errorf("pki: name %q is not a DNS label (lowercase letters, digits and inner '-')", name)
		}
	}
	return nil
}

// ParseIdentity parses spiffe://distcache/<kind>/<name> strictly: no user,
// port, query, fragment, escaped characters or extra path segments.
func ParseIdentity(u *url.URL) (Identity, error) {
	if u == nil {
		return Identity{}, errors.New("pki: nil identity URI")
	}
	if u.Scheme != Scheme || u.Host != TrustDomain || u.Opaque != "" || u.User != nil ||
		u.RawQuery != "" || u.ForceQuery || u.Fragment != "" || u.RawPath != "" {
		return Identity{}, fmt.Errorf("pki: %q is not a %s://%s/<kind>/<name> URI", u.String(), Scheme, TrustDomain)
	}
	kind, name, ok := strings.Cut(strings.TrimPrefix(u.Path, "/"), "/")
	if !ok || !strings.HasPrefix(u.Path, "/") {
		return Identity{}, fmt.Errorf("pki: %q is not a %s://%s/<kind>/<name> URI", u.String(), Scheme, TrustDomain)
	}
	id := Identity{Kind: Kind(kind), Name: name}
	if err := id.Validate(); err != nil {
		return Identity{}, fmt.Errorf("pki: identity %q: %w", u.String(), err)
	}
	return id, nil
}

// isDistcacheURI reports whether u claims to be a distcache identity, however
// malformed. Case-insensitive so that look-alikes count as claims (and are
// then rejected) rather than being ignored.
func isDistcacheURI(u *url.URL) bool {
	return u != nil && strings.EqualFold(u.Scheme, Scheme) && strings.EqualFold(u.Hostname(), TrustDomain)
}

// IdentityFromState returns the identity in the verified client certificate
// of a TLS connection. Only cs.VerifiedChains[0][0] is looked at (never the
// unverified PeerCertificates); it must carry exactly one distcache URI SAN,
// and that URI must be valid. URI SANs of other trust domains are ignored.
func IdentityFromState(cs *tls.ConnectionState) (Identity, error) {
	if cs == nil {
		return Identity{}, errors.New("pki: not a TLS connection")
	}
	if len(cs.VerifiedChains) == 0 || len(cs.VerifiedChains[0]) == 0 {
		return Identity{}, errors.New("pki: no verified client certificate")
	}
	leaf := cs.VerifiedChains[0][0]
	var found *url.URL
	for _, u := range leaf.URIs {
		if !isDistcacheURI(u) {
			continue
		}
		if found != nil {
			return Identity{}, fmt.Errorf("pki: client certificate has several distcache identities (%q, %q)", found.String(), u.String())
		}
		found = u
	}
	if found == nil {
		return Identity{}, fmt.Errorf("pki: client certificate has no %s://%s/ URI SAN", Scheme, TrustDomain)
	}
	return ParseIdentity(found)
}

type identityKey struct{}

// NewContext returns ctx carrying id.
func NewContext(ctx context.Context, id Identity) context.Context {
	return context.WithValue(ctx, identityKey{}, id)
}

// FromContext returns the identity that Middleware put into ctx.
func FromContext(ctx context.Context) (Identity, bool) {
	id, ok := ctx.Value(identityKey{}).(Identity)
	return id, ok
}

// Middleware authenticates every request by its verified client certificate
// (IdentityFromState) and passes the identity to next in the request context.
// Requests without a valid identity get 403 Forbidden with the reason; next
// is not called. Authorization (which tenant may do what) is next's job.
func Middleware(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		id, err := IdentityFromState(r.TLS)
		if err != nil {
			http.Error(w, "forbidden: no valid distcache client identity: "+err.Error(), http.StatusForbidden)
			return
		}
		next.ServeHTTP(w, r.WithContext(NewContext(r.Context(), id)))
	})
}
