package operator_test

import (
	"context"
	"fmt"
	"slices"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	appsv1 "k8s.io/api/apps/v1"
	autoscalingv1 "k8s.io/api/autoscaling/v1"
	corev1 "k8s.io/api/core/v1"
	eventsv1 "k8s.io/api/events/v1"
	policyv1 "k8s.io/api/policy/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	cachev1alpha1 "github.com/distcache/distcache/api/v1alpha1"
	"github.com/distcache/distcache/controllers"
	"github.com/distcache/distcache/internal/ring"
	"github.com/distcache/distcache/internal/testutil/kubetest"
)

var nsCount int

// newNamespace creates a fresh namespace for one spec.
func newNamespace(ctx context.Context) string {
	nsCount++
	ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprintf("op-%d", nsCount)}}
	Expect(k8sClient.Create(ctx, ns)).To(Succeed())
	return ns.Name
}

func newCache(ns, name string, replicas int32, zones ...string) *cachev1alpha1.DistributedCache {
	dc := &cachev1alpha1.DistributedCache{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns},
		Spec: cachev1alpha1.DistributedCacheSpec{
			Replicas: ptr.To(replicas),
			Storage:  cachev1alpha1.StorageSpec{EmptyDir: &cachev1alpha1.EmptyDirStorage{SizeLimit: ptr.To(resource.MustParse("20Gi"))}},
		},
	}
	for _, z := range zones {
		dc.Spec.Zones = append(dc.Spec.Zones, cachev1alpha1.ZoneSpec{Name: z})
	}
	return dc
}

func key(ns, name string) client.ObjectKey { return client.ObjectKey{Namespace: ns, Name: name} }

// ringOf is the published ring document of a zone.
func ringOf(ctx context.Context, g Gomega, dc *cachev1alpha1.DistributedCache, zone string) ring.Spec {
	var cm corev1.ConfigMap
	g.Expect(k8sClient.Get(ctx, key(dc.Namespace, dc.Name+"-ring"), &cm)).To(Succeed())
	doc, ok := cm.Data[zone+".json"]
	g.Expect(ok).To(BeTrue(), "ring ConfigMap has no key for zone %s", zone)
	r, err := ring.Parse([]byte(doc))
	g.Expect(err).NotTo(HaveOccurred())
	return r.Spec()
}

func stsReplicas(ctx context.Context, g Gomega, ns, name string) int32 {
	var sts appsv1.StatefulSet
	g.Expect(k8sClient.Get(ctx, key(ns, name), &sts)).To(Succeed())
	return *sts.Spec.Replicas
}

// createReadyPod creates the pod the zone's StatefulSet would (envtest has
// no StatefulSet controller) and marks it Ready (nor a kubelet).
func createReadyPod(ctx context.Context, dc *cachev1alpha1.DistributedCache, zone string, ordinal int) *corev1.Pod {
	var sts appsv1.StatefulSet
	Expect(k8sClient.Get(ctx, key(dc.Namespace, dc.Name+"-"+zone), &sts)).To(Succeed())
	pod := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{
			Name: fmt.Sprintf("%s-%d", sts.Name, ordinal), Namespace: dc.Namespace,
			Labels: sts.Spec.Template.Labels,
		},
		Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "cachenode", Image: testImage}}},
	}
	Expect(k8sClient.Create(ctx, pod)).To(Succeed())
	setPodReady(ctx, pod, true)
	return pod
}

func setPodReady(ctx context.Context, pod *corev1.Pod, ready bool) {
	status := corev1.ConditionFalse
	if ready {
		status = corev1.ConditionTrue
	}
	pod.Status.Phase = corev1.PodRunning
	pod.Status.Conditions = []corev1.PodCondition{{Type: corev1.PodReady, Status: status, LastTransitionTime: metav1.Now()}}
	Expect(k8sClient.Status().Update(ctx, pod)).To(Succeed())
}

var _ = Describe("DistributedCache", func() {
	It("creates per-zone StatefulSets, Services, PDBs and the ring ConfigMap, all owned by the cache", func(ctx SpecContext) {
		ns := newNamespace(ctx)
		dc := newCache(ns, "alpha", 2, "zone-a", "zone-b")
		dc.Spec.InstanceTypes = []string{"i4i.2xlarge"}
		dc.Spec.ObjectMetadata.Immutable = true
		dc.Spec.S3.Endpoint, dc.Spec.S3.PathStyle = "http://minio.minio.svc:9000", true
		dc.Spec.S3.CredentialsSecret = &cachev1alpha1.CredentialsSecretReference{Name: "s3-creds"}
		dc.Spec.PodDisruptionBudget.MaxUnavailable = ptr.To[int32](2)
		Expect(k8sClient.Create(ctx, dc)).To(Succeed())

		for _, zone := range []string{"zone-a", "zone-b"} {
			name := "alpha-" + zone
			var sts appsv1.StatefulSet
			Eventually(func(g Gomega) {
				g.Expect(k8sClient.Get(ctx, key(ns, name), &sts)).To(Succeed())
			}).Should(Succeed())
			Expect(*sts.Spec.Replicas).To(Equal(int32(2)))
			Expect(sts.Spec.ServiceName).To(Equal(name))
			Expect(sts.Spec.Selector.MatchLabels).To(HaveKeyWithValue(controllers.LabelZone, zone))
			pod := sts.Spec.Template
			Expect(pod.Annotations).To(HaveKey(controllers.AnnotationInputHash))

			terms := pod.Spec.Affinity.NodeAffinity.RequiredDuringSchedulingIgnoredDuringExecution.NodeSelectorTerms
			Expect(terms).To(HaveLen(1))
			Expect(terms[0].MatchExpressions).To(ConsistOf(
				corev1.NodeSelectorRequirement{Key: "topology.kubernetes.io/zone", Operator: corev1.NodeSelectorOpIn, Values: []string{zone}},
				corev1.NodeSelectorRequirement{Key: "node.kubernetes.io/instance-type", Operator: corev1.NodeSelectorOpIn, Values: []string{"i4i.2xlarge"}},
			))
			anti := pod.Spec.Affinity.PodAntiAffinity.PreferredDuringSchedulingIgnoredDuringExecution
			Expect(anti).To(HaveLen(1))
			Expect(anti[0].PodAffinityTerm.TopologyKey).To(Equal("kubernetes.io/hostname"))

			c := pod.Spec.Containers[0]
			Expect(c.Image).To(Equal(testImage))
			Expect(c.Args).To(ContainElements("serve", "--chunk-size=4Mi", "--disk-bytes=10Gi", "--ram-bytes=1Gi",
				"--immutable", "--s3-endpoint=http://minio.minio.svc:9000", "--s3-path-style", "--s3-region=us-east-1",
				"--ring-file=/etc/distcache/ring/ring.json", "--tls-cert=/etc/distcache/tls/tls.crt"))
			var envNames []string
			for _, e := range c.Env {
				envNames = append(envNames, e.Name)
			}
			Expect(envNames).To(Equal([]string{"POD_NAME", "AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY"}))
			Expect(c.Env[1].ValueFrom.SecretKeyRef.Name).To(Equal("s3-creds"))
			Expect(c.Env[1].ValueFrom.SecretKeyRef.Key).To(Equal("AWS_ACCESS_KEY_ID"))
			Expect(c.Ports).To(HaveLen(2))
			Expect(c.Ports[0].ContainerPort).To(Equal(int32(8443)))
			Expect(c.Ports[1].ContainerPort).To(Equal(int32(9090)))
			Expect(c.ReadinessProbe.HTTPGet.Path).To(Equal("/readyz"))
			Expect(c.ReadinessProbe.HTTPGet.Port.IntValue()).To(BeZero(), "named port")
			Expect(c.ReadinessProbe.HTTPGet.Port.StrVal).To(Equal("metrics"))
			Expect(c.LivenessProbe.HTTPGet.Path).To(Equal("/healthz"))

			vols := map[string]corev1.Volume{}
			for _, v := range pod.Spec.Volumes {
				vols[v.Name] = v
			}
			Expect(vols["data"].EmptyDir).NotTo(BeNil())
			Expect(vols["data"].EmptyDir.SizeLimit.String()).To(Equal("20Gi"))
			Expect(vols["ring"].ConfigMap.Name).To(Equal("alpha-ring"))
			Expect(vols["ring"].ConfigMap.Items).To(Equal([]corev1.KeyToPath{{Key: zone + ".json", Path: "ring.json"}}))
			Expect(vols["tls"].Secret.SecretName).To(Equal("alpha-node-tls"))

			var svc corev1.Service
			Eventually(func() error { return k8sClient.Get(ctx, key(ns, name), &svc) }).Should(Succeed())
			Expect(svc.Spec.ClusterIP).To(Equal(corev1.ClusterIPNone))
			Expect(svc.Spec.Selector).To(HaveKeyWithValue(controllers.LabelZone, zone))

			var pdb policyv1.PodDisruptionBudget
			Eventually(func() error { return k8sClient.Get(ctx, key(ns, name), &pdb) }).Should(Succeed())
			Expect(pdb.Spec.MaxUnavailable.IntValue()).To(Equal(2))

			Eventually(func(g Gomega) {
				r := ringOf(ctx, g, dc, zone)
				g.Expect(r.Epoch).To(Equal(int64(1)))
				g.Expect(r.States()).To(Equal(map[string]ring.State{name + "-0": ring.StateActive, name + "-1": ring.StateActive}),
					"a zone without ready nodes starts from the intended pods")
				g.Expect(r.Members[0].Address).To(Equal(fmt.Sprintf("%s-0.%s.%s.svc:8443", name, name, ns)))
			}).Should(Succeed())
		}
		var clientSvc corev1.Service
		Eventually(func() error { return k8sClient.Get(ctx, key(ns, "alpha"), &clientSvc) }).Should(Succeed())
		Expect(clientSvc.Spec.Selector).NotTo(HaveKey(controllers.LabelZone))

		By("status: selector, zones, conditions with observedGeneration")
		By("a missing credentials Secret is reported; its arrival changes the pod template")
		Eventually(func(g Gomega) {
			var got cachev1alpha1.DistributedCache
			g.Expect(k8sClient.Get(ctx, key(ns, "alpha"), &got)).To(Succeed())
			c := meta.FindStatusCondition(got.Status.Conditions, cachev1alpha1.ConditionDegraded)
			g.Expect(c).NotTo(BeNil())
			g.Expect(c.Reason).To(Equal(cachev1alpha1.ReasonSecretNotFound))
			g.Expect(c.Message).To(And(ContainSubstring("spec.s3.credentialsSecret"), ContainSubstring("s3-creds")))
		}).Should(Succeed())
		var before appsv1.StatefulSet
		Expect(k8sClient.Get(ctx, key(ns, "alpha-zone-a"), &before)).To(Succeed())
		Expect(k8sClient.Create(ctx, &corev1.Secret{
			ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "s3-creds"},
			StringData: map[string]string{"AWS_ACCESS_KEY_ID": "AKIA1", "AWS_SECRET_ACCESS_KEY": "s1"},
		})).To(Succeed())
		// Credentials Secrets are not watched: the operator sees them at its
		// next reconcile (at most resyncPeriod later); nudge it.
		updateCache(ctx, ns, "alpha", func(dc *cachev1alpha1.DistributedCache) {
			dc.Annotations = map[string]string{"nudge": "creds"}
		})
		Eventually(func(g Gomega) {
			var sts appsv1.StatefulSet
			g.Expect(k8sClient.Get(ctx, key(ns, "alpha-zone-a"), &sts)).To(Succeed())
			g.Expect(sts.Spec.Template.Annotations[controllers.AnnotationInputHash]).NotTo(Equal(before.Spec.Template.Annotations[controllers.AnnotationInputHash]))
		}).Should(Succeed())

		Eventually(func(g Gomega) {
			var got cachev1alpha1.DistributedCache
			g.Expect(k8sClient.Get(ctx, key(ns, "alpha"), &got)).To(Succeed())
			g.Expect(got.Status.ObservedGeneration).To(Equal(got.Generation))
			g.Expect(got.Status.Selector).To(Equal("app.kubernetes.io/instance=alpha,app.kubernetes.io/name=cachenode"))
			g.Expect(got.Status.Zones).To(HaveLen(2))
			g.Expect(got.Status.RingEpoch).To(Equal(int64(1)))
			g.Expect(got.Status.OperatorVersion).To(Equal(operatorVersion))
			ready := meta.FindStatusCondition(got.Status.Conditions, cachev1alpha1.ConditionReady)
			g.Expect(ready).NotTo(BeNil())
			g.Expect(ready.Status).To(Equal(metav1.ConditionFalse))
			g.Expect(ready.Reason).To(Equal(cachev1alpha1.ReasonPodsNotReady))
			g.Expect(ready.ObservedGeneration).To(Equal(got.Generation))
			g.Expect(meta.IsStatusConditionFalse(got.Status.Conditions, cachev1alpha1.ConditionDegraded)).To(BeTrue(), "starting up is not degraded")
		}).Should(Succeed())

		By("every object is controlled by the cache, for the garbage collector")
		var created cachev1alpha1.DistributedCache
		Expect(k8sClient.Get(ctx, key(ns, "alpha"), &created)).To(Succeed())
		owned := []client.Object{&corev1.Service{}, &corev1.ConfigMap{}, &corev1.Secret{}, &corev1.Secret{}, &corev1.Secret{}}
		names := []string{"alpha", "alpha-ring", "alpha-ca", "alpha-node-tls", "alpha-tenants"}
		for _, zone := range []string{"zone-a", "zone-b"} {
			owned = append(owned, &appsv1.StatefulSet{}, &corev1.Service{}, &policyv1.PodDisruptionBudget{})
			names = append(names, "alpha-"+zone, "alpha-"+zone, "alpha-"+zone)
		}
		for i, o := range owned {
			Expect(k8sClient.Get(ctx, key(ns, names[i]), o)).To(Succeed())
			ref := metav1.GetControllerOf(o)
			Expect(ref).NotTo(BeNil(), "%T %s has no controller", o, names[i])
			Expect(ref.UID).To(Equal(created.UID))
			Expect(ref.Kind).To(Equal("DistributedCache"))
			Expect(*ref.BlockOwnerDeletion).To(BeTrue())
		}

		By("an unchanged cache is not written again")
		var sts appsv1.StatefulSet
		Expect(k8sClient.Get(ctx, key(ns, "alpha-zone-a"), &sts)).To(Succeed())
		rv := sts.ResourceVersion
		updateCache(ctx, ns, "alpha", func(dc *cachev1alpha1.DistributedCache) {
			dc.Annotations = map[string]string{"touch": "1"} // a reconcile without a spec change
		})
		Consistently(func(g Gomega) {
			g.Expect(k8sClient.Get(ctx, key(ns, "alpha-zone-a"), &sts)).To(Succeed())
			g.Expect(sts.ResourceVersion).To(Equal(rv))
		}, "2s").Should(Succeed())

		By("deleting the cache leaves the rest to the garbage collector")
		Expect(k8sClient.Delete(ctx, &created)).To(Succeed())
		Eventually(func() error {
			return k8sClient.Get(ctx, key(ns, "alpha"), &cachev1alpha1.DistributedCache{})
		}).Should(MatchError(ContainSubstring("not found")))
	})

	It("follows spec.replicas and the scale subresource", func(ctx SpecContext) {
		ns := newNamespace(ctx)
		dc := newCache(ns, "scaled", 1, "a", "b")
		Expect(k8sClient.Create(ctx, dc)).To(Succeed())
		for _, z := range []string{"a", "b"} {
			Eventually(func(g Gomega) int32 { return stsReplicas(ctx, g, ns, "scaled-"+z) }).Should(Equal(int32(1)))
		}

		By("editing spec.replicas")
		updateCache(ctx, ns, "scaled", func(dc *cachev1alpha1.DistributedCache) { dc.Spec.Replicas = ptr.To[int32](3) })
		Expect(k8sClient.Get(ctx, key(ns, "scaled"), dc)).To(Succeed())
		for _, z := range []string{"a", "b"} {
			Eventually(func(g Gomega) int32 { return stsReplicas(ctx, g, ns, "scaled-"+z) }).Should(Equal(int32(3)))
		}

		By("kubectl scale: the scale subresource")
		scale := &autoscalingv1.Scale{Spec: autoscalingv1.ScaleSpec{Replicas: 5}}
		Expect(k8sClient.SubResource("scale").Update(ctx, dc, client.WithSubResourceBody(scale))).To(Succeed())
		for _, z := range []string{"a", "b"} {
			Eventually(func(g Gomega) int32 { return stsReplicas(ctx, g, ns, "scaled-"+z) }).Should(Equal(int32(5)))
		}
		Eventually(func(g Gomega) {
			got := &autoscalingv1.Scale{}
			g.Expect(k8sClient.SubResource("scale").Get(ctx, dc, got)).To(Succeed())
			g.Expect(got.Spec.Replicas).To(Equal(int32(5)))
			g.Expect(got.Status.Selector).To(Equal("app.kubernetes.io/instance=scaled,app.kubernetes.io/name=cachenode"))
		}).Should(Succeed())
	})

	It("keeps the ring to the ready pods and drains before scaling down", func(ctx SpecContext) {
		ns := newNamespace(ctx)
		dc := newCache(ns, "beta", 3, "a")
		Expect(k8sClient.Create(ctx, dc)).To(Succeed())
		Eventually(func(g Gomega) int32 { return stsReplicas(ctx, g, ns, "beta-a") }).Should(Equal(int32(3)))
		Eventually(func(g Gomega) int64 { return ringOf(ctx, g, dc, "a").Epoch }).Should(Equal(int64(1)))

		By("pods become ready: the ring holds exactly them, the epoch moves, previous is kept")
		pods := []*corev1.Pod{createReadyPod(ctx, dc, "a", 0)}
		Eventually(func(g Gomega) {
			r := ringOf(ctx, g, dc, "a")
			g.Expect(r.States()).To(Equal(map[string]ring.State{"beta-a-0": ring.StateActive}))
			g.Expect(r.Epoch).To(Equal(int64(2)))
			g.Expect(r.Previous).NotTo(BeNil())
			g.Expect(r.Previous.Epoch).To(Equal(int64(1)))
			g.Expect(r.Previous.Members).To(HaveLen(3))
		}).Should(Succeed())
		pods = append(pods, createReadyPod(ctx, dc, "a", 1), createReadyPod(ctx, dc, "a", 2))
		Eventually(func(g Gomega) {
			r := ringOf(ctx, g, dc, "a")
			g.Expect(r.States()).To(Equal(map[string]ring.State{
				"beta-a-0": ring.StateActive, "beta-a-1": ring.StateActive, "beta-a-2": ring.StateActive}))
		}).Should(Succeed())
		Eventually(func(g Gomega) {
			var got cachev1alpha1.DistributedCache
			g.Expect(k8sClient.Get(ctx, key(ns, "beta"), &got)).To(Succeed())
			g.Expect(got.Status.ReadyReplicas).To(Equal(int32(3)))
			g.Expect(got.Status.Replicas).To(Equal(int32(3)))
			g.Expect(got.Status.RingEpoch).To(Equal(ringOf(ctx, g, dc, "a").Epoch))
			g.Expect(meta.IsStatusConditionTrue(got.Status.Conditions, cachev1alpha1.ConditionReady)).To(BeTrue())
		}).Should(Succeed())

		By("a pod that stops being ready leaves the ring, and comes back")
		before := func() int64 { g := NewGomega(Fail); return ringOf(ctx, g, dc, "a").Epoch }()
		setPodReady(ctx, pods[1], false)
		Eventually(func(g Gomega) {
			r := ringOf(ctx, g, dc, "a")
			g.Expect(r.States()).NotTo(HaveKey("beta-a-1"))
			g.Expect(r.Epoch).To(Equal(before + 1))
		}).Should(Succeed())
		setPodReady(ctx, pods[1], true)
		Eventually(func(g Gomega) map[string]ring.State { return ringOf(ctx, g, dc, "a").States() }).Should(HaveKey("beta-a-1"))

		By("scaling down to 1: the ring drains beta-a-1 and beta-a-2 before the StatefulSet shrinks")
		updateCache(ctx, ns, "beta", func(dc *cachev1alpha1.DistributedCache) { dc.Spec.Replicas = ptr.To[int32](1) })
		Expect(k8sClient.Get(ctx, key(ns, "beta"), dc)).To(Succeed())
		var violations []string
		Eventually(func(g Gomega) int32 {
			// Read the StatefulSet first: if it has shrunk, the ring read
			// after it must already drain the pods that go, and have done
			// so for the drain grace period.
			n := stsReplicas(ctx, g, ns, "beta-a")
			var cm corev1.ConfigMap
			g.Expect(k8sClient.Get(ctx, key(ns, "beta-ring"), &cm)).To(Succeed())
			states := ringOf(ctx, g, dc, "a").States()
			if n < 3 {
				at, err := time.Parse(time.RFC3339, cm.Annotations[controllers.AnnotationRingPublishedPrefix+"a"])
				g.Expect(err).NotTo(HaveOccurred())
				if states["beta-a-1"] != ring.StateDraining || states["beta-a-2"] != ring.StateDraining {
					violations = append(violations, fmt.Sprintf("StatefulSet at %d with ring %v", n, states))
				}
				// The annotation is truncated to the second.
				if elapsed := time.Since(at); elapsed < drainGrace-time.Second {
					violations = append(violations, fmt.Sprintf("StatefulSet at %d only %s after the draining ring", n, elapsed))
				}
			}
			return n
		}).Should(Equal(int32(1)))
		Expect(violations).To(BeEmpty())
		Eventually(func(g Gomega) []string {
			var evs eventsv1.EventList
			g.Expect(k8sClient.List(ctx, &evs, client.InNamespace(ns))).To(Succeed())
			var reasons []string
			for _, e := range evs.Items {
				if e.Regarding.Name == "beta" {
					reasons = append(reasons, e.Reason)
				}
			}
			return reasons
		}).Should(ContainElement(controllers.EventScaleDownHeld), "the StatefulSet waited for the draining ring")
		r := func() ring.Spec { g := NewGomega(Fail); return ringOf(ctx, g, dc, "a") }()
		Expect(r.States()).To(Equal(map[string]ring.State{
			"beta-a-0": ring.StateActive, "beta-a-1": ring.StateDraining, "beta-a-2": ring.StateDraining}))
		Expect(ring.Spec{Members: r.Previous.Members}.States()).To(HaveKeyWithValue("beta-a-2", ring.StateActive),
			"previous has the draining members active: their chunks' new owners fetch from them")
		Eventually(func(g Gomega) string {
			var got cachev1alpha1.DistributedCache
			g.Expect(k8sClient.Get(ctx, key(ns, "beta"), &got)).To(Succeed())
			c := meta.FindStatusCondition(got.Status.Conditions, cachev1alpha1.ConditionProgressing)
			g.Expect(c).NotTo(BeNil())
			return c.Reason
		}).Should(Equal(cachev1alpha1.ReasonRingHandoff))

		By("the StatefulSet controller deletes the pods: they leave the ring")
		for _, p := range pods[1:] {
			Expect(k8sClient.Delete(ctx, p, client.GracePeriodSeconds(0))).To(Succeed())
		}
		Eventually(func(g Gomega) {
			r := ringOf(ctx, g, dc, "a")
			g.Expect(r.States()).To(Equal(map[string]ring.State{"beta-a-0": ring.StateActive}))
			g.Expect(slices.ContainsFunc(r.Previous.Members, func(m ring.Member) bool {
				return m.Name == "beta-a-2" && m.State == ring.StateDraining
			})).To(BeTrue())
		}).Should(Succeed())
	})
})

// updateCache changes a DistributedCache the way kubectl edit does
// (kubetest.Edit).
func updateCache(ctx context.Context, ns, name string, mutate func(*cachev1alpha1.DistributedCache)) {
	GinkgoHelper()
	Expect(kubetest.Edit(ctx, k8sClient, key(ns, name), mutate)).To(Succeed())
}
