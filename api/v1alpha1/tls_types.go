package v1alpha1

import (
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// TLSSpec configures the certificates of the cache: node serving
// certificates, peer certificates and tenants' client certificates.
//
// +kubebuilder:validation:XValidation:rule="!has(self.renewBefore) || !has(self.certificateDuration) || !self.renewBefore.matches('^([0-9]+([.][0-9]+)?(ns|us|ms|s|m|h))+$') || !self.certificateDuration.matches('^([0-9]+([.][0-9]+)?(ns|us|ms|s|m|h))+$') || duration(self.renewBefore) < duration(self.certificateDuration)",message="must be shorter than spec.tls.certificateDuration",fieldPath=".renewBefore",reason="FieldValueInvalid"
type TLSSpec struct {
	// IssuerRef makes cert-manager issue the certificates from this issuer.
	// Omitted: the operator runs a self-managed CA, kept in a Secret in the
	// cache's namespace.
	// +optional
	IssuerRef *IssuerReference `json:"issuerRef,omitempty"`

	// CertificateDuration is the lifetime of issued certificates.
	// +kubebuilder:default="2160h"
	// +kubebuilder:validation:Type=string
	// +kubebuilder:validation:MaxLength=32
	// +kubebuilder:validation:XValidation:rule="self.matches('^([0-9]+([.][0-9]+)?(ns|us|ms|s|m|h))+$') && duration(self) >= duration('1h')",message="must be a duration of at least 1h, such as 2160h",reason="FieldValueInvalid"
	// +optional
	CertificateDuration *metav1.Duration `json:"certificateDuration,omitempty"`

	// RenewBefore is how long before expiry a certificate is renewed (and
	// tenants' Secrets rewritten).
	// +kubebuilder:default="720h"
	// +kubebuilder:validation:Type=string
	// +kubebuilder:validation:MaxLength=32
	// +kubebuilder:validation:XValidation:rule="self.matches('^([0-9]+([.][0-9]+)?(ns|us|ms|s|m|h))+$') && duration(self) >= duration('5m')",message="must be a duration of at least 5m, such as 720h",reason="FieldValueInvalid"
	// +optional
	RenewBefore *metav1.Duration `json:"renewBefore,omitempty"`
}

// IssuerReference names a cert-manager issuer.
type IssuerReference struct {
	// Name of the issuer.
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=253
	// +required
	Name string `json:"name"`

	// Kind of the issuer: Issuer (in the cache's namespace), ClusterIssuer,
	// or an external issuer's kind.
	// +kubebuilder:default="Issuer"
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=63
	// +optional
	Kind string `json:"kind,omitempty"`

	// Group of the issuer.
	// +kubebuilder:default="cert-manager.io"
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=253
	// +optional
	Group string `json:"group,omitempty"`
}
