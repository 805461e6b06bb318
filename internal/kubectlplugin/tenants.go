package kubectlplugin

import (
	"context"
	"crypto/x509"
	"encoding/pem"
	"fmt"
	"slices"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	cachev1alpha1 "github.com/distcache/distcache/api/v1alpha1"
)

// TenantStatus is `kubectl distcache tenants` of one CacheTenant.
type TenantStatus struct {
	Namespace string `json:"namespace"`
	Name      string `json:"name"`
	// TenantName is the name the nodes know the tenant by (the tenant label
	// of their metrics).
	TenantName string   `json:"tenantName,omitempty"`
	Cache      string   `json:"cache"` // namespace/name
	Buckets    []string `json:"buckets"`
	Ready      string   `json:"ready,omitempty"` // the Ready condition's status
	Reason     string   `json:"reason,omitempty"`
	// QuotaBytes is spec.quota, the bound on the tenant's bytes on each
	// node's disk (0: none).
	QuotaBytes int64 `json:"quotaBytes,omitempty"`
	// Use is what the nodes' metrics say the tenant holds; nil when they
	// could not be read (UseError says why).
	Use      *QuotaUse `json:"use,omitempty"`
	UseError string    `json:"useError,omitempty"`
	// CertificateSecret holds the client certificate; CertificateNotAfter
	// is read from its tls.crt, or from status when the Secret cannot be
	// read (CertificateSource says which).
	CertificateSecret   string       `json:"certificateSecret"`
	CertificateNotAfter *metav1.Time `json:"certificateNotAfter,omitempty"`
	CertificateSource   string       `json:"certificateSource,omitempty"`
	CertificateError    string       `json:"certificateError,omitempty"`
	CertificateRenewal  *metav1.Time `json:"certificateRenewal,omitempty"`
	// Endpoint is the gateways' S3 endpoint (status.endpoint);
	// GatewayReady and GatewayReplicas the ready and desired gateway pods
	// over its zones.
	Endpoint           string `json:"endpoint,omitempty"`
	GatewayReplicas    int32  `json:"gatewayReplicas,omitempty"`
	GatewayReady       int32  `json:"gatewayReadyReplicas,omitempty"`
	CredentialsSecret  string `json:"credentialsSecret,omitempty"`
	ObservedGeneration int64  `json:"observedGeneration"`
	Generation         int64  `json:"generation"`
}

// QuotaUse is a tenant's disk bytes on a cache's nodes.
type QuotaUse struct {
	// MaxNodeBytes is the most any one node holds (what the quota bounds),
	// on MaxNode; TotalBytes the sum over the Nodes that were read.
	MaxNodeBytes int64  `json:"maxNodeBytes"`
	MaxNode      string `json:"maxNode,omitempty"`
	TotalBytes   int64  `json:"totalBytes"`
	Nodes        int    `json:"nodes"`
}

// collectTenants reads the tenants, their certificate Secrets and their
// caches' node metrics (one scrape per cache).
func collectTenants(ctx context.Context, cl client.Client, scr Scraper, tenants []cachev1alpha1.CacheTenant) []TenantStatus {
	type cacheUse struct {
		scrapes map[string]scrapeResult
		err     error
	}
	byCache := map[client.ObjectKey]*cacheUse{}
	use := func(ref cachev1alpha1.CacheReference) *cacheUse {
		k := client.ObjectKey{Namespace: ref.Namespace, Name: ref.Name}
		if u, ok := byCache[k]; ok {
			return u
		}
		u := &cacheUse{}
		byCache[k] = u
		var dc cachev1alpha1.DistributedCache
		if err := cl.Get(ctx, k, &dc); err != nil {
			u.err = fmt.Errorf("DistributedCache %s: %w", k, err)
			return u
		}
		pods, err := cachePods(ctx, cl, &dc)
		if err != nil {
			u.err = err
			return u
		}
		u.scrapes = scrapePods(ctx, scr, pods)
		return u
	}
	out := make([]TenantStatus, 0, len(tenants))
	for i := range tenants {
		t := &tenants[i]
		var secret *corev1.Secret
		var s corev1.Secret
		secretErr := cl.Get(ctx, client.ObjectKey{Namespace: t.Namespace, Name: t.CertificateSecretName()}, &s)
		if secretErr == nil {
			secret = &s
		}
		u := use(t.Spec.CacheRef)
		ts := buildTenantStatus(t, secret, secretErr, u.scrapes, u.err)
		out = append(out, ts)
	}
	return out
}

// buildTenantStatus makes the report of a tenant from what was read: its
// certificate Secret (nil and secretErr when unreadable) and the scrapes
// of its cache's nodes (nil and scrapeErr when they could not be listed).
func buildTenantStatus(t *cachev1alpha1.CacheTenant, secret *corev1.Secret, secretErr error, scrapes map[string]scrapeResult, scrapeErr error) TenantStatus {
	ts := TenantStatus{
		Namespace: t.Namespace, Name: t.Name, TenantName: t.Status.TenantName,
		Cache:   t.Spec.CacheRef.Namespace + "/" + t.Spec.CacheRef.Name,
		Buckets: slices.Clone(t.Spec.Buckets), Endpoint: t.Status.Endpoint,
		CertificateSecret: t.CertificateSecretName(), CertificateRenewal: t.Status.CertificateRenewalTime,
		CredentialsSecret:  t.Status.CredentialsSecret,
		ObservedGeneration: t.Status.ObservedGeneration, Generation: t.Generation,
	}
	if c := meta.FindStatusCondition(t.Status.Conditions, cachev1alpha1.ConditionReady); c != nil {
		ts.Ready, ts.Reason = string(c.Status), c.Reason
	}
	if t.Spec.Quota != nil {
		ts.QuotaBytes = t.Spec.Quota.Value()
	}
	if t.GatewayEnabled() {
		// Desired: spec.gateway.replicasPerZone in each zone status lists.
		ts.GatewayReplicas = t.Spec.Gateway.GatewayReplicasPerZone() * int32(len(t.Status.Gateways))
	}
	for _, g := range t.Status.Gateways {
		ts.GatewayReady += g.ReadyReplicas
	}

	switch notAfter, err := certificateNotAfter(secret, secretErr); {
	case err == nil:
		ts.CertificateNotAfter, ts.CertificateSource = &metav1.Time{Time: notAfter}, "secret"
	default:
		ts.CertificateError = err.Error()
		if t.Status.CertificateNotAfter != nil {
			ts.CertificateNotAfter, ts.CertificateSource = t.Status.CertificateNotAfter, "status"
		}
	}

	switch {
	case scrapeErr != nil:
		ts.UseError = scrapeErr.Error()
	case t.Status.TenantName == "":
		ts.UseError = "status.tenantName is empty: the operator has not registered the tenant yet"
	default:
		ts.Use, ts.UseError = quotaUse(t.Status.TenantName, scrapes)
	}
	return ts
}

// certificateNotAfter is the expiry of the first certificate in the
// Secret's tls.crt.
func certificateNotAfter(secret *corev1.Secret, secretErr error) (time.Time, error) {
	if secretErr != nil {
		return time.Time{}, fmt.Errorf("certificate Secret: %w", secretErr)
	}
	block, _ := pem.Decode(secret.Data[corev1.TLSCertKey])
	if block == nil || block.Type != "CERTIFICATE" {
		return time.Time{}, fmt.Errorf("certificate Secret %s/%s: no PEM certificate in %s", secret.Namespace, secret.Name, corev1.TLSCertKey)
	}
	cert, err := x509.ParseCertificate(block.Bytes)
	if err != nil {
		return time.Time{}, fmt.Errorf("certificate Secret %s/%s: %w", secret.Namespace, secret.Name, err)
	}
	return cert.NotAfter, nil
}

// quotaUse adds up the tenant's bytes over the nodes whose metrics were
// read. The error names the nodes that could not be read: with some read,
// Use is a lower bound.
func quotaUse(tenant string, scrapes map[string]scrapeResult) (*QuotaUse, string) {
	var (
		u      QuotaUse
		failed []string
	)
	names := make([]string, 0, len(scrapes))
	for name := range scrapes {
		names = append(names, name)
	}
	slices.Sort(names)
	for _, name := range names {
		r := scrapes[name]
		if r.err != nil {
			failed = append(failed, name+": "+r.err.Error())
			continue
		}
		u.Nodes++
		b := r.metrics.TenantBytes[tenant]
		u.TotalBytes += b
		if b > u.MaxNodeBytes || u.MaxNode == "" {
			u.MaxNodeBytes, u.MaxNode = b, name
		}
	}
	msg := ""
	if len(failed) > 0 {
		msg = "metrics not read from " + strings.Join(failed, "; ")
	}
	if u.Nodes == 0 {
		if msg == "" {
			msg = "the cache has no node pods"
		}
		return nil, msg
	}
	return &u, msg
}
