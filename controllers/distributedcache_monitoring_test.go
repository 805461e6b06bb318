package controllers

import (
	"context"
	"encoding/json"
	"strings"
	"testing"

	monitoringv1 "github.com/prometheus-operator/prometheus-operator/pkg/apis/monitoring/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/tools/events"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"

	cachev1alpha1 "github.com/distcache/distcache/api/v1alpha1"
	"github.com/distcache/distcache/internal/monitoring"
)

// monitoredCache is testCache with every monitoring object enabled, as the
// API server defaults them, plus user labels.
func monitoredCache(edit func(dc *cachev1alpha1.DistributedCache)) *cachev1alpha1.DistributedCache {
	return testCache(func(dc *cachev1alpha1.DistributedCache) {
		dc.UID = "uid-c"
		dc.Spec.Monitoring = cachev1alpha1.MonitoringSpec{
			ServiceMonitor: cachev1alpha1.ServiceMonitorSpec{
				Enabled: true, Interval: "15s", Labels: map[string]string{"release": "kps"},
			},
			PrometheusRule: cachev1alpha1.PrometheusRuleSpec{
				Enabled: true, HitRatioThreshold: "0.7", Labels: map[string]string{"release": "kps", "role": "alerts"},
			},
			GrafanaDashboard: cachev1alpha1.GrafanaDashboardSpec{
				Enabled: true, Labels: map[string]string{"grafana_dashboard": "1"},
			},
		}
		edited(dc, edit)
	})
}

func TestBuildServiceMonitor(t *testing.T) {
	dc := monitoredCache(nil)
	sm := buildServiceMonitor(dc)
	sel, err := metav1.LabelSelectorAsSelector(&sm.Spec.Selector)
	if err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name string
		ok   bool
	}{
		{"named after the cache, in its namespace", sm.Name == "c" && sm.Namespace == "ns"},
		{"selects the client Service", sel.Matches(labels.Set(buildClientService(dc).Labels))},
		{"not the zones' headless Services (each node would be scraped twice)",
			!sel.Matches(labels.Set(buildZoneService(dc, "a").Labels)) && !sel.Matches(labels.Set(buildZoneService(dc, "b").Labels))},
		{"not another cache's client Service",
			!sel.Matches(labels.Set(buildClientService(testCache(func(o *cachev1alpha1.DistributedCache) { o.Name = "other" })).Labels))},
		{"only in the cache's namespace", len(sm.Spec.NamespaceSelector.MatchNames) == 1 && sm.Spec.NamespaceSelector.MatchNames[0] == "ns" &&
			!sm.Spec.NamespaceSelector.Any},
		{"one endpoint: port metrics, /metrics, the spec's interval", len(sm.Spec.Endpoints) == 1 &&
			sm.Spec.Endpoints[0].Port == "metrics" && sm.Spec.Endpoints[0].Path == "/metrics" && sm.Spec.Endpoints[0].Interval == "15s"},
		{"the endpoint's port is one the client Service exposes", func() bool {
			for _, p := range buildClientService(dc).Spec.Ports {
				if p.Name == sm.Spec.Endpoints[0].Port && p.Port == MetricsPort {
					return true
				}
			}
			return false
		}()},
		{"zone relabelled from the pod label the node pods carry", len(sm.Spec.Endpoints[0].RelabelConfigs) == 1 &&
			sm.Spec.Endpoints[0].RelabelConfigs[0].TargetLabel == monitoring.LabelZone &&
			string(sm.Spec.Endpoints[0].RelabelConfigs[0].SourceLabels[0]) ==
				"__meta_kubernetes_pod_label_"+strings.NewReplacer(".", "_", "/", "_").Replace(LabelZone) &&
			buildStatefulSet(dc, "a", "i", "h").Spec.Template.Labels[LabelZone] == "a"},
		{"labels: the user's and the operator's", sm.Labels["release"] == "kps" && sm.Labels[LabelManagedBy] == ManagedByValue &&
			sm.Labels[LabelInstance] == "c"},
		{"no interval in the spec: Prometheus's own", buildServiceMonitor(testCache(nil)).Spec.Endpoints[0].Interval == ""},
		{"the operator's labels win over the user's", buildServiceMonitor(monitoredCache(func(dc *cachev1alpha1.DistributedCache) {
			dc.Spec.Monitoring.ServiceMonitor.Labels = map[string]string{LabelManagedBy: "someone", LabelInstance: "x"}
		})).Labels[LabelManagedBy] == ManagedByValue},
	}
	for _, tt := range tests {
		if !tt.ok {
			t.Errorf("%s: failed", tt.name)
		}
	}
}

func TestBuildPrometheusRule(t *testing.T) {
	tests := []struct {
		name      string
		threshold string
		wantErr   bool
		want      string // in DistcacheLowHitRatio's expression
	}{
		{"threshold from the spec", "0.7", false, "< 0.7"},
		{"threshold unset: the API default", "", false, "< 0.5"},
		{"threshold the API would refuse", "2", true, ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			dc := monitoredCache(func(dc *cachev1alpha1.DistributedCache) {
				dc.Spec.Monitoring.PrometheusRule.HitRatioThreshold = tt.threshold
			})
			pr, err := buildPrometheusRule(dc)
			if (err != nil) != tt.wantErr {
				t.Fatalf("err = %v, want error %v", err, tt.wantErr)
			}
			if err != nil {
				return
			}
			if pr.Name != "c-alerts" || pr.Namespace != "ns" {
				t.Errorf("named %s/%s", pr.Namespace, pr.Name)
			}
			if pr.Labels["role"] != "alerts" || pr.Labels[LabelManagedBy] != ManagedByValue {
				t.Errorf("labels %v", pr.Labels)
			}
			alerts := map[string]string{}
			for _, g := range pr.Spec.Groups {
				for _, r := range g.Rules {
					alerts[r.Alert] = r.Expr.String()
				}
			}
			if !strings.Contains(alerts[monitoring.AlertLowHitRatio], tt.want) {
				t.Errorf("low hit ratio %q lacks %q", alerts[monitoring.AlertLowHitRatio], tt.want)
			}
			for name, expr := range alerts {
				scope := `namespace="ns",service="c"` // the nodes' series
				switch name {
				case monitoring.AlertGatewayCertificateExpiring, monitoring.AlertGatewayZoneFallback:
					scope = `cache_namespace="ns",cache="c"` // the gateways', by their PodMonitor
				case monitoring.AlertNodeUnschedulable:
					scope = `cache_namespace="ns",cache="c"` // the operator's, by its own labels
				}
				if !strings.Contains(expr, scope) {
					t.Errorf("%s is not scoped to the cache: %s", name, expr)
				}
			}
			if len(alerts) != 13 {
				t.Errorf("alerts %v", alerts)
			}
		})
	}
}

func TestBuildDashboardConfigMap(t *testing.T) {
	cm := buildDashboardConfigMap(monitoredCache(nil))
	var dash map[string]any
	tests := []struct {
		name string
		ok   bool
	}{
		{"named <cache>-dashboard", cm.Name == "c-dashboard" && cm.Namespace == "ns"},
		{"the sidecar's label", cm.Labels["grafana_dashboard"] == "1"},
		{"the operator's labels, so the manager's cache sees it", cm.Labels[LabelManagedBy] == ManagedByValue && cm.Labels[LabelInstance] == "c"},
		{"no zone label (zone cleanup leaves it alone)", cm.Labels[LabelZone] == ""},
		{"one key holding the dashboard JSON", len(cm.Data) == 1 && json.Unmarshal([]byte(cm.Data[monitoring.DashboardKey]), &dash) == nil &&
			dash["uid"] == monitoring.DashboardUID},
	}
	for _, tt := range tests {
		if !tt.ok {
			t.Errorf("%s: failed", tt.name)
		}
	}
}

// restMapper knows the core kinds and DistributedCache, and the
// prometheus-operator's kinds when withMonitoring.
func restMapper(withMonitoring bool) meta.RESTMapper {
	m := meta.NewDefaultRESTMapper(nil)
	m.Add(corev1.SchemeGroupVersion.WithKind("ConfigMap"), meta.RESTScopeNamespace)
	m.Add(cachev1alpha1.GroupVersion.WithKind("DistributedCache"), meta.RESTScopeNamespace)
	if withMonitoring {
		m.Add(serviceMonitorGVK, meta.RESTScopeNamespace)
		m.Add(prometheusRuleGVK, meta.RESTScopeNamespace)
	}
	return m
}

func testReconciler(t *testing.T, withMonitoring bool, objs ...client.Object) *DistributedCacheReconciler {
	t.Helper()
	s := runtime.NewScheme()
	for _, add := range []func(*runtime.Scheme) error{clientgoscheme.AddToScheme, cachev1alpha1.AddToScheme, monitoringv1.AddToScheme} {
		if err := add(s); err != nil {
			t.Fatal(err)
		}
	}
	c := fake.NewClientBuilder().WithScheme(s).WithRESTMapper(restMapper(withMonitoring)).WithObjects(objs...).Build()
	return &DistributedCacheReconciler{Client: c, Scheme: s, Recorder: events.NewFakeRecorder(100)}
}

// TestReconcileMonitoring covers the decisions of reconcileMonitoring; the
// envtest suite in e2e/monitoring runs it against a real API server.
func TestReconcileMonitoring(t *testing.T) {
	ctx := context.Background()
	present := func(r *DistributedCacheReconciler, obj client.Object, name string) bool {
		err := r.Get(ctx, client.ObjectKey{Namespace: "ns", Name: name}, obj)
		if err != nil && !apierrors.IsNotFound(err) {
			t.Fatal(err)
		}
		return err == nil
	}
	type want struct{ available, sm, pr, cm bool }
	check := func(t *testing.T, r *DistributedCacheReconciler, dc *cachev1alpha1.DistributedCache, w want) {
		t.Helper()
		available, err := r.reconcileMonitoring(ctx, dc)
		if err != nil {
			t.Fatal(err)
		}
		got := want{available, present(r, &monitoringv1.ServiceMonitor{}, "c"),
			present(r, &monitoringv1.PrometheusRule{}, "c-alerts"), present(r, &corev1.ConfigMap{}, "c-dashboard")}
		if got != w {
			t.Errorf("got %+v, want %+v", got, w)
		}
	}
	disabled := func(dc *cachev1alpha1.DistributedCache) {
		dc.Spec.Monitoring.ServiceMonitor.Enabled = false
		dc.Spec.Monitoring.PrometheusRule.Enabled = false
		dc.Spec.Monitoring.GrafanaDashboard.Enabled = false
	}

	t.Run("CRDs installed: everything enabled is created and owned by the cache", func(t *testing.T) {
		dc := monitoredCache(nil)
		r := testReconciler(t, true, dc)
		check(t, r, dc, want{available: true, sm: true, pr: true, cm: true})
		var sm monitoringv1.ServiceMonitor
		present(r, &sm, "c")
		if !metav1.IsControlledBy(&sm, dc) || sm.Annotations[AnnotationSpecHash] == "" {
			t.Errorf("ServiceMonitor not controlled by the cache or not hashed: %+v", sm.ObjectMeta)
		}
		// A second pass changes nothing.
		rv := sm.ResourceVersion
		check(t, r, dc, want{available: true, sm: true, pr: true, cm: true})
		present(r, &sm, "c")
		if sm.ResourceVersion != rv {
			t.Error("an unchanged ServiceMonitor was written again")
		}
		// A spec change updates it.
		dc.Spec.Monitoring.ServiceMonitor.Interval = "1m"
		check(t, r, dc, want{available: true, sm: true, pr: true, cm: true})
		present(r, &sm, "c")
		if sm.Spec.Endpoints[0].Interval != "1m" {
			t.Errorf("interval %q after the change", sm.Spec.Endpoints[0].Interval)
		}
	})

	t.Run("CRDs missing: monitoring unavailable, not an error; the dashboard still comes", func(t *testing.T) {
		dc := monitoredCache(nil)
		r := testReconciler(t, false, dc)
		available, err := r.reconcileMonitoring(ctx, dc)
		if err != nil || available {
			t.Fatalf("available %v, err %v; want false, nil", available, err)
		}
		if !present(r, &corev1.ConfigMap{}, "c-dashboard") {
			t.Error("no dashboard ConfigMap")
		}
	})

	t.Run("CRDs missing and nothing of theirs enabled: available", func(t *testing.T) {
		dc := monitoredCache(func(dc *cachev1alpha1.DistributedCache) {
			dc.Spec.Monitoring.ServiceMonitor.Enabled = false
			dc.Spec.Monitoring.PrometheusRule.Enabled = false
		})
		r := testReconciler(t, false, dc)
		available, err := r.reconcileMonitoring(ctx, dc)
		if err != nil || !available {
			t.Fatalf("available %v, err %v; want true, nil", available, err)
		}
	})

	t.Run("disabling deletes what the cache controls", func(t *testing.T) {
		dc := monitoredCache(nil)
		r := testReconciler(t, true, dc)
		check(t, r, dc, want{available: true, sm: true, pr: true, cm: true})
		off := monitoredCache(disabled)
		check(t, r, off, want{available: true})
	})

	t.Run("disabling leaves alone objects of the same names the cache does not control", func(t *testing.T) {
		meta := func(name string) metav1.ObjectMeta {
			return metav1.ObjectMeta{Name: name, Namespace: "ns", Labels: objectLabels(testCache(nil), "")}
		}
		dc := monitoredCache(disabled)
		r := testReconciler(t, true, dc,
			&monitoringv1.ServiceMonitor{ObjectMeta: meta("c")},
			&monitoringv1.PrometheusRule{ObjectMeta: meta("c-alerts")},
			&corev1.ConfigMap{ObjectMeta: meta("c-dashboard")})
		check(t, r, dc, want{available: true, sm: true, pr: true, cm: true})
	})

	t.Run("an invalid threshold is an error", func(t *testing.T) {
		dc := monitoredCache(func(dc *cachev1alpha1.DistributedCache) { dc.Spec.Monitoring.PrometheusRule.HitRatioThreshold = "high" })
		r := testReconciler(t, true, dc)
		if _, err := r.reconcileMonitoring(ctx, dc); err == nil {
			t.Error("no error")
		}
	})
}

func TestInstalledMonitoringKinds(t *testing.T) {
	for _, installed := range []bool{true, false} {
		kinds, err := InstalledMonitoringKinds(restMapper(installed))
		if err != nil {
			t.Fatal(err)
		}
		if want := map[bool]int{true: 2, false: 0}[installed]; len(kinds) != want {
			t.Errorf("installed %v: %d kinds, want %d", installed, len(kinds), want)
		}
	}
}
