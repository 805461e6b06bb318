package controllers

import (
	"fmt"
	"path"
	"strings"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/utils/ptr"

	cachev1alpha1 "github.com/distcache/distcache/api/v1alpha1"
)

// The gateways' Deployment, one per zone: the gateway container, its flags
// and its memory sized from the page cache.

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
	podSecurity := restrictedPodSecurity()
	if ov.SecurityContext != nil {
		podSecurity = ov.SecurityContext
	}
	grace := int64(30)
	if ov.TerminationGracePeriodSeconds != nil {
		grace = *ov.TerminationGracePeriodSeconds
	}
	res := gatewayResources(g)
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
		ReadinessProbe: metricsProbe("/readyz", 2, 2),
		LivenessProbe:  metricsProbe("/healthz", 10, 6),
		// Endpoints stop sending new requests before the gateway stops
		// accepting them; it then finishes those in flight (--shutdown-grace).
		Lifecycle:       &corev1.Lifecycle{PreStop: &corev1.LifecycleHandler{Sleep: &corev1.SleepAction{Seconds: 5}}},
		Resources:       res,
		SecurityContext: containerSecurity(ov),
		VolumeMounts:    []corev1.VolumeMount{{Name: tlsVolume, MountPath: tlsDir, ReadOnly: true}},
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
					Containers:                    []corev1.Container{container},
					Volumes:                       []corev1.Volume{certificateVolume(t.CertificateSecretName())},
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
