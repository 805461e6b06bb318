package operator_test

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	cachev1alpha1 "github.com/distcache/distcache/api/v1alpha1"
	"github.com/distcache/distcache/controllers"
)

// gatewayCondition is the tenant's GatewayReady condition (nil if absent).
func gatewayCondition(ctx context.Context, g Gomega, ns, name string) *metav1.Condition {
	var t cachev1alpha1.CacheTenant
	g.Expect(k8sClient.Get(ctx, key(ns, name), &t)).To(Succeed())
	return meta.FindStatusCondition(t.Status.Conditions, cachev1alpha1.ConditionGatewayReady)
}

// updateTenant applies mutate to the latest version of the tenant.
func updateTenant(ctx context.Context, ns, name string, mutate func(*cachev1alpha1.CacheTenant)) {
	Eventually(func(g Gomega) {
		var t cachev1alpha1.CacheTenant
		g.Expect(k8sClient.Get(ctx, key(ns, name), &t)).To(Succeed())
		mutate(&t)
		g.Expect(k8sClient.Update(ctx, &t)).To(Succeed())
	}).Should(Succeed())
}

// setDeploymentReady writes the status the Deployment controller would
// (envtest runs none).
func setDeploymentReady(ctx context.Context, ns, name string, ready int32) {
	Eventually(func(g Gomega) {
		var d appsv1.Deployment
		g.Expect(k8sClient.Get(ctx, key(ns, name), &d)).To(Succeed())
		d.Status.Replicas, d.Status.ReadyReplicas, d.Status.AvailableReplicas = *d.Spec.Replicas, ready, ready
		d.Status.ObservedGeneration = d.Generation
		g.Expect(k8sClient.Status().Update(ctx, &d)).To(Succeed())
	}).Should(Succeed())
}

func gone(ctx context.Context, obj client.Object) func(g Gomega) {
	return func(g Gomega) {
		err := k8sClient.Get(ctx, client.ObjectKeyFromObject(obj), obj)
		g.Expect(apierrors.IsNotFound(err)).To(BeTrue(), "%T %s still exists", obj, obj.GetName())
	}
}

var _ = Describe("CacheTenant gateways", func() {
	It("runs a gateway per zone behind one zone-preferring Service, with generated credentials and an endpoint in status", func(ctx SpecContext) {
		cacheNS := newNamespace(ctx)
		dc := newCache(cacheNS, "gw", 1, "zone-a", "zone-b")
		dc.Spec.TenantNamespaceSelector = &metav1.LabelSelector{}
		Expect(k8sClient.Create(ctx, dc)).To(Succeed())
		ns := newNamespace(ctx)
		t := newTenant(ns, "ch", dc, "ch-data")
		t.Spec.Gateway = &cachev1alpha1.GatewaySpec{}
		Expect(k8sClient.Create(ctx, t)).To(Succeed())

		By("one Deployment per zone, pinned to the zone and started with it")
		deps := map[string]*appsv1.Deployment{}
		Eventually(func(g Gomega) {
			for _, z := range []string{"zone-a", "zone-b"} {
				var d appsv1.Deployment
				g.Expect(k8sClient.Get(ctx, key(ns, "ch-gateway-"+z), &d)).To(Succeed())
				deps[z] = &d
			}
		}).Should(Succeed())
		for zone, d := range deps {
			other := map[string]string{"zone-a": "zone-b", "zone-b": "zone-a"}[zone]
			Expect(metav1.IsControlledBy(d, t)).To(BeTrue())
			Expect(*d.Spec.Replicas).To(Equal(int32(1)))
			pod := d.Spec.Template.Spec
			Expect(pod.Affinity.NodeAffinity.RequiredDuringSchedulingIgnoredDuringExecution.NodeSelectorTerms[0].MatchExpressions).To(
				ContainElement(corev1.NodeSelectorRequirement{Key: "topology.kubernetes.io/zone", Operator: corev1.NodeSelectorOpIn, Values: []string{zone}}))
			c := pod.Containers[0]
			Expect(c.Image).To(Equal(testImage))
			Expect(c.Args).To(ContainElements(
				"gateway", "--zone="+zone, "--listen=:8099",
				fmt.Sprintf("--nodes=https://gw-%s.%s.svc:8443", zone, cacheNS),
				fmt.Sprintf("--fallback-nodes=%s=https://gw-%s.%s.svc:8443", other, other, cacheNS),
			))
			Expect(pod.Volumes[0].Secret.SecretName).To(Equal("ch-distcache-client"))
			Expect(c.Env).To(ContainElement(HaveField("ValueFrom.SecretKeyRef.Name", "ch-s3-credentials")))
			Expect(d.Spec.Template.Labels).To(HaveKeyWithValue(controllers.LabelCache, "gw"))
		}

		By("the credentials Secret: keys present, random, stable across reconciles")
		var creds corev1.Secret
		Eventually(func(g Gomega) {
			g.Expect(k8sClient.Get(ctx, key(ns, "ch-s3-credentials"), &creds)).To(Succeed())
		}).Should(Succeed())
		Expect(metav1.IsControlledBy(&creds, t)).To(BeTrue())
		id, secret := string(creds.Data["AWS_ACCESS_KEY_ID"]), string(creds.Data["AWS_SECRET_ACCESS_KEY"])
		Expect(id).To(HaveLen(20))
		Expect(secret).To(HaveLen(40))
		Expect(string(creds.Data["AWS_ENDPOINT_URL"])).To(Equal(fmt.Sprintf("http://ch-gateway.%s.svc:8099", ns)))
		updateTenant(ctx, ns, "ch", func(t *cachev1alpha1.CacheTenant) {
			t.Annotations = map[string]string{"touched": "yes"} // a reconcile, no generation change
		})
		Consistently(func(g Gomega) {
			var s corev1.Secret
			g.Expect(k8sClient.Get(ctx, key(ns, "ch-s3-credentials"), &s)).To(Succeed())
			g.Expect(string(s.Data["AWS_ACCESS_KEY_ID"])).To(Equal(id))
			g.Expect(string(s.Data["AWS_SECRET_ACCESS_KEY"])).To(Equal(secret))
		}, 2*time.Second).Should(Succeed())
		other := newTenant(ns, "other", dc, "other-data")
		other.Spec.Gateway = &cachev1alpha1.GatewaySpec{}
		Expect(k8sClient.Create(ctx, other)).To(Succeed())
		Eventually(func(g Gomega) {
			var s corev1.Secret
			g.Expect(k8sClient.Get(ctx, key(ns, "other-s3-credentials"), &s)).To(Succeed())
			g.Expect(string(s.Data["AWS_ACCESS_KEY_ID"])).NotTo(Equal(id))
			g.Expect(string(s.Data["AWS_SECRET_ACCESS_KEY"])).NotTo(Equal(secret))
		}).Should(Succeed())

		By("the Service routes to every zone's gateways, preferring the client's zone")
		var svc corev1.Service
		Expect(k8sClient.Get(ctx, key(ns, "ch-gateway"), &svc)).To(Succeed())
		Expect(svc.Spec.TrafficDistribution).To(Equal(ptr.To(corev1.ServiceTrafficDistributionPreferSameZone)))
		Expect(svc.Spec.Ports).To(HaveLen(1))
		Expect(svc.Spec.Ports[0].Port).To(Equal(int32(8099)))
		Expect(svc.Spec.Selector).NotTo(HaveKey("cache.distcache.io/zone"))

		By("a PodDisruptionBudget per zone")
		for _, z := range []string{"zone-a", "zone-b"} {
			var pdb policyv1.PodDisruptionBudget
			Expect(k8sClient.Get(ctx, key(ns, "ch-gateway-"+z), &pdb)).To(Succeed())
			Expect(pdb.Spec.Selector.MatchLabels).To(HaveKeyWithValue("cache.distcache.io/zone", z))
		}

		By("status: endpoint, credentials and per-zone readiness, not ready until the gateways are")
		Eventually(func(g Gomega) {
			var got cachev1alpha1.CacheTenant
			g.Expect(k8sClient.Get(ctx, key(ns, "ch"), &got)).To(Succeed())
			g.Expect(got.Status.Endpoint).To(Equal(fmt.Sprintf("http://ch-gateway.%s.svc:8099", ns)))
			g.Expect(got.Status.CredentialsSecret).To(Equal("ch-s3-credentials"))
			g.Expect(got.Status.Gateways).To(HaveLen(2))
			c := gatewayCondition(ctx, g, ns, "ch")
			g.Expect(c).NotTo(BeNil())
			g.Expect(c.Status).To(Equal(metav1.ConditionFalse))
			g.Expect(c.Reason).To(Equal(cachev1alpha1.ReasonGatewaysNotReady))
			g.Expect(c.Message).To(ContainSubstring("zone-a 0/1"))
		}).Should(Succeed())
		setDeploymentReady(ctx, ns, "ch-gateway-zone-a", 1)
		setDeploymentReady(ctx, ns, "ch-gateway-zone-b", 1)
		Eventually(func(g Gomega) {
			c := gatewayCondition(ctx, g, ns, "ch")
			g.Expect(c).NotTo(BeNil())
			g.Expect(c.Status).To(Equal(metav1.ConditionTrue), c.Message)
			var got cachev1alpha1.CacheTenant
			g.Expect(k8sClient.Get(ctx, key(ns, "ch"), &got)).To(Succeed())
			g.Expect(got.Status.Gateways).To(ContainElement(cachev1alpha1.GatewayZoneStatus{
				Zone: "zone-b", Deployment: "ch-gateway-zone-b", Replicas: 1, ReadyReplicas: 1}))
		}).Should(Succeed())

		By("deleting the credentials Secret rotates the keys and rolls the gateways")
		hash := deps["zone-a"].Spec.Template.Annotations[controllers.AnnotationCredentialsHash]
		Expect(hash).NotTo(BeEmpty())
		Expect(k8sClient.Delete(ctx, &creds)).To(Succeed())
		Eventually(func(g Gomega) {
			var s corev1.Secret
			g.Expect(k8sClient.Get(ctx, key(ns, "ch-s3-credentials"), &s)).To(Succeed())
			g.Expect(string(s.Data["AWS_ACCESS_KEY_ID"])).NotTo(Equal(id))
			var d appsv1.Deployment
			g.Expect(k8sClient.Get(ctx, key(ns, "ch-gateway-zone-a"), &d)).To(Succeed())
			g.Expect(d.Spec.Template.Annotations[controllers.AnnotationCredentialsHash]).NotTo(Equal(hash))
		}).Should(Succeed())

		By("a zone the cache lacks is reported naming the field; dropping a zone removes its gateways")
		updateTenant(ctx, ns, "ch", func(t *cachev1alpha1.CacheTenant) { t.Spec.Gateway.Zones = []string{"zone-b", "zone-c"} })
		Eventually(func(g Gomega) {
			c := gatewayCondition(ctx, g, ns, "ch")
			g.Expect(c).NotTo(BeNil())
			g.Expect(c.Reason).To(Equal(cachev1alpha1.ReasonZoneNotInCache))
			g.Expect(c.Message).To(And(ContainSubstring("spec.gateway.zones"), ContainSubstring("zone-c")))
		}).Should(Succeed())
		Eventually(gone(ctx, &appsv1.Deployment{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "ch-gateway-zone-a"}})).Should(Succeed())
		Eventually(gone(ctx, &policyv1.PodDisruptionBudget{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "ch-gateway-zone-a"}})).Should(Succeed())
		Expect(k8sClient.Get(ctx, key(ns, "ch-gateway-zone-b"), &appsv1.Deployment{})).To(Succeed())

		By("turning the gateway off removes every gateway object and the status fields")
		updateTenant(ctx, ns, "ch", func(t *cachev1alpha1.CacheTenant) { t.Spec.Gateway.Enabled = ptr.To(false) })
		for _, obj := range []client.Object{
			&appsv1.Deployment{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "ch-gateway-zone-b"}},
			&policyv1.PodDisruptionBudget{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "ch-gateway-zone-b"}},
			&corev1.Service{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "ch-gateway"}},
			&corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "ch-s3-credentials"}},
		} {
			Eventually(gone(ctx, obj)).Should(Succeed())
		}
		Eventually(func(g Gomega) {
			var got cachev1alpha1.CacheTenant
			g.Expect(k8sClient.Get(ctx, key(ns, "ch"), &got)).To(Succeed())
			g.Expect(got.Status.Endpoint).To(BeEmpty())
			g.Expect(got.Status.Gateways).To(BeEmpty())
			g.Expect(gatewayCondition(ctx, g, ns, "ch")).To(BeNil())
		}).Should(Succeed())
		Expect(k8sClient.Get(ctx, key(ns, "ch-distcache-client"), &corev1.Secret{})).To(Succeed(), "the certificate stays")

		By("deleting a tenant removes its gateways")
		Expect(k8sClient.Get(ctx, key(ns, "other-gateway-zone-a"), &appsv1.Deployment{})).To(Succeed())
		Expect(k8sClient.Delete(ctx, other)).To(Succeed())
		for _, obj := range []client.Object{
			&appsv1.Deployment{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "other-gateway-zone-a"}},
			&appsv1.Deployment{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "other-gateway-zone-b"}},
			&corev1.Service{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "other-gateway"}},
			&corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "other-s3-credentials"}},
			&cachev1alpha1.CacheTenant{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "other"}},
		} {
			Eventually(gone(ctx, obj)).Should(Succeed())
		}
	})

	It("follows the cache's zones and says why a tenant without a certificate has no ready gateway", func(ctx SpecContext) {
		ns := newNamespace(ctx)
		dc := newCache(ns, "zones", 1, "zone-a")
		Expect(k8sClient.Create(ctx, dc)).To(Succeed())
		t := newTenant(ns, "ch", dc, "ch-data")
		t.Spec.Gateway = &cachev1alpha1.GatewaySpec{ReplicasPerZone: ptr.To[int32](2), Port: ptr.To[int32](9500)}
		t.Spec.CredentialsSecret = &cachev1alpha1.CredentialsSecretReference{Name: "missing"}
		Expect(k8sClient.Create(ctx, t)).To(Succeed())
		Eventually(func(g Gomega) {
			c := gatewayCondition(ctx, g, ns, "ch")
			g.Expect(c).NotTo(BeNil())
			g.Expect(c.Reason).To(Equal(cachev1alpha1.ReasonTenantNotReady))
			g.Expect(c.Message).To(ContainSubstring(cachev1alpha1.ReasonSecretNotFound))
		}).Should(Succeed())
		var d appsv1.Deployment
		Expect(k8sClient.Get(ctx, key(ns, "ch-gateway-zone-a"), &d)).To(Succeed())
		Expect(*d.Spec.Replicas).To(Equal(int32(2)))
		Expect(d.Spec.Template.Spec.Containers[0].Args).To(ContainElement("--listen=:9500"))
		Expect(slices.ContainsFunc(d.Spec.Template.Spec.Containers[0].Args, func(a string) bool {
			return strings.HasPrefix(a, "--fallback-nodes")
		})).To(BeFalse(), "one zone: no fallback")

		By("a zone added to the cache gets its gateways, with the old zone as fallback")
		updateCache(ctx, ns, "zones", func(dc *cachev1alpha1.DistributedCache) {
			dc.Spec.Zones = append(dc.Spec.Zones, cachev1alpha1.ZoneSpec{Name: "zone-b"})
		})
		Eventually(func(g Gomega) {
			var d appsv1.Deployment
			g.Expect(k8sClient.Get(ctx, key(ns, "ch-gateway-zone-b"), &d)).To(Succeed())
			g.Expect(d.Spec.Template.Spec.Containers[0].Args).To(ContainElement(
				fmt.Sprintf("--fallback-nodes=zone-a=https://zones-zone-a.%s.svc:8443", ns)))
			g.Expect(k8sClient.Get(ctx, key(ns, "ch-gateway-zone-a"), &d)).To(Succeed())
			g.Expect(d.Spec.Template.Spec.Containers[0].Args).To(ContainElement(
				fmt.Sprintf("--fallback-nodes=zone-b=https://zones-zone-b.%s.svc:8443", ns)))
		}).Should(Succeed())
	})
})
