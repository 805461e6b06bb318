package operator_test

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/pem"
	"fmt"
	"net/url"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller/controllerutil"

	cachev1alpha1 "github.com/distcache/distcache/api/v1alpha1"
	"github.com/distcache/distcache/controllers"
	"github.com/distcache/distcache/internal/pki"
	"github.com/distcache/distcache/internal/tenancy"
)

// parseCert parses the tls.crt of a certificate Secret.
func parseCert(g Gomega, s *corev1.Secret) *x509.Certificate {
	block, _ := pem.Decode(s.Data[corev1.TLSCertKey])
	g.Expect(block).NotTo(BeNil(), "secret %s has no PEM certificate", s.Name)
	c, err := x509.ParseCertificate(block.Bytes)
	g.Expect(err).NotTo(HaveOccurred())
	return c
}

// caPool is the cache's CA from its CA Secret.
func caPool(ctx context.Context, g Gomega, dc *cachev1alpha1.DistributedCache) *x509.CertPool {
	var s corev1.Secret
	g.Expect(k8sClient.Get(ctx, key(dc.Namespace, controllers.CASecretName(dc)), &s)).To(Succeed())
	pool := x509.NewCertPool()
	g.Expect(pool.AppendCertsFromPEM(s.Data[corev1.TLSCertKey])).To(BeTrue())
	return pool
}

// tenantsFile is the nodes' tenants file the operator wrote for dc.
func tenantsFile(ctx context.Context, g Gomega, dc *cachev1alpha1.DistributedCache) *tenancy.Config {
	var s corev1.Secret
	g.Expect(k8sClient.Get(ctx, key(dc.Namespace, controllers.TenantsSecretName(dc)), &s)).To(Succeed())
	cfg, err := tenancy.Parse(s.Data[controllers.TenantsFileKey])
	g.Expect(err).NotTo(HaveOccurred())
	return cfg
}

func newTenant(ns, name string, dc *cachev1alpha1.DistributedCache, buckets ...string) *cachev1alpha1.CacheTenant {
	return &cachev1alpha1.CacheTenant{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name},
		Spec: cachev1alpha1.CacheTenantSpec{
			CacheRef: cachev1alpha1.CacheReference{Namespace: dc.Namespace, Name: dc.Name},
			Buckets:  buckets,
		},
	}
}

func readyCondition(ctx context.Context, g Gomega, ns, name string) *metav1.Condition {
	var t cachev1alpha1.CacheTenant
	g.Expect(k8sClient.Get(ctx, key(ns, name), &t)).To(Succeed())
	c := meta.FindStatusCondition(t.Status.Conditions, cachev1alpha1.ConditionReady)
	g.Expect(c).NotTo(BeNil())
	return c
}

var _ = Describe("Certificates and CacheTenants", func() {
	It("issues a node certificate valid for every pod's DNS name that nodes can renew without a restart", func(ctx SpecContext) {
		ns := newNamespace(ctx)
		dc := newCache(ns, "certs", 2, "zone-a", "zone-b")
		Expect(k8sClient.Create(ctx, dc)).To(Succeed())

		var nodeTLS corev1.Secret
		Eventually(func(g Gomega) {
			g.Expect(k8sClient.Get(ctx, key(ns, controllers.NodeTLSSecretName(dc)), &nodeTLS)).To(Succeed())
		}).Should(Succeed())
		Expect(nodeTLS.Type).To(Equal(corev1.SecretTypeTLS))
		Expect(metav1.IsControlledBy(&nodeTLS, dc)).To(BeTrue())
		pool := caPool(ctx, Default, dc)
		Expect(nodeTLS.Data["ca.crt"]).To(Equal(func() []byte {
			var s corev1.Secret
			Expect(k8sClient.Get(ctx, key(ns, controllers.CASecretName(dc)), &s)).To(Succeed())
			return s.Data[corev1.TLSCertKey]
		}()))
		cert := parseCert(Default, &nodeTLS)
		// A ring member's address, a zone's Service (its gateways' seeds)
		// and the client Service verify.
		for _, host := range []string{
			fmt.Sprintf("certs-zone-a-0.certs-zone-a.%s.svc", ns),
			fmt.Sprintf("certs-zone-b.%s.svc", ns),
			fmt.Sprintf("certs-zone-b-7.certs-zone-b.%s.svc.cluster.local", ns),
			fmt.Sprintf("certs.%s.svc", ns),
		} {
			_, err := cert.Verify(x509.VerifyOptions{DNSName: host, Roots: pool, KeyUsages: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth}})
			Expect(err).NotTo(HaveOccurred(), host)
		}
		_, err := cert.Verify(x509.VerifyOptions{DNSName: "certs-zone-a-0.other.svc", Roots: pool})
		Expect(err).To(HaveOccurred(), "a name outside the cache must not verify")
		// The same certificate is the nodes' peer client certificate.
		_, err = cert.Verify(x509.VerifyOptions{Roots: pool, KeyUsages: []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth}})
		Expect(err).NotTo(HaveOccurred())
		id, err := pki.IdentityFromState(&tls.ConnectionState{VerifiedChains: [][]*x509.Certificate{{cert}}})
		Expect(err).NotTo(HaveOccurred())
		Expect(id).To(Equal(pki.Identity{Kind: pki.KindPeer, Name: "certs"}))
		_, err = tls.X509KeyPair(nodeTLS.Data[corev1.TLSCertKey], nodeTLS.Data[corev1.TLSPrivateKeyKey])
		Expect(err).NotTo(HaveOccurred())

		// The pods mount it. The StatefulSets come after the certificates
		// (and the nodes' RBAC) in a reconcile: wait for them.
		var sts appsv1.StatefulSet
		Eventually(func() error { return k8sClient.Get(ctx, key(ns, "certs-zone-a"), &sts) }).Should(Succeed())
		hash := sts.Spec.Template.Annotations[controllers.AnnotationInputHash]
		Expect(sts.Spec.Template.Spec.Volumes).To(ContainElement(HaveField("VolumeSource.Secret.SecretName", controllers.NodeTLSSecretName(dc))))

		By("renewing before expiry: a new certificate in the same Secret, the pod template untouched")
		clock.Advance(time.Until(cert.NotAfter) - 24*time.Hour) // inside the default 720h window
		DeferCleanup(clock.Reset)
		updateCache(ctx, ns, dc.Name, func(dc *cachev1alpha1.DistributedCache) {
			dc.Annotations = map[string]string{"nudge": "renew"}
		})
		Eventually(func(g Gomega) {
			var s corev1.Secret
			g.Expect(k8sClient.Get(ctx, key(ns, controllers.NodeTLSSecretName(dc)), &s)).To(Succeed())
			g.Expect(parseCert(g, &s).SerialNumber).NotTo(Equal(cert.SerialNumber))
		}).Should(Succeed())
		Expect(k8sClient.Get(ctx, key(ns, "certs-zone-a"), &sts)).To(Succeed())
		Expect(sts.Spec.Template.Annotations[controllers.AnnotationInputHash]).To(Equal(hash), "renewal must not roll the pods")

		By("a new zone extends the certificate's names")
		updateCache(ctx, ns, dc.Name, func(dc *cachev1alpha1.DistributedCache) {
			dc.Spec.Zones = append(dc.Spec.Zones, cachev1alpha1.ZoneSpec{Name: "zone-c"})
		})
		Eventually(func(g Gomega) {
			var s corev1.Secret
			g.Expect(k8sClient.Get(ctx, key(ns, controllers.NodeTLSSecretName(dc)), &s)).To(Succeed())
			g.Expect(parseCert(g, &s).VerifyHostname(fmt.Sprintf("certs-zone-c-0.certs-zone-c.%s.svc", ns))).To(Succeed())
		}).Should(Succeed())
	})

	It("gives a CacheTenant a client certificate and a place in the tenants file, and takes both away on deletion", func(ctx SpecContext) {
		cacheNS := newNamespace(ctx)
		dc := newCache(cacheNS, "shared", 1, "zone-a")
		dc.Spec.TenantNamespaceSelector = &metav1.LabelSelector{MatchLabels: map[string]string{"distcache.io/tenants": "allowed"}}
		Expect(k8sClient.Create(ctx, dc)).To(Succeed())
		teamNS := newNamespace(ctx)
		Expect(k8sClient.Patch(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: teamNS, Labels: map[string]string{"distcache.io/tenants": "allowed"}}},
			client.Merge)).To(Succeed())
		Expect(k8sClient.Create(ctx, &corev1.Secret{
			ObjectMeta: metav1.ObjectMeta{Namespace: teamNS, Name: "team-s3"},
			StringData: map[string]string{"AWS_ACCESS_KEY_ID": "AKIATEAM", "AWS_SECRET_ACCESS_KEY": "team-secret"},
		})).To(Succeed())
		t := newTenant(teamNS, "clickhouse", dc, "ch-data", "ch-backups")
		t.Spec.Quota = ptr.To(resource.MustParse("10Gi"))
		t.Spec.CredentialsSecret = &cachev1alpha1.CredentialsSecretReference{Name: "team-s3"}
		Expect(k8sClient.Create(ctx, t)).To(Succeed())
		wantName := teamNS + "-clickhouse"

		var secret corev1.Secret
		Eventually(func(g Gomega) {
			c := readyCondition(ctx, g, teamNS, t.Name)
			g.Expect(c.Status).To(Equal(metav1.ConditionTrue), c.Message)
			g.Expect(c.Reason).To(Equal(cachev1alpha1.ReasonCertificateIssued))
			g.Expect(k8sClient.Get(ctx, key(teamNS, "clickhouse-distcache-client"), &secret)).To(Succeed())
		}).Should(Succeed())

		By("the certificate verifies against the cache CA and carries the tenant identity")
		cert := parseCert(Default, &secret)
		chains, err := cert.Verify(x509.VerifyOptions{Roots: caPool(ctx, Default, dc), KeyUsages: []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth}})
		Expect(err).NotTo(HaveOccurred())
		id, err := pki.IdentityFromState(&tls.ConnectionState{VerifiedChains: chains})
		Expect(err).NotTo(HaveOccurred())
		Expect(id).To(Equal(pki.Identity{Kind: pki.KindTenant, Name: wantName}))
		_, err = cert.Verify(x509.VerifyOptions{Roots: caPool(ctx, Default, dc), KeyUsages: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth}})
		Expect(err).To(HaveOccurred(), "a tenant certificate must not serve")
		_, err = tls.X509KeyPair(secret.Data[corev1.TLSCertKey], secret.Data[corev1.TLSPrivateKeyKey])
		Expect(err).NotTo(HaveOccurred())

		var got cachev1alpha1.CacheTenant
		Expect(k8sClient.Get(ctx, key(teamNS, t.Name), &got)).To(Succeed())
		Expect(got.Status.TenantName).To(Equal(wantName))
		Expect(got.Status.CertificateSecretName).To(Equal("clickhouse-distcache-client"))
		Expect(got.Status.CertificateNotAfter.Time).To(BeTemporally("~", cert.NotAfter, time.Second))
		Expect(got.Status.CertificateRenewalTime.Time).To(BeTemporally("<", cert.NotAfter))

		By("the nodes' tenants file lists it with its buckets, quota and credentials")
		Eventually(func(g Gomega) {
			tt, ok := tenantsFile(ctx, g, dc).Tenant(wantName)
			g.Expect(ok).To(BeTrue())
			g.Expect(tt.Buckets).To(Equal([]string{"ch-backups", "ch-data"}))
			g.Expect(tt.QuotaBytes).To(Equal(int64(10 << 30)))
			g.Expect(tt.Credentials).NotTo(BeNil())
			g.Expect(tt.Credentials.AccessKeyID).To(Equal("AKIATEAM"))
			g.Expect(tt.Credentials.SecretAccessKey).To(Equal("team-secret"))
		}).Should(Succeed())

		By("a tenant in a namespace the selector does not admit gets nothing")
		strayNS := newNamespace(ctx)
		Expect(k8sClient.Create(ctx, newTenant(strayNS, "stray", dc, "ch-data"))).To(Succeed())
		Eventually(func(g Gomega) {
			c := readyCondition(ctx, g, strayNS, "stray")
			g.Expect(c.Status).To(Equal(metav1.ConditionFalse))
			g.Expect(c.Reason).To(Equal(cachev1alpha1.ReasonNamespaceNotAllowed))
		}).Should(Succeed())
		Consistently(func(g Gomega) {
			err := k8sClient.Get(ctx, key(strayNS, "stray-distcache-client"), &corev1.Secret{})
			g.Expect(apierrors.IsNotFound(err)).To(BeTrue())
			_, listed := tenantsFile(ctx, g, dc).Tenant(strayNS + "-stray")
			g.Expect(listed).To(BeFalse())
		}, 2*time.Second).Should(Succeed())

		By("labelling that namespace admits it")
		Expect(k8sClient.Patch(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: strayNS, Labels: map[string]string{"distcache.io/tenants": "allowed"}}},
			client.Merge)).To(Succeed())
		Eventually(func(g Gomega) {
			g.Expect(readyCondition(ctx, g, strayNS, "stray").Status).To(Equal(metav1.ConditionTrue))
			_, listed := tenantsFile(ctx, g, dc).Tenant(strayNS + "-stray")
			g.Expect(listed).To(BeTrue())
		}).Should(Succeed())

		By("deleting the tenant removes its Secret and its entry")
		Expect(k8sClient.Delete(ctx, t)).To(Succeed())
		Eventually(func(g Gomega) {
			err := k8sClient.Get(ctx, key(teamNS, "clickhouse-distcache-client"), &corev1.Secret{})
			g.Expect(apierrors.IsNotFound(err)).To(BeTrue(), "certificate Secret still exists")
			_, listed := tenantsFile(ctx, g, dc).Tenant(wantName)
			g.Expect(listed).To(BeFalse())
			err = k8sClient.Get(ctx, key(teamNS, t.Name), &cachev1alpha1.CacheTenant{})
			g.Expect(apierrors.IsNotFound(err)).To(BeTrue(), "CacheTenant still exists (finalizer)")
		}).Should(Succeed())
		_, listed := tenantsFile(ctx, Default, dc).Tenant(strayNS + "-stray")
		Expect(listed).To(BeTrue(), "the other tenant stays")
	})

	It("reports a missing cache, missing credentials and name conflicts", func(ctx SpecContext) {
		ns := newNamespace(ctx)
		ghost := newCache(ns, "ghost", 1, "zone-a")
		Expect(k8sClient.Create(ctx, newTenant(ns, "orphan", ghost, "data-bucket"))).To(Succeed())
		Eventually(func(g Gomega) {
			g.Expect(readyCondition(ctx, g, ns, "orphan").Reason).To(Equal(cachev1alpha1.ReasonCacheNotFound))
		}).Should(Succeed())

		By("creating the cache admits the waiting tenant")
		Expect(k8sClient.Create(ctx, ghost)).To(Succeed())
		Eventually(func(g Gomega) {
			g.Expect(readyCondition(ctx, g, ns, "orphan").Status).To(Equal(metav1.ConditionTrue))
		}).Should(Succeed())

		By("a credentials Secret that does not exist keeps the tenant out")
		nocreds := newTenant(ns, "nocreds", ghost, "data-bucket")
		nocreds.Spec.CredentialsSecret = &cachev1alpha1.CredentialsSecretReference{Name: "absent"}
		Expect(k8sClient.Create(ctx, nocreds)).To(Succeed())
		Eventually(func(g Gomega) {
			c := readyCondition(ctx, g, ns, "nocreds")
			g.Expect(c.Reason).To(Equal(cachev1alpha1.ReasonSecretNotFound))
			g.Expect(c.Message).To(ContainSubstring("absent"))
		}).Should(Succeed())
		_, listed := tenantsFile(ctx, Default, ghost).Tenant(ns + "-nocreds")
		Expect(listed).To(BeFalse())

		By("two tenants whose names map to the same identity: the older one keeps it")
		// <ns>-a + "-b" and <ns> + "-a-b" would collide only across namespaces;
		// build the collision with a namespace named <ns>-x and tenants x-y / y.
		other := ns + "-x"
		Expect(k8sClient.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: other}})).To(Succeed())
		updateCache(ctx, ns, ghost.Name, func(dc *cachev1alpha1.DistributedCache) {
			dc.Spec.TenantNamespaceSelector = &metav1.LabelSelector{}
		})
		Expect(k8sClient.Create(ctx, newTenant(ns, "x-y", ghost, "data-bucket"))).To(Succeed())
		Eventually(func(g Gomega) {
			g.Expect(readyCondition(ctx, g, ns, "x-y").Status).To(Equal(metav1.ConditionTrue))
		}).Should(Succeed())
		Expect(k8sClient.Create(ctx, newTenant(other, "y", ghost, "data-bucket"))).To(Succeed())
		Eventually(func(g Gomega) {
			c := readyCondition(ctx, g, other, "y")
			g.Expect(c.Reason).To(Equal(controllers.ReasonIdentityConflict))
			g.Expect(c.Message).To(ContainSubstring(ns + "/x-y"))
		}).Should(Succeed())
		Expect(readyCondition(ctx, Default, ns, "x-y").Status).To(Equal(metav1.ConditionTrue))
		Expect(apierrors.IsNotFound(k8sClient.Get(ctx, key(other, "y-distcache-client"), &corev1.Secret{}))).To(BeTrue())
	})
})

// certificateSpec reads a cert-manager Certificate's spec.
func certificateSpec(ctx context.Context, g Gomega, ns, name string) map[string]any {
	u := &unstructured.Unstructured{}
	u.SetGroupVersionKind(schema.GroupVersionKind{Group: "cert-manager.io", Version: "v1", Kind: "Certificate"})
	g.Expect(k8sClient.Get(ctx, key(ns, name), u)).To(Succeed())
	spec, _, _ := unstructured.NestedMap(u.Object, "spec")
	return spec
}

// issueLikeCertManager does what cert-manager's controller would for a
// Certificate (envtest runs no cert-manager): it signs a certificate for the
// spec's URI with ca and writes the Secret with the spec's template.
func issueLikeCertManager(ctx context.Context, ca *pki.CA, ns string, spec map[string]any) {
	uris, _, _ := unstructured.NestedStringSlice(spec, "uris")
	Expect(uris).To(HaveLen(1))
	u, err := url.Parse(uris[0])
	Expect(err).NotTo(HaveOccurred())
	id, err := pki.ParseIdentity(u)
	Expect(err).NotTo(HaveOccurred())
	leaf, err := ca.IssueClient(id, time.Hour)
	Expect(err).NotTo(HaveOccurred())
	name, _, _ := unstructured.NestedString(spec, "secretName")
	labels, _, _ := unstructured.NestedStringMap(spec, "secretTemplate", "labels")
	annotations, _, _ := unstructured.NestedStringMap(spec, "secretTemplate", "annotations")
	s := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name}}
	_, err = controllerutil.CreateOrUpdate(ctx, k8sClient, s, func() error {
		s.Labels, s.Annotations, s.Type = labels, annotations, corev1.SecretTypeTLS
		s.Data = map[string][]byte{corev1.TLSCertKey: leaf.CertPEM, corev1.TLSPrivateKeyKey: leaf.KeyPEM, "ca.crt": ca.CertPEM}
		return nil
	})
	Expect(err).NotTo(HaveOccurred())
}

var _ = Describe("cert-manager mode", func() {
	It("asks cert-manager for the node and tenant certificates and copies the tenant's into its namespace", func(ctx SpecContext) {
		ns := newNamespace(ctx)
		dc := newCache(ns, "managed", 1, "zone-a")
		dc.Spec.TLS.IssuerRef = &cachev1alpha1.IssuerReference{Name: "team-ca", Kind: "ClusterIssuer", Group: "cert-manager.io"}
		Expect(k8sClient.Create(ctx, dc)).To(Succeed())

		By("the nodes' Certificate names every pod and the peer identity")
		Eventually(func(g Gomega) {
			spec := certificateSpec(ctx, g, ns, "managed-node")
			g.Expect(spec["secretName"]).To(Equal(controllers.NodeTLSSecretName(dc)))
			g.Expect(spec["dnsNames"]).To(ContainElement("*.managed-zone-a." + ns + ".svc"))
			g.Expect(spec["uris"]).To(Equal([]any{"spiffe://distcache/peer/managed"}))
			g.Expect(spec["usages"]).To(ContainElements("server auth", "client auth"))
			g.Expect(spec["issuerRef"]).To(Equal(map[string]any{"name": "team-ca", "kind": "ClusterIssuer", "group": "cert-manager.io"}))
			g.Expect(spec["duration"]).To(Equal("2160h0m0s"))
		}).Should(Succeed())
		Expect(apierrors.IsNotFound(k8sClient.Get(ctx, key(ns, controllers.CASecretName(dc)), &corev1.Secret{}))).To(BeTrue(),
			"no self-managed CA in cert-manager mode")

		By("a tenant waits for cert-manager, then gets a copy of what it issued")
		Expect(k8sClient.Create(ctx, newTenant(ns, "reports", dc, "reports-data"))).To(Succeed())
		certName := "managed-tenant-" + ns + "-reports"
		var spec map[string]any
		Eventually(func(g Gomega) {
			c := readyCondition(ctx, g, ns, "reports")
			g.Expect(c.Reason).To(Equal(cachev1alpha1.ReasonCertificatePending), c.Message)
			spec = certificateSpec(ctx, g, ns, certName)
		}).Should(Succeed())
		Expect(spec["uris"]).To(Equal([]any{"spiffe://distcache/tenant/" + ns + "-reports"}))
		Expect(spec["usages"]).NotTo(ContainElement("server auth"))
		ca, err := pki.NewCA("stand-in for cert-manager's issuer", 24*time.Hour)
		Expect(err).NotTo(HaveOccurred())
		issueLikeCertManager(ctx, ca, ns, spec)
		var first *x509.Certificate
		Eventually(func(g Gomega) {
			g.Expect(readyCondition(ctx, g, ns, "reports").Status).To(Equal(metav1.ConditionTrue))
			var s corev1.Secret
			g.Expect(k8sClient.Get(ctx, key(ns, "reports-distcache-client"), &s)).To(Succeed())
			first = parseCert(g, &s)
		}).Should(Succeed())
		Expect(first.URIs[0].String()).To(Equal("spiffe://distcache/tenant/" + ns + "-reports"))

		By("cert-manager's renewal reaches the tenant's copy")
		issueLikeCertManager(ctx, ca, ns, spec)
		Eventually(func(g Gomega) {
			var s corev1.Secret
			g.Expect(k8sClient.Get(ctx, key(ns, "reports-distcache-client"), &s)).To(Succeed())
			g.Expect(parseCert(g, &s).SerialNumber).NotTo(Equal(first.SerialNumber))
		}).Should(Succeed())

		By("deleting the tenant deletes its Certificate and both Secrets")
		Expect(k8sClient.Delete(ctx, &cachev1alpha1.CacheTenant{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "reports"}})).To(Succeed())
		Eventually(func(g Gomega) {
			for _, name := range []string{certName, "reports-distcache-client"} {
				g.Expect(apierrors.IsNotFound(k8sClient.Get(ctx, key(ns, name), &corev1.Secret{}))).To(BeTrue(), name)
			}
			u := &unstructured.Unstructured{}
			u.SetGroupVersionKind(schema.GroupVersionKind{Group: "cert-manager.io", Version: "v1", Kind: "Certificate"})
			g.Expect(apierrors.IsNotFound(k8sClient.Get(ctx, key(ns, certName), u))).To(BeTrue())
		}).Should(Succeed())
	})
})

var _ = Describe("Monitoring without the prometheus-operator", func() {
	It("runs the cache and says the ServiceMonitor and PrometheusRule are unavailable", func(ctx SpecContext) {
		ns := newNamespace(ctx)
		dc := newCache(ns, "watched", 1, "zone-a")
		dc.Spec.Monitoring.ServiceMonitor.Enabled = true
		dc.Spec.Monitoring.PrometheusRule.Enabled = true
		dc.Spec.Monitoring.GrafanaDashboard.Enabled = true
		Expect(k8sClient.Create(ctx, dc)).To(Succeed())
		Eventually(func(g Gomega) {
			var got cachev1alpha1.DistributedCache
			g.Expect(k8sClient.Get(ctx, key(ns, dc.Name), &got)).To(Succeed())
			c := meta.FindStatusCondition(got.Status.Conditions, cachev1alpha1.ConditionDegraded)
			g.Expect(c).NotTo(BeNil())
			g.Expect(c.Reason).To(Equal(cachev1alpha1.ReasonMonitoringUnavailable))
			g.Expect(c.Message).To(ContainSubstring("monitoring.coreos.com"))
			g.Expect(k8sClient.Get(ctx, key(ns, "watched-zone-a"), &appsv1.StatefulSet{})).To(Succeed())
			g.Expect(k8sClient.Get(ctx, key(ns, "watched-dashboard"), &corev1.ConfigMap{})).To(Succeed())
		}).Should(Succeed())
	})
})
