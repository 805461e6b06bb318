package controllers

import (
	"bytes"
	"context"
	"fmt"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
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

// CASecretName is the Secret (tls.crt, tls.key) holding the cache's
// self-managed CA.
func CASecretName(dc *cachev1alpha1.DistributedCache) string { return dc.Name + "-ca" }

// Rotating the self-managed CA without a moment where two holders of the
// cache's certificates cannot talk. Kubelets deliver a changed Secret to
// pods within a minute or two and at different moments, so nodes and
// gateways briefly hold different versions of their Secrets; each step
// below keeps every version still in use compatible with the next:
//
//  1. Distributing: a new CA is created and added to the trust bundle
//     (ca.crt) of every certificate Secret; certificates are still
//     issued by the old CA. Held for the grace period.
//  2. Reissuing: the new CA signs; every certificate (the nodes', each
//     tenant's) is issued again. Held until all of them are.
//  3. Retiring: held for the grace period, so every holder has its new
//     certificate; then the old CA leaves the bundle and the rotation
//     ends.
//
// The state lives in the CA Secret: tls.crt/tls.key sign, ca.crt is the
// bundle, next.crt/next.key hold the new CA while it is distributed, and
// annotations carry the phase and when it began.

// AnnotationRotateCA on a DistributedCache asks for a CA rotation: each
// new value starts one (for example the date). A CA also rotates by itself
// two thirds into its lifetime.
const AnnotationRotateCA = "cache.distcache.io/rotate-ca"

// Annotations of the CA Secret.
const (
	annotationCARotation      = "cache.distcache.io/ca-rotation"       // the phase
	annotationCARotationSince = "cache.distcache.io/ca-rotation-since" // RFC 3339
	annotationCARotatedFor    = "cache.distcache.io/ca-rotated-for"    // the last AnnotationRotateCA value acted on
)

// Keys of the CA Secret besides tls.crt, tls.key and ca.crt.
const (
	nextCACertKey = "next.crt"
	nextCAKeyKey  = "next.key"
)

// Phases of a CA rotation (status.certificateAuthority.rotation).
const (
	CARotationDistributing = "Distributing"
	CARotationReissuing    = "Reissuing"
	CARotationRetiring     = "Retiring"
)

// EventCARotation is the reason of the events of a CA rotation.
const EventCARotation = "CARotation"

// caReissueRetry is how often a rotation that waits for tenants'
// certificates looks again (their Secrets are written by the CacheTenant
// controller, which this one does not watch).
const caReissueRetry = 10 * time.Second

// DefaultCARotationGrace is the default of --ca-rotation-grace: kubelets
// update mounted Secrets within their sync period plus their cache's TTL
// (a minute each by default), and nodes and gateways read the files at
// their next handshake.
const DefaultCARotationGrace = 5 * time.Minute

// caState is the cache's CA as the certificate Secrets need it.
type caState struct {
	signer *pki.CA
	bundle []byte // the ca.crt of every certificate Secret
}

// loadCAState reads the CA Secret: the signing CA and the trust bundle (the
// signing CA alone for Secrets written before rotations existed).
func loadCAState(s *corev1.Secret) (caState, error) {
	ca, err := pki.LoadCA(s.Data[corev1.TLSCertKey], s.Data[corev1.TLSPrivateKeyKey])
	if err != nil {
		return caState{}, fmt.Errorf("secret %s does not hold a usable CA (restore it, or delete it to start a new CA and reissue every certificate): %w", s.Name, err)
	}
	bundle := s.Data[caCertKey]
	if len(bundle) == 0 {
		bundle = ca.CertPEM
	}
	return caState{signer: ca, bundle: bundle}, nil
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

// caRotationDue is when a CA rotates by itself: two thirds into its
// lifetime, like the leaves it signs.
func caRotationDue(ca *pki.CA) time.Time {
	return ca.Cert.NotBefore.Add(ca.Cert.NotAfter.Sub(ca.Cert.NotBefore) * 2 / 3)
}

// rotateCA moves a rotation of the CA in s one step when it is time, writing
// s. It returns the CA state to issue with and when to look again.
func (r *DistributedCacheReconciler) rotateCA(ctx context.Context, dc *cachev1alpha1.DistributedCache, s *corev1.Secret) (caState, time.Duration, error) {
	st, err := loadCAState(s)
	if err != nil {
		return caState{}, 0, err
	}
	now := r.now()
	since, _ := time.Parse(time.RFC3339, s.Annotations[annotationCARotationSince])
	wait := since.Add(r.caGrace()).Sub(now)
	var event string
	switch phase := s.Annotations[annotationCARotation]; phase {
	case "":
		token := dc.Annotations[AnnotationRotateCA]
		asked := token != "" && token != s.Annotations[annotationCARotatedFor]
		due := caRotationDue(st.signer)
		if !asked && now.Before(due) {
			return st, due.Sub(now), nil
		}
		next, err := pki.NewCA(caCommonName(dc), caValidity)
		if err != nil {
			return caState{}, 0, err
		}
		s.Data[nextCACertKey], s.Data[nextCAKeyKey] = next.CertPEM, next.KeyPEM
		s.Data[caCertKey] = concatPEM(st.signer.CertPEM, next.CertPEM)
		setAnnotation(s, annotationCARotatedFor, token)
		event = fmt.Sprintf("started a CA rotation (%s): the new CA, valid until %s, is added to every certificate Secret's ca.crt; certificates are reissued from it in %s",
			map[bool]string{true: AnnotationRotateCA + "=" + token, false: "the CA is two thirds into its lifetime"}[asked],
			next.Cert.NotAfter.UTC().Format(time.RFC3339), r.caGrace())
		setPhase(s, CARotationDistributing, now)
	case CARotationDistributing:
		if wait > 0 {
			return st, wait, nil
		}
		next, err := pki.LoadCA(s.Data[nextCACertKey], s.Data[nextCAKeyKey])
		if err != nil {
			return caState{}, 0, fmt.Errorf("secret %s: the CA being rotated in (%s): %w", s.Name, nextCACertKey, err)
		}
		s.Data[corev1.TLSCertKey], s.Data[corev1.TLSPrivateKeyKey] = next.CertPEM, next.KeyPEM
		delete(s.Data, nextCACertKey)
		delete(s.Data, nextCAKeyKey)
		event = "CA rotation: the new CA signs; every certificate is being reissued"
		setPhase(s, CARotationReissuing, now)
	case CARotationReissuing:
		pending, err := r.certificatesNotFrom(ctx, dc, st.signer)
		if err != nil {
			return caState{}, 0, err
		}
		if pending != "" {
			if wait <= 0 { // longer than a grace period: say what it waits for
				r.Recorder.Eventf(dc, nil, corev1.EventTypeWarning, EventCARotation, "RotateCA",
					"CA rotation waits for certificate Secret %s to hold a certificate of the new CA", pending)
			}
			return st, caReissueRetry, nil
		}
		event = fmt.Sprintf("CA rotation: every certificate is reissued; the old CA leaves the bundles in %s", r.caGrace())
		setPhase(s, CARotationRetiring, now)
	case CARotationRetiring:
		if wait > 0 {
			return st, wait, nil
		}
		s.Data[caCertKey] = st.signer.CertPEM
		delete(s.Annotations, annotationCARotation)
		delete(s.Annotations, annotationCARotationSince)
		event = "CA rotation done: the old CA is no longer trusted"
	default:
		return caState{}, 0, fmt.Errorf("secret %s: unknown CA rotation phase %q in annotation %s", s.Name, phase, annotationCARotation)
	}
	if err := r.Update(ctx, s); err != nil {
		return caState{}, 0, fmt.Errorf("writing CA secret: %w", err)
	}
	r.Recorder.Eventf(dc, nil, corev1.EventTypeNormal, EventCARotation, "RotateCA", "%s", event)
	st, err = loadCAState(s)
	return st, time.Second, err // look again soon: the next step may be due already
}

// certificatesNotFrom names a certificate Secret of the cache (the nodes',
// or an admitted, ready tenant's) not yet issued by ca, or returns "".
// Tenants that are not ready hold no usable certificate; they are issued
// one from the current CA when they become ready.
func (r *DistributedCacheReconciler) certificatesNotFrom(ctx context.Context, dc *cachev1alpha1.DistributedCache, ca *pki.CA) (string, error) {
	keys := []types.NamespacedName{{Namespace: dc.Namespace, Name: NodeTLSSecretName(dc)}}
	decisions, err := listTenantDecisions(ctx, r.Client, dc)
	if err != nil {
		return "", err
	}
	for _, d := range decisions {
		if d.Reason == "" && meta.IsStatusConditionTrue(d.Tenant.Status.Conditions, cachev1alpha1.ConditionReady) {
			keys = append(keys, types.NamespacedName{Namespace: d.Tenant.Namespace, Name: d.Tenant.CertificateSecretName()})
		}
	}
	for _, k := range keys {
		var s corev1.Secret
		if err := r.Get(ctx, k, &s); err != nil {
			if client.IgnoreNotFound(err) != nil {
				return "", err
			}
			return k.String(), nil
		}
		if cert, err := parseLeafSecret(&s); err != nil || cert.CheckSignatureFrom(ca.Cert) != nil {
			return k.String(), nil
		}
	}
	return "", nil
}

// caStatus is status.certificateAuthority for the CA Secret s.
func caStatus(s *corev1.Secret, st caState) *cachev1alpha1.CertificateAuthorityStatus {
	cs := &cachev1alpha1.CertificateAuthorityStatus{
		NotAfter: &metav1.Time{Time: st.signer.Cert.NotAfter},
		Rotation: s.Annotations[annotationCARotation],
	}
	if since, err := time.Parse(time.RFC3339, s.Annotations[annotationCARotationSince]); err == nil && cs.Rotation != "" {
		cs.RotationPhaseSince = &metav1.Time{Time: since}
	}
	return cs
}

// caGrace is how long a rotation holds the phases that wait for kubelets
// to deliver changed Secrets.
func (r *DistributedCacheReconciler) caGrace() time.Duration {
	if r.CARotationGrace > 0 {
		return r.CARotationGrace
	}
	return DefaultCARotationGrace
}

func caCommonName(dc *cachev1alpha1.DistributedCache) string {
	return fmt.Sprintf("distcache %s/%s CA", dc.Namespace, dc.Name)
}

func setPhase(s *corev1.Secret, phase string, now time.Time) {
	setAnnotation(s, annotationCARotation, phase)
	setAnnotation(s, annotationCARotationSince, now.UTC().Format(time.RFC3339))
}

func setAnnotation(o metav1.Object, k, v string) {
	a := o.GetAnnotations()
	if a == nil {
		a = map[string]string{}
	}
	a[k] = v
	o.SetAnnotations(a)
}

// concatPEM joins PEM blocks into one bundle.
func concatPEM(blocks ...[]byte) []byte {
	var b bytes.Buffer
	for _, p := range blocks {
		b.Write(bytes.TrimRight(p, "\n"))
		b.WriteByte('\n')
	}
	return b.Bytes()
}
