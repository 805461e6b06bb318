package controllers

import (
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	cachev1alpha1 "github.com/distcache/distcache/api/v1alpha1"
)

// testCache is a defaulted cache "c" in namespace "ns" with zones a and b;
// edit changes it before it is returned.
func testCache(edit func(dc *cachev1alpha1.DistributedCache)) *cachev1alpha1.DistributedCache {
	dc := &cachev1alpha1.DistributedCache{
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
	}
	if edit != nil {
		edit(dc)
	}
	return dc
}
