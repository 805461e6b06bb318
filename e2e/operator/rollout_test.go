package operator_test

import (
	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	eventsv1 "k8s.io/api/events/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	"sigs.k8s.io/controller-runtime/pkg/client"

	cachev1alpha1 "github.com/distcache/distcache/api/v1alpha1"
	"github.com/distcache/distcache/controllers"
)

// settle writes what the StatefulSet controller reports once every pod
// runs the current template and is ready (envtest runs no StatefulSet
// controller), under revision rev.
func settle(ctx SpecContext, g Gomega, ns, name, rev string) {
	var sts appsv1.StatefulSet
	g.Expect(k8sClient.Get(ctx, key(ns, name), &sts)).To(Succeed())
	n := *sts.Spec.Replicas
	sts.Status = appsv1.StatefulSetStatus{ObservedGeneration: sts.Generation, Replicas: n, ReadyReplicas: n, AvailableReplicas: n,
		CurrentReplicas: n, UpdatedReplicas: n, CurrentRevision: rev, UpdateRevision: rev}
	g.Expect(k8sClient.Status().Update(ctx, &sts)).To(Succeed())
}

// eventReasons are the reasons of the events about objects in ns.
func eventReasons(ctx SpecContext, g Gomega, ns string) []string {
	var evs eventsv1.EventList
	g.Expect(k8sClient.List(ctx, &evs, client.InNamespace(ns))).To(Succeed())
	var reasons []string
	for _, e := range evs.Items {
		reasons = append(reasons, e.Reason)
	}
	return reasons
}

func templateHashOf(ctx SpecContext, g Gomega, ns, name string) string {
	var sts appsv1.StatefulSet
	g.Expect(k8sClient.Get(ctx, key(ns, name), &sts)).To(Succeed())
	return sts.Spec.Template.Annotations[controllers.AnnotationInputHash]
}

var _ = Describe("Rollouts", func() {
	// An upgrade (a new cachenode image, or any change of the pod
	// template) rolls one zone at a time: the next zone gets the new
	// template only once every pod of the previous one runs it and is
	// ready, so the cache never has more than one pod down.
	It("rolls a new pod template out zone by zone", func(ctx SpecContext) {
		ns := newNamespace(ctx)
		dc := newCache(ns, "roll", 2, "a", "b")
		Expect(k8sClient.Create(ctx, dc)).To(Succeed())
		stsA, stsB := "roll-a", "roll-b"
		var before string
		Eventually(func(g Gomega) {
			before = templateHashOf(ctx, g, ns, stsA)
			g.Expect(templateHashOf(ctx, g, ns, stsB)).To(Equal(before))
		}).Should(Succeed())
		Eventually(func(g Gomega) { settle(ctx, g, ns, stsA, "r1"); settle(ctx, g, ns, stsB, "r1") }).Should(Succeed())

		updateCache(ctx, ns, "roll", func(dc *cachev1alpha1.DistributedCache) {
			dc.Spec.Resources.Requests = corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("250m")}
		})
		var after string
		Eventually(func(g Gomega) {
			after = templateHashOf(ctx, g, ns, stsA)
			g.Expect(after).NotTo(Equal(before), "zone a did not get the new template")
		}).Should(Succeed())
		Consistently(func(g Gomega) {
			g.Expect(templateHashOf(ctx, g, ns, stsB)).To(Equal(before), "zone b got the new template while zone a rolls")
		}, "2s").Should(Succeed())
		Eventually(func(g Gomega) {
			g.Expect(eventReasons(ctx, g, ns)).To(ContainElement(controllers.EventRolloutHeld))
		}).Should(Succeed())

		// Zone a has rolled out and is ready: zone b's turn.
		Eventually(func(g Gomega) { settle(ctx, g, ns, stsA, "r2") }).Should(Succeed())
		Eventually(func(g Gomega) {
			g.Expect(templateHashOf(ctx, g, ns, stsB)).To(Equal(after))
		}).Should(Succeed())
	})
})
