package v1alpha1

import (
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

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
