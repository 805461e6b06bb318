package controllers

import (
	"fmt"
	"path"
	"strings"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	"k8s.io/utils/ptr"

	cachev1alpha1 "github.com/distcache/distcache/api/v1alpha1"
)

// The cache nodes' pod template (buildStatefulSet): the cachenode
// container and its flags, the volumes, security contexts and affinity.

// Paths inside the cachenode container.
const (
	dataDir      = "/var/lib/distcache"
	ringDir      = "/etc/distcache/ring"
	ringFileName = "ring.json"
	tlsDir       = "/etc/distcache/tls"
	tenantsDir   = "/etc/distcache/tenants"

	dataVolume    = "data"
	ringVolume    = "ring"
	tlsVolume     = "tls"
	tenantsVolume = "tenants"

	containerName = "cachenode"
)

// nodeArgs are the `cachenode serve` flags of a zone's nodes from the spec
// (docs/operations.md). The nodes watch their zone's ring document and the
// tenants file through the API server (--ring-configmap, --tenants-secret,
// allowed by the node Role); the mounted files are what they start with.
func nodeArgs(dc *cachev1alpha1.DistributedCache, zone string) []string {
	spec := &dc.Spec
	args := []string{
		"serve",
		fmt.Sprintf("--listen=:%d", APIPort),
		fmt.Sprintf("--metrics-listen=:%d", MetricsPort),
		"--data-dir=" + dataDir,
		"--ring-file=" + path.Join(ringDir, ringFileName),
		"--ring-configmap=" + dc.Namespace + "/" + ringConfigMapName(dc) + ":" + ringKey(zone),
		"--tls-cert=" + path.Join(tlsDir, corev1.TLSCertKey),
		"--tls-key=" + path.Join(tlsDir, corev1.TLSPrivateKeyKey),
		"--client-ca=" + path.Join(tlsDir, "ca.crt"),
		"--tenants-file=" + path.Join(tenantsDir, TenantsFileKey),
		"--tenants-secret=" + dc.Namespace + "/" + TenantsSecretName(dc) + ":" + TenantsFileKey,
	}
	if q := spec.ChunkSize; q != nil {
		args = append(args, "--chunk-size="+q.String())
	}
	if q := spec.DiskSize; q != nil {
		args = append(args, "--disk-bytes="+q.String())
	}
	if q := spec.MemorySize; q != nil {
		args = append(args, "--ram-bytes="+q.String())
	}
	if d := spec.ObjectMetadata.TTL; d != nil {
		args = append(args, "--meta-ttl="+d.Duration.String())
	}
	if spec.ObjectMetadata.Immutable {
		args = append(args, "--immutable")
	}
	s3 := &spec.S3
	if s3.Endpoint != "" {
		args = append(args, "--s3-endpoint="+s3.Endpoint)
	}
	if s3.Region != "" {
		args = append(args, "--s3-region="+s3.Region)
	}
	if s3.PathStyle {
		args = append(args, "--s3-path-style")
	}
	if n := s3.MaxConcurrentRequests; n != nil {
		args = append(args, fmt.Sprintf("--s3-max-concurrent=%d", *n))
	}
	if n := s3.MaxAttempts; n != nil {
		args = append(args, fmt.Sprintf("--s3-max-attempts=%d", *n))
	}
	if d := s3.RequestTimeout; d != nil {
		args = append(args, "--s3-timeout="+d.Duration.String())
	}
	switch s3.PutIfAbsent {
	case cachev1alpha1.PutIfAbsentEnabled:
		args = append(args, "--writeback-put-if-absent=true")
	case cachev1alpha1.PutIfAbsentDisabled:
		args = append(args, "--writeback-put-if-absent=false")
	}
	if spec.CrossZone == cachev1alpha1.CrossZoneOnMiss {
		// The other zones' rings are the other keys of the ring ConfigMap.
		zones := make([]string, 0, len(spec.Zones))
		for _, z := range spec.Zones {
			zones = append(zones, z.Name)
		}
		args = append(args, "--cross-zone=OnMiss", "--zones="+strings.Join(zones, ","))
	}
	return args
}

// nodeEnv: the pod's name (the node's ring member name), the default S3
// credentials from spec.s3.credentialsSecret, then the overrides' env.
func nodeEnv(dc *cachev1alpha1.DistributedCache, extra []corev1.EnvVar) []corev1.EnvVar {
	env := []corev1.EnvVar{podNameEnv()}
	if cs := dc.Spec.S3.CredentialsSecret; cs != nil {
		idKey, secretKey := cs.AccessKeyIDKey, cs.SecretAccessKeyKey
		if idKey == "" {
			idKey = "AWS_ACCESS_KEY_ID"
		}
		if secretKey == "" {
			secretKey = "AWS_SECRET_ACCESS_KEY"
		}
		ref := func(key string) *corev1.EnvVarSource {
			return &corev1.EnvVarSource{SecretKeyRef: &corev1.SecretKeySelector{
				LocalObjectReference: corev1.LocalObjectReference{Name: cs.Name}, Key: key,
			}}
		}
		env = append(env,
			corev1.EnvVar{Name: "AWS_ACCESS_KEY_ID", ValueFrom: ref(idKey)},
			corev1.EnvVar{Name: "AWS_SECRET_ACCESS_KEY", ValueFrom: ref(secretKey)})
	}
	return append(env, extra...)
}

// nodeUser is the uid and gid the cachenode container runs as.
func nodeUser(ov cachev1alpha1.PodTemplateOverrides) (uid, gid int64) {
	uid, gid = defaultNodeUser, -1
	if sc := ov.SecurityContext; sc != nil {
		if sc.RunAsUser != nil {
			uid = *sc.RunAsUser
		}
		if sc.RunAsGroup != nil {
			gid = *sc.RunAsGroup
		}
	}
	if sc := ov.ContainerSecurityContext; sc != nil {
		if sc.RunAsUser != nil {
			uid = *sc.RunAsUser
		}
		if sc.RunAsGroup != nil {
			gid = *sc.RunAsGroup
		}
	}
	if gid < 0 {
		gid = uid
	}
	return uid, gid
}

// nodePodSecurity is the cache pods' security context: the restricted
// Pod Security level's (restrictedPodSecurity), plus fsGroup so that the
// node's user can write a volume claim's filesystem (the kubelet changes
// its group only where the root's differs: a large disk tier is not walked
// on every start). The overrides' replace it whole, as for the gateways.
// In hostPath mode the pod still needs the privileged level: its init
// container runs as root and the volume is a hostPath (docs/operations.md,
// "Pod Security").
func nodePodSecurity(ov cachev1alpha1.PodTemplateOverrides) *corev1.PodSecurityContext {
	if ov.SecurityContext != nil {
		return ov.SecurityContext
	}
	sc := restrictedPodSecurity()
	sc.FSGroup = ptr.To[int64](defaultNodeUser)
	sc.FSGroupChangePolicy = ptr.To(corev1.FSGroupChangeOnRootMismatch)
	return sc
}

// buildInitContainers: in hostPath mode, one that creates the pod's
// directory on the host and gives it to the node's user (the kubelet makes
// hostPath directories owned by root, and fsGroup does not apply to them).
// It runs as root with CAP_CHOWN only.
func buildInitContainers(dc *cachev1alpha1.DistributedCache, image string, ov cachev1alpha1.PodTemplateOverrides) []corev1.Container {
	if dc.Spec.Storage.HostPath == nil {
		return nil
	}
	uid, gid := nodeUser(ov)
	const root = "/var/lib/distcache-host"
	return []corev1.Container{{
		Name:            "init-data-dir",
		Image:           image,
		ImagePullPolicy: dc.Spec.ImagePullPolicy,
		Args: []string{"init-data-dir", "--dir=" + root + "/$(POD_NAME)",
			fmt.Sprintf("--uid=%d", uid), fmt.Sprintf("--gid=%d", gid)},
		Env:          []corev1.EnvVar{podNameEnv()},
		VolumeMounts: []corev1.VolumeMount{{Name: dataVolume, MountPath: root}},
		SecurityContext: &corev1.SecurityContext{
			RunAsUser:                ptr.To[int64](0),
			RunAsNonRoot:             ptr.To(false),
			AllowPrivilegeEscalation: ptr.To(false),
			Capabilities:             &corev1.Capabilities{Drop: []corev1.Capability{"ALL"}, Add: []corev1.Capability{"CHOWN"}},
		},
		Resources: corev1.ResourceRequirements{
			Requests: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("10m"), corev1.ResourceMemory: resource.MustParse("16Mi")},
			Limits:   corev1.ResourceList{corev1.ResourceMemory: resource.MustParse("64Mi")},
		},
	}}
}

func buildContainer(dc *cachev1alpha1.DistributedCache, zone, image string, ov cachev1alpha1.PodTemplateOverrides) corev1.Container {
	dataMount := corev1.VolumeMount{Name: dataVolume, MountPath: dataDir}
	if dc.Spec.Storage.HostPath != nil {
		// Pods of one cache may share a node: each keeps its own directory,
		// stable across restarts since StatefulSet pod names are.
		dataMount.SubPathExpr = "$(POD_NAME)"
	}
	return corev1.Container{
		Name:            containerName,
		Image:           image,
		ImagePullPolicy: dc.Spec.ImagePullPolicy,
		Args:            nodeArgs(dc, zone),
		Env:             nodeEnv(dc, ov.Env),
		Ports: []corev1.ContainerPort{
			{Name: "api", ContainerPort: APIPort, Protocol: corev1.ProtocolTCP},
			{Name: "metrics", ContainerPort: MetricsPort, Protocol: corev1.ProtocolTCP},
		},
		ReadinessProbe:  metricsProbe("/readyz", 5, 2),
		LivenessProbe:   metricsProbe("/healthz", 5, 6),
		Resources:       dc.Spec.Resources,
		SecurityContext: containerSecurity(ov),
		VolumeMounts: []corev1.VolumeMount{
			dataMount,
			{Name: ringVolume, MountPath: ringDir, ReadOnly: true},
			{Name: tlsVolume, MountPath: tlsDir, ReadOnly: true},
			{Name: tenantsVolume, MountPath: tenantsDir, ReadOnly: true},
		},
	}
}

// buildVolumes: the disk tier per storage mode (a volume claim template
// needs no pod volume), the zone's ring document, the node certificate and
// the tenants file. ConfigMap and Secret volumes are mounted whole (no
// subPath) so the kubelet's updates reach the running node.
func buildVolumes(dc *cachev1alpha1.DistributedCache, zone string) []corev1.Volume {
	var vols []corev1.Volume
	st := &dc.Spec.Storage
	switch {
	case st.HostPath != nil:
		vols = append(vols, corev1.Volume{Name: dataVolume, VolumeSource: corev1.VolumeSource{HostPath: &corev1.HostPathVolumeSource{
			Path: path.Join(st.HostPath.Path, dc.Name), Type: ptr.To(corev1.HostPathDirectoryOrCreate),
		}}})
	case st.EmptyDir != nil:
		vols = append(vols, corev1.Volume{Name: dataVolume, VolumeSource: corev1.VolumeSource{EmptyDir: &corev1.EmptyDirVolumeSource{
			SizeLimit: st.EmptyDir.SizeLimit,
		}}})
	}
	return append(vols,
		corev1.Volume{Name: ringVolume, VolumeSource: corev1.VolumeSource{ConfigMap: &corev1.ConfigMapVolumeSource{
			LocalObjectReference: corev1.LocalObjectReference{Name: ringConfigMapName(dc)},
			Items:                []corev1.KeyToPath{{Key: ringKey(zone), Path: ringFileName}},
		}}},
		certificateVolume(NodeTLSSecretName(dc)),
		corev1.Volume{Name: tenantsVolume, VolumeSource: corev1.VolumeSource{Secret: &corev1.SecretVolumeSource{
			SecretName: TenantsSecretName(dc),
			Items:      []corev1.KeyToPath{{Key: TenantsFileKey, Path: TenantsFileKey}},
		}}},
	)
}

// buildAffinity: required node affinity to the zone (and the instance
// types, if any) and preferred anti-affinity between the cache's pods
// across hosts (zoneAffinity).
func buildAffinity(dc *cachev1alpha1.DistributedCache, zone string, extra *corev1.Affinity) *corev1.Affinity {
	ours := []corev1.NodeSelectorRequirement{{Key: ZoneTopologyKey, Operator: corev1.NodeSelectorOpIn, Values: []string{zone}}}
	if len(dc.Spec.InstanceTypes) > 0 {
		ours = append(ours, corev1.NodeSelectorRequirement{
			Key: InstanceTypeKey, Operator: corev1.NodeSelectorOpIn, Values: append([]string(nil), dc.Spec.InstanceTypes...),
		})
	}
	return zoneAffinity(ours, cacheLabels(dc), extra)
}
