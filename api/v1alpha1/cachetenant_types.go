package v1alpha1

import (
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// CacheTenantSpec is a team's access to a DistributedCache.
type CacheTenantSpec struct {
	// CacheRef is the DistributedCache this tenant uses. The cache's
	// spec.tenantNamespaceSelector must admit this tenant's namespace.
	// Immutable: the client certificate is bound to that cache's CA; to move
	// a tenant, create a new CacheTenant.
	// +kubebuilder:validation:XValidation:rule="self == oldSelf",message="is immutable: create a new CacheTenant to use another cache",reason="FieldValueForbidden"
	// +required
	CacheRef CacheReference `json:"cacheRef"`

	// Buckets the tenant may read and write through the cache: exact S3
	// bucket names, no wildcards. Any other bucket is refused (403) before
	// anything reaches S3.
	// +listType=set
	// +kubebuilder:validation:MinItems=1
	// +kubebuilder:validation:MaxItems=100
	// +kubebuilder:validation:items:MinLength=3
	// +kubebuilder:validation:items:MaxLength=63
	// +kubebuilder:validation:items:Pattern=`^[a-z0-9][a-z0-9.-]*[a-z0-9]$`
	// +kubebuilder:validation:items:XValidation:rule="!self.contains('..') && !self.contains('.-') && !self.contains('-.') && !self.startsWith('xn--') && !self.startsWith('sthree-') && !self.matches('^[0-9]+[.][0-9]+[.][0-9]+[.][0-9]+$')",message="not a valid S3 bucket name (no '..', '.-', '-.', IP addresses, or xn--/sthree- prefixes)",reason="FieldValueInvalid"
	// +required
	Buckets []string `json:"buckets"`

	// Quota bounds the bytes of this tenant's data on each cache node's disk
	// tier; omitted: no quota beyond the node's diskSize.
	// +kubebuilder:validation:XValidation:rule="isQuantity(string(self)) && quantity(string(self)).isInteger() && quantity(string(self)).compareTo(quantity('0')) > 0",message="must be a positive whole number of bytes",reason="FieldValueInvalid"
	// +optional
	Quota *resource.Quantity `json:"quota,omitempty"`

	// CredentialsSecret holds this tenant's own S3 credentials, in the
	// tenant's namespace; the cache reads and writes this tenant's buckets
	// with them. Omitted: the cache's credentials.
	// +optional
	CredentialsSecret *CredentialsSecretReference `json:"credentialsSecret,omitempty"`

	// CertificateSecretName is the Secret, in the tenant's namespace, that
	// receives the client certificate (tls.crt, tls.key, ca.crt). Empty:
	// <metadata.name>-distcache-client (CertificateSecretName()).
	// +kubebuilder:validation:MaxLength=253
	// +kubebuilder:validation:Pattern=`^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$`
	// +optional
	CertificateSecretName string `json:"certificateSecretName,omitempty"`
}

// CacheReference names a DistributedCache.
type CacheReference struct {
	// Namespace of the DistributedCache.
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=63
	// +kubebuilder:validation:Pattern=`^[a-z0-9]([-a-z0-9]*[a-z0-9])?$`
	// +required
	Namespace string `json:"namespace"`

	// Name of the DistributedCache.
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=63
	// +kubebuilder:validation:Pattern=`^[a-z]([-a-z0-9]*[a-z0-9])?$`
	// +required
	Name string `json:"name"`
}

// CacheTenantStatus is the observed state of a tenant.
type CacheTenantStatus struct {
	// ObservedGeneration is the metadata.generation the status describes.
	// +optional
	ObservedGeneration int64 `json:"observedGeneration,omitempty"`

	// TenantName is the name the cache nodes know this tenant by (the client
	// certificate's identity, in metrics as the tenant label).
	// +optional
	TenantName string `json:"tenantName,omitempty"`

	// CertificateSecretName is the Secret holding the client certificate.
	// +optional
	CertificateSecretName string `json:"certificateSecretName,omitempty"`

	// CertificateNotAfter is when the current client certificate expires.
	// +optional
	CertificateNotAfter *metav1.Time `json:"certificateNotAfter,omitempty"`

	// CertificateRenewalTime is when the operator will renew it.
	// +optional
	CertificateRenewalTime *metav1.Time `json:"certificateRenewalTime,omitempty"`

	// Conditions: Ready (see the Condition* constants).
	// +listType=map
	// +listMapKey=type
	// +patchStrategy=merge
	// +patchMergeKey=type
	// +optional
	Conditions []metav1.Condition `json:"conditions,omitempty" patchStrategy:"merge" patchMergeKey:"type"`
}

// CacheTenant gives a team, in its own namespace, access to a
// DistributedCache: the operator registers the tenant with the cache nodes
// and issues its client certificate into a Secret beside it.
//
// +kubebuilder:object:root=true
// +kubebuilder:subresource:status
// +kubebuilder:resource:shortName=ctenant,categories=distcache
// +kubebuilder:printcolumn:name="Cache",type=string,JSONPath=`.spec.cacheRef.name`
// +kubebuilder:printcolumn:name="Cache Namespace",type=string,JSONPath=`.spec.cacheRef.namespace`,priority=1
// +kubebuilder:printcolumn:name="Secret",type=string,JSONPath=`.status.certificateSecretName`
// +kubebuilder:printcolumn:name="Expires",type=string,JSONPath=`.status.certificateNotAfter`,description="When the client certificate expires"
// +kubebuilder:printcolumn:name="Status",type=string,JSONPath=`.status.conditions[?(@.type=="Ready")].status`,description="The Ready condition"
// +kubebuilder:printcolumn:name="Reason",type=string,JSONPath=`.status.conditions[?(@.type=="Ready")].reason`,priority=1
// +kubebuilder:printcolumn:name="Age",type=date,JSONPath=`.metadata.creationTimestamp`
// +kubebuilder:validation:XValidation:rule="size(self.metadata.name) <= 63 && self.metadata.name.matches('^[a-z0-9]([-a-z0-9]*[a-z0-9])?$')",message="metadata.name must be a DNS label (at most 63 lowercase letters, digits and '-'): it becomes part of the tenant's identity in the cache",reason="FieldValueInvalid"
type CacheTenant struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`

	// Spec is the desired state.
	// +required
	Spec CacheTenantSpec `json:"spec"`

	// Status is the observed state, written by the operator.
	// +optional
	Status CacheTenantStatus `json:"status,omitempty"`
}

// CacheTenantList is a list of CacheTenants.
//
// +kubebuilder:object:root=true
type CacheTenantList struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata,omitempty"`
	Items           []CacheTenant `json:"items"`
}

func init() {
	SchemeBuilder.Register(&CacheTenant{}, &CacheTenantList{})
}
