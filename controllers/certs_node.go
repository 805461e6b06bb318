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

// The cache's certificate step: the nodes' certificate Secret, signed by
// the cache's CA or issued by cert-manager.

// reconcileCertificates keeps the cache's CA and node certificate current and
// asks for a look again at the next renewal or rotation step.
func (r *DistributedCacheReconciler) reconcileCertificates(ctx context.Context, dc *cachev1alpha1.DistributedCache, st *reconcileState) error {
	if dc.Spec.TLS.IssuerRef != nil {
		if err := r.patchStatus(ctx, client.ObjectKeyFromObject(dc), func(latest *cachev1alpha1.DistributedCache) {
			latest.Status.CertificateAuthority = nil // the issuer's
		}); err != nil {
			return err
		}
		return r.reconcileCertManagerCertificates(ctx, dc)
	}
	ca, caNext, err := r.reconcileCA(ctx, dc)
	if err != nil {
		return err
	}
	renew, err := r.reconcileNodeCertificate(ctx, dc, ca)
	st.after(min(renew, caNext))
	return err
}

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

// nodeCertificateRequest is the nodes' certificate in cert-manager mode.
func nodeCertificateRequest(dc *cachev1alpha1.DistributedCache) certificateRequest {
	return certificateRequest{
		name: dc.Name + "-node", namespace: dc.Namespace, secretName: NodeTLSSecretName(dc),
		dnsNames: nodeDNSNames(dc), identity: peerIdentity(dc), server: true,
		secretLabels: objectLabels(dc, ""),
	}
}

// reconcileCertManagerCertificates writes the nodes' Certificate;
// cert-manager renews it, so nothing needs a timed look.
func (r *DistributedCacheReconciler) reconcileCertManagerCertificates(ctx context.Context, dc *cachev1alpha1.DistributedCache) error {
	cert := buildCertificate(dc, nodeCertificateRequest(dc))
	res, err := applyCertificate(ctx, r.Client, r.Scheme, dc, cert)
	if err != nil {
		return err
	}
	r.recordCreated(dc, "Certificate", cert.GetName(), res)
	return nil
}
