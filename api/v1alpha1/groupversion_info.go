// Package v1alpha1 holds the distcache operator's API, group
// cache.distcache.io, version v1alpha1:
//
//   - DistributedCache (namespaced): a cache for S3, one StatefulSet of cache
//     nodes per availability zone, with its ring, certificates and monitoring.
//   - CacheTenant (namespaced, in the tenant's own namespace): a team's access
//     to one DistributedCache: allowed buckets, a quota and the client
//     certificate the operator issues into a Secret beside it.
//
// Validation lives in the CRD schema (OpenAPI and CEL rules, generated from
// the markers here), so the API server refuses a bad object with a message
// naming the field. Defaults live in one place too: the kubebuilder
// default markers, applied by the API server. The few defaults
// that depend on other objects (the operator's own cachenode image, the
// certificate Secret's name) are methods in this package (defaults.go).
//
// +kubebuilder:object:generate=true
// +groupName=cache.distcache.io
package v1alpha1

//lint:file-ignore SA1019 controller-runtime's scheme.Builder is kubebuilder's layout for API packages; it costs this package no extra dependency here

import (
	"k8s.io/apimachinery/pkg/runtime/schema"
	"sigs.k8s.io/controller-runtime/pkg/scheme"
)

var (
	// GroupVersion is the group and version of these objects.
	GroupVersion = schema.GroupVersion{Group: "cache.distcache.io", Version: "v1alpha1"}

	// SchemeBuilder registers the Go types with a runtime.Scheme.
	SchemeBuilder = &scheme.Builder{GroupVersion: GroupVersion}

	// AddToScheme adds the types of this group and version to a scheme.
	AddToScheme = SchemeBuilder.AddToScheme
)
