package controllers

import (
	"context"
	"crypto/x509"
	"fmt"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller/controllerutil"

	cachev1alpha1 "github.com/distcache/distcache/api/v1alpha1"
	"github.com/distcache/distcache/internal/pki"
)

// A CacheTenant's certificate step: its client certificate, issued into a
// Secret in the tenant's namespace (signed by the cache's CA, or copied from
// the Secret cert-manager wrote in the cache's namespace), and revoked when
// the tenant is not admitted or deleted.

// Event reasons of CacheTenants.
const (
	EventTenantRevoked = "TenantRevoked"
)

// reconcileCertificate returns the tenant's state and, when it waits for
// something unwatched, when to look again.
func (r *CacheTenantReconciler) reconcileCertificate(ctx context.Context, t *cachev1alpha1.CacheTenant) (tenantState, time.Duration, error) {
	st := tenantState{name: tenantName(t)}
	dc := &cachev1alpha1.DistributedCache{}
	ref := t.Spec.CacheRef
	if err := r.Get(ctx, types.NamespacedName{Namespace: ref.Namespace, Name: ref.Name}, dc); err != nil {
		if client.IgnoreNotFound(err) != nil {
			return st, 0, err
		}
		st.reason, st.message = cachev1alpha1.ReasonCacheNotFound, fmt.Sprintf("DistributedCache %s/%s does not exist", ref.Namespace, ref.Name)
		st.revoke = true
		return st, 0, nil
	}
	decisions, err := listTenantDecisions(ctx, r.Client, dc)
	if err != nil {
		return st, 0, err
	}
	for _, d := range decisions {
		if d.Tenant.UID == t.UID && d.Reason != "" {
			st.reason, st.message, st.revoke = d.Reason, d.Message, true
			return st, 0, nil
		}
	}
	if cs := t.Spec.CredentialsSecret; cs != nil {
		if _, err := readCredentials(ctx, r.apiReader(), t.Namespace, cs); err != nil {
			st.reason, st.message = cachev1alpha1.ReasonSecretNotFound, "spec.credentialsSecret: "+err.Error()
			return st, tenantRetry, nil
		}
	}
	validity, renewBefore := certLifetimes(dc)
	if dc.Spec.TLS.IssuerRef != nil {
		cert, err := r.copyIssuedCertificate(ctx, dc, t, st.name)
		if err != nil {
			return st, 0, err
		}
		if cert == nil {
			st.reason = cachev1alpha1.ReasonCertificatePending
			st.message = fmt.Sprintf("waiting for cert-manager to issue Certificate %s/%s", dc.Namespace, tenantCertificateName(dc, st.name))
			return st, tenantRetry, nil
		}
		st.secret, st.notAfter, st.renewAt = t.CertificateSecretName(), cert.NotAfter, renewalTime(cert, renewBefore)
		return st, 0, nil
	}
	var caSecret corev1.Secret
	if err := r.Get(ctx, types.NamespacedName{Namespace: dc.Namespace, Name: CASecretName(dc)}, &caSecret); err != nil {
		if client.IgnoreNotFound(err) != nil {
			return st, 0, err
		}
		st.reason, st.message = cachev1alpha1.ReasonCertificatePending, "waiting for the cache's CA"
		return st, tenantRetry, nil
	}
	ca, err := loadCAState(&caSecret)
	if err != nil {
		return st, 0, fmt.Errorf("cache CA secret %s/%s: %w", caSecret.Namespace, caSecret.Name, err)
	}
	cert, err := r.ensureClientCertificate(ctx, t, ca, st.name, validity, renewBefore)
	if err != nil {
		return st, 0, err
	}
	st.secret, st.notAfter, st.renewAt = t.CertificateSecretName(), cert.NotAfter, renewalTime(cert, renewBefore)
	return st, 0, nil
}

// ensureClientCertificate keeps the tenant's certificate Secret current and
// returns the certificate in it.
func (r *CacheTenantReconciler) ensureClientCertificate(ctx context.Context, t *cachev1alpha1.CacheTenant, ca caState,
	name string, validity, renewBefore time.Duration) (*x509.Certificate, error) {
	id := pki.Identity{Kind: pki.KindTenant, Name: name}
	cur, err := r.ownedCertificateSecret(ctx, t)
	if err != nil {
		return nil, err
	}
	why, cert := reissueReason(cur, wantedCert{ca: ca.signer, bundle: ca.bundle, identity: id, renewBefore: renewBefore, now: r.now()})
	if why == "" {
		if data := bundleUpdate(cur, ca.bundle); data != nil {
			if err := r.writeCertificateSecret(ctx, t, cur, data); err != nil {
				return nil, err
			}
		}
		return cert, nil
	}
	leaf, err := ca.signer.IssueClient(id, validity)
	if err != nil {
		return nil, err
	}
	data := tlsSecretData(leaf, ca.bundle)
	if err := r.writeCertificateSecret(ctx, t, cur, data); err != nil {
		return nil, err
	}
	r.Recorder.Eventf(t, nil, corev1.EventTypeNormal, EventCertificateIssued, "IssueCertificate",
		"issued client certificate for tenant %s into Secret %s (%s), valid until %s", name, t.CertificateSecretName(), why, leaf.NotAfter.UTC().Format(time.RFC3339))
	return parseLeafSecret(&corev1.Secret{Data: data})
}

// writeCertificateSecret writes data into the tenant's certificate Secret,
// creating it (owned by the tenant) when existing is nil.
func (r *CacheTenantReconciler) writeCertificateSecret(ctx context.Context, t *cachev1alpha1.CacheTenant, existing *corev1.Secret, data map[string][]byte) error {
	s := &corev1.Secret{
		ObjectMeta: metav1.ObjectMeta{Name: t.CertificateSecretName(), Namespace: t.Namespace, Labels: tenantSecretLabels(t)},
		Type:       corev1.SecretTypeTLS,
		Data:       data,
	}
	if err := controllerutil.SetControllerReference(t, s, r.Scheme); err != nil {
		return err
	}
	var err error
	if existing != nil {
		existing.Labels = mergeMaps(existing.Labels, s.Labels)
		existing.Data = s.Data
		err = r.Update(ctx, existing)
	} else {
		err = r.Create(ctx, s)
	}
	if err != nil {
		return fmt.Errorf("writing certificate secret %s: %w", s.Name, err)
	}
	return nil
}

// ownedCertificateSecret returns the tenant's certificate Secret, nil if it
// does not exist, or an error if a Secret of that name is not the tenant's.
func (r *CacheTenantReconciler) ownedCertificateSecret(ctx context.Context, t *cachev1alpha1.CacheTenant) (*corev1.Secret, error) {
	var s corev1.Secret
	err := r.Get(ctx, types.NamespacedName{Namespace: t.Namespace, Name: t.CertificateSecretName()}, &s)
	if apierrors.IsNotFound(err) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	if !metav1.IsControlledBy(&s, t) {
		return nil, fmt.Errorf("secret %s exists and is not owned by this CacheTenant: delete it or set spec.certificateSecretName", s.Name)
	}
	return &s, nil
}

// tenantCertificateName names a tenant's Certificate, and the Secret
// cert-manager writes, in the cache's namespace.
func tenantCertificateName(dc *cachev1alpha1.DistributedCache, tenant string) string {
	return dc.Name + "-tenant-" + tenant
}

// tenantCertificateRequest is a tenant's client certificate in cert-manager
// mode: issued in the cache's namespace (where the issuer is) and copied to
// the tenant's namespace by the CacheTenant reconciler.
func tenantCertificateRequest(dc *cachev1alpha1.DistributedCache, t *cachev1alpha1.CacheTenant, tenant string) certificateRequest {
	name := tenantCertificateName(dc, tenant)
	return certificateRequest{
		name: name, namespace: dc.Namespace, secretName: name,
		identity:          pki.Identity{Kind: pki.KindTenant, Name: tenant},
		secretLabels:      objectLabels(dc, ""),
		secretAnnotations: map[string]string{AnnotationTenant: t.Namespace + "/" + t.Name},
	}
}

// copyIssuedCertificate (cert-manager mode) writes the tenant's Certificate
// in the cache's namespace and copies the Secret cert-manager issued into
// the tenant's Secret. It returns nil while cert-manager has not issued it.
func (r *CacheTenantReconciler) copyIssuedCertificate(ctx context.Context, dc *cachev1alpha1.DistributedCache, t *cachev1alpha1.CacheTenant, name string) (*x509.Certificate, error) {
	req := tenantCertificateRequest(dc, t, name)
	if _, err := applyCertificate(ctx, r.Client, r.Scheme, dc, buildCertificate(dc, req)); err != nil {
		return nil, err
	}
	var src corev1.Secret
	if err := r.Get(ctx, types.NamespacedName{Namespace: dc.Namespace, Name: req.secretName}, &src); err != nil {
		return nil, client.IgnoreNotFound(err)
	}
	data := copyIssuedSecret(&src)
	if data == nil {
		return nil, nil
	}
	cert, err := parseLeafSecret(&corev1.Secret{Data: data})
	if err != nil {
		return nil, fmt.Errorf("secret %s/%s issued by cert-manager: %w", src.Namespace, src.Name, err)
	}
	existing, err := r.ownedCertificateSecret(ctx, t)
	if err != nil {
		return nil, err
	}
	if existing != nil && equality.Semantic.DeepEqual(existing.Data, data) {
		return cert, nil
	}
	if err := r.writeCertificateSecret(ctx, t, existing, data); err != nil {
		return nil, err
	}
	r.Recorder.Eventf(t, nil, corev1.EventTypeNormal, EventCertificateIssued, "CopyCertificate",
		"copied client certificate for tenant %s from %s/%s (cert-manager), valid until %s", name, src.Namespace, src.Name, cert.NotAfter.UTC().Format(time.RFC3339))
	return cert, nil
}

// tenantSecretLabels mark a tenant's certificate Secret as the operator's,
// so the manager's cache (selecting on LabelManagedBy) sees it.
func tenantSecretLabels(t *cachev1alpha1.CacheTenant) map[string]string {
	return map[string]string{
		LabelName:      "cachetenant",
		LabelInstance:  t.Name,
		LabelComponent: "client-certificate",
		LabelManagedBy: ManagedByValue,
	}
}

// revoke deletes the certificate Secrets this tenant owns: the one it names
// and one it named before.
func (r *CacheTenantReconciler) revoke(ctx context.Context, t *cachev1alpha1.CacheTenant) error {
	names := []string{t.CertificateSecretName()}
	if old := t.Status.CertificateSecretName; old != "" && old != names[0] {
		names = append(names, old)
	}
	for _, n := range names {
		var s corev1.Secret
		err := r.Get(ctx, types.NamespacedName{Namespace: t.Namespace, Name: n}, &s)
		if apierrors.IsNotFound(err) {
			continue
		}
		if err != nil {
			return err
		}
		if !metav1.IsControlledBy(&s, t) {
			continue
		}
		if err := r.Delete(ctx, &s); client.IgnoreNotFound(err) != nil {
			return err
		}
		r.Recorder.Eventf(t, nil, corev1.EventTypeNormal, EventTenantRevoked, "Revoke", "deleted certificate Secret %s", n)
	}
	return r.revokeIssued(ctx, t)
}

// revokeIssued deletes the tenant's cert-manager Certificate and the Secret
// cert-manager wrote, in the cache's namespace, if they are this tenant's
// (another tenant may hold the same name after a conflict).
func (r *CacheTenantReconciler) revokeIssued(ctx context.Context, t *cachev1alpha1.CacheTenant) error {
	dc := &cachev1alpha1.DistributedCache{ObjectMeta: metav1.ObjectMeta{Namespace: t.Spec.CacheRef.Namespace, Name: t.Spec.CacheRef.Name}}
	key := types.NamespacedName{Namespace: dc.Namespace, Name: tenantCertificateName(dc, tenantName(t))}
	mine := t.Namespace + "/" + t.Name
	cert := &unstructured.Unstructured{}
	cert.SetGroupVersionKind(certificateGVK)
	err := r.Get(ctx, key, cert)
	switch {
	case meta.IsNoMatchError(err) || apierrors.IsNotFound(err):
	case err != nil:
		return err
	default:
		ann, _, _ := unstructured.NestedStringMap(cert.Object, "spec", "secretTemplate", "annotations")
		if ann[AnnotationTenant] == mine {
			if err := r.Delete(ctx, cert); client.IgnoreNotFound(err) != nil {
				return err
			}
		}
	}
	var s corev1.Secret
	err = r.Get(ctx, key, &s)
	if apierrors.IsNotFound(err) {
		return nil
	}
	if err != nil {
		return err
	}
	if s.Annotations[AnnotationTenant] != mine {
		return nil
	}
	return client.IgnoreNotFound(r.Delete(ctx, &s))
}
