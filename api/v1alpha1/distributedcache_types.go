package v1alpha1

import (
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// This file is over 600 lines on purpose: kubebuilder keeps a kind's API in
// one file, and most of it is the fields' documentation, which is the CRD's
// and docs/api-reference.md's text.

// Immutable fields (refused on update by `self == oldSelf`-style transition
// rules), and why:
//
//   - spec.chunkSize: the chunk size is part of every chunk's identity and of
//     the placement key (docs/ring.md), and all nodes of a cache must agree on
//     it. Changing it would throw the whole cache away and, during a rolling
//     update, leave nodes with different layouts. Create a new cache instead.
//     (Rewriting the same size in another notation, 4Mi as 4096Ki, is allowed.)
//   - spec.storage's mode (hostPath, volumeClaimTemplate or emptyDir): it
//     decides where every node's data lives; switching silently drops the
//     data and changes the volumes of the StatefulSets.
//   - spec.storage.volumeClaimTemplate: a StatefulSet's volume claim templates
//     cannot change, so the operator could not apply the change.
//
// Everything else may change: zones can be added and removed (each zone is
// its own StatefulSet and ring), replicas change through the ring's warm
// handoff, sizes and the backend roll out pod by pod.

// DistributedCacheSpec is the desired state of a cache: one StatefulSet of
// cache nodes per zone, all with the same chunk size, bounds and backend.
//
// +kubebuilder:validation:XValidation:rule="!has(self.diskSize) || !has(self.chunkSize) || !isQuantity(string(self.diskSize)) || !isQuantity(string(self.chunkSize)) || quantity(string(self.diskSize)).compareTo(quantity(string(self.chunkSize)).add(quantity(string(self.chunkSize))).add(quantity(string(self.chunkSize))).add(quantity(string(self.chunkSize)))) >= 0",message="must hold at least four chunks (4 x spec.chunkSize)",fieldPath=".diskSize",reason="FieldValueInvalid"
// +kubebuilder:validation:XValidation:rule="!has(self.storage) || !has(self.storage.volumeClaimTemplate) || !has(self.storage.volumeClaimTemplate.size) || !has(self.diskSize) || !isQuantity(string(self.storage.volumeClaimTemplate.size)) || !isQuantity(string(self.diskSize)) || quantity(string(self.storage.volumeClaimTemplate.size)).compareTo(quantity(string(self.diskSize))) >= 0",message="must be at least spec.diskSize (the disk tier's bound includes its garbage)",fieldPath=".storage.volumeClaimTemplate.size",reason="FieldValueInvalid"
// +kubebuilder:validation:XValidation:rule="!has(self.storage) || !has(self.storage.emptyDir) || !has(self.storage.emptyDir.sizeLimit) || !has(self.diskSize) || !isQuantity(string(self.storage.emptyDir.sizeLimit)) || !isQuantity(string(self.diskSize)) || quantity(string(self.storage.emptyDir.sizeLimit)).compareTo(quantity(string(self.diskSize))) >= 0",message="must be at least spec.diskSize (the kubelet evicts a pod over its limit)",fieldPath=".storage.emptyDir.sizeLimit",reason="FieldValueInvalid"
// +kubebuilder:validation:XValidation:rule="!has(self.resources) || !has(self.resources.limits) || !('memory' in self.resources.limits) || !has(self.memorySize) || !isQuantity(string(self.resources.limits['memory'])) || !isQuantity(string(self.memorySize)) || quantity(string(self.resources.limits['memory'])).compareTo(quantity(string(self.memorySize))) > 0",message="must be less than spec.resources.limits.memory (the RAM tier lives inside the container's memory)",fieldPath=".memorySize",reason="FieldValueInvalid"
type DistributedCacheSpec struct {
	// Replicas is the number of cache nodes in each zone (a cache with two
	// zones and 3 replicas runs 6 nodes). This is what
	// `kubectl scale distributedcache/NAME --replicas=N` changes. Scaling moves
	// about 1/N of a zone's chunks, fetched from their previous owners (warm
	// handoff, docs/ring.md).
	// +kubebuilder:default=3
	// +kubebuilder:validation:Minimum=1
	// +kubebuilder:validation:Maximum=256
	// +optional
	Replicas *int32 `json:"replicas,omitempty"`

	// Zones are the availability zones the cache runs in, one StatefulSet and
	// one ring each. Gateways prefer the nodes of their own zone. Names are
	// unique (the list is a map keyed by name).
	// +listType=map
	// +listMapKey=name
	// +kubebuilder:validation:MinItems=1
	// +kubebuilder:validation:MaxItems=8
	// +required
	Zones []ZoneSpec `json:"zones"`

	// CrossZone says what a zone does on a miss when the cache has other
	// zones. Never (the default): a miss goes to S3. OnMiss: the chunk's
	// owner asks the chunk's owners in the other zones for it (from their
	// stores only, never filling from S3) before S3; inter-zone traffic is
	// billed per GB, S3 GETs per request (docs/architecture.md, Zones). With either, a
	// gateway whose zone has no reachable cache node reads through another
	// zone's nodes before S3.
	// +kubebuilder:default=Never
	// +kubebuilder:validation:Enum=Never;OnMiss
	// +optional
	CrossZone CrossZonePolicy `json:"crossZone,omitempty"`

	// InstanceTypes restricts cache nodes to these node instance types (the
	// node.kubernetes.io/instance-type label), typically ones with local NVMe
	// such as i4i.2xlarge, i3en.2xlarge or m6id.4xlarge. Empty: any type.
	// +listType=set
	// +kubebuilder:validation:MaxItems=32
	// +kubebuilder:validation:items:MinLength=1
	// +kubebuilder:validation:items:MaxLength=63
	// +kubebuilder:validation:items:Pattern=`^[A-Za-z0-9]([-A-Za-z0-9_.]*[A-Za-z0-9])?$`
	// +optional
	InstanceTypes []string `json:"instanceTypes,omitempty"`

	// NodeSelector restricts cache nodes to nodes with these labels, in
	// addition to the zone and instance types.
	// +optional
	NodeSelector map[string]string `json:"nodeSelector,omitempty"`

	// Tolerations let cache nodes run on tainted (for example dedicated
	// storage) nodes.
	// +listType=atomic
	// +optional
	Tolerations []corev1.Toleration `json:"tolerations,omitempty"`

	// Storage is where each node's disk tier lives: exactly one of hostPath
	// (local NVMe), volumeClaimTemplate or emptyDir. The mode is immutable.
	// +required
	Storage StorageSpec `json:"storage"`

	// ChunkSize is the size of the pieces objects are cached in, from 64Ki to
	// 64Mi. Immutable: it is part of every chunk's identity.
	// +kubebuilder:default="4Mi"
	// +kubebuilder:validation:XValidation:rule="isQuantity(string(self)) && quantity(string(self)).isInteger() && quantity(string(self)).compareTo(quantity('64Ki')) >= 0 && quantity(string(self)).compareTo(quantity('64Mi')) <= 0",message="must be a whole number of bytes from 64Ki to 64Mi",reason="FieldValueInvalid"
	// +kubebuilder:validation:XValidation:rule="!isQuantity(string(oldSelf)) || !isQuantity(string(self)) || quantity(string(self)).compareTo(quantity(string(oldSelf))) == 0",message="is immutable: it is part of every cached chunk's identity; create a new cache to change it",reason="FieldValueForbidden"
	// +optional
	ChunkSize *resource.Quantity `json:"chunkSize,omitempty"`

	// DiskSize is the hard bound on each node's disk tier, garbage included
	// (cachenode --disk-bytes). At least 16Mi and four chunks; it must fit in
	// the volume.
	// +kubebuilder:default="10Gi"
	// +kubebuilder:validation:XValidation:rule="isQuantity(string(self)) && quantity(string(self)).isInteger() && quantity(string(self)).compareTo(quantity('16Mi')) >= 0",message="must be a whole number of bytes, at least 16Mi",reason="FieldValueInvalid"
	// +optional
	DiskSize *resource.Quantity `json:"diskSize,omitempty"`

	// MemorySize is the size of each node's RAM tier (cachenode --ram-bytes).
	// It lives inside the container's memory: keep resources.limits.memory
	// comfortably above it.
	// +kubebuilder:default="1Gi"
	// +kubebuilder:validation:XValidation:rule="isQuantity(string(self)) && quantity(string(self)).isInteger() && quantity(string(self)).compareTo(quantity('0')) > 0",message="must be a positive whole number of bytes",reason="FieldValueInvalid"
	// +optional
	MemorySize *resource.Quantity `json:"memorySize,omitempty"`

	// ObjectMetadata says how long cached object metadata (size, ETag) is
	// trusted before it is revalidated against S3.
	// +kubebuilder:default={}
	// +optional
	ObjectMetadata ObjectMetadataSpec `json:"objectMetadata,omitempty"`

	// S3 is the backend the cache reads through and writes through to.
	// +kubebuilder:default={}
	// +optional
	S3 S3Spec `json:"s3,omitempty"`

	// TenantNamespaceSelector selects the namespaces whose CacheTenants may use
	// this cache. Omitted: only CacheTenants in the cache's own namespace. An
	// empty selector ({}) allows every namespace. Tenants without their own
	// credentials read with the cache's, so keep this as narrow as the buckets
	// those credentials can reach.
	// +optional
	TenantNamespaceSelector *metav1.LabelSelector `json:"tenantNamespaceSelector,omitempty"`

	// Image is the cachenode container image. Empty: the image the operator
	// was started with (its --cachenode-image flag), so operator and nodes
	// upgrade together.
	// +kubebuilder:validation:MaxLength=512
	// +optional
	Image string `json:"image,omitempty"`

	// ImagePullPolicy of the cachenode container; empty: the Kubernetes
	// default for the image's tag.
	// +kubebuilder:validation:Enum=Always;IfNotPresent;Never
	// +optional
	ImagePullPolicy corev1.PullPolicy `json:"imagePullPolicy,omitempty"`

	// ImagePullSecrets for the cachenode image.
	// +listType=atomic
	// +optional
	ImagePullSecrets []corev1.LocalObjectReference `json:"imagePullSecrets,omitempty"`

	// Resources of the cachenode container. Size memory for the RAM tier
	// (memorySize) plus working space.
	// +optional
	Resources corev1.ResourceRequirements `json:"resources,omitempty"`

	// TLS configures the certificates of nodes, peers and tenants. By default
	// the operator runs its own CA; set tls.issuerRef to use cert-manager.
	// +kubebuilder:default={}
	// +optional
	TLS TLSSpec `json:"tls,omitempty"`

	// Monitoring configures the ServiceMonitor and the Grafana dashboard.
	// +kubebuilder:default={}
	// +optional
	Monitoring MonitoringSpec `json:"monitoring,omitempty"`

	// PodDisruptionBudget bounds voluntary disruptions (node drains) per zone.
	// +kubebuilder:default={}
	// +optional
	PodDisruptionBudget PodDisruptionBudgetSpec `json:"podDisruptionBudget,omitempty"`

	// PodTemplate holds overrides of the cache node pods the operator builds.
	// +optional
	PodTemplate *PodTemplateOverrides `json:"podTemplate,omitempty"`
}

// CrossZonePolicy is spec.crossZone.
type CrossZonePolicy string

const (
	// CrossZoneNever: a miss goes to S3, never to another zone's nodes.
	CrossZoneNever CrossZonePolicy = "Never"
	// CrossZoneOnMiss: a miss asks the other zones' owners before S3.
	CrossZoneOnMiss CrossZonePolicy = "OnMiss"
)

// ZoneSpec is one availability zone of the cache.
type ZoneSpec struct {
	// Name is the zone, the value of the nodes' topology.kubernetes.io/zone
	// label (for example eu-west-1a). It also names the zone's StatefulSet
	// (<cache>-<zone>), Service and ring ConfigMap, so it is a DNS label.
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=40
	// +kubebuilder:validation:Pattern=`^[a-z0-9]([-a-z0-9]*[a-z0-9])?$`
	// +required
	Name string `json:"name"`
}

// StorageSpec is where a node's disk tier lives. Exactly one member is set;
// which one (the storage mode) is immutable.
//
// +kubebuilder:validation:XValidation:rule="(has(self.hostPath) ? 1 : 0) + (has(self.volumeClaimTemplate) ? 1 : 0) + (has(self.emptyDir) ? 1 : 0) == 1",message="exactly one storage mode must be set: hostPath, volumeClaimTemplate or emptyDir",reason="FieldValueInvalid"
// +kubebuilder:validation:XValidation:rule="has(self.hostPath) == has(oldSelf.hostPath) && has(self.volumeClaimTemplate) == has(oldSelf.volumeClaimTemplate) && has(self.emptyDir) == has(oldSelf.emptyDir)",message="the storage mode (hostPath, volumeClaimTemplate or emptyDir) is immutable: the cached data would be lost; create a new cache to change it",reason="FieldValueForbidden"
type StorageSpec struct {
	// HostPath keeps the disk tier in a directory of the node, typically a
	// local NVMe instance-store filesystem. The data survives pod restarts on
	// the same node.
	// +optional
	HostPath *HostPathStorage `json:"hostPath,omitempty"`

	// VolumeClaimTemplate gives every node a PersistentVolumeClaim (for
	// example from a local-volume provisioner). Immutable, as a
	// StatefulSet's claim templates are.
	// +kubebuilder:validation:XValidation:rule="self == oldSelf",message="is immutable (a StatefulSet's volume claim templates cannot change)",reason="FieldValueForbidden"
	// +optional
	VolumeClaimTemplate *VolumeClaimTemplateStorage `json:"volumeClaimTemplate,omitempty"`

	// EmptyDir keeps the disk tier in a pod-lifetime emptyDir volume: the
	// cache starts cold after every pod restart. For tests and small setups.
	// +optional
	EmptyDir *EmptyDirStorage `json:"emptyDir,omitempty"`
}

// StorageMode names the member of a StorageSpec that is set.
type StorageMode string

// The storage modes.
const (
	StorageModeHostPath            StorageMode = "HostPath"
	StorageModeVolumeClaimTemplate StorageMode = "VolumeClaimTemplate"
	StorageModeEmptyDir            StorageMode = "EmptyDir"
)

// HostPathStorage is a directory on the node.
type HostPathStorage struct {
	// Path is the absolute directory on the node; it is created if missing.
	// Each cache keeps its data in a subdirectory named after the cache, so
	// two caches may share a path.
	// +kubebuilder:validation:MinLength=2
	// +kubebuilder:validation:MaxLength=4096
	// +kubebuilder:validation:Pattern=`^/`
	// +kubebuilder:validation:XValidation:rule="!self.matches('(^|/)[.][.]?(/|$)')",message="must be a clean absolute path (no '.' or '..' elements)",reason="FieldValueInvalid"
	// +required
	Path string `json:"path"`
}

// VolumeClaimTemplateStorage is a PersistentVolumeClaim per node.
type VolumeClaimTemplateStorage struct {
	// StorageClassName of the claims; omitted: the cluster's default class.
	// +kubebuilder:validation:MaxLength=253
	// +optional
	StorageClassName *string `json:"storageClassName,omitempty"`

	// Size requested by each claim; at least diskSize.
	// +kubebuilder:validation:XValidation:rule="isQuantity(string(self)) && quantity(string(self)).compareTo(quantity('0')) > 0",message="must be positive",reason="FieldValueInvalid"
	// +required
	Size resource.Quantity `json:"size"`
}

// EmptyDirStorage is a pod-lifetime emptyDir volume.
type EmptyDirStorage struct {
	// SizeLimit of the volume; omitted: no limit. At least diskSize.
	// +kubebuilder:validation:XValidation:rule="isQuantity(string(self)) && quantity(string(self)).compareTo(quantity('0')) > 0",message="must be positive",reason="FieldValueInvalid"
	// +optional
	SizeLimit *resource.Quantity `json:"sizeLimit,omitempty"`
}

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
}

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

// MonitoringSpec configures metrics scraping and dashboards.
type MonitoringSpec struct {
	// ServiceMonitor for the prometheus-operator.
	// +kubebuilder:default={}
	// +optional
	ServiceMonitor ServiceMonitorSpec `json:"serviceMonitor,omitempty"`

	// PrometheusRule publishes the distcache alerts for the
	// prometheus-operator: low hit ratio, node down, node unschedulable
	// (from the operator's own metrics), S3 error rate, disk near capacity,
	// certificates expiring (nodes' and gateways'), cross-zone traffic and
	// gateway zone fallback. Each carries a runbook_url into
	// docs/operations.md.
	// +kubebuilder:default={}
	// +optional
	PrometheusRule PrometheusRuleSpec `json:"prometheusRule,omitempty"`

	// GrafanaDashboard publishes the distcache dashboard.
	// +kubebuilder:default={}
	// +optional
	GrafanaDashboard GrafanaDashboardSpec `json:"grafanaDashboard,omitempty"`
}

// PrometheusRuleSpec configures the PrometheusRule with the alerts.
type PrometheusRuleSpec struct {
	// Enabled creates a PrometheusRule. Where the prometheus-operator's CRDs
	// are not installed the operator reports that in a condition and carries
	// on.
	// +kubebuilder:default=false
	// +optional
	Enabled bool `json:"enabled,omitempty"`

	// Labels on the PrometheusRule, for the Prometheus object's
	// ruleSelector (for example release: kube-prometheus-stack).
	// +optional
	Labels map[string]string `json:"labels,omitempty"`

	// HitRatioThreshold: the DistcacheLowHitRatio alert fires when a zone's
	// byte hit ratio stays below this fraction (0 to 1) for 15 minutes.
	// +kubebuilder:default="0.5"
	// +kubebuilder:validation:Pattern=`^(0(\.[0-9]+)?|1(\.0+)?)$`
	// +optional
	HitRatioThreshold string `json:"hitRatioThreshold,omitempty"`
}

// ServiceMonitorSpec configures the ServiceMonitor.
type ServiceMonitorSpec struct {
	// Enabled creates a ServiceMonitor scraping every cache node. Where the
	// prometheus-operator's CRDs are not installed the operator reports that
	// in a condition and carries on.
	// +kubebuilder:default=false
	// +optional
	Enabled bool `json:"enabled,omitempty"`

	// Interval between scrapes (prometheus-operator duration syntax).
	// +kubebuilder:default="30s"
	// +kubebuilder:validation:Pattern=`^(0|(([0-9]+)y)?(([0-9]+)w)?(([0-9]+)d)?(([0-9]+)h)?(([0-9]+)m)?(([0-9]+)s)?(([0-9]+)ms)?)$`
	// +optional
	Interval string `json:"interval,omitempty"`

	// Labels on the ServiceMonitor, for the Prometheus object's
	// serviceMonitorSelector (for example release: kube-prometheus-stack).
	// +optional
	Labels map[string]string `json:"labels,omitempty"`
}

// GrafanaDashboardSpec configures the dashboard ConfigMap.
type GrafanaDashboardSpec struct {
	// Enabled creates a ConfigMap holding the dashboard JSON, in the cache's
	// namespace, for Grafana's dashboard sidecar to load.
	// +kubebuilder:default=false
	// +optional
	Enabled bool `json:"enabled,omitempty"`

	// Labels on the ConfigMap; the default is the Grafana sidecar's default
	// label.
	// +kubebuilder:default={"grafana_dashboard":"1"}
	// +optional
	Labels map[string]string `json:"labels,omitempty"`
}

// PodDisruptionBudgetSpec configures the PodDisruptionBudget of each zone.
type PodDisruptionBudgetSpec struct {
	// MaxUnavailable is how many nodes of a zone a voluntary disruption may
	// take down at once. At least 1, so node drains can always proceed.
	// +kubebuilder:default=1
	// +kubebuilder:validation:Minimum=1
	// +optional
	MaxUnavailable *int32 `json:"maxUnavailable,omitempty"`
}

// PodTemplateOverrides are applied to the cache node pods the operator
// builds. The operator's own labels, selector, containers, volumes and
// scheduling constraints (zone, instance types) take precedence.
type PodTemplateOverrides struct {
	// Metadata adds labels and annotations to the pods.
	// +optional
	Metadata PodMetadata `json:"metadata,omitempty"`

	// PriorityClassName of the pods.
	// +kubebuilder:validation:MaxLength=253
	// +optional
	PriorityClassName string `json:"priorityClassName,omitempty"`

	// ServiceAccountName of the pods (for example one bound to an IAM role
	// through IRSA). Empty: one the operator creates.
	// +kubebuilder:validation:MaxLength=253
	// +optional
	ServiceAccountName string `json:"serviceAccountName,omitempty"`

	// Affinity added to the pods' zone and instance-type node affinity.
	// +optional
	Affinity *corev1.Affinity `json:"affinity,omitempty"`

	// TopologySpreadConstraints of the pods.
	// +listType=atomic
	// +optional
	TopologySpreadConstraints []corev1.TopologySpreadConstraint `json:"topologySpreadConstraints,omitempty"`

	// SecurityContext of the pods. It replaces the operator's default
	// whole (user and group 65532, runAsNonRoot, RuntimeDefault seccomp,
	// fsGroup 65532 with OnRootMismatch; the Pod Security level restricted):
	// keep those fields when setting it, or the namespace may refuse the pods.
	// +optional
	SecurityContext *corev1.PodSecurityContext `json:"securityContext,omitempty"`

	// ContainerSecurityContext of the main container (cachenode, or the
	// gateway). It replaces the operator's default whole (no privilege
	// escalation, all capabilities dropped, read-only root filesystem,
	// runAsNonRoot).
	// +optional
	ContainerSecurityContext *corev1.SecurityContext `json:"containerSecurityContext,omitempty"`

	// Env adds environment variables to the cachenode container (every
	// cachenode flag can be set as DISTCACHE_<FLAG>; docs/operations.md).
	// +listType=atomic
	// +optional
	Env []corev1.EnvVar `json:"env,omitempty"`

	// TerminationGracePeriodSeconds of the pods; keep it above the node's
	// shutdown grace (20s).
	// +kubebuilder:validation:Minimum=0
	// +optional
	TerminationGracePeriodSeconds *int64 `json:"terminationGracePeriodSeconds,omitempty"`
}

// PodMetadata is the labels and annotations added to pods.
type PodMetadata struct {
	// Labels added to the pods.
	// +optional
	Labels map[string]string `json:"labels,omitempty"`

	// Annotations added to the pods.
	// +optional
	Annotations map[string]string `json:"annotations,omitempty"`
}

// DistributedCacheStatus is the observed state of a cache.
type DistributedCacheStatus struct {
	// ObservedGeneration is the metadata.generation the status describes.
	// +optional
	ObservedGeneration int64 `json:"observedGeneration,omitempty"`

	// Replicas is the number of cache nodes per zone (the smallest count over
	// the zones), comparable with spec.replicas: the scale subresource's
	// status.replicas.
	// +optional
	Replicas int32 `json:"replicas,omitempty"`

	// ReadyReplicas is the number of ready cache nodes per zone (the smallest
	// count over the zones).
	// +optional
	ReadyReplicas int32 `json:"readyReplicas,omitempty"`

	// Selector is the label selector of all the cache's node pods, in string
	// form (the scale subresource's status.selector, for HPA).
	// +optional
	Selector string `json:"selector,omitempty"`

	// OperatorVersion is the version of the operator that last reconciled
	// the cache; its nodes run that version's cachenode image unless
	// spec.image names another.
	// +optional
	OperatorVersion string `json:"operatorVersion,omitempty"`

	// RingEpoch is the highest ring epoch published in any zone.
	// +optional
	RingEpoch int64 `json:"ringEpoch,omitempty"`

	// Zones is the state of each zone.
	// +listType=map
	// +listMapKey=name
	// +optional
	Zones []ZoneStatus `json:"zones,omitempty"`

	// CertificateAuthority is the state of the self-managed CA (absent
	// with spec.tls.issuerRef).
	// +optional
	CertificateAuthority *CertificateAuthorityStatus `json:"certificateAuthority,omitempty"`

	// Conditions: Ready, Progressing and Degraded (see the Condition*
	// constants).
	// +listType=map
	// +listMapKey=type
	// +patchStrategy=merge
	// +patchMergeKey=type
	// +optional
	Conditions []metav1.Condition `json:"conditions,omitempty" patchStrategy:"merge" patchMergeKey:"type"`
}

// CertificateAuthorityStatus is the state of a self-managed CA and of its
// rotation (docs/operator.md: annotate the cache with
// cache.distcache.io/rotate-ca to start one).
type CertificateAuthorityStatus struct {
	// NotAfter is when the signing CA expires. It is rotated by itself
	// two thirds into its lifetime.
	// +optional
	NotAfter *metav1.Time `json:"notAfter,omitempty"`

	// Rotation is the phase of a CA rotation under way: Distributing (the
	// new CA is added to every trust bundle), Reissuing (every certificate
	// is issued again by the new CA), Retiring (the old CA is dropped from
	// the bundles once every holder has the new certificates). Empty when
	// none is.
	// +optional
	Rotation string `json:"rotation,omitempty"`

	// RotationPhaseSince is when the rotation entered its phase.
	// +optional
	RotationPhaseSince *metav1.Time `json:"rotationPhaseSince,omitempty"`
}

// ZoneStatus is the observed state of one zone.
type ZoneStatus struct {
	// Name of the zone.
	// +required
	Name string `json:"name"`

	// StatefulSet running the zone's cache nodes.
	// +optional
	StatefulSet string `json:"statefulSet,omitempty"`

	// RingConfigMap holding the zone's ring document.
	// +optional
	RingConfigMap string `json:"ringConfigMap,omitempty"`

	// Replicas is the number of the zone's cache node pods.
	// +optional
	Replicas int32 `json:"replicas,omitempty"`

	// ReadyReplicas is the number of the zone's ready cache node pods.
	// +optional
	ReadyReplicas int32 `json:"readyReplicas,omitempty"`

	// RingEpoch is the epoch of the zone's published ring.
	// +optional
	RingEpoch int64 `json:"ringEpoch,omitempty"`

	// LeavingPods are the pods a scale-down is removing (ordinals at or
	// above spec.replicas) once the drain grace has passed, with the
	// write-back and transient data each still holds: the StatefulSet
	// keeps a pod while it holds any (its node hands it to the holders the
	// ring wants, or persists it), and keeps a pod that cannot be asked
	// for a bounded time (docs/operations.md, "Scaling down"). Empty when
	// no scale-down waits on held data.
	// +listType=map
	// +listMapKey=name
	// +optional
	LeavingPods []LeavingPodStatus `json:"leavingPods,omitempty"`
}

// LeavingPodStatus is what a pod being scaled away last reported of the
// data it holds for WriteBack and Transient policies.
type LeavingPodStatus struct {
	// Name of the pod.
	// +required
	Name string `json:"name"`

	// HeldObjects is how many write-back (not yet in S3) and transient
	// objects the pod's node holds, its copies for other holders included.
	// +optional
	HeldObjects int64 `json:"heldObjects"`

	// HeldBytes is the size of those objects' bodies.
	// +optional
	HeldBytes int64 `json:"heldBytes"`

	// Unanswered says why the pod could not be asked (not running, no pod
	// IP, its metrics endpoint unreachable); empty when it answered.
	// +optional
	Unanswered string `json:"unanswered,omitempty"`

	// UnansweredSince is when the operator first could not ask the pod; it
	// goes anyway once the operator's bound has passed since then.
	// +optional
	UnansweredSince *metav1.Time `json:"unansweredSince,omitempty"`
}

// DistributedCache is a distributed cache for S3: one StatefulSet of cache
// nodes per zone, their rings, certificates and monitoring.
//
// +kubebuilder:object:root=true
// +kubebuilder:subresource:status
// +kubebuilder:subresource:scale:specpath=.spec.replicas,statuspath=.status.replicas,selectorpath=.status.selector
// +kubebuilder:resource:shortName=dcache,categories=distcache
// +kubebuilder:printcolumn:name="Replicas",type=integer,JSONPath=`.spec.replicas`,description="Desired cache nodes per zone"
// +kubebuilder:printcolumn:name="Ready",type=integer,JSONPath=`.status.readyReplicas`,description="Ready cache nodes per zone (fewest over the zones)"
// +kubebuilder:printcolumn:name="Ring Epoch",type=integer,JSONPath=`.status.ringEpoch`,description="Highest published ring epoch"
// +kubebuilder:printcolumn:name="Status",type=string,JSONPath=`.status.conditions[?(@.type=="Ready")].status`,description="The Ready condition"
// +kubebuilder:printcolumn:name="Version",type=string,JSONPath=`.status.operatorVersion`,description="Version of the operator that last reconciled the cache"
// +kubebuilder:printcolumn:name="Reason",type=string,JSONPath=`.status.conditions[?(@.type=="Ready")].reason`,priority=1
// +kubebuilder:printcolumn:name="Progress",type=string,JSONPath=`.status.conditions[?(@.type=="Progressing")].reason`,description="Why the cache is Progressing: Scaling, RollingOut, RingHandoff, HeldDataDraining (a scale-down waits for status.zones[].leavingPods to hand their write-back data over), LeavingPodUnanswered; Reconciled when nothing is in flight",priority=1
// +kubebuilder:printcolumn:name="Age",type=date,JSONPath=`.metadata.creationTimestamp`
// +kubebuilder:validation:XValidation:rule="self.metadata.name.matches('^[a-z]([-a-z0-9]*[a-z0-9])?$')",message="metadata.name must be a DNS-1035 label (lowercase letters, digits and '-', starting with a letter): it names the cache's Services and StatefulSets",reason="FieldValueInvalid"
// +kubebuilder:validation:XValidation:rule="!has(self.spec) || !has(self.spec.zones) || self.spec.zones.all(z, size(self.metadata.name) + size(z.name) <= 51)",message="metadata.name and each zone name together must be at most 51 characters (StatefulSets are named <cache>-<zone>)",fieldPath=".spec.zones",reason="FieldValueInvalid"
type DistributedCache struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`

	// Spec is the desired state.
	// +required
	Spec DistributedCacheSpec `json:"spec"`

	// Status is the observed state, written by the operator.
	// +optional
	Status DistributedCacheStatus `json:"status,omitempty"`
}

// DistributedCacheList is a list of DistributedCaches.
//
// +kubebuilder:object:root=true
type DistributedCacheList struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata,omitempty"`
	Items           []DistributedCache `json:"items"`
}

func init() {
	SchemeBuilder.Register(&DistributedCache{}, &DistributedCacheList{})
}
