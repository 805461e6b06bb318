package controllers

import (
	"context"
	"crypto/rand"
	"crypto/sha256"
	"encoding/base32"
	"encoding/base64"
	"encoding/hex"
	"fmt"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller/controllerutil"

	cachev1alpha1 "github.com/distcache/distcache/api/v1alpha1"
)

// The S3 credentials clients sign their requests to the gateways with:
// random keys kept in a Secret of the tenant's namespace, which the
// gateways read from their environment.

// Keys of the credentials Secret: the names AWS SDKs, the AWS CLI and
// ClickHouse's from_env read from the environment, so `envFrom` of the
// Secret is all a client needs.
const (
	CredentialsAccessKeyID     = "AWS_ACCESS_KEY_ID"
	CredentialsSecretAccessKey = "AWS_SECRET_ACCESS_KEY"
	CredentialsEndpointURL     = "AWS_ENDPOINT_URL"
	CredentialsRegion          = "AWS_REGION"
	// defaultClientRegion is what clients are told to sign for when the
	// gateway accepts any region: SDKs need one.
	defaultClientRegion = "us-east-1"
)

// GatewayCredentialsSecretName names the Secret of the S3 credentials.
func GatewayCredentialsSecretName(t *cachev1alpha1.CacheTenant) string {
	return t.Name + "-s3-credentials"
}

// ensureGatewayCredentials keeps the credentials Secret: random keys made
// once (and again when the Secret is deleted or a key is emptied), the
// endpoint and region kept current. The keys are never logged.
func (r *CacheTenantReconciler) ensureGatewayCredentials(ctx context.Context, t *cachev1alpha1.CacheTenant) (*corev1.Secret, error) {
	name := GatewayCredentialsSecretName(t)
	var cur corev1.Secret
	err := r.Get(ctx, types.NamespacedName{Namespace: t.Namespace, Name: name}, &cur)
	if client.IgnoreNotFound(err) != nil {
		return nil, err
	}
	exists := err == nil
	if exists && !metav1.IsControlledBy(&cur, t) {
		return nil, fmt.Errorf("secret %s exists and is not owned by this CacheTenant: delete or rename it", name)
	}
	region := t.Spec.Gateway.Region
	if region == "" {
		region = defaultClientRegion
	}
	data := map[string][]byte{
		CredentialsAccessKeyID:     cur.Data[CredentialsAccessKeyID],
		CredentialsSecretAccessKey: cur.Data[CredentialsSecretAccessKey],
		CredentialsEndpointURL:     []byte(GatewayEndpoint(t)),
		CredentialsRegion:          []byte(region),
	}
	if len(data[CredentialsAccessKeyID]) == 0 || len(data[CredentialsSecretAccessKey]) == 0 {
		id, secret, err := newGatewayKeys()
		if err != nil {
			return nil, err
		}
		data[CredentialsAccessKeyID], data[CredentialsSecretAccessKey] = []byte(id), []byte(secret)
	}
	labels := mergeMaps(tenantSecretLabels(t), map[string]string{LabelComponent: "s3-credentials"})
	if exists {
		if mapsEqualBytes(cur.Data, data) {
			return &cur, nil
		}
		cur.Labels = mergeMaps(cur.Labels, labels)
		cur.Data = data
		if err := r.Update(ctx, &cur); err != nil {
			return nil, fmt.Errorf("updating credentials secret %s: %w", name, err)
		}
		return &cur, nil
	}
	s := &corev1.Secret{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: t.Namespace, Labels: labels},
		Type:       corev1.SecretTypeOpaque,
		Data:       data,
	}
	if err := controllerutil.SetControllerReference(t, s, r.Scheme); err != nil {
		return nil, err
	}
	if err := r.Create(ctx, s); err != nil {
		return nil, fmt.Errorf("creating credentials secret %s: %w", name, err)
	}
	r.Recorder.Eventf(t, nil, corev1.EventTypeNormal, EventGatewayCredentialsIssued, "IssueCredentials",
		"generated the S3 credentials of the gateways into Secret %s", name)
	return s, nil
}

// EventGatewayCredentialsIssued: new S3 keys were generated for the
// tenant's gateways.
const EventGatewayCredentialsIssued = "GatewayCredentialsIssued"

// newGatewayKeys makes an access key ID (20 characters, AWS's shape) and a
// secret access key (40), from crypto/rand.
func newGatewayKeys() (id, secret string, err error) {
	b := make([]byte, 12+30)
	if _, err := rand.Read(b); err != nil {
		return "", "", err
	}
	id = "DC" + base32.StdEncoding.EncodeToString(b[:12])[:18]
	return id, base64.RawURLEncoding.EncodeToString(b[12:]), nil
}

func mapsEqualBytes(a, b map[string][]byte) bool {
	if len(a) != len(b) {
		return false
	}
	for k, v := range a {
		w, ok := b[k]
		if !ok || string(v) != string(w) {
			return false
		}
	}
	return true
}

// credentialsHash is a short hash of the keys in a credentials Secret, for
// the pod template: it changes when the keys do and tells nothing of them.
func credentialsHash(data map[string][]byte) string {
	sum := sha256.Sum256([]byte(string(data[CredentialsAccessKeyID]) + "\x00" + string(data[CredentialsSecretAccessKey])))
	return hex.EncodeToString(sum[:8])
}
