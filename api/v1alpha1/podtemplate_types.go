package v1alpha1

import (
	corev1 "k8s.io/api/core/v1"
)

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
