package crdvalidation_test

import (
	"context"
	"strings"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

var _ = Describe("schema validation", func() {
	var ns string
	BeforeEach(func(ctx SpecContext) { ns = newNamespace(ctx) })

	It("accepts the base objects the tables start from", func(ctx SpecContext) {
		// Every refusal below is meaningful only if the unpatched object is valid.
		Expect(k8sClient.Create(ctx, object(baseCache, `{}`, ns), client.FieldValidation("Strict"))).To(Succeed())
		Expect(k8sClient.Create(ctx, object(baseTenant, `{}`, ns), client.FieldValidation("Strict"))).To(Succeed())
	})

	DescribeTable("refuses an invalid DistributedCache, naming the field",
		func(ctx context.Context, patch, field, fragment string) {
			createExpectingRefusal(ctx, object(baseCache, patch, ns), field, fragment)
		},
		Entry("spec missing", `spec: null`, "spec", "Required value"),
		// replicas
		Entry("zero replicas", `spec: {replicas: 0}`, "spec.replicas", "greater than or equal to 1"),
		Entry("negative replicas", `spec: {replicas: -2}`, "spec.replicas", "greater than or equal to 1"),
		Entry("too many replicas", `spec: {replicas: 1000}`, "spec.replicas", "less than or equal to 256"),
		// zones
		Entry("no zones", `spec: {zones: []}`, "spec.zones", "at least 1 items"),
		Entry("zones missing", `spec: {zones: null}`, "spec.zones", "Required value"),
		Entry("duplicate zones", `spec: {zones: [{name: zone-a}, {name: zone-b}, {name: zone-a}]}`, "spec.zones[2]", "Duplicate value"),
		Entry("zone name not a DNS label", `spec: {zones: [{name: Zone_A}]}`, "spec.zones[0].name", "should match"),
		Entry("cache and zone names too long together",
			`{metadata: {generateName: null, name: a-cache-with-a-rather-long-name}, spec: {zones: [{name: eu-central-1-zone-a-long}]}}`,
			"spec.zones", "at most 51 characters"),
		Entry("cache name with a dot", `{metadata: {generateName: null, name: my.cache}}`, "metadata.name", "DNS-1035 label"),
		Entry("duplicate instance types", `spec: {instanceTypes: [i4i.2xlarge, i4i.2xlarge]}`, "spec.instanceTypes[1]", "Duplicate value"),
		// storage
		Entry("storage missing", `spec: {storage: null}`, "spec.storage", "Required value"),
		Entry("no storage mode", `spec: {storage: {hostPath: null}}`, "spec.storage", "exactly one storage mode"),
		Entry("two storage modes", `spec: {storage: {emptyDir: {}}}`, "spec.storage", "exactly one storage mode"),
		Entry("unknown storage mode (pruned, leaving none)", `spec: {storage: {hostPath: null, nfs: {server: nas}}}`, "spec.storage", "exactly one storage mode"),
		Entry("relative hostPath", `spec: {storage: {hostPath: {path: mnt/nvme}}}`, "spec.storage.hostPath.path", "should match '^/'"),
		Entry("hostPath with ..", `spec: {storage: {hostPath: {path: /mnt/../etc}}}`, "spec.storage.hostPath.path", "clean absolute path"),
		Entry("volume claim of zero bytes", `spec: {storage: {hostPath: null, volumeClaimTemplate: {size: "0"}}}`, "spec.storage.volumeClaimTemplate.size", "must be positive"),
		Entry("volume claim smaller than diskSize", `spec: {diskSize: 100Gi, storage: {hostPath: null, volumeClaimTemplate: {size: 50Gi}}}`,
			"spec.storage.volumeClaimTemplate.size", "at least spec.diskSize"),
		Entry("volume claim without size", `spec: {storage: {hostPath: null, volumeClaimTemplate: {storageClassName: local-nvme}}}`,
			"spec.storage.volumeClaimTemplate.size", "Required value"),
		Entry("emptyDir limit smaller than diskSize", `spec: {diskSize: 20Gi, storage: {hostPath: null, emptyDir: {sizeLimit: 10Gi}}}`,
			"spec.storage.emptyDir.sizeLimit", "at least spec.diskSize"),
		// sizes
		Entry("unknown cross-zone policy", `spec: {crossZone: Always}`, "spec.crossZone", "Unsupported value"),
		Entry("chunk size below 64Ki", `spec: {chunkSize: 32Ki}`, "spec.chunkSize", "from 64Ki to 64Mi"),
		Entry("chunk size above 64Mi", `spec: {chunkSize: 128Mi}`, "spec.chunkSize", "from 64Ki to 64Mi"),
		Entry("zero chunk size", `spec: {chunkSize: "0"}`, "spec.chunkSize", "from 64Ki to 64Mi"),
		Entry("negative chunk size", `spec: {chunkSize: -4Mi}`, "spec.chunkSize", "from 64Ki to 64Mi"),
		Entry("chunk size as a small integer", `spec: {chunkSize: 1024}`, "spec.chunkSize", "from 64Ki to 64Mi"),
		Entry("fractional chunk size", `spec: {chunkSize: "100000.5"}`, "spec.chunkSize", "whole number of bytes"),
		Entry("chunk size not a quantity", `spec: {chunkSize: 4MB}`, "spec.chunkSize", "should match"),
		Entry("zero disk size", `spec: {diskSize: "0"}`, "spec.diskSize", "at least 16Mi"),
		Entry("negative disk size", `spec: {diskSize: -10Gi}`, "spec.diskSize", "at least 16Mi"),
		Entry("disk smaller than four chunks", `spec: {chunkSize: 64Mi, diskSize: 128Mi}`, "spec.diskSize", "at least four chunks"),
		Entry("zero memory size", `spec: {memorySize: "0"}`, "spec.memorySize", "positive whole number"),
		Entry("negative memory size", `spec: {memorySize: -1Gi}`, "spec.memorySize", "positive whole number"),
		Entry("RAM tier not below the memory limit", `spec: {memorySize: 8Gi, resources: {limits: {memory: 8Gi}}}`, "spec.memorySize", "less than spec.resources.limits.memory"),
		Entry("RAM tier above a memory limit written in bytes", `spec: {memorySize: 2Gi, resources: {limits: {memory: 1073741824}}}`, "spec.memorySize", "less than spec.resources.limits.memory"),
		// metadata cache
		Entry("negative metadata TTL", `spec: {objectMetadata: {ttl: -5s}}`, "spec.objectMetadata.ttl", "non-negative duration"),
		Entry("metadata TTL not a duration", `spec: {objectMetadata: {ttl: soon}}`, "spec.objectMetadata.ttl", "non-negative duration"),
		// S3
		Entry("endpoint not http(s)", `spec: {s3: {endpoint: "ftp://s3.example.com"}}`, "spec.s3.endpoint", "http or https URL"),
		Entry("endpoint not a URL", `spec: {s3: {endpoint: "s3 dot example"}}`, "spec.s3.endpoint", "http or https URL"),
		Entry("empty region", `spec: {s3: {region: ""}}`, "spec.s3.region", "at least 1 chars"),
		Entry("zero attempts", `spec: {s3: {maxAttempts: 0}}`, "spec.s3.maxAttempts", "greater than or equal to 1"),
		Entry("zero concurrency", `spec: {s3: {maxConcurrentRequests: 0}}`, "spec.s3.maxConcurrentRequests", "greater than or equal to 1"),
		Entry("zero request timeout", `spec: {s3: {requestTimeout: 0s}}`, "spec.s3.requestTimeout", "positive duration"),
		Entry("unknown putIfAbsent", `spec: {s3: {putIfAbsent: Always}}`, "spec.s3.putIfAbsent", "Unsupported value"),
		Entry("credentials Secret without a name", `spec: {s3: {credentialsSecret: {accessKeyIDKey: id}}}`, "spec.s3.credentialsSecret.name", "Required value"),
		Entry("credentials key with a slash", `spec: {s3: {credentialsSecret: {name: s3, accessKeyIDKey: a/b}}}`, "spec.s3.credentialsSecret.accessKeyIDKey", "should match"),
		// TLS
		Entry("renewBefore not shorter than the lifetime", `spec: {tls: {certificateDuration: 24h, renewBefore: 24h}}`, "spec.tls.renewBefore", "shorter than spec.tls.certificateDuration"),
		Entry("renewBefore not a duration", `spec: {tls: {renewBefore: 30d}}`, "spec.tls.renewBefore", "at least 5m"),
		Entry("certificate lifetime under an hour", `spec: {tls: {certificateDuration: 10m, renewBefore: 5m}}`, "spec.tls.certificateDuration", "at least 1h"),
		Entry("issuer without a name", `spec: {tls: {issuerRef: {kind: ClusterIssuer}}}`, "spec.tls.issuerRef.name", "Required value"),
		// the rest
		Entry("unknown image pull policy", `spec: {imagePullPolicy: Sometimes}`, "spec.imagePullPolicy", "Unsupported value"),
		Entry("PDB allowing no disruption", `spec: {podDisruptionBudget: {maxUnavailable: 0}}`, "spec.podDisruptionBudget.maxUnavailable", "greater than or equal to 1"),
		Entry("scrape interval not a duration", `spec: {monitoring: {serviceMonitor: {enabled: true, interval: often}}}`, "spec.monitoring.serviceMonitor.interval", "should match"),
		Entry("replicas of the wrong type", `spec: {replicas: three}`, "spec.replicas", "Invalid value"),
	)

	It("refuses an unknown storage mode outright under strict field validation", func(ctx SpecContext) {
		obj := object(baseCache, `spec: {storage: {nfs: {server: nas}}}`, ns)
		err := k8sClient.Create(ctx, obj, client.FieldValidation("Strict"))
		Expect(err).To(HaveOccurred())
		Expect(err.Error()).To(ContainSubstring(`unknown field "spec.storage.nfs"`))
	})

	DescribeTable("refuses an invalid CacheTenant, naming the field",
		func(ctx context.Context, patch, field, fragment string) {
			createExpectingRefusal(ctx, object(baseTenant, patch, ns), field, fragment)
		},
		Entry("no buckets", `spec: {buckets: []}`, "spec.buckets", "at least 1 items"),
		Entry("spec missing", `spec: null`, "spec", "Required value"),
		Entry("buckets missing", `spec: {buckets: null}`, "spec.buckets", "Required value"),
		Entry("duplicate buckets", `spec: {buckets: [a-bucket, b-bucket, a-bucket]}`, "spec.buckets[2]", "Duplicate value"),
		Entry("upper-case bucket", `spec: {buckets: [Team-Data]}`, "spec.buckets[0]", "should match"),
		Entry("wildcard bucket", `spec: {buckets: ["team-*"]}`, "spec.buckets[0]", "should match"),
		Entry("short bucket", `spec: {buckets: [ab]}`, "spec.buckets[0]", "at least 3 chars"),
		Entry("bucket with ..", `spec: {buckets: [team..data]}`, "spec.buckets[0]", "not a valid S3 bucket name"),
		Entry("bucket shaped like an IP address", `spec: {buckets: [ok-bucket, 192.168.10.1]}`, "spec.buckets[1]", "not a valid S3 bucket name"),
		Entry("bucket with a reserved prefix", `spec: {buckets: [xn--team]}`, "spec.buckets[0]", "not a valid S3 bucket name"),
		Entry("zero quota", `spec: {quota: "0"}`, "spec.quota", "positive whole number"),
		Entry("negative quota", `spec: {quota: -1Gi}`, "spec.quota", "positive whole number"),
		// write policies
		Entry("policy of a bucket the tenant does not have", `spec: {policies: [{bucket: other-bucket, mode: ReadOnly}]}`, "spec.policies", "one of spec.buckets"),
		Entry("policy with an unknown mode", `spec: {policies: [{bucket: team-data, mode: WriteAround}]}`, "spec.policies[0].mode", "Unsupported value"),
		Entry("policy without a mode", `spec: {policies: [{bucket: team-data}]}`, "spec.policies[0].mode", "Required value"),
		Entry("two policies for one prefix", `spec: {policies: [{bucket: team-data, prefix: tmp/, mode: ReadOnly}, {bucket: team-data, prefix: tmp/, mode: NoCache}]}`,
			"spec.policies[1]", "Duplicate value"),
		Entry("two policies for a whole bucket", `spec: {policies: [{bucket: team-data, mode: ReadOnly}, {bucket: team-data, mode: NoCache}]}`,
			"spec.policies[1]", "Duplicate value"),
		Entry("policy prefix longer than a key", `spec: {policies: [{bucket: team-data, prefix: "`+strings.Repeat("k", 1025)+`", mode: NoCache}]}`,
			"spec.policies[0].prefix", "1024"),
		Entry("write-back with four replicas", `spec: {policies: [{bucket: team-data, mode: WriteBack, replicas: 4}]}`,
			"spec.policies[0].replicas", "less than or equal to 3"),
		Entry("read-only policy with replicas", `spec: {policies: [{bucket: team-data, mode: ReadOnly, replicas: 2}]}`,
			"spec.policies[0].replicas", "only WriteBack and Transient"),
		Entry("write-back policy with an expiry", `spec: {policies: [{bucket: team-data, mode: WriteBack, expiry: 1h}]}`,
			"spec.policies[0].expiry", "only Transient policies expire"),
		Entry("transient policy with a zero expiry", `spec: {policies: [{bucket: team-data, mode: Transient, expiry: 0s}]}`,
			"spec.policies[0].expiry", "positive duration"),
		Entry("cache reference without a name", `spec: {cacheRef: {name: null}}`, "spec.cacheRef.name", "Required value"),
		Entry("cache reference without a namespace", `spec: {cacheRef: {namespace: null}}`, "spec.cacheRef.namespace", "Required value"),
		Entry("certificate Secret name not a DNS name", `spec: {certificateSecretName: Team_Cert}`, "spec.certificateSecretName", "should match"),
		Entry("tenant name with a dot", `{metadata: {generateName: null, name: team.a}}`, "metadata.name", "DNS label"),
		// gateway
		Entry("gateway port below 1024", `spec: {gateway: {port: 80}}`, "spec.gateway.port", "greater than or equal to 1024"),
		Entry("gateway port above 65535", `spec: {gateway: {port: 70000}}`, "spec.gateway.port", "less than or equal to 65535"),
		Entry("gateway port on the metrics port", `spec: {gateway: {port: 9091}}`, "spec.gateway.port", "metrics port"),
		Entry("zero gateways per zone", `spec: {gateway: {replicasPerZone: 0}}`, "spec.gateway.replicasPerZone", "greater than or equal to 1"),
		Entry("negative page cache", `spec: {gateway: {pageCacheSize: -1Gi}}`, "spec.gateway.pageCacheSize", "from 0 to 512Gi"),
		Entry("fractional page cache", `spec: {gateway: {pageCacheSize: "1000.5"}}`, "spec.gateway.pageCacheSize", "whole number of bytes"),
		Entry("gateway zone not a DNS label", `spec: {gateway: {zones: [Zone_A]}}`, "spec.gateway.zones[0]", "should match"),
		Entry("duplicate gateway zones", `spec: {gateway: {zones: [zone-a, zone-a]}}`, "spec.gateway.zones[1]", "Duplicate value"),
		Entry("gateway Service of type ExternalName", `spec: {gateway: {service: {type: ExternalName}}}`, "spec.gateway.service.type", "Unsupported value"),
		Entry("gateway region with a space", `spec: {gateway: {region: "eu west"}}`, "spec.gateway.region", "should match"),
		Entry("gateway for a tenant named with a digit first", `{metadata: {generateName: null, name: 1team}, spec: {gateway: {}}}`, "metadata.name", "start with a letter"),
		Entry("gateway for a tenant name too long for its Service",
			`{metadata: {generateName: null, name: a-tenant-with-a-name-long-enough-to-overflow-its-service}, spec: {gateway: {}}}`,
			"metadata.name", "at most 55 characters"),
	)
})
