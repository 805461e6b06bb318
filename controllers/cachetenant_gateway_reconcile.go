package controllers

import (
	"context"
	"crypto/rand"
	"encoding/base32"
	"encoding/base64"
	"fmt"
	"slices"
	"strings"

	monitoringv1 "github.com/prometheus-operator/prometheus-operator/pkg/apis/monitoring/v1"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller/controllerutil"

	cachev1alpha1 "github.com/distcache/distcache/api/v1alpha1"
)

// +kubebuilder:rbac:groups=apps,resources=deployments,verbs=get;list;watch;create;update;patch;delete
// +kubebuilder:rbac:groups=monitoring.coreos.com,resources=podmonitors,verbs=get;list;watch;create;update;patch;delete

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

// ensureGatewayCredentials keeps the credentials Secret: random keys made
// once (and again when the Secret is deleted or a key is emptied), the
// endpoint and region kept current. The keys are never logged.
func (r *CacheTenantReconciler) ensureGatewayCredentials(ctx context.Context, t *cachev1alpha1.CacheTenant) (*corev1.Secret, error) {
	name := GatewayCredentialsSecretName(t)
	var cur corev1.Secret
	err := r.Get(ctx, types.NamespacedName{Namespace: t.Namespace, Name: name}, &cur)
	if client.IgnoreNotFound(err) != nil {
		return nil, err
	}
	exists := err == nil
	if exists && !metav1.IsControlledBy(&cur, t) {
		return nil, fmt.Errorf("secret %s exists and is not owned by this CacheTenant: delete or rename it", name)
	}
	region := t.Spec.Gateway.Region
	if region == "" {
		region = defaultClientRegion
	}
	data := map[string][]byte{
		CredentialsAccessKeyID:     cur.Data[CredentialsAccessKeyID],
		CredentialsSecretAccessKey: cur.Data[CredentialsSecretAccessKey],
		CredentialsEndpointURL:     []byte(GatewayEndpoint(t)),
		CredentialsRegion:          []byte(region),
	}
	if len(data[CredentialsAccessKeyID]) == 0 || len(data[CredentialsSecretAccessKey]) == 0 {
		id, secret, err := newGatewayKeys()
		if err != nil {
			return nil, err
		}
		data[CredentialsAccessKeyID], data[CredentialsSecretAccessKey] = []byte(id), []byte(secret)
	}
	labels := mergeMaps(tenantSecretLabels(t), map[string]string{LabelComponent: "s3-credentials"})
	if exists {
		if mapsEqualBytes(cur.Data, data) {
			return &cur, nil
		}
		cur.Labels = mergeMaps(cur.Labels, labels)
		cur.Data = data
		if err := r.Update(ctx, &cur); err != nil {
			return nil, fmt.Errorf("updating credentials secret %s: %w", name, err)
		}
		return &cur, nil
	}
	s := &corev1.Secret{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: t.Namespace, Labels: labels},
		Type:       corev1.SecretTypeOpaque,
		Data:       data,
	}
	if err := controllerutil.SetControllerReference(t, s, r.Scheme); err != nil {
		return nil, err
	}
	if err := r.Create(ctx, s); err != nil {
		return nil, fmt.Errorf("creating credentials secret %s: %w", name, err)
	}
	r.Recorder.Eventf(t, nil, corev1.EventTypeNormal, EventGatewayCredentialsIssued, "IssueCredentials",
		"generated the S3 credentials of the gateways into Secret %s", name)
	return s, nil
}

// EventGatewayCredentialsIssued: new S3 keys were generated for the
// tenant's gateways.
const EventGatewayCredentialsIssued = "GatewayCredentialsIssued"

// newGatewayKeys makes an access key ID (20 characters, AWS's shape) and a
// secret access key (40), from crypto/rand.
func newGatewayKeys() (id, secret string, err error) {
	b := make([]byte, 12+30)
	if _, err := rand.Read(b); err != nil {
		return "", "", err
	}
	id = "DC" + base32.StdEncoding.EncodeToString(b[:12])[:18]
	return id, base64.RawURLEncoding.EncodeToString(b[12:]), nil
}

func mapsEqualBytes(a, b map[string][]byte) bool {
	if len(a) != len(b) {
		return false
	}
	for k, v := range a {
		w, ok := b[k]
		if !ok || string(v) != string(w) {
			return false
		}
	}
	return true
}

// removeGateway deletes the tenant's gateway Deployments and PDBs of
// zones not in keep; with keep nil (gateways off), also the Service, the
// credentials Secret and the PodMonitor. Only objects the tenant controls.
func (r *CacheTenantReconciler) removeGateway(ctx context.Context, t *cachev1alpha1.CacheTenant, keep []string) error {
	stale := func(o client.Object) bool {
		return metav1.IsControlledBy(o, t) && (keep == nil || !slices.Contains(keep, o.GetLabels()[LabelZone]))
	}
	sel := client.MatchingLabels(gatewaySelectorLabels(t))
	var deps appsv1.DeploymentList
	if err := r.List(ctx, &deps, client.InNamespace(t.Namespace), sel); err != nil {
		return err
	}
	for i := range deps.Items {
		if stale(&deps.Items[i]) {
			if err := r.deleteIfControlled(ctx, &deps.Items[i]); err != nil {
				return err
			}
		}
	}
	var pdbs policyv1.PodDisruptionBudgetList
	if err := r.List(ctx, &pdbs, client.InNamespace(t.Namespace), sel); err != nil {
		return err
	}
	for i := range pdbs.Items {
		if stale(&pdbs.Items[i]) {
			if err := r.deleteIfControlled(ctx, &pdbs.Items[i]); err != nil {
				return err
			}
		}
	}
	if keep != nil {
		return nil
	}
	for _, o := range []client.Object{
		&corev1.Service{ObjectMeta: metav1.ObjectMeta{Namespace: t.Namespace, Name: GatewayServiceName(t)}},
		&corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: t.Namespace, Name: GatewayCredentialsSecretName(t)}},
	} {
		if err := r.getAndDeleteIfControlled(ctx, t, o); err != nil {
			return err
		}
	}
	installed, err := kindInstalled(r.RESTMapper(), podMonitorGVK)
	if err != nil || !installed {
		return err
	}
	return r.getAndDeleteIfControlled(ctx, t, &monitoringv1.PodMonitor{ObjectMeta: metav1.ObjectMeta{Namespace: t.Namespace, Name: gatewayPodMonitorName(t)}})
}

// getAndDeleteIfControlled deletes the object named like o if t controls it.
func (r *CacheTenantReconciler) getAndDeleteIfControlled(ctx context.Context, t *cachev1alpha1.CacheTenant, o client.Object) error {
	if err := r.Get(ctx, client.ObjectKeyFromObject(o), o); err != nil {
		return client.IgnoreNotFound(err)
	}
	if !metav1.IsControlledBy(o, t) {
		return nil
	}
	return r.deleteIfControlled(ctx, o)
}

// deleteIfControlled deletes o, which the caller found controlled by the
// tenant, unless it was replaced meanwhile.
func (r *CacheTenantReconciler) deleteIfControlled(ctx context.Context, o client.Object) error {
	return client.IgnoreNotFound(r.Delete(ctx, o, client.Preconditions{UID: ptr.To(o.GetUID())}))
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
		return r.getAndDeleteIfControlled(ctx, t, &monitoringv1.PodMonitor{ObjectMeta: metav1.ObjectMeta{Namespace: t.Namespace, Name: gatewayPodMonitorName(t)}})
	}
	_, err = apply(ctx, r.Client, r.Scheme, t, buildGatewayPodMonitor(t, dc), &monitoringv1.PodMonitor{}, func(existing, desired *monitoringv1.PodMonitor) {
		existing.Spec = desired.Spec
	})
	return err
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
