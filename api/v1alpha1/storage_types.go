package v1alpha1

import (
	"k8s.io/apimachinery/pkg/api/resource"
)

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
