package controllers

import (
	"context"

	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"

	cachev1alpha1 "github.com/distcache/distcache/api/v1alpha1"
)

// Services and disruption budgets: the client Service, and per zone the
// headless Service naming the pods and the PodDisruptionBudget.

// reconcileServices writes the client Service and each zone's headless
// Service.
func (r *DistributedCacheReconciler) reconcileServices(ctx context.Context, dc *cachev1alpha1.DistributedCache, _ *reconcileState) error {
	desired := []*corev1.Service{buildClientService(dc)}
	for _, z := range dc.Spec.Zones {
		desired = append(desired, buildZoneService(dc, z.Name))
	}
	for _, svc := range desired {
		if _, err := applyOwned(ctx, r, dc, "Service", svc, &corev1.Service{}, func(existing, desired *corev1.Service) {
			// clusterIP(s) are allocated by the API server and immutable.
			ip, ips := existing.Spec.ClusterIP, existing.Spec.ClusterIPs
			existing.Spec = desired.Spec
			if desired.Spec.ClusterIP == "" {
				existing.Spec.ClusterIP, existing.Spec.ClusterIPs = ip, ips
			}
		}); err != nil {
			return err
		}
	}
	return nil
}

// nodePorts are the ports a node Service exposes.
func nodePorts() []corev1.ServicePort {
	return []corev1.ServicePort{
		{Name: "api", Port: APIPort, TargetPort: intstr.FromString("api"), Protocol: corev1.ProtocolTCP},
		{Name: "metrics", Port: MetricsPort, TargetPort: intstr.FromString("metrics"), Protocol: corev1.ProtocolTCP},
	}
}

// buildZoneService is the headless Service <cache>-<zone> that gives the
// zone's pods their stable DNS names (<pod>.<cache>-<zone>.<ns>.svc), the
// addresses in the ring. Not-ready pods are published too: a node must
// reach a draining or starting peer by name.
func buildZoneService(dc *cachev1alpha1.DistributedCache, zone string) *corev1.Service {
	return &corev1.Service{
		ObjectMeta: metav1.ObjectMeta{
			Name: zoneObjectName(dc, zone), Namespace: dc.Namespace,
			Labels: objectLabels(dc, zone),
		},
		Spec: corev1.ServiceSpec{
			ClusterIP:                corev1.ClusterIPNone,
			Selector:                 zoneSelectorLabels(dc, zone),
			Ports:                    nodePorts(),
			PublishNotReadyAddresses: true,
		},
	}
}

// buildClientService is the Service <cache> selecting the ready nodes of
// every zone: the entry point for gateways fetching the ring.
func buildClientService(dc *cachev1alpha1.DistributedCache) *corev1.Service {
	return &corev1.Service{
		ObjectMeta: metav1.ObjectMeta{
			Name: clientServiceName(dc), Namespace: dc.Namespace,
			Labels: objectLabels(dc, ""),
		},
		Spec: corev1.ServiceSpec{
			Type:     corev1.ServiceTypeClusterIP,
			Selector: cacheLabels(dc),
			Ports:    nodePorts(),
		},
	}
}

// reconcilePDBs writes each zone's PodDisruptionBudget.
func (r *DistributedCacheReconciler) reconcilePDBs(ctx context.Context, dc *cachev1alpha1.DistributedCache, _ *reconcileState) error {
	for _, z := range dc.Spec.Zones {
		if _, err := applyOwned(ctx, r, dc, "PodDisruptionBudget", buildPDB(dc, z.Name), &policyv1.PodDisruptionBudget{},
			func(existing, desired *policyv1.PodDisruptionBudget) { existing.Spec = desired.Spec }); err != nil {
			return err
		}
	}
	return nil
}

// buildPDB is the zone's PodDisruptionBudget.
func buildPDB(dc *cachev1alpha1.DistributedCache, zone string) *policyv1.PodDisruptionBudget {
	maxUnavailable := intstr.FromInt32(1)
	if m := dc.Spec.PodDisruptionBudget.MaxUnavailable; m != nil {
		maxUnavailable = intstr.FromInt32(*m)
	}
	return &policyv1.PodDisruptionBudget{
		ObjectMeta: metav1.ObjectMeta{
			Name: zoneObjectName(dc, zone), Namespace: dc.Namespace,
			Labels: objectLabels(dc, zone),
		},
		Spec: policyv1.PodDisruptionBudgetSpec{
			MaxUnavailable: &maxUnavailable,
			Selector:       &metav1.LabelSelector{MatchLabels: zoneSelectorLabels(dc, zone)},
		},
	}
}
