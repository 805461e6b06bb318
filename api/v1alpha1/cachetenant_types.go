package v1alpha1

import (
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// CacheTenantSpec is a team's access to a DistributedCache.
// +kubebuilder:validation:XValidation:rule="!has(self.policies) || self.policies.all(p, p.bucket in self.buckets)",message="every policy's bucket must be one of spec.buckets",fieldPath=".policies",reason="FieldValueInvalid"
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

	// Policies choose how the cache treats writes (and reads) of a bucket
	// or of the keys under a prefix in it: WriteThrough (the default: a
	// write is acknowledged once S3 has it, and cached), WriteBack (a
	// write is acknowledged once replicas cache nodes keep it on disk, and
	// sent to S3 in the background), Transient (kept on replicas cache
	// nodes only, never sent to S3, until deleted or expired), ReadOnly
	// (writes refused with S3 AccessDenied naming the policy) or NoCache
	// (reads and writes go straight to S3; nothing is cached). The longest
	// matching prefix wins; keys no policy matches are WriteThrough.
	// +listType=map
	// +listMapKey=bucket
	// +listMapKey=prefix
	// +kubebuilder:validation:MaxItems=64
	// +optional
	Policies []WritePolicy `json:"policies,omitempty"`

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

	// Gateway runs S3 gateways for this tenant, one Deployment per zone of
	// the cache, behind one Service that keeps clients in their own zone:
	// S3 clients (ClickHouse's S3 disks, SDKs) point at status.endpoint
	// and sign with the keys in status.credentialsSecret. Omitted: no
	// gateway (the tenant runs its own with the client certificate).
	// +optional
	Gateway *GatewaySpec `json:"gateway,omitempty"`
}

// GatewaySpec is the tenant's operator-run S3 gateways.
//
// +kubebuilder:validation:XValidation:rule="!has(self.port) || self.port != 9091",message="must not be 9091, the gateways' metrics port",fieldPath=".port",reason="FieldValueInvalid"
type GatewaySpec struct {
	// Enabled runs the gateways; false removes them, their Service and
	// their credentials Secret.
	// +kubebuilder:default=true
	// +optional
	Enabled *bool `json:"enabled,omitempty"`

	// ReplicasPerZone is the number of gateway pods in each zone.
	// +kubebuilder:default=1
	// +kubebuilder:validation:Minimum=1
	// +kubebuilder:validation:Maximum=64
	// +optional
	ReplicasPerZone *int32 `json:"replicasPerZone,omitempty"`

	// Zones restricts the gateways to these zones of the cache. Empty: every
	// zone of the cache. A zone the cache does not have is reported in the
	// GatewayReady condition.
	// +listType=set
	// +kubebuilder:validation:MaxItems=8
	// +kubebuilder:validation:items:MinLength=1
	// +kubebuilder:validation:items:MaxLength=40
	// +kubebuilder:validation:items:Pattern=`^[a-z0-9]([-a-z0-9]*[a-z0-9])?$`
	// +optional
	Zones []string `json:"zones,omitempty"`

	// Port is the S3 port of the gateways and of their Service (plain
	// HTTP). The default, 8099, is not used by ClickHouse (9000, 8123,
	// 9009, 9363...) or MinIO, so a gateway can run beside either.
	// +kubebuilder:default=8099
	// +kubebuilder:validation:Minimum=1024
	// +kubebuilder:validation:Maximum=65535
	// +optional
	Port *int32 `json:"port,omitempty"`

	// PageCacheSize is each gateway's RAM page cache (cachenode gateway
	// --page-cache-bytes); 0 disables it. Without spec.gateway.resources
	// the memory request and limit are sized from it.
	// +kubebuilder:default="256Mi"
	// +kubebuilder:validation:XValidation:rule="isQuantity(string(self)) && quantity(string(self)).isInteger() && quantity(string(self)).compareTo(quantity('0')) >= 0 && quantity(string(self)).compareTo(quantity('512Gi')) <= 0",message="must be a whole number of bytes from 0 to 512Gi",reason="FieldValueInvalid"
	// +optional
	PageCacheSize *resource.Quantity `json:"pageCacheSize,omitempty"`

	// Region is the region S3 clients must sign for; empty: any.
	// +kubebuilder:validation:MaxLength=64
	// +kubebuilder:validation:Pattern=`^[a-z0-9-]*$`
	// +optional
	Region string `json:"region,omitempty"`

	// Resources of the gateway container. Omitted: 500m CPU and a memory
	// request and limit sized from pageCacheSize.
	// +optional
	Resources *corev1.ResourceRequirements `json:"resources,omitempty"`

	// NodeSelector places the gateways (next to the compute that reads
	// through them), in addition to their zone.
	// +optional
	NodeSelector map[string]string `json:"nodeSelector,omitempty"`

	// Tolerations of the gateway pods.
	// +listType=atomic
	// +optional
	Tolerations []corev1.Toleration `json:"tolerations,omitempty"`

	// Service is the Service in front of every zone's gateways.
	// +kubebuilder:default={}
	// +optional
	Service GatewayServiceSpec `json:"service,omitempty"`

	// PodTemplate holds overrides of the gateway pods.
	// +optional
	PodTemplate *PodTemplateOverrides `json:"podTemplate,omitempty"`
}

// GatewayServiceSpec is the gateways' Service.
type GatewayServiceSpec struct {
	// Type of the Service.
	// +kubebuilder:default=ClusterIP
	// +kubebuilder:validation:Enum=ClusterIP;NodePort;LoadBalancer
	// +optional
	Type corev1.ServiceType `json:"type,omitempty"`

	// Annotations of the Service (for example a load balancer's).
	// +optional
	Annotations map[string]string `json:"annotations,omitempty"`
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

	// Endpoint is the S3 endpoint URL of the tenant's gateways in the
	// cluster; empty without a gateway.
	// +optional
	Endpoint string `json:"endpoint,omitempty"`

	// CredentialsSecret is the Secret, in the tenant's namespace, with the
	// keys S3 clients sign with at Endpoint (AWS_ACCESS_KEY_ID,
	// AWS_SECRET_ACCESS_KEY, AWS_ENDPOINT_URL, AWS_REGION). Delete it to
	// rotate them: the operator writes new ones and rolls the gateways.
	// +optional
	CredentialsSecret string `json:"credentialsSecret,omitempty"`

	// Gateways is the state of each zone's gateways.
	// +listType=map
	// +listMapKey=zone
	// +optional
	Gateways []GatewayZoneStatus `json:"gateways,omitempty"`

	// Conditions: Ready and, with a gateway, GatewayReady (see the
	// Condition* constants).
	// +listType=map
	// +listMapKey=type
	// +patchStrategy=merge
	// +patchMergeKey=type
	// +optional
	Conditions []metav1.Condition `json:"conditions,omitempty" patchStrategy:"merge" patchMergeKey:"type"`
}

// GatewayZoneStatus is the observed state of one zone's gateways.
type GatewayZoneStatus struct {
	// Zone of the gateways.
	Zone string `json:"zone"`
	// Deployment running them.
	// +optional
	Deployment string `json:"deployment,omitempty"`
	// Replicas is the number of the zone's gateway pods.
	// +optional
	Replicas int32 `json:"replicas"`
	// ReadyReplicas is the number of them ready to serve.
	// +optional
	ReadyReplicas int32 `json:"readyReplicas"`
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
// +kubebuilder:printcolumn:name="Endpoint",type=string,JSONPath=`.status.endpoint`,description="S3 endpoint of the tenant's gateways"
// +kubebuilder:printcolumn:name="Status",type=string,JSONPath=`.status.conditions[?(@.type=="Ready")].status`,description="The Ready condition"
// +kubebuilder:printcolumn:name="Reason",type=string,JSONPath=`.status.conditions[?(@.type=="Ready")].reason`,priority=1
// +kubebuilder:printcolumn:name="Age",type=date,JSONPath=`.metadata.creationTimestamp`
// +kubebuilder:validation:XValidation:rule="size(self.metadata.name) <= 63 && self.metadata.name.matches('^[a-z0-9]([-a-z0-9]*[a-z0-9])?$')",message="metadata.name must be a DNS label (at most 63 lowercase letters, digits and '-'): it becomes part of the tenant's identity in the cache",reason="FieldValueInvalid"
// +kubebuilder:validation:XValidation:rule="!has(self.spec.gateway) || (size(self.metadata.name) <= 55 && self.metadata.name.matches('^[a-z]'))",message="metadata.name must start with a letter and be at most 55 characters when spec.gateway is set: the gateways' Service is named <name>-gateway",reason="FieldValueInvalid"
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

// WriteMode is how the cache treats the writes and reads of a bucket or
// prefix (tenancy.Mode).
// +kubebuilder:validation:Enum=WriteThrough;WriteBack;Transient;ReadOnly;NoCache
type WriteMode string

// Write modes.
const (
	WriteModeWriteThrough WriteMode = "WriteThrough"
	WriteModeWriteBack    WriteMode = "WriteBack"
	WriteModeTransient    WriteMode = "Transient"
	WriteModeReadOnly     WriteMode = "ReadOnly"
	WriteModeNoCache      WriteMode = "NoCache"
)

// WritePolicy applies a WriteMode to a bucket, or to the keys under a
// prefix in it.
// +kubebuilder:validation:XValidation:rule="!has(self.replicas) || self.mode in ['WriteBack', 'Transient']",message="only WriteBack and Transient policies have replicas",fieldPath=".replicas",reason="FieldValueForbidden"
// +kubebuilder:validation:XValidation:rule="!has(self.expiry) || self.mode == 'Transient'",message="only Transient policies expire",fieldPath=".expiry",reason="FieldValueForbidden"
type WritePolicy struct {
	// Bucket is one of spec.buckets.
	// +kubebuilder:validation:MinLength=3
	// +kubebuilder:validation:MaxLength=63
	// +required
	Bucket string `json:"bucket"`

	// Prefix of the keys the policy applies to (S3 key prefix, not a
	// directory: "tmp" matches "tmp/x" and "tmpfile"). Empty: the whole
	// bucket.
	// +kubebuilder:default=""
	// +kubebuilder:validation:MaxLength=1024
	// +optional
	Prefix string `json:"prefix"`

	// Mode of the bucket or prefix.
	// +required
	Mode WriteMode `json:"mode"`

	// Replicas is how many cache nodes of the zone keep a WriteBack or
	// Transient write on disk before it is acknowledged (default 2).
	// +kubebuilder:validation:Minimum=1
	// +kubebuilder:validation:Maximum=3
	// +optional
	Replicas *int32 `json:"replicas,omitempty"`

	// Expiry ends a Transient object this long after it was written;
	// omitted: it stays until deleted.
	// +kubebuilder:validation:XValidation:rule="duration(self) > duration('0s')",message="must be a positive duration"
	// +optional
	Expiry *metav1.Duration `json:"expiry,omitempty"`
}
