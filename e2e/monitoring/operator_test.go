package monitoring_test

import (
	"context"
	"fmt"
	"os"
	"strings"
	"testing"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	monitoringv1 "github.com/prometheus-operator/prometheus-operator/pkg/apis/monitoring/v1"
	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/rest"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/envtest"

	cachev1alpha1 "github.com/distcache/distcache/api/v1alpha1"
	"github.com/distcache/distcache/controllers"
	"github.com/distcache/distcache/internal/monitoring"
	"github.com/distcache/distcache/internal/testutil/kubetest"
)

// The envtest suite: the reconciler in a manager against a real
// kube-apiserver that at first has no prometheus-operator CRDs, as many
// clusters do; the specs install them later.
var (
	testEnv   *kubetest.Env
	restCfg   *rest.Config
	k8sClient client.Client
	scheme    = runtime.NewScheme()
	root      string // repository root
	operator  *kubetest.Manager
	// operatorMetrics is the registry the operator's own metrics go to
	// (controller-runtime's in main.go).
	operatorMetrics = prometheus.NewRegistry()
)

func TestOperatorMonitoring(t *testing.T) {
	if testing.Short() {
		t.Skip("starts kube-apiserver and etcd")
	}
	RegisterFailHandler(Fail)
	RunSpecs(t, "operator monitoring suite")
}

// prometheusOperatorCRDs is the directory with the ServiceMonitor and
// PrometheusRule CRDs: $PROMETHEUS_OPERATOR_CRDS, else what
// hack/prometheus-operator-crds.sh prints (a no-op once they are in bin/).
func prometheusOperatorCRDs(ctx context.Context) (string, error) {
	if dir := os.Getenv("PROMETHEUS_OPERATOR_CRDS"); dir != "" {
		return dir, nil
	}
	ctx, cancel := context.WithTimeout(ctx, 5*time.Minute)
	defer cancel()
	return kubetest.CRDs(ctx, root, "prometheus-operator-crds.sh")
}

var _ = BeforeSuite(func() {
	root = kubetest.SetUpSuite(scheme, 60*time.Second, 100*time.Millisecond)
	testEnv = kubetest.StartAPI(root, scheme)
	restCfg, k8sClient = testEnv.Config, testEnv.Client

	// As main.go: cache options for the monitoring kinds installed at start
	// (none here).
	byObject := controllers.CacheOptions()
	monitoringCache, err := controllers.MonitoringCacheOptions(restCfg)
	Expect(err).NotTo(HaveOccurred())
	Expect(monitoringCache).To(BeEmpty(), "the CRDs are not installed yet")
	for obj, opts := range monitoringCache {
		byObject[obj] = opts
	}
	operator = kubetest.RunOperator(restCfg, scheme, byObject,
		controllers.Options{CacheNodeImage: "example.com/cachenode:test", Metrics: operatorMetrics})
})

func objKey(ns, name string) client.ObjectKey { return client.ObjectKey{Namespace: ns, Name: name} }

// editCache changes the cache as kubectl edit would, retrying on conflicts
// with the operator's status writes.
func editCache(ctx context.Context, ns, name string, edit func(dc *cachev1alpha1.DistributedCache)) {
	Expect(kubetest.Edit(ctx, k8sClient, objKey(ns, name), edit)).To(Succeed())
}

var _ = Describe("DistributedCache monitoring", Ordered, func() {
	const name = "demo"
	var ns string
	var dc *cachev1alpha1.DistributedCache

	BeforeAll(func(ctx SpecContext) {
		n := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "mon-e2e"}}
		Expect(k8sClient.Create(ctx, n)).To(Succeed())
		ns = n.Name
		dc = &cachev1alpha1.DistributedCache{
			ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns},
			Spec: cachev1alpha1.DistributedCacheSpec{
				Replicas: ptr.To[int32](2),
				Zones:    []cachev1alpha1.ZoneSpec{{Name: "z1"}, {Name: "z2"}},
				Storage:  cachev1alpha1.StorageSpec{EmptyDir: &cachev1alpha1.EmptyDirStorage{SizeLimit: ptr.To(resource.MustParse("20Gi"))}},
				Monitoring: cachev1alpha1.MonitoringSpec{
					ServiceMonitor: cachev1alpha1.ServiceMonitorSpec{Enabled: true, Interval: "15s",
						Labels: map[string]string{"release": "kube-prometheus-stack"}},
					PrometheusRule: cachev1alpha1.PrometheusRuleSpec{Enabled: true, HitRatioThreshold: "0.6",
						Labels: map[string]string{"release": "kube-prometheus-stack", "role": "alert-rules"}},
					GrafanaDashboard: cachev1alpha1.GrafanaDashboardSpec{Enabled: true},
				},
			},
		}
		Expect(k8sClient.Create(ctx, dc)).To(Succeed())
	})

	It("publishes the dashboard while the prometheus-operator's CRDs are missing", func(ctx SpecContext) {
		var cm corev1.ConfigMap
		Eventually(func(g Gomega) {
			g.Expect(k8sClient.Get(ctx, objKey(ns, name+"-dashboard"), &cm)).To(Succeed())
		}).Should(Succeed())
		Expect(cm.Labels).To(HaveKeyWithValue("grafana_dashboard", "1"), "the API default of grafanaDashboard.labels, for the sidecar")
		Expect(cm.Labels).To(HaveKeyWithValue(controllers.LabelManagedBy, controllers.ManagedByValue))
		Expect(cm.Labels).To(HaveKeyWithValue(controllers.LabelInstance, name))
		Expect(metav1.IsControlledBy(&cm, dc)).To(BeTrue())
		Expect(cm.Data).To(HaveKey(monitoring.DashboardKey))
		Expect(cm.Data[monitoring.DashboardKey]).To(ContainSubstring(`"uid": "` + monitoring.DashboardUID + `"`))

		err := k8sClient.List(ctx, &monitoringv1.ServiceMonitorList{}, client.InNamespace(ns))
		Expect(meta.IsNoMatchError(err)).To(BeTrue(), "ServiceMonitors are not served yet: %v", err)
	})

	It("creates the ServiceMonitor and PrometheusRule once the CRDs are installed", func(ctx SpecContext) {
		dir, err := prometheusOperatorCRDs(ctx)
		Expect(err).NotTo(HaveOccurred())
		_, err = envtest.InstallCRDs(restCfg, envtest.CRDInstallOptions{Paths: []string{dir}, ErrorIfPathMissing: true})
		Expect(err).NotTo(HaveOccurred())
		// Nothing watches the new kinds: a change of the cache triggers
		// the reconcile that finds them (any reconcile would).
		editCache(ctx, ns, name, func(dc *cachev1alpha1.DistributedCache) {
			metav1.SetMetaDataAnnotation(&dc.ObjectMeta, "example.com/touch", "1")
		})

		var sm monitoringv1.ServiceMonitor
		Eventually(func(g Gomega) {
			g.Expect(k8sClient.Get(ctx, objKey(ns, name), &sm)).To(Succeed())
		}).Should(Succeed())
		Expect(metav1.IsControlledBy(&sm, dc)).To(BeTrue())
		Expect(sm.Labels).To(HaveKeyWithValue("release", "kube-prometheus-stack"))
		Expect(sm.Labels).To(HaveKeyWithValue(controllers.LabelManagedBy, controllers.ManagedByValue))
		Expect(sm.Spec.NamespaceSelector.MatchNames).To(Equal([]string{ns}))
		Expect(sm.Spec.Endpoints).To(HaveLen(1))
		ep := sm.Spec.Endpoints[0]
		Expect(ep.Port).To(Equal("metrics"))
		Expect(ep.Path).To(Equal("/metrics"))
		Expect(ep.Interval).To(Equal(monitoringv1.Duration("15s")))

		// The selector picks exactly the cache's client Service among the
		// Services the operator made, and that Service has the port.
		sel, err := metav1.LabelSelectorAsSelector(&sm.Spec.Selector)
		Expect(err).NotTo(HaveOccurred())
		var svcs corev1.ServiceList
		Expect(k8sClient.List(ctx, &svcs, client.InNamespace(ns))).To(Succeed())
		var selected []string
		for _, s := range svcs.Items {
			if sel.Matches(labels.Set(s.Labels)) {
				selected = append(selected, s.Name)
				Expect(s.Spec.Ports).To(ContainElement(HaveField("Name", ep.Port)))
			}
		}
		Expect(svcs.Items).To(HaveLen(3), "the client Service and one headless Service per zone")
		Expect(selected).To(Equal([]string{name}))

		var pr monitoringv1.PrometheusRule
		Eventually(func(g Gomega) {
			g.Expect(k8sClient.Get(ctx, objKey(ns, name+"-alerts"), &pr)).To(Succeed())
		}).Should(Succeed())
		Expect(metav1.IsControlledBy(&pr, dc)).To(BeTrue())
		Expect(pr.Labels).To(HaveKeyWithValue("role", "alert-rules"))
		Expect(pr.Labels).To(HaveKeyWithValue(controllers.LabelManagedBy, controllers.ManagedByValue))
		alerts := map[string]string{}
		for _, g := range pr.Spec.Groups {
			for _, r := range g.Rules {
				alerts[r.Alert] = r.Expr.String()
				Expect(r.Annotations).To(HaveKeyWithValue("runbook_url", monitoring.RunbookURL+"#"+strings.ToLower(r.Alert)))
			}
		}
		Expect(alerts).To(HaveLen(13))
		Expect(alerts[monitoring.AlertLowHitRatio]).To(HaveSuffix("< 0.6"))
		for alert, expr := range alerts {
			scope := `namespace="` + ns + `",service="` + name + `"`
			switch alert {
			case monitoring.AlertGatewayCertificateExpiring, monitoring.AlertGatewayZoneFallback, monitoring.AlertNodeUnschedulable:
				scope = `cache_namespace="` + ns + `",cache="` + name + `"`
			}
			Expect(expr).To(ContainSubstring(scope), alert)
		}
	})

	It("follows changes of the spec", func(ctx SpecContext) {
		editCache(ctx, ns, name, func(dc *cachev1alpha1.DistributedCache) {
			dc.Spec.Monitoring.ServiceMonitor.Interval = "1m"
			dc.Spec.Monitoring.PrometheusRule.HitRatioThreshold = "0.85"
			dc.Spec.Monitoring.GrafanaDashboard.Labels = map[string]string{"dashboards": "distcache"}
		})
		Eventually(func(g Gomega) {
			var sm monitoringv1.ServiceMonitor
			g.Expect(k8sClient.Get(ctx, objKey(ns, name), &sm)).To(Succeed())
			g.Expect(sm.Spec.Endpoints[0].Interval).To(Equal(monitoringv1.Duration("1m")))
			var pr monitoringv1.PrometheusRule
			g.Expect(k8sClient.Get(ctx, objKey(ns, name+"-alerts"), &pr)).To(Succeed())
			g.Expect(pr.Spec.Groups[0].Rules[0].Expr.String()).To(HaveSuffix("< 0.85"))
			var cm corev1.ConfigMap
			g.Expect(k8sClient.Get(ctx, objKey(ns, name+"-dashboard"), &cm)).To(Succeed())
			g.Expect(cm.Labels).To(HaveKeyWithValue("dashboards", "distcache"))
		}).Should(Succeed())
	})

	It("deletes what is disabled", func(ctx SpecContext) {
		editCache(ctx, ns, name, func(dc *cachev1alpha1.DistributedCache) {
			dc.Spec.Monitoring.ServiceMonitor.Enabled = false
			dc.Spec.Monitoring.PrometheusRule.Enabled = false
			dc.Spec.Monitoring.GrafanaDashboard.Enabled = false
		})
		for _, obj := range []client.Object{&monitoringv1.ServiceMonitor{}, &monitoringv1.PrometheusRule{}, &corev1.ConfigMap{}} {
			objName := map[string]string{"*v1.ServiceMonitor": name, "*v1.PrometheusRule": name + "-alerts", "*v1.ConfigMap": name + "-dashboard"}[fmt.Sprintf("%T", obj)]
			Eventually(func() bool {
				return apierrors.IsNotFound(k8sClient.Get(ctx, objKey(ns, objName), obj))
			}).Should(BeTrue(), "%T %s is still there", obj, objName)
		}
	})
})

// unschedulablePods gathers the operator's gauge of unschedulable cache
// pods: the value per "namespace/cache/zone".
func unschedulablePods() (map[string]float64, error) {
	families, err := operatorMetrics.Gather()
	if err != nil {
		return nil, err
	}
	out := map[string]float64{}
	for _, f := range families {
		if f.GetName() != monitoring.MetricUnschedulablePods {
			continue
		}
		for _, m := range f.GetMetric() {
			l := map[string]string{}
			for _, p := range m.GetLabel() {
				l[p.GetName()] = p.GetValue()
			}
			out[l[monitoring.LabelCacheNamespace]+"/"+l[monitoring.LabelCache]+"/"+l[monitoring.LabelZone]] = gaugeValue(m)
		}
	}
	return out, nil
}

func gaugeValue(m *dto.Metric) float64 { return m.GetGauge().GetValue() }

// envtest runs no scheduler: the spec writes the PodScheduled condition as
// the scheduler would, through the status subresource.
var _ = Describe("the operator's metrics", func() {
	It("count the cache pods the scheduler cannot place, per cache and zone", func(ctx SpecContext) {
		n := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "unschedulable-e2e"}}
		Expect(k8sClient.Create(ctx, n)).To(Succeed())
		// The pods of cache "pending" (no DistributedCache: the
		// reconciler ignores them), as its StatefulSets label them.
		newPod := func(name, zone string) *corev1.Pod {
			p := &corev1.Pod{
				ObjectMeta: metav1.ObjectMeta{Namespace: n.Name, Name: name, Labels: map[string]string{
					controllers.LabelName: controllers.NodeAppName, controllers.LabelInstance: "pending",
					controllers.LabelZone: zone, controllers.LabelManagedBy: controllers.ManagedByValue,
				}},
				Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "cachenode", Image: "example.com/cachenode:test"}}},
			}
			Expect(k8sClient.Create(ctx, p)).To(Succeed())
			return p
		}
		setScheduled := func(p *corev1.Pod, status corev1.ConditionStatus, reason string) {
			p.Status.Conditions = []corev1.PodCondition{{Type: corev1.PodScheduled, Status: status, Reason: reason, LastTransitionTime: metav1.Now()}}
			Expect(k8sClient.Status().Update(ctx, p)).To(Succeed())
		}
		a0, a1, b0 := newPod("pending-z1-0", "z1"), newPod("pending-z1-1", "z1"), newPod("pending-z2-0", "z2")
		setScheduled(a0, corev1.ConditionFalse, corev1.PodReasonUnschedulable)
		setScheduled(a1, corev1.ConditionFalse, corev1.PodReasonUnschedulable)
		setScheduled(b0, corev1.ConditionTrue, "")
		Eventually(unschedulablePods).Should(And(
			HaveKeyWithValue(n.Name+"/pending/z1", 2.0),
			HaveKeyWithValue(n.Name+"/pending/z2", 0.0)))

		By("a pod the scheduler places leaves the count; a deleted cache's series go with its pods")
		setScheduled(a1, corev1.ConditionTrue, "")
		Eventually(unschedulablePods).Should(HaveKeyWithValue(n.Name+"/pending/z1", 1.0))
		for _, p := range []*corev1.Pod{a0, a1, b0} {
			Expect(k8sClient.Delete(ctx, p, client.GracePeriodSeconds(0))).To(Succeed())
		}
		Eventually(unschedulablePods).ShouldNot(Or(HaveKey(n.Name+"/pending/z1"), HaveKey(n.Name+"/pending/z2")))
	})
})
