package controllers

import (
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/utils/ptr"

	cachev1alpha1 "github.com/distcache/distcache/api/v1alpha1"
)

// Pod template pieces the cache nodes (distributedcache_pod.go) and the
// gateways (cachetenant_gateway_deployment.go) share.

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

// defaultNodeUser is the user of the cachenode image (distroless nonroot).
const defaultNodeUser = 65532

// containerSecurity is the security context of the cachenode container of
// a node or a gateway: the restricted level's (no privilege escalation, no
// capabilities, a read-only root filesystem: a node writes its data
// directory only, a gateway nothing), or the overrides'.
func containerSecurity(ov cachev1alpha1.PodTemplateOverrides) *corev1.SecurityContext {
	if ov.ContainerSecurityContext != nil {
		return ov.ContainerSecurityContext
	}
	return restrictedContainerSecurity()
}

// metricsProbe is an HTTP probe of path on the container's "metrics" port.
func metricsProbe(path string, period, failures int32) *corev1.Probe {
	return &corev1.Probe{
		ProbeHandler: corev1.ProbeHandler{HTTPGet: &corev1.HTTPGetAction{
			Path: path, Port: intstr.FromString("metrics"), Scheme: corev1.URISchemeHTTP,
		}},
		PeriodSeconds: period, TimeoutSeconds: 2, FailureThreshold: failures,
	}
}

// podNameEnv is POD_NAME, the pod's name.
func podNameEnv() corev1.EnvVar {
	return corev1.EnvVar{
		Name:      "POD_NAME",
		ValueFrom: &corev1.EnvVarSource{FieldRef: &corev1.ObjectFieldSelector{APIVersion: "v1", FieldPath: "metadata.name"}},
	}
}

// certificateVolume is the volume tlsVolume of the certificate Secret
// secret: the certificate, its key and the trust bundle, mounted at tlsDir.
func certificateVolume(secret string) corev1.Volume {
	return corev1.Volume{Name: tlsVolume, VolumeSource: corev1.VolumeSource{Secret: &corev1.SecretVolumeSource{
		SecretName: secret,
		Items: []corev1.KeyToPath{
			{Key: corev1.TLSCertKey, Path: corev1.TLSCertKey},
			{Key: corev1.TLSPrivateKeyKey, Path: corev1.TLSPrivateKeyKey},
			{Key: caCertKey, Path: caCertKey},
		},
	}}}
}

// zoneAffinity: the required node requirements ours (a zone, instance
// types), ANDed into every required term of the overrides extra;
// preferred anti-affinity across hosts between the pods spread selects;
// the overrides' other terms added.
func zoneAffinity(ours []corev1.NodeSelectorRequirement, spread map[string]string, extra *corev1.Affinity) *corev1.Affinity {
	extra = extra.DeepCopy()
	if extra == nil {
		extra = &corev1.Affinity{}
	}
	terms := []corev1.NodeSelectorTerm{{MatchExpressions: ours}}
	na := extra.NodeAffinity
	if na != nil && na.RequiredDuringSchedulingIgnoredDuringExecution != nil && len(na.RequiredDuringSchedulingIgnoredDuringExecution.NodeSelectorTerms) > 0 {
		terms = na.RequiredDuringSchedulingIgnoredDuringExecution.NodeSelectorTerms
		for i := range terms {
			terms[i].MatchExpressions = append(append([]corev1.NodeSelectorRequirement(nil), ours...), terms[i].MatchExpressions...)
		}
	}
	aff := &corev1.Affinity{
		NodeAffinity: &corev1.NodeAffinity{
			RequiredDuringSchedulingIgnoredDuringExecution: &corev1.NodeSelector{NodeSelectorTerms: terms},
		},
		PodAntiAffinity: &corev1.PodAntiAffinity{
			PreferredDuringSchedulingIgnoredDuringExecution: []corev1.WeightedPodAffinityTerm{{
				Weight: 100,
				PodAffinityTerm: corev1.PodAffinityTerm{
					TopologyKey:   HostnameKey,
					LabelSelector: &metav1.LabelSelector{MatchLabels: spread},
				},
			}},
		},
		PodAffinity: extra.PodAffinity,
	}
	if na != nil {
		aff.NodeAffinity.PreferredDuringSchedulingIgnoredDuringExecution = na.PreferredDuringSchedulingIgnoredDuringExecution
	}
	if pa := extra.PodAntiAffinity; pa != nil {
		aff.PodAntiAffinity.PreferredDuringSchedulingIgnoredDuringExecution = append(aff.PodAntiAffinity.PreferredDuringSchedulingIgnoredDuringExecution, pa.PreferredDuringSchedulingIgnoredDuringExecution...)
		aff.PodAntiAffinity.RequiredDuringSchedulingIgnoredDuringExecution = pa.RequiredDuringSchedulingIgnoredDuringExecution
	}
	return aff
}
