package v1alpha1

import (
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// ObjectMetadataSpec configures the metadata cache.
type ObjectMetadataSpec struct {
	// TTL is how long cached object metadata is trusted before it is
	// revalidated against S3 (cachenode --meta-ttl). An object overwritten in
	// S3 behind the cache is served stale for at most this long; 0s
	// revalidates on every read.
	// +kubebuilder:default="30s"
	// +kubebuilder:validation:Type=string
	// +kubebuilder:validation:MaxLength=32
	// +kubebuilder:validation:XValidation:rule="self.matches('^([0-9]+([.][0-9]+)?(ns|us|ms|s|m|h))+$') && duration(self) >= duration('0s')",message="must be a non-negative duration such as 30s or 5m",reason="FieldValueInvalid"
	// +optional
	TTL *metav1.Duration `json:"ttl,omitempty"`

	// Immutable says objects are never overwritten in place (true of
	// ClickHouse's S3 disks), so metadata is never revalidated and ttl is
	// ignored (cachenode --immutable).
	// +kubebuilder:default=false
	// +optional
	Immutable bool `json:"immutable,omitempty"`
}

// S3Spec is the S3-compatible backend.
type S3Spec struct {
	// Endpoint is the S3 endpoint URL. Empty: AWS S3 in region.
	// +kubebuilder:validation:MaxLength=2048
	// +kubebuilder:validation:XValidation:rule="isURL(self) && url(self).getScheme() in ['http', 'https'] && url(self).getHostname() != ''",message="must be an http or https URL such as https://s3.eu-west-1.amazonaws.com",reason="FieldValueInvalid"
	// +optional
	Endpoint string `json:"endpoint,omitempty"`

	// Region of the buckets (SigV4 signing region).
	// +kubebuilder:default="us-east-1"
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=64
	// +optional
	Region string `json:"region,omitempty"`

	// PathStyle uses path-style addressing (http://host/bucket/key), as MinIO
	// and most non-AWS servers need.
	// +kubebuilder:default=false
	// +optional
	PathStyle bool `json:"pathStyle,omitempty"`

	// CredentialsSecret holds the cache's default backend credentials, in the
	// cache's namespace. Omitted: the pod's ambient credentials (IRSA, EKS Pod
	// Identity, instance profile). Tenants may bring their own.
	// +optional
	CredentialsSecret *CredentialsSecretReference `json:"credentialsSecret,omitempty"`

	// MaxConcurrentRequests caps each node's in-flight S3 requests.
	// +kubebuilder:default=64
	// +kubebuilder:validation:Minimum=1
	// +kubebuilder:validation:Maximum=4096
	// +optional
	MaxConcurrentRequests *int32 `json:"maxConcurrentRequests,omitempty"`

	// MaxAttempts per S3 request; retries back off with jitter.
	// +kubebuilder:default=4
	// +kubebuilder:validation:Minimum=1
	// +kubebuilder:validation:Maximum=20
	// +optional
	MaxAttempts *int32 `json:"maxAttempts,omitempty"`

	// RequestTimeout is the timeout of one S3 request.
	// +kubebuilder:default="30s"
	// +kubebuilder:validation:Type=string
	// +kubebuilder:validation:MaxLength=32
	// +kubebuilder:validation:XValidation:rule="self.matches('^([0-9]+([.][0-9]+)?(ns|us|ms|s|m|h))+$') && duration(self) > duration('0s')",message="must be a positive duration such as 30s",reason="FieldValueInvalid"
	// +optional
	RequestTimeout *metav1.Duration `json:"requestTimeout,omitempty"`

	// PutIfAbsent says whether this S3 honours If-None-Match: * on PUT, so
	// that the nodes persist a WriteBack object of up to 1 MiB whose key S3
	// does not hold yet in one conditional PUT, without a HEAD first
	// (cachenode --writeback-put-if-absent). Omitted or Auto: on for AWS S3
	// (no endpoint, or one under amazonaws.com), off for any other S3.
	// Enabled: this S3 honours it (MinIO does since 2024). Disabled: a HEAD
	// before every upload. Enabled on an S3 that ignores If-None-Match
	// could let a stale copy replace a newer version.
	// +kubebuilder:validation:Enum=Auto;Enabled;Disabled
	// +optional
	PutIfAbsent PutIfAbsentMode `json:"putIfAbsent,omitempty"`
}

// PutIfAbsentMode is spec.s3.putIfAbsent. It has no default in the schema:
// omitted, it leaves the pod template (and its hash) as it was before the
// field existed.
type PutIfAbsentMode string

const (
	// PutIfAbsentAuto: on for AWS S3's own endpoints, off for any other.
	PutIfAbsentAuto PutIfAbsentMode = "Auto"
	// PutIfAbsentEnabled: this S3 honours If-None-Match: *.
	PutIfAbsentEnabled PutIfAbsentMode = "Enabled"
	// PutIfAbsentDisabled: a HEAD before every upload.
	PutIfAbsentDisabled PutIfAbsentMode = "Disabled"
)

// CredentialsSecretReference names a Secret with S3 credentials, in the
// namespace of the object that refers to it, and the keys that hold them.
type CredentialsSecretReference struct {
	// Name of the Secret.
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=253
	// +kubebuilder:validation:Pattern=`^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$`
	// +required
	Name string `json:"name"`

	// AccessKeyIDKey is the key holding the access key id.
	// +kubebuilder:default="AWS_ACCESS_KEY_ID"
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=253
	// +kubebuilder:validation:Pattern=`^[-._a-zA-Z0-9]+$`
	// +optional
	AccessKeyIDKey string `json:"accessKeyIDKey,omitempty"`

	// SecretAccessKeyKey is the key holding the secret access key.
	// +kubebuilder:default="AWS_SECRET_ACCESS_KEY"
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=253
	// +kubebuilder:validation:Pattern=`^[-._a-zA-Z0-9]+$`
	// +optional
	SecretAccessKeyKey string `json:"secretAccessKeyKey,omitempty"`

	// SessionTokenKey is the key holding a session token, if any.
	// +kubebuilder:validation:MaxLength=253
	// +kubebuilder:validation:Pattern=`^[-._a-zA-Z0-9]+$`
	// +optional
	SessionTokenKey string `json:"sessionTokenKey,omitempty"`
}
