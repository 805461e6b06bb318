package controllers

import (
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	cachev1alpha1 "github.com/distcache/distcache/api/v1alpha1"
)

// edited is obj once edit (nil: none) changed it: the optional edit of
// the test fixtures.
func edited[T any](obj *T, edit func(*T)) *T {
	if edit != nil {
		edit(obj)
	}
	return obj
}

// testCache is a defaulted cache "c" in namespace "ns" with zones a and b;
// edit changes it before it is returned.
func testCache(edit func(dc *cachev1alpha1.DistributedCache)) *cachev1alpha1.DistributedCache {
	return edited(&cachev1alpha1.DistributedCache{
		ObjectMeta: metav1.ObjectMeta{Name: "c", Namespace: "ns", Generation: 1},
		Spec: cachev1alpha1.DistributedCacheSpec{
			Replicas:   ptr.To[int32](3),
			Zones:      []cachev1alpha1.ZoneSpec{{Name: "a"}, {Name: "b"}},
			Storage:    cachev1alpha1.StorageSpec{EmptyDir: &cachev1alpha1.EmptyDirStorage{}},
			ChunkSize:  ptr.To(resource.MustParse("4Mi")),
			DiskSize:   ptr.To(resource.MustParse("10Gi")),
			MemorySize: ptr.To(resource.MustParse("1Gi")),
			ObjectMetadata: cachev1alpha1.ObjectMetadataSpec{
				TTL: &metav1.Duration{Duration: 30e9},
			},
			S3: cachev1alpha1.S3Spec{Region: "us-east-1", MaxConcurrentRequests: ptr.To[int32](64)},
		},
	}, edit)
}

// testTenant is tenant "ch" in namespace "team" of testCache's cache, with
// a defaulted gateway; edit changes it before it is returned.
func testTenant(edit func(t *cachev1alpha1.CacheTenant)) *cachev1alpha1.CacheTenant {
	return edited(&cachev1alpha1.CacheTenant{
		ObjectMeta: metav1.ObjectMeta{Name: "ch", Namespace: "team", Generation: 1},
		Spec: cachev1alpha1.CacheTenantSpec{
			CacheRef: cachev1alpha1.CacheReference{Namespace: "ns", Name: "c"},
			Buckets:  []string{"data"},
			Gateway: &cachev1alpha1.GatewaySpec{
				Enabled: ptr.To(true), ReplicasPerZone: ptr.To[int32](1), Port: ptr.To[int32](8099),
				PageCacheSize: ptr.To(resource.MustParse("256Mi")),
			},
		},
	}, edit)
}
