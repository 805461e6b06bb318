package controllers

import (
	"context"
	"fmt"
	"slices"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller/controllerutil"

	cachev1alpha1 "github.com/distcache/distcache/api/v1alpha1"
	"github.com/distcache/distcache/internal/pki"
)

// caValidity is the lifetime of a self-managed cache CA. Leaves never
// outlive it; it is rotated two thirds into it, or when asked (rotateCA).
const caValidity = 10 * 365 * 24 * time.Hour

// Fallbacks for certificate lifetimes when the API server's defaults are
// absent (objects built in unit tests).
const (
	defaultCertificateDuration = 2160 * time.Hour
	defaultRenewBefore         = 720 * time.Hour
)

// EventCertificateIssued is the reason of the event for a (re)issued
// certificate.
const EventCertificateIssued = "CertificateIssued"

// CASecretName is the Secret (tls.crt, tls.key) holding the cache's
// self-managed CA.
func CASecretName(dc *cachev1alpha1.DistributedCache) string { return dc.Name + "-ca" }

// peerIdentity is the identity the cache's nodes present to each other.
func peerIdentity(dc *cachev1alpha1.DistributedCache) pki.Identity {
	return pki.Identity{Kind: pki.KindPeer, Name: dc.Name}
}

// nodeDNSNames are the names the node certificate is valid for: every pod of
// every zone through its headless Service (wildcards, as pods come and go),
// each zone's Service itself (the seeds of that zone's gateways), and the
// client Service, each short and fully qualified. Sorted.
func nodeDNSNames(dc *cachev1alpha1.DistributedCache) []string {
	ns := dc.Namespace
	svc := clientServiceName(dc)
	names := []string{svc, svc + "." + ns, svc + "." + ns + ".svc", svc + "." + ns + ".svc.cluster.local"}
	for _, z := range dc.Spec.Zones {
		zs := zoneObjectName(dc, z.Name)
		names = append(names, "*."+zs+"."+ns+".svc", "*."+zs+"."+ns+".svc.cluster.local",
			zs+"."+ns+".svc", zs+"."+ns+".svc.cluster.local")
	}
	slices.Sort(names)
	return slices.Compact(names)
}

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

// reconcileCA returns the cache's CA, creating its Secret on first use and
// moving a rotation on (rotateCA), and when to look again. A Secret that no
// longer holds a usable CA is an error, never silently replaced: every
// issued certificate chains to it.
func (r *DistributedCacheReconciler) reconcileCA(ctx context.Context, dc *cachev1alpha1.DistributedCache) (caState, time.Duration, error) {
	var s corev1.Secret
	err := r.Get(ctx, types.NamespacedName{Namespace: dc.Namespace, Name: CASecretName(dc)}, &s)
	if err == nil {
		st, next, err := r.rotateCA(ctx, dc, &s)
		if err != nil {
			return caState{}, 0, err
		}
		return st, next, r.patchStatus(ctx, client.ObjectKeyFromObject(dc), func(latest *cachev1alpha1.DistributedCache) {
			latest.Status.CertificateAuthority = caStatus(&s, st)
		})
	}
	if client.IgnoreNotFound(err) != nil {
		return caState{}, 0, err
	}
	ca, err := pki.NewCA(caCommonName(dc), caValidity)
	if err != nil {
		return caState{}, 0, err
	}
	s = corev1.Secret{
		ObjectMeta: metav1.ObjectMeta{Name: CASecretName(dc), Namespace: dc.Namespace, Labels: objectLabels(dc, "")},
		Type:       corev1.SecretTypeTLS,
		Data:       map[string][]byte{corev1.TLSCertKey: ca.CertPEM, corev1.TLSPrivateKeyKey: ca.KeyPEM, caCertKey: ca.CertPEM},
	}
	// A new CA answers any rotation asked for so far.
	setAnnotation(&s, annotationCARotatedFor, dc.Annotations[AnnotationRotateCA])
	if err := controllerutil.SetControllerReference(dc, &s, r.Scheme); err != nil {
		return caState{}, 0, err
	}
	if err := r.Create(ctx, &s); err != nil {
		return caState{}, 0, fmt.Errorf("creating CA secret: %w", err)
	}
	r.Recorder.Eventf(dc, nil, corev1.EventTypeNormal, EventCreated, "Create", "created CA %s, valid until %s", s.Name, ca.Cert.NotAfter.UTC().Format(time.RFC3339))
	return caState{signer: ca, bundle: ca.CertPEM}, time.Second, nil
}

// reconcileNodeCertificate keeps the nodes' certificate Secret current: a
// server certificate for nodeDNSNames, also usable as a client certificate,
// carrying the peer identity. It is reissued in place before expiry (or when
// the zones change); the nodes reload it from the mounted Secret without a
// restart. It returns when to look again.
func (r *DistributedCacheReconciler) reconcileNodeCertificate(ctx context.Context, dc *cachev1alpha1.DistributedCache, ca caState) (time.Duration, error) {
	validity, renewBefore := certLifetimes(dc)
	want := wantedCert{ca: ca.signer, bundle: ca.bundle, dnsNames: nodeDNSNames(dc), identity: peerIdentity(dc), renewBefore: renewBefore, now: r.now()}
	key := types.NamespacedName{Namespace: dc.Namespace, Name: NodeTLSSecretName(dc)}
	var existing corev1.Secret
	err := r.Get(ctx, key, &existing)
	if client.IgnoreNotFound(err) != nil {
		return 0, err
	}
	found := err == nil
	var cur *corev1.Secret
	if found {
		cur = &existing
	}
	why, cert := reissueReason(cur, want)
	if why == "" {
		if data := bundleUpdate(cur, want.bundle); data != nil {
			existing.Data = data
			if err := r.Update(ctx, &existing); err != nil {
				return 0, fmt.Errorf("writing node certificate secret: %w", err)
			}
			r.Recorder.Eventf(dc, nil, corev1.EventTypeNormal, EventCertificateIssued, "UpdateTrustBundle",
				"updated the CA bundle (ca.crt) of %s", key.Name)
		}
		return renewalTime(cert, renewBefore).Sub(want.now), nil
	}
	leaf, err := ca.signer.IssueServer(fmt.Sprintf("%s.%s cache node", dc.Name, dc.Namespace), want.dnsNames, nil, validity, pki.WithIdentity(want.identity))
	if err != nil {
		return 0, err
	}
	s := &corev1.Secret{
		ObjectMeta: metav1.ObjectMeta{Name: key.Name, Namespace: key.Namespace, Labels: objectLabels(dc, "")},
		Type:       corev1.SecretTypeTLS,
		Data:       tlsSecretData(leaf, ca.bundle),
	}
	if err := controllerutil.SetControllerReference(dc, s, r.Scheme); err != nil {
		return 0, err
	}
	if found {
		existing.Labels = mergeMaps(existing.Labels, s.Labels)
		existing.OwnerReferences = s.OwnerReferences
		existing.Data = s.Data
		err = r.Update(ctx, &existing)
	} else {
		err = r.Create(ctx, s)
	}
	if err != nil {
		return 0, fmt.Errorf("writing node certificate secret: %w", err)
	}
	r.Recorder.Eventf(dc, nil, corev1.EventTypeNormal, EventCertificateIssued, "IssueCertificate",
		"issued node certificate %s (%s), valid until %s", key.Name, why, leaf.NotAfter.UTC().Format(time.RFC3339))
	return renewIn(leaf, renewBefore, want.now), nil
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

// reconcileCertificates keeps the cache's CA and node certificate current and
// returns when to look again (the next renewal or rotation step).
func (r *DistributedCacheReconciler) reconcileCertificates(ctx context.Context, dc *cachev1alpha1.DistributedCache) (time.Duration, error) {
	if dc.Spec.TLS.IssuerRef != nil {
		if err := r.patchStatus(ctx, client.ObjectKeyFromObject(dc), func(latest *cachev1alpha1.DistributedCache) {
			latest.Status.CertificateAuthority = nil // the issuer's
		}); err != nil {
			return 0, err
		}
		return r.reconcileCertManagerCertificates(ctx, dc)
	}
	ca, caNext, err := r.reconcileCA(ctx, dc)
	if err != nil {
		return 0, err
	}
	renew, err := r.reconcileNodeCertificate(ctx, dc, ca)
	return min(renew, caNext), err
}
