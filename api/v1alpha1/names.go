package v1alpha1

// Names of the objects the operator publishes for others to read: the cache
// nodes and the kubectl plugin read the ring ConfigMap by these, so they are
// defined here, once, and the operator names the objects with them.

// AnnotationRingPublishedPrefix + zone, on the ring ConfigMap, is when the
// zone's current ring epoch was published (RFC 3339).
const AnnotationRingPublishedPrefix = "cache.distcache.io/published-"

// RingConfigMapName is the ConfigMap, in the cache's namespace, holding
// every zone's ring document (docs/ring.md).
func (dc *DistributedCache) RingConfigMapName() string { return dc.Name + "-ring" }

// RingConfigMapKey is the key of the ring ConfigMap holding zone's document.
func RingConfigMapKey(zone string) string { return zone + ".json" }
