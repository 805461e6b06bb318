package controllers

import (
	cachev1alpha1 "github.com/distcache/distcache/api/v1alpha1"
)

// Names, labels and annotations of the objects a DistributedCache owns. Every
// object carries LabelManagedBy, which is also what the manager's cache
// selects on (CacheOptions).
const (
	LabelName      = "app.kubernetes.io/name"
	LabelInstance  = "app.kubernetes.io/instance"
	LabelComponent = "app.kubernetes.io/component"
	LabelManagedBy = "app.kubernetes.io/managed-by"
	LabelZone      = "cache.distcache.io/zone"

	// NodeAppName is the app.kubernetes.io/name of cache node pods.
	NodeAppName = "cachenode"
	// ManagedByValue is the app.kubernetes.io/managed-by of owned objects.
	ManagedByValue = "distcache-operator"

	// AnnotationInputHash on the pod template hashes the inputs of the pod
	// template; a change rolls the pods.
	AnnotationInputHash = "cache.distcache.io/input-hash"
	// AnnotationSpecHash on every owned object hashes the state the operator
	// last wrote, so unchanged objects are not written again.
	AnnotationSpecHash = "cache.distcache.io/spec-hash"

	// ZoneTopologyKey and InstanceTypeKey are the well-known node labels.
	ZoneTopologyKey = "topology.kubernetes.io/zone"
	InstanceTypeKey = "node.kubernetes.io/instance-type"
	HostnameKey     = "kubernetes.io/hostname"

	// APIPort is the node's mTLS API, MetricsPort its plain HTTP port
	// (/metrics, /healthz, /readyz).
	APIPort     = 8443
	MetricsPort = 9090
)

// zoneObjectName names a zone's StatefulSet, headless Service and PDB.
func zoneObjectName(dc *cachev1alpha1.DistributedCache, zone string) string {
	return dc.Name + "-" + zone
}

// clientServiceName names the Service selecting every zone's nodes.
func clientServiceName(dc *cachev1alpha1.DistributedCache) string { return dc.Name }

// ringConfigMapName names the ConfigMap holding every zone's ring document.
func ringConfigMapName(dc *cachev1alpha1.DistributedCache) string { return dc.RingConfigMapName() }

// ringKey is the ring ConfigMap's key holding a zone's document.
func ringKey(zone string) string { return cachev1alpha1.RingConfigMapKey(zone) }

// NodeTLSSecretName is the Secret (tls.crt, tls.key, ca.crt) with the cache
// nodes' server certificate. The certificate step creates it; until it
// exists the pods wait in ContainerCreating.
func NodeTLSSecretName(dc *cachev1alpha1.DistributedCache) string { return dc.Name + "-node-tls" }

// TenantsSecretName is the Secret (key tenants.yaml) with the nodes'
// tenants file (docs/operations.md). The CacheTenant step creates it.
func TenantsSecretName(dc *cachev1alpha1.DistributedCache) string { return dc.Name + "-tenants" }

// NodeServiceAccountName is the ServiceAccount of the cache's node pods
// (unless spec.podTemplate.serviceAccountName names another), bound by
// the Role of the same name to reading the ring ConfigMap and the tenants
// Secret.
func NodeServiceAccountName(dc *cachev1alpha1.DistributedCache) string { return dc.Name + "-node" }

// podServiceAccountName is the ServiceAccount the node pods run as.
func podServiceAccountName(dc *cachev1alpha1.DistributedCache) string {
	if ov := dc.Spec.PodTemplate; ov != nil && ov.ServiceAccountName != "" {
		return ov.ServiceAccountName
	}
	return NodeServiceAccountName(dc)
}

// TenantsFileKey is the key of TenantsSecretName holding the tenants file.
const TenantsFileKey = "tenants.yaml"

// desiredReplicas is spec.replicas; the API server defaults it to 3.
func desiredReplicas(dc *cachev1alpha1.DistributedCache) int32 {
	if dc.Spec.Replicas == nil {
		return 3
	}
	return *dc.Spec.Replicas
}

// cacheLabels select every node pod of the cache, in all zones.
func cacheLabels(dc *cachev1alpha1.DistributedCache) map[string]string {
	return map[string]string{LabelName: NodeAppName, LabelInstance: dc.Name}
}

// zoneSelectorLabels select the node pods of one zone.
func zoneSelectorLabels(dc *cachev1alpha1.DistributedCache, zone string) map[string]string {
	l := cacheLabels(dc)
	l[LabelZone] = zone
	return l
}

// objectLabels are the labels of owned objects (and node pods) of a zone,
// or of the whole cache when zone is "".
func objectLabels(dc *cachev1alpha1.DistributedCache, zone string) map[string]string {
	return ownedLabels(cacheLabels(dc), zone, "cache-node")
}

// ownedLabels adds to selector (a map of the caller's) the labels every
// object the operator writes carries: the zone unless "", the component
// and LabelManagedBy.
func ownedLabels(selector map[string]string, zone, component string) map[string]string {
	if zone != "" {
		selector[LabelZone] = zone
	}
	selector[LabelComponent] = component
	selector[LabelManagedBy] = ManagedByValue
	return selector
}
