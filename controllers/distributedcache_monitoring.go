package controllers

import (
	"context"
	"fmt"

	monitoringv1 "github.com/prometheus-operator/prometheus-operator/pkg/apis/monitoring/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/rest"
	"k8s.io/utils/ptr"
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
	monitoringAvailable = true

	installed, err := kindInstalled(r.Client.RESTMapper(), serviceMonitorGVK)
	if err != nil {
		return false, err
	}
	switch {
	case mon.ServiceMonitor.Enabled && installed:
		sm := buildServiceMonitor(dc)
		res, err := apply(ctx, r.Client, r.Scheme, dc, sm, &monitoringv1.ServiceMonitor{}, func(existing, desired *monitoringv1.ServiceMonitor) {
			existing.Spec = desired.Spec
		})
		if err != nil {
			return false, fmt.Errorf("servicemonitor: %w", err)
		}
		r.recordCreated(dc, "ServiceMonitor", sm.Name, res)
	case mon.ServiceMonitor.Enabled:
		monitoringAvailable = false
	case installed:
		if err := r.deleteControlled(ctx, dc, &monitoringv1.ServiceMonitor{}, serviceMonitorName(dc)); err != nil {
			return false, fmt.Errorf("servicemonitor: %w", err)
		}
	}

	installed, err = kindInstalled(r.Client.RESTMapper(), prometheusRuleGVK)
	if err != nil {
		return false, err
	}
	switch {
	case mon.PrometheusRule.Enabled && installed:
		pr, err := buildPrometheusRule(dc)
		if err != nil {
			return false, fmt.Errorf("prometheusrule: %w", err)
		}
		res, err := apply(ctx, r.Client, r.Scheme, dc, pr, &monitoringv1.PrometheusRule{}, func(existing, desired *monitoringv1.PrometheusRule) {
			existing.Spec = desired.Spec
		})
		if err != nil {
			return false, fmt.Errorf("prometheusrule: %w", err)
		}
		r.recordCreated(dc, "PrometheusRule", pr.Name, res)
	case mon.PrometheusRule.Enabled:
		monitoringAvailable = false
	case installed:
		if err := r.deleteControlled(ctx, dc, &monitoringv1.PrometheusRule{}, prometheusRuleName(dc)); err != nil {
			return false, fmt.Errorf("prometheusrule: %w", err)
		}
	}

	if mon.GrafanaDashboard.Enabled {
		cm := buildDashboardConfigMap(dc)
		res, err := apply(ctx, r.Client, r.Scheme, dc, cm, &corev1.ConfigMap{}, func(existing, desired *corev1.ConfigMap) {
			existing.Data = desired.Data
			existing.BinaryData = nil
		})
		if err != nil {
			return false, fmt.Errorf("dashboard configmap: %w", err)
		}
		r.recordCreated(dc, "ConfigMap", cm.Name, res)
	} else if err := r.deleteControlled(ctx, dc, &corev1.ConfigMap{}, DashboardConfigMapName(dc)); err != nil {
		return false, fmt.Errorf("dashboard configmap: %w", err)
	}
	return monitoringAvailable, nil
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

// deleteControlled deletes the object of obj's kind named name in the
// cache's namespace if it exists and the cache controls it (an object of
// the same name that someone else made is left alone).
func (r *DistributedCacheReconciler) deleteControlled(ctx context.Context, dc *cachev1alpha1.DistributedCache, obj client.Object, name string) error {
	err := r.Get(ctx, client.ObjectKey{Namespace: dc.Namespace, Name: name}, obj)
	if err != nil {
		return client.IgnoreNotFound(err)
	}
	if !metav1.IsControlledBy(obj, dc) {
		return nil
	}
	return client.IgnoreNotFound(r.Delete(ctx, obj, client.Preconditions{UID: ptr.To(obj.GetUID())}))
}
