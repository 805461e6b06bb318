package node

import (
	"net/http"

	"github.com/distcache/distcache/internal/pki"
	"github.com/distcache/distcache/internal/s3backend"
	"github.com/distcache/distcache/internal/tenancy"
)

// HeaderTenant is how a peer (another cache node or a gateway holding a peer
// certificate) says which tenant it acts for. Tenant certificates cannot use it.
const HeaderTenant = "X-Distcache-Tenant"

// caller is the tenant a request acts for, with the backend credentials to use.
type caller struct {
	tenant *tenancy.Tenant
	creds  s3backend.Credentials
	// hop: another node sent this; serve it here, never relay it again.
	hop bool
	// localOnly: answer from this node's store only (handoff probe).
	localOnly bool
	// peer: the request comes from another node (trusted for hints such
	// as the object size of a pinned version).
	peer bool
}

// authorize resolves the tenant from the verified client identity and checks
// the bucket against the tenant's list before anything touches S3 or the store.
func (s *Server) authorize(r *http.Request, bucket string) (caller, *apiError) {
	c, err := s.identify(r)
	if err != nil {
		return caller{}, err
	}
	if !c.tenant.AllowsBucket(bucket) {
		return caller{}, newError(http.StatusForbidden, CodeAccessDenied, "bucket "+bucket+" is not allowed for tenant "+c.tenant.Name)
	}
	return c, nil
}

// identify resolves the tenant a request acts for from the verified client
// identity.
func (s *Server) identify(r *http.Request) (caller, *apiError) {
	id, ok := pki.FromContext(r.Context())
	if !ok {
		return caller{}, newError(http.StatusForbidden, CodeAccessDenied, "no verified client identity")
	}
	name := id.Name
	switch id.Kind {
	case pki.KindTenant:
		if h := r.Header.Get(HeaderTenant); h != "" && h != name {
			return caller{}, newError(http.StatusForbidden, CodeAccessDenied, "a tenant certificate cannot act for another tenant")
		}
		// Hop and Local-Only steer how nodes serve each other (no
		// relaying, no metadata owner, store-only answers); they are
		// the peer protocol, not the tenant API.
		if r.Header.Get(HeaderHop) != "" || r.Header.Get(HeaderLocalOnly) != "" {
			return caller{}, newError(http.StatusForbidden, CodeAccessDenied,
				HeaderHop+" and "+HeaderLocalOnly+" are for cache nodes only, not tenant certificates")
		}
	case pki.KindPeer:
		name = r.Header.Get(HeaderTenant)
		if name == "" {
			return caller{}, newError(http.StatusBadRequest, CodeBadRequest, "peer requests must name a tenant in "+HeaderTenant)
		}
	default:
		return caller{}, newError(http.StatusForbidden, CodeAccessDenied, "unknown identity kind")
	}
	t, ok := s.tenants.Current().Tenant(name)
	if !ok {
		return caller{}, newError(http.StatusForbidden, CodeAccessDenied, "tenant "+name+" is not configured on this cache")
	}
	c := caller{tenant: t, hop: r.Header.Get(HeaderHop) != "", localOnly: r.Header.Get(HeaderLocalOnly) != "",
		peer: id.Kind == pki.KindPeer}
	c.creds = tenantCredentials(t)
	return c, nil
}
