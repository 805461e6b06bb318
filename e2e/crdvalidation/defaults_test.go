package crdvalidation_test

import (
	"context"
	"os"
	"path/filepath"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/yaml"

	cachev1alpha1 "github.com/distcache/distcache/api/v1alpha1"
)

func getCache(ctx context.Context, key client.ObjectKey) *cachev1alpha1.DistributedCache {
	GinkgoHelper()
	dc := &cachev1alpha1.DistributedCache{}
	Expect(k8sClient.Get(ctx, key, dc)).To(Succeed())
	return dc
}

func getTenant(ctx context.Context, key client.ObjectKey) *cachev1alpha1.CacheTenant {
	GinkgoHelper()
	t := &cachev1alpha1.CacheTenant{}
	Expect(k8sClient.Get(ctx, key, t)).To(Succeed())
	return t
}

// quantity matches a *resource.Quantity equal in value to s.
func quantity(s string) OmegaMatcher {
	want := resource.MustParse(s)
	return WithTransform(func(q *resource.Quantity) int {
		if q == nil {
			return -2
		}
		return q.Cmp(want)
	}, BeZero())
}

func duration(s string) OmegaMatcher {
	d, err := time.ParseDuration(s)
	Expect(err).NotTo(HaveOccurred())
	return Equal(&metav1.Duration{Duration: d})
}

var _ = Describe("the samples", func() {
	It("are accepted under strict field validation and read back with defaults", func(ctx SpecContext) {
		dir := filepath.Join(root, "config", "samples")
		data, err := os.ReadFile(filepath.Join(dir, "kustomization.yaml"))
		Expect(err).NotTo(HaveOccurred())
		var kustomization struct{ Resources []string }
		Expect(yaml.Unmarshal(data, &kustomization)).To(Succeed())
		Expect(kustomization.Resources).To(HaveLen(2))

		var cacheKey, tenantKey client.ObjectKey
		for _, file := range kustomization.Resources {
			data, err := os.ReadFile(filepath.Join(dir, file))
			Expect(err).NotTo(HaveOccurred())
			obj := &unstructured.Unstructured{}
			Expect(yaml.Unmarshal(data, &obj.Object)).To(Succeed(), file)
			ensureNamespace(ctx, obj.GetNamespace())
			Expect(k8sClient.Create(ctx, obj, client.FieldValidation("Strict"))).To(Succeed(), file)
			switch obj.GetKind() {
			case "DistributedCache":
				cacheKey = client.ObjectKeyFromObject(obj)
			case "CacheTenant":
				tenantKey = client.ObjectKeyFromObject(obj)
			}
		}

		dc := getCache(ctx, cacheKey)
		s := dc.Spec
		// As written in the sample.
		Expect(s.Replicas).To(Equal(int32p(3)))
		Expect(s.Zones).To(HaveLen(2))
		Expect(s.InstanceTypes).To(ContainElements("i4i.2xlarge", "i3en.2xlarge", "m6id.4xlarge"))
		Expect(s.Storage.Mode()).To(Equal(cachev1alpha1.StorageModeHostPath))
		Expect(s.DiskSize).To(quantity("1500Gi"))
		Expect(s.ObjectMetadata.Immutable).To(BeTrue())
		Expect(s.Monitoring.ServiceMonitor.Enabled).To(BeTrue())
		Expect(s.Monitoring.PrometheusRule.Enabled).To(BeTrue())
		Expect(s.Monitoring.PrometheusRule.Labels).To(HaveKeyWithValue("release", "kube-prometheus-stack"))
		Expect(s.Monitoring.GrafanaDashboard.Enabled).To(BeTrue())
		// Defaulted by the API server.
		Expect(s.ObjectMetadata.TTL).To(duration("30s"))
		Expect(s.S3.Endpoint).To(BeEmpty())
		Expect(s.S3.PathStyle).To(BeFalse())
		Expect(s.S3.MaxConcurrentRequests).To(Equal(int32p(64)))
		Expect(s.S3.MaxAttempts).To(Equal(int32p(4)))
		Expect(s.S3.RequestTimeout).To(duration("30s"))
		Expect(s.S3.CredentialsSecret).To(Equal(&cachev1alpha1.CredentialsSecretReference{
			Name: "distcache-s3", AccessKeyIDKey: "AWS_ACCESS_KEY_ID", SecretAccessKeyKey: "AWS_SECRET_ACCESS_KEY",
		}))
		Expect(s.TLS.IssuerRef).To(BeNil())
		Expect(s.TLS.CertificateDuration).To(duration("2160h"))
		Expect(s.TLS.RenewBefore).To(duration("720h"))
		Expect(s.Monitoring.ServiceMonitor.Interval).To(Equal("30s"))
		Expect(s.Monitoring.PrometheusRule.HitRatioThreshold).To(Equal("0.5"))
		Expect(s.Monitoring.GrafanaDashboard.Labels).To(Equal(map[string]string{"grafana_dashboard": "1"}))
		Expect(s.PodDisruptionBudget.MaxUnavailable).To(Equal(int32p(1)))

		t := getTenant(ctx, tenantKey)
		Expect(t.Spec.CacheRef).To(Equal(cachev1alpha1.CacheReference{Namespace: cacheKey.Namespace, Name: cacheKey.Name}))
		Expect(t.Spec.Buckets).To(ConsistOf("acme-clickhouse-data", "acme-clickhouse-backups"))
		Expect(t.Spec.Quota).To(quantity("200Gi"))
		Expect(t.Spec.CredentialsSecret.SecretAccessKeyKey).To(Equal("AWS_SECRET_ACCESS_KEY"))
		Expect(t.CertificateSecretName()).To(Equal("clickhouse-distcache-client"))
		Expect(t.GatewayEnabled()).To(BeTrue())
		Expect(t.Spec.Gateway.ReplicasPerZone).To(Equal(int32p(2)))
		Expect(t.Spec.Gateway.PageCacheSize).To(quantity("4Gi"))
		// Defaulted by the API server.
		Expect(t.Spec.Gateway.Enabled).To(Equal(ptr.To(true)))
		Expect(t.Spec.Gateway.Port).To(Equal(int32p(8099)))
		Expect(t.Spec.Gateway.Service.Type).To(Equal(corev1.ServiceTypeClusterIP))
		Expect(s.CrossZone).To(Equal(cachev1alpha1.CrossZoneNever))
	})
})

var _ = Describe("defaults", func() {
	It("fill in a minimal cache built with the Go types", func(ctx SpecContext) {
		dc := &cachev1alpha1.DistributedCache{
			ObjectMeta: metav1.ObjectMeta{Name: "minimal", Namespace: newNamespace(ctx)},
			Spec: cachev1alpha1.DistributedCacheSpec{
				Zones:   []cachev1alpha1.ZoneSpec{{Name: "eu-west-1a"}},
				Storage: cachev1alpha1.StorageSpec{EmptyDir: &cachev1alpha1.EmptyDirStorage{}},
			},
		}
		Expect(k8sClient.Create(ctx, dc)).To(Succeed())
		s := getCache(ctx, client.ObjectKeyFromObject(dc)).Spec
		Expect(s.Replicas).To(Equal(int32p(3)))
		Expect(s.ChunkSize).To(quantity("4Mi"))
		Expect(s.DiskSize).To(quantity("10Gi"))
		Expect(s.MemorySize).To(quantity("1Gi"))
		Expect(s.Storage.Mode()).To(Equal(cachev1alpha1.StorageModeEmptyDir))
		Expect(s.ObjectMetadata).To(Equal(cachev1alpha1.ObjectMetadataSpec{TTL: &metav1.Duration{Duration: 30 * time.Second}}))
		Expect(s.S3.Region).To(Equal("us-east-1"))
		Expect(s.S3.CredentialsSecret).To(BeNil())
		Expect(s.S3.MaxAttempts).To(Equal(int32p(4)))
		Expect(s.TLS.RenewBefore).To(duration("720h"))
		Expect(s.Monitoring.ServiceMonitor.Enabled).To(BeFalse())
		Expect(s.Monitoring.ServiceMonitor.Interval).To(Equal("30s"))
		Expect(s.Monitoring.GrafanaDashboard.Labels).To(HaveKeyWithValue("grafana_dashboard", "1"))
		Expect(s.PodDisruptionBudget.MaxUnavailable).To(Equal(int32p(1)))
		Expect(s.Image).To(BeEmpty())
		Expect(s.CacheNodeImage("ghcr.io/distcache/distcache:v1")).To(Equal("ghcr.io/distcache/distcache:v1"))
	})

	It("keep what the user wrote", func(ctx SpecContext) {
		obj := object(baseCache, `spec: {replicas: 5, chunkSize: 1Mi, s3: {region: eu-west-1, maxAttempts: 2}, tls: {issuerRef: {name: ca}}}`, newNamespace(ctx))
		Expect(k8sClient.Create(ctx, obj)).To(Succeed())
		s := getCache(ctx, client.ObjectKeyFromObject(obj)).Spec
		Expect(s.Replicas).To(Equal(int32p(5)))
		Expect(s.ChunkSize).To(quantity("1Mi"))
		Expect(s.S3.Region).To(Equal("eu-west-1"))
		Expect(s.S3.MaxAttempts).To(Equal(int32p(2)))
		Expect(s.S3.MaxConcurrentRequests).To(Equal(int32p(64)))
		Expect(s.S3.PutIfAbsent).To(BeEmpty(), "no default: an omitted putIfAbsent leaves the pod template as before the field")
		Expect(s.TLS.IssuerRef).To(Equal(&cachev1alpha1.IssuerReference{Name: "ca", Kind: "Issuer", Group: "cert-manager.io"}))
	})

	It("name the tenant's certificate Secret after the tenant unless told otherwise", func(ctx SpecContext) {
		ns := newNamespace(ctx)
		a := object(baseTenant, `{metadata: {generateName: null, name: team-a}}`, ns)
		b := object(baseTenant, `{metadata: {generateName: null, name: team-b}, spec: {certificateSecretName: ch-client-tls}}`, ns)
		Expect(k8sClient.Create(ctx, a)).To(Succeed())
		Expect(k8sClient.Create(ctx, b)).To(Succeed())
		Expect(getTenant(ctx, client.ObjectKeyFromObject(a)).CertificateSecretName()).To(Equal("team-a-distcache-client"))
		Expect(getTenant(ctx, client.ObjectKeyFromObject(b)).CertificateSecretName()).To(Equal("ch-client-tls"))
	})
})
