package controllers

import (
	"context"
	"fmt"
	"strings"

	monitoringv1 "github.com/prometheus-operator/prometheus-operator/pkg/apis/monitoring/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/apiutil"

	cachev1alpha1 "github.com/distcache/distcache/api/v1alpha1"
	"github.com/distcache/distcache/internal/monitoring"
)

// Monitoring: a ServiceMonitor and a PrometheusRule for the
// prometheus-operator, and a ConfigMap with the Grafana dashboard for
// Grafana's dashboard sidecar. The prometheus-operator's CRDs are optional:
// the reconciler looks them up in the API server's discovery on every pass
// and reports monitoring unavailable where they are missing.
//
// The monitoring.coreos.com/v1 types must be in the manager's scheme
// (monitoringv1.AddToScheme, which needs no CRD in the cluster) for the
// client to read and write them.

// Kinds the prometheus-operator's CRDs define.
var (
	serviceMonitorGVK = monitoringv1.SchemeGroupVersion.WithKind(monitoringv1.ServiceMonitorsKind)
	prometheusRuleGVK = monitoringv1.SchemeGroupVersion.WithKind(monitoringv1.PrometheusRuleKind)
	podMonitorGVK     = monitoringv1.SchemeGroupVersion.WithKind(monitoringv1.PodMonitorsKind)
)

// InstalledMonitoringKinds returns an empty object of each
// prometheus-operator kind the reconcilers write (ServiceMonitor,
// PrometheusRule for caches, PodMonitor for tenants' gateways) whose CRD
// the API server serves. SetupWithManager watches (Owns) only these: a
// watch on a kind without its CRD would keep the manager from starting.
func InstalledMonitoringKinds(mapper meta.RESTMapper) ([]client.Object, error) {
	var out []client.Object
	for _, k := range []struct {
		gvk schema.GroupVersionKind
		obj client.Object
	}{
		{serviceMonitorGVK, &monitoringv1.ServiceMonitor{}},
		{prometheusRuleGVK, &monitoringv1.PrometheusRule{}},
		{podMonitorGVK, &monitoringv1.PodMonitor{}},
	} {
		ok, err := kindInstalled(mapper, k.gvk)
		if err != nil {
			return nil, err
		}
		if ok {
			out = append(out, k.obj)
		}
	}
	return out, nil
}

// MonitoringCacheOptions are CacheOptions for the prometheus-operator
// kinds whose CRDs are installed when the operator starts, so the manager
// caches only the ServiceMonitors and PrometheusRules it manages. Kinds
// missing then are left out: restricting the cache of a kind the API server
// does not serve fails the manager's start. (A CRD installed later is still
// used, with an unrestricted cache of that kind, until the operator
// restarts.)
func MonitoringCacheOptions(cfg *rest.Config) (map[client.Object]cache.ByObject, error) {
	httpClient, err := rest.HTTPClientFor(cfg)
	if err != nil {
		return nil, err
	}
	mapper, err := apiutil.NewDynamicRESTMapper(cfg, httpClient)
	if err != nil {
		return nil, err
	}
	kinds, err := InstalledMonitoringKinds(mapper)
	if err != nil {
		return nil, err
	}
	sel := labels.SelectorFromSet(labels.Set{LabelManagedBy: ManagedByValue})
	out := map[client.Object]cache.ByObject{}
	for _, obj := range kinds {
		out[obj] = cache.ByObject{Label: sel}
	}
	return out, nil
}

func serviceMonitorName(dc *cachev1alpha1.DistributedCache) string { return dc.Name }
func prometheusRuleName(dc *cachev1alpha1.DistributedCache) string { return dc.Name + "-alerts" }

// DashboardConfigMapName names the ConfigMap with the Grafana dashboard.
func DashboardConfigMapName(dc *cachev1alpha1.DistributedCache) string { return dc.Name + "-dashboard" }

// monitoringLabels are the user's labels (for the Prometheus or Grafana
// selector) under the operator's own, which win: the managed-by label is
// what the manager's cache selects on.
func monitoringLabels(dc *cachev1alpha1.DistributedCache, user map[string]string) map[string]string {
	return mergeMaps(user, objectLabels(dc, ""))
}

// buildServiceMonitor is the ServiceMonitor <cache> scraping every node of
// the cache through its client Service (buildClientService; the zones'
// headless Services carry the same labels plus the zone and are left out,
// or each node would be scraped once per Service). Prometheus discovers the
// nodes behind it, ready or not, and gives every series the labels the
// dashboard and the alerts select on (internal/monitoring): namespace,
// service (= the cache), pod, and zone from the pod's zone label.
func buildServiceMonitor(dc *cachev1alpha1.DistributedCache) *monitoringv1.ServiceMonitor {
	spec := dc.Spec.Monitoring.ServiceMonitor
	return &monitoringv1.ServiceMonitor{
		ObjectMeta: metav1.ObjectMeta{
			Name: serviceMonitorName(dc), Namespace: dc.Namespace,
			Labels: monitoringLabels(dc, spec.Labels),
		},
		Spec: monitoringv1.ServiceMonitorSpec{
			Selector: metav1.LabelSelector{
				MatchLabels: objectLabels(dc, ""),
				MatchExpressions: []metav1.LabelSelectorRequirement{
					{Key: LabelZone, Operator: metav1.LabelSelectorOpDoesNotExist},
				},
			},
			NamespaceSelector: monitoringv1.NamespaceSelector{MatchNames: []string{dc.Namespace}},
			Endpoints: []monitoringv1.Endpoint{{
				Port:     "metrics",
				Path:     "/metrics",
				Interval: monitoringv1.Duration(spec.Interval),
				RelabelConfigs: []monitoringv1.RelabelConfig{{
					SourceLabels: []monitoringv1.LabelName{monitoringv1.LabelName(podLabelSource(LabelZone))},
					TargetLabel:  monitoring.LabelZone,
					Action:       "replace",
				}},
			}},
		},
	}
}

// buildPrometheusRule is the PrometheusRule <cache>-alerts with the alerts
// of internal/monitoring, scoped to this cache's series.
func buildPrometheusRule(dc *cachev1alpha1.DistributedCache) (*monitoringv1.PrometheusRule, error) {
	spec := dc.Spec.Monitoring.PrometheusRule
	groups, err := monitoring.RuleGroups(monitoring.Target{Namespace: dc.Namespace, Cache: dc.Name}, spec.HitRatioThreshold)
	if err != nil {
		return nil, err
	}
	return &monitoringv1.PrometheusRule{
		ObjectMeta: metav1.ObjectMeta{
			Name: prometheusRuleName(dc), Namespace: dc.Namespace,
			Labels: monitoringLabels(dc, spec.Labels),
		},
		Spec: monitoringv1.PrometheusRuleSpec{Groups: groups},
	}, nil
}

// buildDashboardConfigMap is the ConfigMap <cache>-dashboard holding the
// dashboard JSON under monitoring.DashboardKey, labelled for Grafana's
// sidecar (spec.monitoring.grafanaDashboard.labels, by default
// grafana_dashboard: "1").
func buildDashboardConfigMap(dc *cachev1alpha1.DistributedCache) *corev1.ConfigMap {
	return &corev1.ConfigMap{
		ObjectMeta: metav1.ObjectMeta{
			Name: DashboardConfigMapName(dc), Namespace: dc.Namespace,
			Labels: monitoringLabels(dc, dc.Spec.Monitoring.GrafanaDashboard.Labels),
		},
		Data: map[string]string{monitoring.DashboardKey: string(monitoring.Dashboard())},
	}
}

// monitoringStep is reconcileMonitoring as a reconcile step: monitoring
// that spec.monitoring asks for but the cluster cannot provide is a
// Degraded reason and a warning event, not an error.
func (r *DistributedCacheReconciler) monitoringStep(ctx context.Context, dc *cachev1alpha1.DistributedCache, st *reconcileState) error {
	available, err := r.reconcileMonitoring(ctx, dc)
	if err != nil || available {
		return err
	}
	st.problems = append(st.problems, finding{cachev1alpha1.ReasonMonitoringUnavailable,
		"spec.monitoring asks for a ServiceMonitor or PrometheusRule but the prometheus-operator's CRDs (monitoring.coreos.com) are not installed; the cache runs without them"})
	r.Recorder.Eventf(dc, nil, corev1.EventTypeWarning, cachev1alpha1.ReasonMonitoringUnavailable, "Monitoring",
		"the prometheus-operator's CRDs are not installed: no ServiceMonitor or PrometheusRule")
	return nil
}

// reconcileMonitoring creates or updates the ServiceMonitor, the
// PrometheusRule and the dashboard ConfigMap that spec.monitoring enables,
// and deletes those it no longer enables (if the cache controls them).
// Where the prometheus-operator's CRDs are not installed, an enabled
// ServiceMonitor or PrometheusRule is skipped and monitoringAvailable is
// false (a Degraded reason, not an error); it is true when everything
// enabled exists. Missing CRDs are looked up again on the next reconcile,
// so installing the prometheus-operator later is picked up.
func (r *DistributedCacheReconciler) reconcileMonitoring(ctx context.Context, dc *cachev1alpha1.DistributedCache) (monitoringAvailable bool, err error) {
	mon := dc.Spec.Monitoring
	smAvailable, err := reconcileMonitoringKind(ctx, r, dc, serviceMonitorGVK, mon.ServiceMonitor.Enabled, serviceMonitorName(dc),
		func() (*monitoringv1.ServiceMonitor, error) { return buildServiceMonitor(dc), nil }, &monitoringv1.ServiceMonitor{},
		func(existing, desired *monitoringv1.ServiceMonitor) { existing.Spec = desired.Spec })
	if err != nil {
		return false, err
	}
	prAvailable, err := reconcileMonitoringKind(ctx, r, dc, prometheusRuleGVK, mon.PrometheusRule.Enabled, prometheusRuleName(dc),
		func() (*monitoringv1.PrometheusRule, error) { return buildPrometheusRule(dc) }, &monitoringv1.PrometheusRule{},
		func(existing, desired *monitoringv1.PrometheusRule) { existing.Spec = desired.Spec })
	if err != nil {
		return false, err
	}
	if mon.GrafanaDashboard.Enabled {
		_, err = applyOwned(ctx, r, dc, "ConfigMap", buildDashboardConfigMap(dc), &corev1.ConfigMap{}, func(existing, desired *corev1.ConfigMap) {
			existing.Data = desired.Data
			existing.BinaryData = nil
		})
	} else {
		err = deleteControlled(ctx, r.Client, dc, &corev1.ConfigMap{}, DashboardConfigMapName(dc))
	}
	if err != nil {
		return false, fmt.Errorf("dashboard configmap: %w", err)
	}
	return smAvailable && prAvailable, nil
}

// reconcileMonitoringKind writes the object build makes when enabled and
// the API server serves gvk (a prometheus-operator kind), and deletes the
// cache's object of that kind named name when not enabled. It returns
// false when enabled but gvk is not served. gvk.Kind names the object in
// its events and, in lower case, in errors.
func reconcileMonitoringKind[T client.Object](ctx context.Context, r *DistributedCacheReconciler, dc *cachev1alpha1.DistributedCache,
	gvk schema.GroupVersionKind, enabled bool, name string, build func() (T, error), existing T, copySpec func(existing, desired T)) (bool, error) {
	installed, err := kindInstalled(r.Client.RESTMapper(), gvk)
	if err != nil {
		return false, err
	}
	switch {
	case enabled && installed:
		desired, err := build()
		if err == nil {
			_, err = applyOwned(ctx, r, dc, gvk.Kind, desired, existing, copySpec)
		}
		if err != nil {
			return false, fmt.Errorf("%s: %w", strings.ToLower(gvk.Kind), err)
		}
	case enabled:
		return false, nil
	case installed:
		if err := deleteControlled(ctx, r.Client, dc, existing, name); err != nil {
			return false, fmt.Errorf("%s: %w", strings.ToLower(gvk.Kind), err)
		}
	}
	return true, nil
}

// kindInstalled reports whether the API server serves gvk: false, without
// an error, when discovery has no such kind (its CRD is not installed).
// The manager's RESTMapper asks discovery again for a kind it has not seen,
// so a CRD installed later is found.
func kindInstalled(mapper meta.RESTMapper, gvk schema.GroupVersionKind) (bool, error) {
	_, err := mapper.RESTMapping(gvk.GroupKind(), gvk.Version)
	if meta.IsNoMatchError(err) {
		return false, nil
	}
	if err != nil {
		return false, fmt.Errorf("looking up %s: %w", gvk, err)
	}
	return true, nil
}

// podLabelSource is a pod label as Prometheus's Kubernetes service
// discovery names it (non-alphanumerics become '_').
func podLabelSource(label string) string {
	return "__meta_kubernetes_pod_label_" + strings.Map(func(r rune) rune {
		if r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' {
			return r
		}
		return '_'
	}, label)
}
