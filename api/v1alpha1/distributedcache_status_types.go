package v1alpha1

import (
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

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

	// LeavingPods are the pods that are going while they may still hold
	// write-back or transient data, with what each last reported: those a
	// scale-down removes (ordinals at or above spec.replicas, once the
	// drain grace has passed), and every pod of the zone when the cache is
	// deleted or the zone removed from spec.zones. The StatefulSet (or its
	// deletion) waits while a pod holds any (its node hands it to the
	// holders the ring wants, or persists it), and waits for a pod that
	// cannot be asked for a bounded time (docs/operations.md, "Scaling
	// down"; docs/write-back.md). Empty when nothing waits on held data.
	// +listType=map
	// +listMapKey=name
	// +optional
	LeavingPods []LeavingPodStatus `json:"leavingPods,omitempty"`
}

// LeavingPodStatus is what a pod that is going (scale-down, deletion, a
// removed zone) last reported of the data it holds for WriteBack and
// Transient policies.
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
