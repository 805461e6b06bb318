package controllers

import (
	"slices"
	"strconv"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	"k8s.io/utils/ptr"

	cachev1alpha1 "github.com/distcache/distcache/api/v1alpha1"
)

func argValue(args []string, flag string) (string, bool) {
	for _, a := range args {
		if v, ok := strings.CutPrefix(a, flag+"="); ok {
			return v, true
		}
	}
	return "", false
}

func TestGatewayDeploymentIsPinnedToItsZone(t *testing.T) {
	tn, dc := testTenant(nil), testCache(nil)
	for _, tc := range []struct {
		zone, nodes, fallback string
	}{
		{"a", "https://c-a.ns.svc:8443", "b=https://c-b.ns.svc:8443"},
		{"b", "https://c-b.ns.svc:8443", "a=https://c-a.ns.svc:8443"},
	} {
		d := buildGatewayDeployment(tn, dc, tc.zone, "img:1", "h1")
		if d.Name != "ch-gateway-"+tc.zone || d.Namespace != "team" {
			t.Errorf("zone %s: Deployment %s/%s", tc.zone, d.Namespace, d.Name)
		}
		pod := d.Spec.Template.Spec
		terms := pod.Affinity.NodeAffinity.RequiredDuringSchedulingIgnoredDuringExecution.NodeSelectorTerms
		if len(terms) != 1 || !slices.ContainsFunc(terms[0].MatchExpressions, func(r corev1.NodeSelectorRequirement) bool {
			return r.Key == ZoneTopologyKey && slices.Equal(r.Values, []string{tc.zone})
		}) {
			t.Errorf("zone %s: node affinity %+v", tc.zone, terms)
		}
		args := pod.Containers[0].Args
		for flag, want := range map[string]string{"--zone": tc.zone, "--nodes": tc.nodes, "--fallback-nodes": tc.fallback, "--listen": ":8099"} {
			if got, _ := argValue(args, flag); got != want {
				t.Errorf("zone %s: %s = %q, want %q", tc.zone, flag, got, want)
			}
		}
		if d.Spec.Template.Labels[LabelZone] != tc.zone || d.Spec.Selector.MatchLabels[LabelZone] != tc.zone {
			t.Errorf("zone %s: pod labels %v, selector %v", tc.zone, d.Spec.Template.Labels, d.Spec.Selector.MatchLabels)
		}
	}
}

func TestGatewayDeploymentOneZoneHasNoFallback(t *testing.T) {
	dc := testCache(func(dc *cachev1alpha1.DistributedCache) { dc.Spec.Zones = dc.Spec.Zones[:1] })
	args := buildGatewayDeployment(testTenant(nil), dc, "a", "img", "h").Spec.Template.Spec.Containers[0].Args
	if v, ok := argValue(args, "--fallback-nodes"); ok {
		t.Errorf("--fallback-nodes=%s with a single zone", v)
	}
}

func TestGatewayDeploymentRunsRestrictedWithTheTenantsCertificate(t *testing.T) {
	d := buildGatewayDeployment(testTenant(nil), testCache(nil), "a", "img", "h")
	pod := d.Spec.Template.Spec
	c := pod.Containers[0]
	if sc := pod.SecurityContext; sc == nil || !*sc.RunAsNonRoot || sc.SeccompProfile == nil || sc.SeccompProfile.Type != corev1.SeccompProfileTypeRuntimeDefault {
		t.Errorf("pod security context %+v", pod.SecurityContext)
	}
	if sc := c.SecurityContext; sc == nil || *sc.AllowPrivilegeEscalation || !*sc.ReadOnlyRootFilesystem || !slices.Equal(sc.Capabilities.Drop, []corev1.Capability{"ALL"}) {
		t.Errorf("container security context %+v", c.SecurityContext)
	}
	if *pod.AutomountServiceAccountToken {
		t.Error("the gateway needs no API token")
	}
	if v := pod.Volumes[0].Secret; v == nil || v.SecretName != "ch-distcache-client" {
		t.Errorf("TLS volume %+v", pod.Volumes[0])
	}
	// The keys come from the credentials Secret, never as literal values.
	for _, e := range c.Env[:2] {
		if e.Value != "" || e.ValueFrom == nil || e.ValueFrom.SecretKeyRef.Name != "ch-s3-credentials" {
			t.Errorf("env %s = %+v", e.Name, e)
		}
	}
	if d.Spec.Strategy.RollingUpdate.MaxUnavailable.IntVal != 0 {
		t.Error("a rollout may take a zone's last gateway away")
	}
	if c.Lifecycle == nil || c.Lifecycle.PreStop == nil || c.Lifecycle.PreStop.Sleep == nil {
		t.Error("no preStop pause: a stopping gateway refuses requests its endpoints still send")
	}
	if d.Spec.Template.Annotations[AnnotationCredentialsHash] != "h" {
		t.Errorf("pod annotations %v", d.Spec.Template.Annotations)
	}
}

func TestGatewayMemoryFollowsThePageCache(t *testing.T) {
	for _, tc := range []struct {
		pageCache string
		limit     string
		buffers   int64
	}{
		{"256Mi", "640Mi", 64 << 20},
		{"4Gi", "6400Mi", 1 << 30},
		{"0", "320Mi", 64 << 20},
	} {
		tn := testTenant(func(t *cachev1alpha1.CacheTenant) {
			t.Spec.Gateway.PageCacheSize = ptr.To(resource.MustParse(tc.pageCache))
		})
		res := gatewayResources(tn.Spec.Gateway)
		want := resource.MustParse(tc.limit)
		if got := res.Limits[corev1.ResourceMemory]; got.Cmp(want) != 0 {
			t.Errorf("page cache %s: memory limit %s, want %s", tc.pageCache, got.String(), want.String())
		}
		if got := res.Requests[corev1.ResourceMemory]; got.Cmp(want) != 0 {
			t.Errorf("page cache %s: memory request %s, want the limit", tc.pageCache, got.String())
		}
		args := buildGatewayDeployment(tn, testCache(nil), "a", "img", "h").Spec.Template.Spec.Containers[0].Args
		if v, _ := argValue(args, "--read-buffer-bytes"); v != strconv.FormatInt(tc.buffers, 10) {
			t.Errorf("page cache %s: --read-buffer-bytes=%s, want %d", tc.pageCache, v, tc.buffers)
		}
	}
	given := corev1.ResourceRequirements{Limits: corev1.ResourceList{corev1.ResourceMemory: resource.MustParse("9Gi")}}
	tn := testTenant(func(t *cachev1alpha1.CacheTenant) { t.Spec.Gateway.Resources = &given })
	if got := gatewayResources(tn.Spec.Gateway); got.Limits.Memory().Cmp(resource.MustParse("9Gi")) != 0 {
		t.Errorf("spec.gateway.resources not used: %+v", got)
	}
}

func TestGatewayServiceKeepsClientsInTheirZone(t *testing.T) {
	s := buildGatewayService(testTenant(func(t *cachev1alpha1.CacheTenant) {
		t.Spec.Gateway.Service = cachev1alpha1.GatewayServiceSpec{Type: corev1.ServiceTypeLoadBalancer, Annotations: map[string]string{"lb": "internal"}}
	}))
	if s.Spec.TrafficDistribution == nil || *s.Spec.TrafficDistribution != corev1.ServiceTrafficDistributionPreferSameZone {
		t.Errorf("trafficDistribution %v", s.Spec.TrafficDistribution)
	}
	if s.Name != "ch-gateway" || s.Spec.Type != corev1.ServiceTypeLoadBalancer || s.Annotations["lb"] != "internal" {
		t.Errorf("Service %s type %s annotations %v", s.Name, s.Spec.Type, s.Annotations)
	}
	if _, zoned := s.Spec.Selector[LabelZone]; zoned || s.Spec.Selector[LabelInstance] != "ch-gateway" {
		t.Errorf("selector %v: must select every zone's gateways", s.Spec.Selector)
	}
	if GatewayEndpoint(testTenant(nil)) != "http://ch-gateway.team.svc:8099" {
		t.Errorf("endpoint %s", GatewayEndpoint(testTenant(nil)))
	}
}

func TestGatewayZones(t *testing.T) {
	dc := testCache(nil)
	for _, tc := range []struct {
		want           []string
		zones, missing []string
	}{
		{nil, []string{"a", "b"}, nil},
		{[]string{"b"}, []string{"b"}, nil},
		{[]string{"b", "c"}, []string{"b"}, []string{"c"}},
	} {
		tn := testTenant(func(t *cachev1alpha1.CacheTenant) { t.Spec.Gateway.Zones = tc.want })
		zones, missing := gatewayZones(tn, dc)
		if !slices.Equal(zones, tc.zones) || !slices.Equal(missing, tc.missing) {
			t.Errorf("zones %v: got %v missing %v, want %v missing %v", tc.want, zones, missing, tc.zones, tc.missing)
		}
	}
}

func TestGatewayReadiness(t *testing.T) {
	tn := testTenant(func(t *cachev1alpha1.CacheTenant) { t.Spec.Gateway.ReplicasPerZone = ptr.To[int32](2) })
	ready := []cachev1alpha1.GatewayZoneStatus{{Zone: "a", ReadyReplicas: 2}, {Zone: "b", ReadyReplicas: 2}}
	short := []cachev1alpha1.GatewayZoneStatus{{Zone: "a", ReadyReplicas: 2}, {Zone: "b", ReadyReplicas: 1}}
	for _, tc := range []struct {
		name          string
		tenant        tenantState
		missing       []string
		zones         []cachev1alpha1.GatewayZoneStatus
		why           string
		reason, inMsg string
	}{
		{"ready", tenantState{}, nil, ready, "", "", ""},
		{"zone missing", tenantState{}, []string{"c"}, ready, "", cachev1alpha1.ReasonZoneNotInCache, "spec.gateway.zones"},
		{"no certificate", tenantState{reason: cachev1alpha1.ReasonCertificatePending}, nil, short, "", cachev1alpha1.ReasonTenantNotReady, "CertificatePending"},
		{"zone short", tenantState{}, nil, short, "zone b: pod x: Unschedulable: 0/1 nodes", cachev1alpha1.ReasonGatewaysNotReady, "b 1/2; zone b: pod x: Unschedulable"},
	} {
		reason, msg := gatewayReadiness(tn, tc.tenant, tc.missing, tc.zones, tc.why)
		if reason != tc.reason || !strings.Contains(msg, tc.inMsg) {
			t.Errorf("%s: %q %q, want %q containing %q", tc.name, reason, msg, tc.reason, tc.inMsg)
		}
	}
}

func TestPodWaitReason(t *testing.T) {
	for _, tc := range []struct {
		pod  corev1.PodStatus
		want string
	}{
		{corev1.PodStatus{Conditions: []corev1.PodCondition{{Type: corev1.PodScheduled, Status: corev1.ConditionFalse, Reason: "Unschedulable", Message: "0/2 nodes match"}}},
			"Unschedulable: 0/2 nodes match"},
		{corev1.PodStatus{ContainerStatuses: []corev1.ContainerStatus{{State: corev1.ContainerState{Waiting: &corev1.ContainerStateWaiting{Reason: "ImagePullBackOff", Message: "no such image"}}}}},
			"ImagePullBackOff: no such image"},
		{corev1.PodStatus{}, ""},
	} {
		if got := podWaitReason(&corev1.Pod{Status: tc.pod}); got != tc.want {
			t.Errorf("podWaitReason = %q, want %q", got, tc.want)
		}
	}
}

func TestNewGatewayKeysAreRandomAndShapedLikeAWSKeys(t *testing.T) {
	seen := map[string]bool{}
	for range 100 {
		id, secret, err := newGatewayKeys()
		if err != nil {
			t.Fatal(err)
		}
		if len(id) != 20 || len(secret) != 40 || strings.ContainsAny(id+secret, "/+= ") {
			t.Fatalf("keys %q / (%d chars)", id, len(secret))
		}
		if seen[id] || seen[secret] {
			t.Fatal("a key repeated")
		}
		seen[id], seen[secret] = true, true
	}
}

func TestCredentialsHashChangesWithTheKeysOnly(t *testing.T) {
	a := map[string][]byte{CredentialsAccessKeyID: []byte("A"), CredentialsSecretAccessKey: []byte("S"), CredentialsEndpointURL: []byte("http://x")}
	b := map[string][]byte{CredentialsAccessKeyID: []byte("A"), CredentialsSecretAccessKey: []byte("S"), CredentialsEndpointURL: []byte("http://y")}
	c := map[string][]byte{CredentialsAccessKeyID: []byte("A"), CredentialsSecretAccessKey: []byte("T")}
	if credentialsHash(a) != credentialsHash(b) || credentialsHash(a) == credentialsHash(c) {
		t.Error("credentialsHash must follow the keys and nothing else")
	}
}

func TestGatewayPodMonitorLabelsSeriesWithTheCache(t *testing.T) {
	dc := testCache(func(dc *cachev1alpha1.DistributedCache) {
		dc.Spec.Monitoring.ServiceMonitor = cachev1alpha1.ServiceMonitorSpec{Enabled: true, Interval: "15s", Labels: map[string]string{"release": "prom"}}
	})
	pm := buildGatewayPodMonitor(testTenant(nil), dc)
	if pm.Labels["release"] != "prom" || pm.Labels[LabelManagedBy] != ManagedByValue {
		t.Errorf("labels %v", pm.Labels)
	}
	ep := pm.Spec.PodMetricsEndpoints[0]
	targets := map[string]string{}
	for _, r := range ep.RelabelConfigs {
		targets[r.TargetLabel] = string(r.SourceLabels[0])
	}
	want := map[string]string{
		"cache":           "__meta_kubernetes_pod_label_cache_distcache_io_cache",
		"cache_namespace": "__meta_kubernetes_pod_label_cache_distcache_io_cache_namespace",
		"zone":            "__meta_kubernetes_pod_label_cache_distcache_io_zone",
	}
	for k, v := range want {
		if targets[k] != v {
			t.Errorf("relabel to %s from %q, want %q", k, targets[k], v)
		}
	}
	if string(ep.Interval) != "15s" || *ep.Port != "metrics" {
		t.Errorf("endpoint %+v", ep)
	}
}
