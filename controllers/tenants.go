package controllers

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"slices"
	"strings"
	"unicode"
	"unicode/utf8"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/log"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"
	"sigs.k8s.io/yaml"

	cachev1alpha1 "github.com/distcache/distcache/api/v1alpha1"
	"github.com/distcache/distcache/internal/pki"
	"github.com/distcache/distcache/internal/tenancy"
)

// Tenants: which CacheTenants a cache admits (decideTenants, the one
// decision both reconcilers act on) and the nodes' tenants file the cache
// step writes from it.

// ReasonIdentityConflict (CacheTenant Ready=False): another, older
// CacheTenant of the same cache maps to the same tenant name.
const ReasonIdentityConflict = "IdentityConflict"

// tenantName is the name the cache nodes know a CacheTenant by, and the
// identity in its certificate: <namespace>-<name>, which is a DNS label when
// it fits in 63 characters; longer ones are cut and end in a hash of the
// full namespace/name so they stay distinct. Names can still collide
// ("a-b"/"c" and "a"/"b-c"); decideTenants admits the older tenant only.
func tenantName(t *cachev1alpha1.CacheTenant) string {
	n := t.Namespace + "-" + t.Name
	if len(n) <= pki.MaxNameLen {
		return n
	}
	sum := sha256.Sum256([]byte(t.Namespace + "/" + t.Name))
	suffix := "-" + hex.EncodeToString(sum[:4])
	return strings.TrimRight(n[:pki.MaxNameLen-len(suffix)], "-") + suffix
}

// tenantDecision is whether a CacheTenant is admitted to a cache, and if not
// why (a CacheTenant Ready reason and a message).
type tenantDecision struct {
	Tenant  *cachev1alpha1.CacheTenant
	Name    string // tenantName
	Reason  string // "" when admitted
	Message string
}

// decideTenants decides which of the tenants referring to dc are admitted:
// not being deleted, in a namespace spec.tenantNamespaceSelector admits
// (nsLabels holds each namespace's labels) and not conflicting with an
// older tenant's name. Tenants of other caches are left out. The result is
// sorted by tenant name.
func decideTenants(dc *cachev1alpha1.DistributedCache, tenants []cachev1alpha1.CacheTenant, nsLabels map[string]map[string]string) []tenantDecision {
	sel := labels.Nothing()
	if s := dc.Spec.TenantNamespaceSelector; s != nil {
		var err error
		if sel, err = metav1.LabelSelectorAsSelector(s); err != nil {
			sel = labels.Nothing() // the schema validates it; refuse rather than allow all
		}
	}
	var out []tenantDecision
	for i := range tenants {
		t := &tenants[i]
		if t.Spec.CacheRef.Namespace != dc.Namespace || t.Spec.CacheRef.Name != dc.Name || !t.DeletionTimestamp.IsZero() {
			continue
		}
		d := tenantDecision{Tenant: t, Name: tenantName(t)}
		if t.Namespace != dc.Namespace && !sel.Matches(labels.Set(nsLabels[t.Namespace])) {
			d.Reason = cachev1alpha1.ReasonNamespaceNotAllowed
			d.Message = fmt.Sprintf("DistributedCache %s/%s's spec.tenantNamespaceSelector does not admit namespace %s", dc.Namespace, dc.Name, t.Namespace)
		}
		out = append(out, d)
	}
	// A tenant already admitted under its name first, then the oldest, so a
	// newer tenant never takes a name from one in use.
	slices.SortFunc(out, func(a, b tenantDecision) int {
		if c := cmpBool(holdsName(b), holdsName(a)); c != 0 {
			return c
		}
		if c := a.Tenant.CreationTimestamp.Compare(b.Tenant.CreationTimestamp.Time); c != 0 {
			return c
		}
		return strings.Compare(a.Tenant.Namespace+"/"+a.Tenant.Name, b.Tenant.Namespace+"/"+b.Tenant.Name)
	})
	owner := map[string]*cachev1alpha1.CacheTenant{}
	for i := range out {
		d := &out[i]
		if d.Reason != "" {
			continue
		}
		if o, taken := owner[d.Name]; taken {
			d.Reason = ReasonIdentityConflict
			d.Message = fmt.Sprintf("tenant name %q is already used by CacheTenant %s/%s; rename this CacheTenant", d.Name, o.Namespace, o.Name)
			continue
		}
		owner[d.Name] = d.Tenant
	}
	slices.SortFunc(out, func(a, b tenantDecision) int { return strings.Compare(a.Name, b.Name) })
	return out
}

// holdsName reports whether the tenant's status says it is admitted under
// the name it maps to.
func holdsName(d tenantDecision) bool {
	st := &d.Tenant.Status
	return st.TenantName == d.Name && meta.IsStatusConditionTrue(st.Conditions, cachev1alpha1.ConditionReady)
}

func cmpBool(a, b bool) int {
	switch {
	case a == b:
		return 0
	case a:
		return 1
	}
	return -1
}

// listTenantDecisions lists every CacheTenant and the labels of their
// namespaces, and decides which are admitted to dc.
func listTenantDecisions(ctx context.Context, c client.Reader, dc *cachev1alpha1.DistributedCache) ([]tenantDecision, error) {
	var tenants cachev1alpha1.CacheTenantList
	if err := c.List(ctx, &tenants); err != nil {
		return nil, fmt.Errorf("listing CacheTenants: %w", err)
	}
	nsLabels := map[string]map[string]string{}
	for _, t := range tenants.Items {
		if t.Spec.CacheRef.Namespace != dc.Namespace || t.Spec.CacheRef.Name != dc.Name {
			continue
		}
		if _, ok := nsLabels[t.Namespace]; ok {
			continue
		}
		var ns corev1.Namespace
		if err := c.Get(ctx, types.NamespacedName{Name: t.Namespace}, &ns); err != nil {
			if client.IgnoreNotFound(err) != nil {
				return nil, err
			}
		}
		nsLabels[t.Namespace] = ns.Labels
	}
	return decideTenants(dc, tenants.Items, nsLabels), nil
}

// reconcileTenants writes the nodes' tenants file, the Secret
// <cache>-tenants, from the admitted CacheTenants. A tenant whose own
// credentials Secret cannot be read is left out (its CacheTenant says why):
// falling back to the cache's credentials would widen its access. The nodes
// hot-reload the file, so tenants come and go without a restart.
func (r *DistributedCacheReconciler) reconcileTenants(ctx context.Context, dc *cachev1alpha1.DistributedCache, _ *reconcileState) error {
	decisions, err := listTenantDecisions(ctx, r.Client, dc)
	if err != nil {
		return err
	}
	cfg := tenancy.Config{Tenants: []tenancy.Tenant{}}
	ephemeral := dc.Spec.Storage.Mode() == cachev1alpha1.StorageModeEmptyDir
	raisedBy := map[*cachev1alpha1.CacheTenant][]string{}
	for _, d := range decisions {
		if d.Reason != "" {
			continue
		}
		var creds *tenancy.Credentials
		if ref := d.Tenant.Spec.CredentialsSecret; ref != nil {
			if creds, err = readCredentials(ctx, r.apiReader(), d.Tenant.Namespace, ref); err != nil {
				log.FromContext(ctx).V(1).Info("leaving tenant out of the tenants file", "tenant", d.Name, "reason", err.Error())
				continue
			}
		}
		entry, raised := tenantEntry(d, creds, ephemeral)
		if len(raised) > 0 {
			raisedBy[d.Tenant] = raised
		}
		cfg.Tenants = append(cfg.Tenants, entry)
	}
	doc, err := renderTenantsFile(&cfg)
	if err != nil {
		return err
	}
	s := &corev1.Secret{
		ObjectMeta: metav1.ObjectMeta{Name: TenantsSecretName(dc), Namespace: dc.Namespace, Labels: objectLabels(dc, "")},
		Type:       corev1.SecretTypeOpaque,
		Data:       map[string][]byte{TenantsFileKey: doc},
	}
	res, err := applyOwned(ctx, r, dc, "Secret", s, &corev1.Secret{}, func(existing, desired *corev1.Secret) {
		existing.Data = desired.Data
	})
	if err != nil {
		return err
	}
	if res == applyUpdated {
		r.Recorder.Eventf(dc, nil, corev1.EventTypeNormal, EventTenantsUpdated, "UpdateTenants", "tenants file lists %d tenants", len(cfg.Tenants))
		for t, raised := range raisedBy {
			r.Recorder.Eventf(t, dc, corev1.EventTypeWarning, EventReplicasRaised, "RenderPolicies",
				"WriteBack policies %s keep %d copies, not 1: DistributedCache %s stores on emptyDir volumes, and a rescheduled pod would lose the writes only it held",
				strings.Join(raised, ", "), minEphemeralReplicas, dc.Name)
		}
	}
	return nil
}

// EventTenantsUpdated is the reason of the event for a rewritten tenants
// file.
const EventTenantsUpdated = "TenantsUpdated"

// renderTenantsFile renders the tenants file and checks that the nodes'
// parser accepts it, so a file the nodes would refuse is never written.
func renderTenantsFile(cfg *tenancy.Config) ([]byte, error) {
	doc, err := yaml.Marshal(cfg)
	if err != nil {
		return nil, err
	}
	if _, err := tenancy.Parse(doc); err != nil {
		return nil, fmt.Errorf("rendered tenants file is invalid: %w", err)
	}
	return doc, nil
}

// readCredentials reads a CredentialsSecretReference in namespace ns.
func readCredentials(ctx context.Context, c client.Reader, ns string, ref *cachev1alpha1.CredentialsSecretReference) (*tenancy.Credentials, error) {
	var s corev1.Secret
	if err := c.Get(ctx, types.NamespacedName{Namespace: ns, Name: ref.Name}, &s); err != nil {
		return nil, fmt.Errorf("credentials secret %s/%s: %w", ns, ref.Name, err)
	}
	return credentialsFromSecret(&s, ref)
}

// credentialsFromSecret reads the credentials ref names from s. Each value
// must be text without control characters: the nodes' tenants file (YAML)
// cannot hold them, and a tenant that does not render would keep the file
// from being written for every tenant of the cache.
func credentialsFromSecret(s *corev1.Secret, ref *cachev1alpha1.CredentialsSecretReference) (*tenancy.Credentials, error) {
	keyOr := func(k, def string) string {
		if k == "" {
			return def
		}
		return k
	}
	cr := &tenancy.Credentials{
		AccessKeyID:     string(s.Data[keyOr(ref.AccessKeyIDKey, "AWS_ACCESS_KEY_ID")]),
		SecretAccessKey: string(s.Data[keyOr(ref.SecretAccessKeyKey, "AWS_SECRET_ACCESS_KEY")]),
	}
	if ref.SessionTokenKey != "" {
		cr.SessionToken = string(s.Data[ref.SessionTokenKey])
	}
	if cr.AccessKeyID == "" || cr.SecretAccessKey == "" {
		return nil, fmt.Errorf("credentials secret %s/%s lacks key %s or %s", s.Namespace, ref.Name,
			keyOr(ref.AccessKeyIDKey, "AWS_ACCESS_KEY_ID"), keyOr(ref.SecretAccessKeyKey, "AWS_SECRET_ACCESS_KEY"))
	}
	for key, v := range map[string]string{keyOr(ref.AccessKeyIDKey, "AWS_ACCESS_KEY_ID"): cr.AccessKeyID,
		keyOr(ref.SecretAccessKeyKey, "AWS_SECRET_ACCESS_KEY"): cr.SecretAccessKey, ref.SessionTokenKey: cr.SessionToken} {
		if !utf8.ValidString(v) || strings.ContainsFunc(v, unicode.IsControl) {
			return nil, fmt.Errorf("credentials secret %s/%s: key %s holds control characters (a trailing newline?) or bytes that are not UTF-8",
				s.Namespace, ref.Name, key)
		}
	}
	return cr, nil
}

// tenantEntry is a tenant's entry in the nodes' tenants file. On a cache
// whose disks are emptyDir volumes (ephemeral), a WriteBack policy keeps
// at least 2 copies: a rescheduled pod comes back with an empty disk, and
// an acknowledged write that only it held would be lost. raised names the
// policies whose replicas were raised so.
func tenantEntry(d tenantDecision, creds *tenancy.Credentials, ephemeral bool) (t tenancy.Tenant, raised []string) {
	t = tenancy.Tenant{Name: d.Name, Buckets: slices.Clone(d.Tenant.Spec.Buckets), Credentials: creds}
	slices.Sort(t.Buckets)
	if q := d.Tenant.Spec.Quota; q != nil {
		t.QuotaBytes = q.Value()
	}
	for _, p := range d.Tenant.Spec.Policies {
		tp := tenancy.Policy{Bucket: p.Bucket, Prefix: p.Prefix, Mode: tenancy.Mode(p.Mode)}
		if p.Replicas != nil {
			tp.Replicas = int(*p.Replicas)
		}
		if ephemeral && tp.Mode == tenancy.WriteBack && tp.ReplicaCount() < minEphemeralReplicas {
			tp.Replicas = minEphemeralReplicas
			raised = append(raised, p.Bucket+"/"+p.Prefix)
		}
		if p.Expiry != nil {
			tp.Expiry = p.Expiry.Duration.String()
		}
		t.Policies = append(t.Policies, tp)
	}
	return t, raised
}

// minEphemeralReplicas is the fewest copies a WriteBack write gets on a
// cache with emptyDir storage.
const minEphemeralReplicas = 2

// EventReplicasRaised is the reason of the warning on a CacheTenant whose
// WriteBack policies asked for fewer copies than an emptyDir cache keeps.
const EventReplicasRaised = "WriteBackReplicasRaised"

// mapTenants maps the CacheTenants of namespace ns ("": of every namespace)
// with to, for the watches' map functions; a failed list is logged and maps
// to nothing.
func mapTenants(ctx context.Context, c client.Reader, ns string, to func(t *cachev1alpha1.CacheTenant) []reconcile.Request) []reconcile.Request {
	var tenants cachev1alpha1.CacheTenantList
	if err := c.List(ctx, &tenants, client.InNamespace(ns)); err != nil {
		var kv []any
		if ns != "" {
			kv = append(kv, "namespace", ns)
		}
		log.FromContext(ctx).Error(err, "listing CacheTenants", kv...)
		return nil
	}
	var reqs []reconcile.Request
	for i := range tenants.Items {
		reqs = append(reqs, to(&tenants.Items[i])...)
	}
	return reqs
}
