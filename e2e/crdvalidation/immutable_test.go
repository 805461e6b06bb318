package crdvalidation_test

import (
	"context"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

var _ = Describe("updates", func() {
	var ns string
	BeforeEach(func(ctx SpecContext) { ns = newNamespace(ctx) })

	// update creates base+create, then merge-patches it with update.
	update := func(ctx context.Context, base, create, update string) error {
		obj := object(base, create, ns)
		Expect(k8sClient.Create(ctx, obj)).To(Succeed())
		return k8sClient.Patch(ctx, obj, mergePatchJSON(update))
	}

	DescribeTable("refuses changes to immutable fields",
		func(ctx context.Context, base, create, patch, field, fragment string) {
			expectInvalid(update(ctx, base, create, patch), field, fragment)
		},
		Entry("chunk size", baseCache, `spec: {chunkSize: 4Mi}`, `spec: {chunkSize: 8Mi}`, "spec.chunkSize", "immutable"),
		Entry("defaulted chunk size", baseCache, `{}`, `spec: {chunkSize: 1Mi}`, "spec.chunkSize", "immutable"),
		Entry("storage mode hostPath -> emptyDir", baseCache, `{}`, `spec: {storage: {hostPath: null, emptyDir: {}}}`, "spec.storage", "storage mode"),
		Entry("storage mode emptyDir -> volumeClaimTemplate", baseCache, `spec: {storage: {hostPath: null, emptyDir: {}}}`,
			`spec: {storage: {emptyDir: null, volumeClaimTemplate: {size: 100Gi}}}`, "spec.storage", "storage mode"),
		Entry("volume claim size", baseCache, `spec: {storage: {hostPath: null, volumeClaimTemplate: {size: 100Gi}}}`,
			`spec: {storage: {volumeClaimTemplate: {size: 200Gi}}}`, "spec.storage.volumeClaimTemplate", "immutable"),
		Entry("volume claim storage class", baseCache, `spec: {storage: {hostPath: null, volumeClaimTemplate: {size: 100Gi}}}`,
			`spec: {storage: {volumeClaimTemplate: {storageClassName: fast}}}`, "spec.storage.volumeClaimTemplate", "immutable"),
		Entry("tenant's cache", baseTenant, `{}`, `spec: {cacheRef: {name: other}}`, "spec.cacheRef", "immutable"),
		Entry("tenant's cache namespace", baseTenant, `{}`, `spec: {cacheRef: {namespace: other}}`, "spec.cacheRef", "immutable"),
	)

	DescribeTable("allows changes to everything else",
		func(ctx context.Context, base, create, patch string) {
			Expect(update(ctx, base, create, patch)).To(Succeed())
		},
		Entry("chunk size in another notation", baseCache, `spec: {chunkSize: 4Mi}`, `spec: {chunkSize: 4096Ki}`),
		Entry("chunk size as plain bytes", baseCache, `spec: {chunkSize: 4Mi}`, `spec: {chunkSize: 4194304}`),
		Entry("replicas", baseCache, `{}`, `spec: {replicas: 7}`),
		Entry("a zone added", baseCache, `{}`, `spec: {zones: [{name: zone-a}, {name: zone-b}]}`),
		Entry("a zone replaced", baseCache, `spec: {zones: [{name: zone-a}, {name: zone-b}]}`, `spec: {zones: [{name: zone-b}, {name: zone-c}]}`),
		Entry("the host path", baseCache, `{}`, `spec: {storage: {hostPath: {path: /mnt/nvme1/distcache}}}`),
		Entry("sizes", baseCache, `{}`, `spec: {diskSize: 800Gi, memorySize: 8Gi}`),
		Entry("metadata TTL and immutable mode", baseCache, `{}`, `spec: {objectMetadata: {ttl: 5m, immutable: true}}`),
		Entry("the backend", baseCache, `{}`, `spec: {s3: {endpoint: "http://minio.storage:9000", pathStyle: true}}`),
		Entry("TLS to cert-manager", baseCache, `{}`, `spec: {tls: {issuerRef: {name: ca, kind: ClusterIssuer}}}`),
		Entry("tenant's buckets and quota", baseTenant, `{}`, `spec: {buckets: [team-data, team-backups], quota: 10Gi}`),
	)

	It("still validates the new object on update", func(ctx SpecContext) {
		err := update(ctx, baseCache, `{}`, `spec: {replicas: 0}`)
		expectInvalid(err, "spec.replicas", "greater than or equal to 1")
	})

	It("allows other changes to a cache with a volume claim template", func(ctx SpecContext) {
		Expect(update(ctx, baseCache, `spec: {storage: {hostPath: null, volumeClaimTemplate: {size: 100Gi}}}`,
			`spec: {replicas: 4}`)).To(Succeed())
	})

	It("applies with a typed client: a Get followed by an unchanged Update is accepted", func(ctx SpecContext) {
		obj := object(baseCache, `{}`, ns)
		Expect(k8sClient.Create(ctx, obj)).To(Succeed())
		dc := getCache(ctx, client.ObjectKeyFromObject(obj))
		Expect(k8sClient.Update(ctx, dc)).To(Succeed())
	})
})
