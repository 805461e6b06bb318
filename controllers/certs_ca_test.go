package controllers

import (
	"context"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/tools/events"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/distcache/distcache/internal/pki"
)

// The rotation's decisions that the envtest spec (e2e/operator) does not
// reach: when it starts by itself, and Secrets it must refuse to act on.
// e2e/operator runs a whole rotation against a real API server.
func TestRotateCASteps(t *testing.T) {
	ctx := context.Background()
	ca, err := pki.NewCA("test CA", 30*24*time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	caSecret := func(edit func(s *corev1.Secret)) *corev1.Secret {
		return edited(&corev1.Secret{
			ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "c-ca", Annotations: map[string]string{}},
			Data:       map[string][]byte{corev1.TLSCertKey: ca.CertPEM, corev1.TLSPrivateKeyKey: ca.KeyPEM},
		}, edit)
	}
	run := func(t *testing.T, s *corev1.Secret, now time.Time) (*corev1.Secret, time.Duration, *events.FakeRecorder, error) {
		t.Helper()
		r := testReconciler(t, false, s)
		rec := events.NewFakeRecorder(10)
		r.Recorder, r.Now = rec, func() time.Time { return now }
		var cur corev1.Secret
		if err := r.Get(ctx, client.ObjectKeyFromObject(s), &cur); err != nil {
			t.Fatal(err)
		}
		_, wait, err := r.rotateCA(ctx, testCache(nil), &cur)
		var after corev1.Secret
		if gerr := r.Get(ctx, client.ObjectKeyFromObject(s), &after); gerr != nil {
			t.Fatal(gerr)
		}
		return &after, wait, rec, err
	}
	due := caRotationDue(ca)

	t.Run("idle before two thirds of the CA's life: nothing, look again then", func(t *testing.T) {
		now := due.Add(-time.Hour)
		after, wait, _, err := run(t, caSecret(nil), now)
		if err != nil || after.Annotations[annotationCARotation] != "" || wait != time.Hour {
			t.Fatalf("phase %q, wait %v, err %v", after.Annotations[annotationCARotation], wait, err)
		}
	})
	t.Run("two thirds into the CA's life: it starts by itself", func(t *testing.T) {
		after, _, rec, err := run(t, caSecret(nil), due)
		if err != nil || after.Annotations[annotationCARotation] != CARotationDistributing || len(after.Data[nextCACertKey]) == 0 {
			t.Fatalf("phase %q, keys %d, err %v", after.Annotations[annotationCARotation], len(after.Data), err)
		}
		if got := strings.Count(string(after.Data[caCertKey]), "BEGIN CERTIFICATE"); got != 2 {
			t.Fatalf("bundle holds %d certificates, want the old and the new", got)
		}
		if e := <-rec.Events; !strings.Contains(e, "two thirds into its lifetime") {
			t.Fatalf("event %q", e)
		}
	})
	t.Run("an unknown phase is an error, and nothing is written", func(t *testing.T) {
		s := caSecret(func(s *corev1.Secret) { s.Annotations[annotationCARotation] = "Sideways" })
		after, _, _, err := run(t, s, time.Now())
		if err == nil || !strings.Contains(err.Error(), annotationCARotation) || after.Annotations[annotationCARotation] != "Sideways" {
			t.Fatalf("err %v, phase %q", err, after.Annotations[annotationCARotation])
		}
	})
	t.Run("a damaged new CA is not switched to", func(t *testing.T) {
		s := caSecret(func(s *corev1.Secret) {
			setPhase(s, CARotationDistributing, time.Now().Add(-time.Hour))
			s.Data[nextCACertKey], s.Data[nextCAKeyKey] = []byte("garbage"), ca.KeyPEM
		})
		after, _, _, err := run(t, s, time.Now())
		if err == nil || string(after.Data[corev1.TLSCertKey]) != string(ca.CertPEM) {
			t.Fatalf("err %v; signing CA changed: %v", err, string(after.Data[corev1.TLSCertKey]) != string(ca.CertPEM))
		}
	})
	t.Run("reissuing waits for the node certificate, and says so after the grace", func(t *testing.T) {
		s := caSecret(func(s *corev1.Secret) { setPhase(s, CARotationReissuing, time.Now().Add(-time.Hour)) })
		after, wait, rec, err := run(t, s, time.Now())
		if err != nil || after.Annotations[annotationCARotation] != CARotationReissuing || wait != caReissueRetry {
			t.Fatalf("phase %q, wait %v, err %v", after.Annotations[annotationCARotation], wait, err)
		}
		if e := <-rec.Events; !strings.Contains(e, "Warning") || !strings.Contains(e, "ns/c-node-tls") {
			t.Fatalf("event %q", e)
		}
	})
}
