package controllers

import (
	"context"
	"fmt"
	"strings"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	cachev1alpha1 "github.com/distcache/distcache/api/v1alpha1"
)

// The gateways' part of a CacheTenant's status: each zone's Deployment and
// the GatewayReady condition, with what the pods of a zone short of ready
// gateways wait for.

// gatewayState is what reconcileGateway found, for the status. The zero
// value is a tenant without gateways.
type gatewayState struct {
	enabled     bool
	endpoint    string
	credentials string
	zones       []cachev1alpha1.GatewayZoneStatus
	// reason and message of GatewayReady=False; "" when every zone is ready.
	reason, message string
}

// observeGateways reads each zone's Deployment status.
func (r *CacheTenantReconciler) observeGateways(ctx context.Context, t *cachev1alpha1.CacheTenant, zones []string) ([]cachev1alpha1.GatewayZoneStatus, error) {
	out := make([]cachev1alpha1.GatewayZoneStatus, 0, len(zones))
	for _, z := range zones {
		zs := cachev1alpha1.GatewayZoneStatus{Zone: z, Deployment: GatewayDeploymentName(t, z)}
		var d appsv1.Deployment
		err := r.Get(ctx, types.NamespacedName{Namespace: t.Namespace, Name: zs.Deployment}, &d)
		if client.IgnoreNotFound(err) != nil {
			return nil, err
		}
		if err == nil {
			zs.Replicas, zs.ReadyReplicas = d.Status.Replicas, d.Status.ReadyReplicas
		}
		out = append(out, zs)
	}
	return out, nil
}

// whyNotReady says, for the first zone short of ready gateways, what its
// pods wait for: the scheduler's or the kubelet's reason. "" if nothing
// tells.
func (r *CacheTenantReconciler) whyNotReady(ctx context.Context, t *cachev1alpha1.CacheTenant, zones []cachev1alpha1.GatewayZoneStatus) string {
	want := t.Spec.Gateway.GatewayReplicasPerZone()
	for _, z := range zones {
		if z.ReadyReplicas >= want {
			continue
		}
		var pods corev1.PodList
		if err := r.List(ctx, &pods, client.InNamespace(t.Namespace), client.MatchingLabels(gatewayZoneSelectorLabels(t, z.Zone))); err != nil {
			return ""
		}
		for _, p := range pods.Items {
			if why := podWaitReason(&p); why != "" {
				return fmt.Sprintf("zone %s: pod %s: %s", z.Zone, p.Name, why)
			}
		}
		return ""
	}
	return ""
}

// podWaitReason is why a pod is not ready, from its conditions and
// container states, or "".
func podWaitReason(p *corev1.Pod) string {
	for _, c := range p.Status.Conditions {
		if c.Type == corev1.PodScheduled && c.Status == corev1.ConditionFalse {
			return strings.TrimSpace(c.Reason + ": " + c.Message)
		}
	}
	for _, cs := range p.Status.ContainerStatuses {
		if w := cs.State.Waiting; w != nil && w.Reason != "" {
			return strings.TrimSpace(w.Reason + ": " + w.Message)
		}
		if cs.LastTerminationState.Terminated != nil && !cs.Ready {
			term := cs.LastTerminationState.Terminated
			return fmt.Sprintf("last exit %d (%s)", term.ExitCode, term.Reason)
		}
	}
	return ""
}

// gatewayReadiness is the GatewayReady condition's reason and message, ""
// when ready: the first of these checks that fails.
func gatewayReadiness(t *cachev1alpha1.CacheTenant, tenant tenantState, missing []string, zones []cachev1alpha1.GatewayZoneStatus, why string) (reason, message string) {
	if len(missing) > 0 {
		return cachev1alpha1.ReasonZoneNotInCache, fmt.Sprintf("spec.gateway.zones: the cache %s/%s has no zone %s",
			t.Spec.CacheRef.Namespace, t.Spec.CacheRef.Name, strings.Join(missing, ", "))
	}
	if tenant.reason != "" {
		return cachev1alpha1.ReasonTenantNotReady, "the tenant is not ready (" + tenant.reason + "): its gateways have no client certificate"
	}
	want := t.Spec.Gateway.GatewayReplicasPerZone()
	var short []string
	for _, z := range zones {
		if z.ReadyReplicas < want {
			short = append(short, fmt.Sprintf("%s %d/%d", z.Zone, z.ReadyReplicas, want))
		}
	}
	if len(short) > 0 {
		msg := "gateways ready per zone: " + strings.Join(short, ", ")
		if why != "" {
			msg += "; " + why
		}
		return cachev1alpha1.ReasonGatewaysNotReady, msg
	}
	return "", ""
}

// setGatewayStatus writes the gateway part of the tenant's status.
func setGatewayStatus(s *cachev1alpha1.CacheTenantStatus, generation int64, gw gatewayState) {
	if !gw.enabled {
		s.Endpoint, s.CredentialsSecret, s.Gateways = "", "", nil
		meta.RemoveStatusCondition(&s.Conditions, cachev1alpha1.ConditionGatewayReady)
		return
	}
	s.Endpoint, s.CredentialsSecret, s.Gateways = gw.endpoint, gw.credentials, gw.zones
	cond := metav1.Condition{
		Type: cachev1alpha1.ConditionGatewayReady, Status: metav1.ConditionTrue, ObservedGeneration: generation,
		Reason: cachev1alpha1.ReasonGatewaysAvailable, Message: "every zone's gateways are ready at " + gw.endpoint,
	}
	if gw.reason != "" {
		cond.Status, cond.Reason, cond.Message = metav1.ConditionFalse, gw.reason, gw.message
	}
	meta.SetStatusCondition(&s.Conditions, cond)
}
