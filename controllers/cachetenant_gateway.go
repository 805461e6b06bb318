package controllers

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"path"
	"slices"
	"strings"

	monitoringv1 "github.com/prometheus-operator/prometheus-operator/pkg/apis/monitoring/v1"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/utils/ptr"

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
// pure builders; cachetenant_gateway_reconcile.go writes them.

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
	gatewayTLSVolume     = "tls"
)

// Keys of the credentials Secret: the names AWS SDKs, the AWS CLI and
// ClickHouse's from_env read from the environment, so `envFrom` of the
// Secret is all a client needs.
const (
	CredentialsAccessKeyID     = "AWS_ACCESS_KEY_ID"
	CredentialsSecretAccessKey = "AWS_SECRET_ACCESS_KEY"
	CredentialsEndpointURL     = "AWS_ENDPOINT_URL"
	CredentialsRegion          = "AWS_REGION"
	// defaultClientRegion is what clients are told to sign for when the
	// gateway accepts any region: SDKs need one.
	defaultClientRegion = "us-east-1"
)

// GatewayServiceName names the tenant's gateway Service.
func GatewayServiceName(t *cachev1alpha1.CacheTenant) string { return t.Name + "-gateway" }

// GatewayDeploymentName names a zone's gateway Deployment (and its PDB).
func GatewayDeploymentName(t *cachev1alpha1.CacheTenant, zone string) string {
	return t.Name + "-gateway-" + zone
}

// GatewayCredentialsSecretName names the Secret of the S3 credentials.
func GatewayCredentialsSecretName(t *cachev1alpha1.CacheTenant) string {
	return t.Name + "-s3-credentials"
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
	l := gatewaySelectorLabels(t)
	if zone != "" {
		l[LabelZone] = zone
	}
	l[LabelComponent] = "gateway"
	l[LabelManagedBy] = ManagedByValue
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

// gatewayMemory is the memory the gateway container needs for a page cache
// of pageCache bytes: the page pool (1.25x the page cache), the read
// buffers of GetObjects in flight, and room for the Go runtime.
func gatewayMemory(pageCache int64) (limit, readBuffers int64) {
	readBuffers = max(64<<20, pageCache/4)
	return pageCache + pageCache/4 + readBuffers + 256<<20, readBuffers
}

// gatewayResources: spec.gateway.resources, or 500m CPU and memory sized
// from the page cache (request = limit: a gateway whose memory is taken
// back loses its page cache).
func gatewayResources(g *cachev1alpha1.GatewaySpec) corev1.ResourceRequirements {
	if g.Resources != nil {
		return *g.Resources.DeepCopy()
	}
	limit, _ := gatewayMemory(g.GatewayPageCacheBytes())
	mem := *resource.NewQuantity(limit, resource.BinarySI)
	return corev1.ResourceRequirements{
		Requests: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("500m"), corev1.ResourceMemory: mem},
		Limits:   corev1.ResourceList{corev1.ResourceMemory: mem},
	}
}

// gatewayArgs are the `cachenode gateway` flags of a zone's gateways: the
// zone's nodes first, the other zones' as fallback (cachenode
// gateway --help).
func gatewayArgs(t *cachev1alpha1.CacheTenant, dc *cachev1alpha1.DistributedCache, zone string) []string {
	g := t.Spec.Gateway
	_, readBuffers := gatewayMemory(g.GatewayPageCacheBytes())
	args := []string{
		"gateway",
		fmt.Sprintf("--listen=:%d", g.GatewayPort()),
		fmt.Sprintf("--metrics-listen=:%d", GatewayMetricsPort),
		"--zone=" + zone,
		"--nodes=" + zoneNodesURL(dc, zone),
	}
	var fallback []string
	for _, z := range dc.Spec.Zones {
		if z.Name != zone {
			fallback = append(fallback, z.Name+"="+zoneNodesURL(dc, z.Name))
		}
	}
	if len(fallback) > 0 {
		args = append(args, "--fallback-nodes="+strings.Join(fallback, ","))
	}
	args = append(args,
		"--tls-cert="+path.Join(tlsDir, corev1.TLSCertKey),
		"--tls-key="+path.Join(tlsDir, corev1.TLSPrivateKeyKey),
		"--ca="+path.Join(tlsDir, "ca.crt"),
		"--domain="+strings.Join(gatewayDomains(t), ","),
		fmt.Sprintf("--page-cache-bytes=%d", g.GatewayPageCacheBytes()),
		fmt.Sprintf("--read-buffer-bytes=%d", readBuffers),
	)
	if g.Region != "" {
		args = append(args, "--region="+g.Region)
	}
	return args
}

// gatewayEnv: the keys clients sign with (from the credentials Secret, so
// the keys never appear in the Deployment), GOMEMLIMIT at 90% of the
// memory limit, then the overrides' env.
func gatewayEnv(t *cachev1alpha1.CacheTenant, res corev1.ResourceRequirements, extra []corev1.EnvVar) []corev1.EnvVar {
	ref := func(key string) *corev1.EnvVarSource {
		return &corev1.EnvVarSource{SecretKeyRef: &corev1.SecretKeySelector{
			LocalObjectReference: corev1.LocalObjectReference{Name: GatewayCredentialsSecretName(t)}, Key: key,
		}}
	}
	env := []corev1.EnvVar{
		{Name: "DISTCACHE_ACCESS_KEY", ValueFrom: ref(CredentialsAccessKeyID)},
		{Name: "DISTCACHE_SECRET_KEY", ValueFrom: ref(CredentialsSecretAccessKey)},
	}
	if q, ok := res.Limits[corev1.ResourceMemory]; ok {
		env = append(env, corev1.EnvVar{Name: "GOMEMLIMIT", Value: fmt.Sprintf("%d", q.Value()/10*9)})
	}
	return append(env, extra...)
}

// restrictedPodSecurity and restrictedContainerSecurity meet the
// restricted Pod Security level (gateways and cache nodes: the
// restricted-level table test in podsecurity_test.go); the overrides
// replace them whole.
func restrictedPodSecurity() *corev1.PodSecurityContext {
	return &corev1.PodSecurityContext{
		RunAsNonRoot: ptr.To(true), RunAsUser: ptr.To[int64](defaultNodeUser), RunAsGroup: ptr.To[int64](defaultNodeUser),
		SeccompProfile: &corev1.SeccompProfile{Type: corev1.SeccompProfileTypeRuntimeDefault},
	}
}

func restrictedContainerSecurity() *corev1.SecurityContext {
	return &corev1.SecurityContext{
		AllowPrivilegeEscalation: ptr.To(false), ReadOnlyRootFilesystem: ptr.To(true),
		Capabilities: &corev1.Capabilities{Drop: []corev1.Capability{"ALL"}},
	}
}

// buildGatewayDeployment is the Deployment <tenant>-gateway-<zone>: the
// zone's gateways, pinned to the zone, spread over hosts, rolled one
// surge pod at a time (never fewer ready than replicasPerZone); each pod
// leaves the Service's endpoints before it stops listening (preStop).
// credentialsHash is credentialsHash of the credentials Secret.
func buildGatewayDeployment(t *cachev1alpha1.CacheTenant, dc *cachev1alpha1.DistributedCache, zone, image, credentialsHash string) *appsv1.Deployment {
	g := t.Spec.Gateway
	var ov cachev1alpha1.PodTemplateOverrides
	if g.PodTemplate != nil {
		ov = *g.PodTemplate
	}
	podLabels := mergeMaps(ov.Metadata.Labels, gatewayLabels(t, zone))
	podAnnotations := mergeMaps(ov.Metadata.Annotations, map[string]string{AnnotationCredentialsHash: credentialsHash})
	podSecurity, containerSecurity := restrictedPodSecurity(), restrictedContainerSecurity()
	if ov.SecurityContext != nil {
		podSecurity = ov.SecurityContext
	}
	if ov.ContainerSecurityContext != nil {
		containerSecurity = ov.ContainerSecurityContext
	}
	grace := int64(30)
	if ov.TerminationGracePeriodSeconds != nil {
		grace = *ov.TerminationGracePeriodSeconds
	}
	res := gatewayResources(g)
	probe := func(path string, period, failures int32) *corev1.Probe {
		return &corev1.Probe{
			ProbeHandler: corev1.ProbeHandler{HTTPGet: &corev1.HTTPGetAction{
				Path: path, Port: intstr.FromString("metrics"), Scheme: corev1.URISchemeHTTP,
			}},
			PeriodSeconds: period, TimeoutSeconds: 2, FailureThreshold: failures,
		}
	}
	container := corev1.Container{
		Name:            gatewayContainerName,
		Image:           image,
		ImagePullPolicy: dc.Spec.ImagePullPolicy,
		Args:            gatewayArgs(t, dc, zone),
		Env:             gatewayEnv(t, res, ov.Env),
		Ports: []corev1.ContainerPort{
			{Name: "s3", ContainerPort: g.GatewayPort(), Protocol: corev1.ProtocolTCP},
			{Name: "metrics", ContainerPort: GatewayMetricsPort, Protocol: corev1.ProtocolTCP},
		},
		ReadinessProbe: probe("/readyz", 2, 2),
		LivenessProbe:  probe("/healthz", 10, 6),
		// Endpoints stop sending new requests before the gateway stops
		// accepting them; it then finishes those in flight (--shutdown-grace).
		Lifecycle:       &corev1.Lifecycle{PreStop: &corev1.LifecycleHandler{Sleep: &corev1.SleepAction{Seconds: 5}}},
		Resources:       res,
		SecurityContext: containerSecurity,
		VolumeMounts:    []corev1.VolumeMount{{Name: gatewayTLSVolume, MountPath: tlsDir, ReadOnly: true}},
	}
	zoneReq := []corev1.NodeSelectorRequirement{{Key: ZoneTopologyKey, Operator: corev1.NodeSelectorOpIn, Values: []string{zone}}}
	return &appsv1.Deployment{
		ObjectMeta: metav1.ObjectMeta{Name: GatewayDeploymentName(t, zone), Namespace: t.Namespace, Labels: gatewayLabels(t, zone)},
		Spec: appsv1.DeploymentSpec{
			Replicas: ptr.To(g.GatewayReplicasPerZone()),
			Selector: &metav1.LabelSelector{MatchLabels: gatewayZoneSelectorLabels(t, zone)},
			Strategy: appsv1.DeploymentStrategy{
				Type: appsv1.RollingUpdateDeploymentStrategyType,
				RollingUpdate: &appsv1.RollingUpdateDeployment{
					MaxUnavailable: ptr.To(intstr.FromInt32(0)), MaxSurge: ptr.To(intstr.FromInt32(1)),
				},
			},
			Template: corev1.PodTemplateSpec{
				ObjectMeta: metav1.ObjectMeta{Labels: podLabels, Annotations: podAnnotations},
				Spec: corev1.PodSpec{
					Containers: []corev1.Container{container},
					Volumes: []corev1.Volume{{Name: gatewayTLSVolume, VolumeSource: corev1.VolumeSource{Secret: &corev1.SecretVolumeSource{
						SecretName: t.CertificateSecretName(),
						Items: []corev1.KeyToPath{
							{Key: corev1.TLSCertKey, Path: corev1.TLSCertKey},
							{Key: corev1.TLSPrivateKeyKey, Path: corev1.TLSPrivateKeyKey},
							{Key: "ca.crt", Path: "ca.crt"},
						},
					}}}},
					Affinity:                      zoneAffinity(zoneReq, gatewayZoneSelectorLabels(t, zone), ov.Affinity),
					NodeSelector:                  g.NodeSelector,
					Tolerations:                   g.Tolerations,
					ImagePullSecrets:              dc.Spec.ImagePullSecrets,
					PriorityClassName:             ov.PriorityClassName,
					ServiceAccountName:            ov.ServiceAccountName,
					AutomountServiceAccountToken:  ptr.To(false), // the gateway never talks to the API server
					SecurityContext:               podSecurity,
					TopologySpreadConstraints:     ov.TopologySpreadConstraints,
					TerminationGracePeriodSeconds: &grace,
				},
			},
		},
	}
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

// credentialsHash is a short hash of the keys in a credentials Secret, for
// the pod template: it changes when the keys do and tells nothing of them.
func credentialsHash(data map[string][]byte) string {
	sum := sha256.Sum256([]byte(string(data[CredentialsAccessKeyID]) + "\x00" + string(data[CredentialsSecretAccessKey])))
	return hex.EncodeToString(sum[:8])
}
