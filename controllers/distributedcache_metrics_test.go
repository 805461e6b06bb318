package controllers

import (
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"

	"github.com/distcache/distcache/internal/monitoring"
)

// cachePod is a pod of cache cache's zone in ns, as the StatefulSet
// makes it, with the scheduler's verdict edit applies.
func cachePod(ns, cache, zone, name string, edit func(p *corev1.Pod)) *corev1.Pod {
	dc := testCache(nil)
	dc.Namespace, dc.Name = ns, cache
	return edited(&corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name, Labels: objectLabels(dc, zone)}}, edit)
}

func unschedulable(p *corev1.Pod) {
	p.Status.Phase = corev1.PodPending
	p.Status.Conditions = []corev1.PodCondition{{Type: corev1.PodScheduled, Status: corev1.ConditionFalse, Reason: corev1.PodReasonUnschedulable,
		Message: "0/3 nodes are available: 3 node(s) didn't match Pod's node affinity/selector."}}
}

func scheduled(p *corev1.Pod) {
	p.Spec.NodeName = "node-1"
	p.Status.Conditions = []corev1.PodCondition{{Type: corev1.PodScheduled, Status: corev1.ConditionTrue}}
}

func TestUnschedulablePodsCollector(t *testing.T) {
	scheme := runtime.NewScheme()
	if err := clientgoscheme.AddToScheme(scheme); err != nil {
		t.Fatal(err)
	}
	gatewayPod := cachePod("team", "x", "a", "ch-gateway-a-1", unschedulable)
	gatewayPod.Labels = gatewayLabels(testTenant(nil), "a") // a gateway: not a cache node
	pods := []*corev1.Pod{
		// Cache ns/c: zone a has one pod the scheduler cannot place, one
		// it has not looked at yet and one running; zone b's all run.
		cachePod("ns", "c", "a", "c-a-0", scheduled),
		cachePod("ns", "c", "a", "c-a-1", unschedulable),
		cachePod("ns", "c", "a", "c-a-2", nil),
		cachePod("ns", "c", "b", "c-b-0", scheduled),
		// Cache ns/d: two unschedulable pods in zone a.
		cachePod("ns", "d", "a", "d-a-0", unschedulable),
		cachePod("ns", "d", "a", "d-a-1", unschedulable),
		// A cache of the same name elsewhere: its own series.
		cachePod("other", "c", "a", "c-a-0", unschedulable),
		// Scheduling gates hold a pod back on purpose: not unschedulable.
		cachePod("ns", "e", "a", "e-a-0", func(p *corev1.Pod) {
			p.Status.Conditions = []corev1.PodCondition{{Type: corev1.PodScheduled, Status: corev1.ConditionFalse, Reason: corev1.PodReasonSchedulingGated}}
		}),
		gatewayPod,
	}
	b := fake.NewClientBuilder().WithScheme(scheme)
	for _, p := range pods {
		b = b.WithObjects(p)
	}
	reader := b.Build()

	elected := make(chan struct{})
	c := newCachePodsCollector(reader, elected)
	if n := testutil.CollectAndCount(c); n != 0 {
		t.Fatalf("%d series before the operator is elected leader", n)
	}
	close(elected)
	want := `
# HELP distcache_operator_cache_pods_unschedulable ` + helpOf(t) + `
# TYPE distcache_operator_cache_pods_unschedulable gauge
distcache_operator_cache_pods_unschedulable{cache="c",cache_namespace="ns",zone="a"} 1
distcache_operator_cache_pods_unschedulable{cache="c",cache_namespace="ns",zone="b"} 0
distcache_operator_cache_pods_unschedulable{cache="c",cache_namespace="other",zone="a"} 1
distcache_operator_cache_pods_unschedulable{cache="d",cache_namespace="ns",zone="a"} 2
distcache_operator_cache_pods_unschedulable{cache="e",cache_namespace="ns",zone="a"} 0
`
	if err := testutil.CollectAndCompare(c, strings.NewReader(want), monitoring.MetricUnschedulablePods); err != nil {
		t.Fatal(err)
	}
	// Registered as main.go does, next to other collectors.
	reg := prometheus.NewPedanticRegistry()
	if err := reg.Register(c); err != nil {
		t.Fatal(err)
	}
	if _, err := reg.Gather(); err != nil {
		t.Fatal(err)
	}
}

// helpOf is the family's help text, as the Desc has it.
func helpOf(t *testing.T) string {
	t.Helper()
	d := monitoring.UnschedulablePodsDesc().String()
	_, rest, ok := strings.Cut(d, `help: "`)
	help, _, ok2 := strings.Cut(rest, `"`)
	if !ok || !ok2 {
		t.Fatalf("no help in %s", d)
	}
	return help
}
