package controllers

import (
	"context"
	"fmt"
	"slices"

	monitoringv1 "github.com/prometheus-operator/prometheus-operator/pkg/apis/monitoring/v1"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	cachev1alpha1 "github.com/distcache/distcache/api/v1alpha1"
	"github.com/distcache/distcache/internal/monitoring"
)

// A CacheTenant with spec.gateway gets, in its own namespace, one gateway
// Deployment per zone of its cache (<tenant>-gateway-<zone>, pinned to the
// zone, reading that zone's nodes first), one Service in front of all of
// them that keeps clients in their own zone (<tenant>-gateway,
// trafficDistribution PreferSameZone), a PodDisruptionBudget per zone, the
// Secret of S3 credentials clients sign with (<tenant>-s3-credentials) and,
// where the cache has a ServiceMonitor, a PodMonitor. This file holds the
// gateway step (reconcileGateway), the names and labels, and the Service,
// PDB and PodMonitor; the Deployment is built in
// cachetenant_gateway_deployment.go, the credentials kept in
// cachetenant_gateway_credentials.go, the status read in
// cachetenant_gateway_status.go.

// Labels and names of gateway objects.
const (
	// GatewayAppName is the app.kubernetes.io/name of gateway pods.
	GatewayAppName = monitoring.GatewayAppName
	// LabelCache and LabelCacheNamespace on gateway pods name the cache they
	// read through; the PodMonitor turns them into the cache and
	// cache_namespace labels the dashboard's Gateways row selects on.
	LabelCache          = monitoring.GatewayPodLabelCache
	LabelCacheNamespace = monitoring.GatewayPodLabelCacheNamespace
	// AnnotationCredentialsHash on the gateways' pod template hashes the S3
	// credentials they accept: a rotated Secret rolls them.
	AnnotationCredentialsHash = "cache.distcache.io/credentials-hash"

	// GatewayMetricsPort is the gateways' plain HTTP port (/metrics,
	// /healthz, /readyz).
	GatewayMetricsPort = 9091

	gatewayContainerName = "gateway"
)

// GatewayServiceName names the tenant's gateway Service.
func GatewayServiceName(t *cachev1alpha1.CacheTenant) string { return t.Name + "-gateway" }

// GatewayDeploymentName names a zone's gateway Deployment (and its PDB).
func GatewayDeploymentName(t *cachev1alpha1.CacheTenant, zone string) string {
	return t.Name + "-gateway-" + zone
}

// gatewayPodMonitorName names the PodMonitor scraping the gateways.
func gatewayPodMonitorName(t *cachev1alpha1.CacheTenant) string { return t.Name + "-gateway" }

// GatewayEndpoint is the S3 endpoint URL of the tenant's gateways, as
// clients in the cluster reach it.
func GatewayEndpoint(t *cachev1alpha1.CacheTenant) string {
	return fmt.Sprintf("http://%s.%s.svc:%d", GatewayServiceName(t), t.Namespace, t.Spec.Gateway.GatewayPort())
}

// gatewayDomains are the host names clients may address the gateways by
// (path-style; virtual-hosted names under them are refused).
func gatewayDomains(t *cachev1alpha1.CacheTenant) []string {
	svc := GatewayServiceName(t)
	return []string{svc, svc + "." + t.Namespace, svc + "." + t.Namespace + ".svc", svc + "." + t.Namespace + ".svc.cluster.local"}
}

// gatewaySelectorLabels select every gateway pod of the tenant.
func gatewaySelectorLabels(t *cachev1alpha1.CacheTenant) map[string]string {
	return map[string]string{LabelName: GatewayAppName, LabelInstance: GatewayServiceName(t)}
}

// gatewayZoneSelectorLabels select the tenant's gateway pods of one zone.
func gatewayZoneSelectorLabels(t *cachev1alpha1.CacheTenant, zone string) map[string]string {
	l := gatewaySelectorLabels(t)
	l[LabelZone] = zone
	return l
}

// gatewayLabels are the labels of the tenant's gateway objects and pods
// (of one zone, or of all when zone is "").
func gatewayLabels(t *cachev1alpha1.CacheTenant, zone string) map[string]string {
	l := ownedLabels(gatewaySelectorLabels(t), zone, "gateway")
	l[LabelCache] = t.Spec.CacheRef.Name
	l[LabelCacheNamespace] = t.Spec.CacheRef.Namespace
	return l
}

// gatewayZones are the zones the tenant runs gateways in, in the cache's
// order, and the zones spec.gateway.zones names that the cache lacks.
func gatewayZones(t *cachev1alpha1.CacheTenant, dc *cachev1alpha1.DistributedCache) (zones, missing []string) {
	want := t.Spec.Gateway.Zones
	for _, z := range dc.Spec.Zones {
		if len(want) == 0 || slices.Contains(want, z.Name) {
			zones = append(zones, z.Name)
		}
	}
	for _, z := range want {
		if !slices.ContainsFunc(dc.Spec.Zones, func(s cachev1alpha1.ZoneSpec) bool { return s.Name == z }) {
			missing = append(missing, z)
		}
	}
	return zones, missing
}

// zoneNodesURL is the mTLS API of a zone's cache nodes, through the zone's
// headless Service (a name in the node certificate, nodeDNSNames).
func zoneNodesURL(dc *cachev1alpha1.DistributedCache, zone string) string {
	return fmt.Sprintf("https://%s.%s.svc:%d", zoneObjectName(dc, zone), dc.Namespace, APIPort)
}

// reconcileGateway runs the tenant's gateways when spec.gateway asks for
// them and the tenant is admitted to an existing cache, and removes them
// otherwise. tenant is the tenant's own state: gateways of a tenant whose
// certificate is not issued yet are created (they wait for it) but
// reported not ready for that reason.
func (r *CacheTenantReconciler) reconcileGateway(ctx context.Context, t *cachev1alpha1.CacheTenant, tenant tenantState) (gatewayState, error) {
	var dc cachev1alpha1.DistributedCache
	ref := t.Spec.CacheRef
	err := r.Get(ctx, types.NamespacedName{Namespace: ref.Namespace, Name: ref.Name}, &dc)
	if client.IgnoreNotFound(err) != nil {
		return gatewayState{}, err
	}
	if !t.GatewayEnabled() || tenant.revoke || err != nil {
		return gatewayState{}, r.removeGateway(ctx, t, nil)
	}
	zones, missing := gatewayZones(t, &dc)
	creds, err := r.ensureGatewayCredentials(ctx, t)
	if err != nil {
		return gatewayState{}, err
	}
	if _, err := apply(ctx, r.Client, r.Scheme, t, buildGatewayService(t), &corev1.Service{}, func(existing, desired *corev1.Service) {
		// The API server allocates the cluster IPs and node ports: keep them.
		desired.Spec.ClusterIP, desired.Spec.ClusterIPs = existing.Spec.ClusterIP, existing.Spec.ClusterIPs
		for i := range desired.Spec.Ports {
			if i < len(existing.Spec.Ports) {
				desired.Spec.Ports[i].NodePort = existing.Spec.Ports[i].NodePort
			}
		}
		existing.Spec = desired.Spec
	}); err != nil {
		return gatewayState{}, err
	}
	image := dc.Spec.CacheNodeImage(r.CacheNodeImage)
	hash := credentialsHash(creds.Data)
	for _, z := range zones {
		if _, err := apply(ctx, r.Client, r.Scheme, t, buildGatewayDeployment(t, &dc, z, image, hash), &appsv1.Deployment{}, func(existing, desired *appsv1.Deployment) {
			existing.Spec = desired.Spec
		}); err != nil {
			return gatewayState{}, err
		}
		if _, err := apply(ctx, r.Client, r.Scheme, t, buildGatewayPDB(t, z), &policyv1.PodDisruptionBudget{}, func(existing, desired *policyv1.PodDisruptionBudget) {
			existing.Spec = desired.Spec
		}); err != nil {
			return gatewayState{}, err
		}
	}
	if err := r.removeGateway(ctx, t, zones); err != nil {
		return gatewayState{}, err
	}
	if err := r.reconcileGatewayPodMonitor(ctx, t, &dc); err != nil {
		return gatewayState{}, err
	}
	st := gatewayState{enabled: true, endpoint: GatewayEndpoint(t), credentials: creds.Name}
	if st.zones, err = r.observeGateways(ctx, t, zones); err != nil {
		return gatewayState{}, err
	}
	st.reason, st.message = gatewayReadiness(t, tenant, missing, st.zones, r.whyNotReady(ctx, t, st.zones))
	return st, nil
}

// removeGateway deletes the tenant's gateway Deployments and PDBs of
// zones not in keep; with keep nil (gateways off), also the Service, the
// credentials Secret and the PodMonitor. Only objects the tenant controls.
func (r *CacheTenantReconciler) removeGateway(ctx context.Context, t *cachev1alpha1.CacheTenant, keep []string) error {
	stale := func(o client.Object) bool {
		return metav1.IsControlledBy(o, t) && (keep == nil || !slices.Contains(keep, o.GetLabels()[LabelZone]))
	}
	objs, err := listObjects(ctx, r, []client.ListOption{client.InNamespace(t.Namespace), client.MatchingLabels(gatewaySelectorLabels(t))},
		&appsv1.DeploymentList{}, &policyv1.PodDisruptionBudgetList{})
	if err != nil {
		return err
	}
	for _, o := range objs {
		if stale(o) {
			if err := deleteUnlessReplaced(ctx, r.Client, o); err != nil {
				return err
			}
		}
	}
	if keep != nil {
		return nil
	}
	if err := deleteControlled(ctx, r.Client, t, &corev1.Service{}, GatewayServiceName(t)); err != nil {
		return err
	}
	if err := deleteControlled(ctx, r.Client, t, &corev1.Secret{}, GatewayCredentialsSecretName(t)); err != nil {
		return err
	}
	installed, err := kindInstalled(r.RESTMapper(), podMonitorGVK)
	if err != nil || !installed {
		return err
	}
	return deleteControlled(ctx, r.Client, t, &monitoringv1.PodMonitor{}, gatewayPodMonitorName(t))
}

// buildGatewayService is the Service <tenant>-gateway in front of every
// zone's gateways. PreferSameZone keeps a client on its own zone's
// gateways while one is ready (and on another zone's otherwise).
func buildGatewayService(t *cachev1alpha1.CacheTenant) *corev1.Service {
	g := t.Spec.Gateway
	typ := g.Service.Type
	if typ == "" {
		typ = corev1.ServiceTypeClusterIP
	}
	return &corev1.Service{
		ObjectMeta: metav1.ObjectMeta{
			Name: GatewayServiceName(t), Namespace: t.Namespace,
			Labels: gatewayLabels(t, ""), Annotations: maps0(g.Service.Annotations),
		},
		Spec: corev1.ServiceSpec{
			Type:                typ,
			Selector:            gatewaySelectorLabels(t),
			Ports:               []corev1.ServicePort{{Name: "s3", Port: g.GatewayPort(), TargetPort: intstr.FromString("s3"), Protocol: corev1.ProtocolTCP}},
			TrafficDistribution: ptr.To(corev1.ServiceTrafficDistributionPreferSameZone),
		},
	}
}

// maps0 is a copy of m, nil when empty (so an empty map and none hash alike).
func maps0(m map[string]string) map[string]string {
	if len(m) == 0 {
		return nil
	}
	return mergeMaps(nil, m)
}

// buildGatewayPDB is the zone's gateway PodDisruptionBudget: a drain takes
// one gateway of the zone at a time.
func buildGatewayPDB(t *cachev1alpha1.CacheTenant, zone string) *policyv1.PodDisruptionBudget {
	return &policyv1.PodDisruptionBudget{
		ObjectMeta: metav1.ObjectMeta{Name: GatewayDeploymentName(t, zone), Namespace: t.Namespace, Labels: gatewayLabels(t, zone)},
		Spec: policyv1.PodDisruptionBudgetSpec{
			MaxUnavailable: ptr.To(intstr.FromInt32(1)),
			Selector:       &metav1.LabelSelector{MatchLabels: gatewayZoneSelectorLabels(t, zone)},
		},
	}
}

// reconcileGatewayPodMonitor writes the PodMonitor where the cache has a
// ServiceMonitor and the prometheus-operator's CRDs exist, and removes it
// where the cache no longer asks for one. Without the CRDs there is
// nothing to do: the cache's own status says monitoring is unavailable.
func (r *CacheTenantReconciler) reconcileGatewayPodMonitor(ctx context.Context, t *cachev1alpha1.CacheTenant, dc *cachev1alpha1.DistributedCache) error {
	installed, err := kindInstalled(r.RESTMapper(), podMonitorGVK)
	if err != nil || !installed {
		return err
	}
	if !dc.Spec.Monitoring.ServiceMonitor.Enabled {
		return deleteControlled(ctx, r.Client, t, &monitoringv1.PodMonitor{}, gatewayPodMonitorName(t))
	}
	_, err = apply(ctx, r.Client, r.Scheme, t, buildGatewayPodMonitor(t, dc), &monitoringv1.PodMonitor{}, func(existing, desired *monitoringv1.PodMonitor) {
		existing.Spec = desired.Spec
	})
	return err
}

// buildGatewayPodMonitor scrapes the tenant's gateways with the cache's
// ServiceMonitor settings (interval, labels for the Prometheus selector),
// labelling their series with the cache, its namespace and the zone, as
// the dashboard's Gateways row selects them.
func buildGatewayPodMonitor(t *cachev1alpha1.CacheTenant, dc *cachev1alpha1.DistributedCache) *monitoringv1.PodMonitor {
	sm := dc.Spec.Monitoring.ServiceMonitor
	relabel := func(label, target string) monitoringv1.RelabelConfig {
		return monitoringv1.RelabelConfig{
			SourceLabels: []monitoringv1.LabelName{monitoringv1.LabelName(podLabelSource(label))},
			TargetLabel:  target, Action: "replace",
		}
	}
	return &monitoringv1.PodMonitor{
		ObjectMeta: metav1.ObjectMeta{
			Name: gatewayPodMonitorName(t), Namespace: t.Namespace,
			Labels: mergeMaps(sm.Labels, gatewayLabels(t, "")),
		},
		Spec: monitoringv1.PodMonitorSpec{
			Selector:          metav1.LabelSelector{MatchLabels: gatewaySelectorLabels(t)},
			NamespaceSelector: monitoringv1.NamespaceSelector{MatchNames: []string{t.Namespace}},
			PodMetricsEndpoints: []monitoringv1.PodMetricsEndpoint{{
				Port:     ptr.To("metrics"),
				Path:     "/metrics",
				Interval: monitoringv1.Duration(sm.Interval),
				RelabelConfigs: []monitoringv1.RelabelConfig{
					relabel(LabelCache, monitoring.LabelCache),
					relabel(LabelCacheNamespace, monitoring.LabelCacheNamespace),
					relabel(LabelZone, monitoring.LabelZone),
				},
			}},
		},
	}
}
