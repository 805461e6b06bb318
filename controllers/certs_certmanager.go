package controllers

import (
	"context"
	"fmt"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"sigs.k8s.io/controller-runtime/pkg/client"

	cachev1alpha1 "github.com/distcache/distcache/api/v1alpha1"
	"github.com/distcache/distcache/internal/pki"
)

// In cert-manager mode (spec.tls.issuerRef) the operator writes cert-manager
// Certificates instead of signing itself; cert-manager issues and renews the
// Secrets. The Certificates are written as unstructured objects so the
// operator needs neither cert-manager's Go module nor its CRDs to run.

// certificateGVK is cert-manager's Certificate kind.
var certificateGVK = schema.GroupVersionKind{Group: "cert-manager.io", Version: "v1", Kind: "Certificate"}

// AnnotationTenant on a tenant's certificate Secret in the cache's
// namespace (cert-manager mode) names the CacheTenant, namespace/name, that
// receives a copy of it.
const AnnotationTenant = "cache.distcache.io/tenant"

// certificateRequest is what a cert-manager Certificate asks for.
type certificateRequest struct {
	name, namespace, secretName string
	dnsNames                    []string
	identity                    pki.Identity
	server                      bool
	secretLabels                map[string]string
	secretAnnotations           map[string]string
}

// buildCertificate is the cert-manager Certificate for req, issued by the
// cache's spec.tls.issuerRef with its lifetimes. The private key is rotated
// on every renewal.
func buildCertificate(dc *cachev1alpha1.DistributedCache, req certificateRequest) *unstructured.Unstructured {
	validity, renewBefore := certLifetimes(dc)
	iss := dc.Spec.TLS.IssuerRef
	usages := []any{"digital signature", "client auth"}
	if req.server {
		usages = append(usages, "server auth")
	}
	spec := map[string]any{
		"secretName":  req.secretName,
		"commonName":  req.identity.Name,
		"uris":        []any{req.identity.String()},
		"usages":      usages,
		"duration":    validity.String(),
		"renewBefore": renewBefore.String(),
		"privateKey":  map[string]any{"algorithm": "ECDSA", "size": int64(256), "encoding": "PKCS8", "rotationPolicy": "Always"},
		"issuerRef":   map[string]any{"name": iss.Name, "kind": iss.Kind, "group": iss.Group},
		"secretTemplate": map[string]any{
			"labels":      toAnyMap(req.secretLabels),
			"annotations": toAnyMap(req.secretAnnotations),
		},
	}
	if len(req.dnsNames) > 0 {
		names := make([]any, len(req.dnsNames))
		for i, n := range req.dnsNames {
			names[i] = n
		}
		spec["dnsNames"] = names
	}
	u := &unstructured.Unstructured{Object: map[string]any{"spec": spec}}
	u.SetGroupVersionKind(certificateGVK)
	u.SetName(req.name)
	u.SetNamespace(req.namespace)
	u.SetLabels(objectLabels(dc, ""))
	return u
}

func toAnyMap(m map[string]string) map[string]any {
	out := make(map[string]any, len(m))
	for k, v := range m {
		out[k] = v
	}
	return out
}

// applyCertificate writes a Certificate owned by owner; where cert-manager
// is not installed it says so.
func applyCertificate(ctx context.Context, c client.Client, scheme *runtime.Scheme, owner *cachev1alpha1.DistributedCache, cert *unstructured.Unstructured) (applyResult, error) {
	existing := &unstructured.Unstructured{}
	existing.SetGroupVersionKind(certificateGVK)
	res, err := apply(ctx, c, scheme, owner, cert, existing, func(existing, desired *unstructured.Unstructured) {
		existing.Object["spec"] = desired.Object["spec"]
	})
	if meta.IsNoMatchError(err) {
		return "", fmt.Errorf("spec.tls.issuerRef is set but cert-manager is not installed (no %s kind): install cert-manager or remove spec.tls.issuerRef", certificateGVK.GroupKind())
	}
	return res, err
}

// copyIssuedSecret is the tenant's Secret contents copied from the Secret
// cert-manager wrote, or nil while it is not issued yet.
func copyIssuedSecret(src *corev1.Secret) map[string][]byte {
	if len(src.Data[corev1.TLSCertKey]) == 0 || len(src.Data[corev1.TLSPrivateKeyKey]) == 0 {
		return nil
	}
	return map[string][]byte{
		corev1.TLSCertKey:       src.Data[corev1.TLSCertKey],
		corev1.TLSPrivateKeyKey: src.Data[corev1.TLSPrivateKeyKey],
		caCertKey:               src.Data[caCertKey],
	}
}
