package controllers

import (
	"reflect"
	"slices"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	cachev1alpha1 "github.com/distcache/distcache/api/v1alpha1"
)

func envNames(env []corev1.EnvVar) []string {
	var out []string
	for _, e := range env {
		out = append(out, e.Name)
	}
	return out
}

func volume(vols []corev1.Volume, name string) *corev1.Volume {
	for i := range vols {
		if vols[i].Name == name {
			return &vols[i]
		}
	}
	return nil
}

func TestBuildStatefulSet(t *testing.T) {
	tests := []struct {
		name  string
		dc    *cachev1alpha1.DistributedCache
		check func(t *testing.T, dc *cachev1alpha1.DistributedCache)
	}{
		{
			name: "emptyDir cache: names, selector, ports, probes, args, volumes",
			dc:   testCache(nil),
			check: func(t *testing.T, dc *cachev1alpha1.DistributedCache) {
				s := buildStatefulSet(dc, "a", "img:1", "h1")
				if s.Name != "c-a" || s.Namespace != "ns" || s.Spec.ServiceName != "c-a" || *s.Spec.Replicas != 3 {
					t.Fatalf("name/service/replicas: %s %s %s %d", s.Name, s.Namespace, s.Spec.ServiceName, *s.Spec.Replicas)
				}
				want := map[string]string{LabelName: NodeAppName, LabelInstance: "c", LabelZone: "a"}
				if !reflect.DeepEqual(s.Spec.Selector.MatchLabels, want) {
					t.Fatalf("selector %v", s.Spec.Selector.MatchLabels)
				}
				for k, v := range want {
					if s.Spec.Template.Labels[k] != v {
						t.Fatalf("pod label %s missing", k)
					}
				}
				if s.Spec.Template.Annotations[AnnotationInputHash] != "h1" {
					t.Fatal("input hash annotation missing")
				}
				c := s.Spec.Template.Spec.Containers[0]
				if c.Image != "img:1" || c.Args[0] != "serve" {
					t.Fatalf("image/args: %s %v", c.Image, c.Args)
				}
				for _, a := range []string{"--chunk-size=4Mi", "--disk-bytes=10Gi", "--ram-bytes=1Gi", "--meta-ttl=30s",
					"--s3-region=us-east-1", "--s3-max-concurrent=64", "--ring-file=/etc/distcache/ring/ring.json",
					"--tls-cert=/etc/distcache/tls/tls.crt", "--tls-key=/etc/distcache/tls/tls.key",
					"--client-ca=/etc/distcache/tls/ca.crt", "--tenants-file=/etc/distcache/tenants/tenants.yaml",
					"--ring-configmap=ns/c-ring:a.json", "--tenants-secret=ns/c-tenants:tenants.yaml"} {
					if !slices.Contains(c.Args, a) {
						t.Errorf("args lack %s: %v", a, c.Args)
					}
				}
				if slices.Contains(c.Args, "--immutable") || slices.Contains(c.Args, "--s3-path-style") {
					t.Errorf("unexpected flags: %v", c.Args)
				}
				if p := s.Spec.Template.Spec; p.ServiceAccountName != "c-node" || p.AutomountServiceAccountToken == nil || !*p.AutomountServiceAccountToken {
					t.Errorf("service account %q, automount %v", p.ServiceAccountName, p.AutomountServiceAccountToken)
				}
				if !reflect.DeepEqual(envNames(c.Env), []string{"POD_NAME"}) || c.Env[0].ValueFrom.FieldRef.FieldPath != "metadata.name" {
					t.Errorf("env %v", c.Env)
				}
				if len(c.Ports) != 2 || c.Ports[0].ContainerPort != 8443 || c.Ports[1].ContainerPort != 9090 {
					t.Errorf("ports %v", c.Ports)
				}
				if c.ReadinessProbe.HTTPGet.Path != "/readyz" || c.LivenessProbe.HTTPGet.Path != "/healthz" ||
					c.ReadinessProbe.HTTPGet.Port.StrVal != "metrics" {
					t.Errorf("probes %v %v", c.ReadinessProbe, c.LivenessProbe)
				}
				vols := s.Spec.Template.Spec.Volumes
				if v := volume(vols, dataVolume); v == nil || v.EmptyDir == nil {
					t.Errorf("data volume %v", v)
				}
				if v := volume(vols, ringVolume); v == nil || v.ConfigMap.Name != "c-ring" || v.ConfigMap.Items[0].Key != "a.json" {
					t.Errorf("ring volume %v", v)
				}
				if v := volume(vols, tlsVolume); v == nil || v.Secret.SecretName != "c-node-tls" {
					t.Errorf("tls volume %v", v)
				}
				if len(s.Spec.VolumeClaimTemplates) != 0 {
					t.Error("emptyDir cache has claim templates")
				}
				aff := s.Spec.Template.Spec.Affinity
				terms := aff.NodeAffinity.RequiredDuringSchedulingIgnoredDuringExecution.NodeSelectorTerms
				if len(terms) != 1 || len(terms[0].MatchExpressions) != 1 || terms[0].MatchExpressions[0].Key != ZoneTopologyKey ||
					terms[0].MatchExpressions[0].Values[0] != "a" {
					t.Errorf("node affinity %v", terms)
				}
				anti := aff.PodAntiAffinity.PreferredDuringSchedulingIgnoredDuringExecution
				if len(anti) != 1 || anti[0].PodAffinityTerm.TopologyKey != HostnameKey {
					t.Errorf("anti-affinity %v", anti)
				}
			},
		},
		{
			name: "hostPath, instance types, credentials, S3 options, overrides",
			dc: testCache(func(dc *cachev1alpha1.DistributedCache) {
				dc.Spec.Storage = cachev1alpha1.StorageSpec{HostPath: &cachev1alpha1.HostPathStorage{Path: "/mnt/nvme"}}
				dc.Spec.InstanceTypes = []string{"i4i.2xlarge"}
				dc.Spec.NodeSelector = map[string]string{"pool": "cache"}
				dc.Spec.Tolerations = []corev1.Toleration{{Key: "dedicated", Operator: corev1.TolerationOpExists}}
				dc.Spec.ObjectMetadata.Immutable = true
				dc.Spec.S3.Endpoint, dc.Spec.S3.PathStyle = "http://minio:9000", true
				dc.Spec.S3.CredentialsSecret = &cachev1alpha1.CredentialsSecretReference{Name: "s3", AccessKeyIDKey: "id", SecretAccessKeyKey: "secret"}
				dc.Spec.PodTemplate = &cachev1alpha1.PodTemplateOverrides{
					Env:      []corev1.EnvVar{{Name: "DISTCACHE_LOG_LEVEL", Value: "debug"}},
					Metadata: cachev1alpha1.PodMetadata{Labels: map[string]string{"team": "x", LabelZone: "evil"}},
					Affinity: &corev1.Affinity{NodeAffinity: &corev1.NodeAffinity{RequiredDuringSchedulingIgnoredDuringExecution: &corev1.NodeSelector{
						NodeSelectorTerms: []corev1.NodeSelectorTerm{{MatchExpressions: []corev1.NodeSelectorRequirement{{Key: "disk", Operator: corev1.NodeSelectorOpExists}}}},
					}}},
				}
			}),
			check: func(t *testing.T, dc *cachev1alpha1.DistributedCache) {
				s := buildStatefulSet(dc, "b", "img", "h")
				p := s.Spec.Template.Spec
				c := p.Containers[0]
				for _, a := range []string{"--immutable", "--s3-endpoint=http://minio:9000", "--s3-path-style", "--ring-configmap=ns/c-ring:b.json"} {
					if !slices.Contains(c.Args, a) {
						t.Errorf("args lack %s", a)
					}
				}
				if !reflect.DeepEqual(envNames(c.Env), []string{"POD_NAME", "AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY", "DISTCACHE_LOG_LEVEL"}) {
					t.Errorf("env %v", envNames(c.Env))
				}
				if r := c.Env[1].ValueFrom.SecretKeyRef; r.Name != "s3" || r.Key != "id" {
					t.Errorf("access key ref %v", r)
				}
				if v := volume(p.Volumes, dataVolume); v == nil || v.HostPath == nil || v.HostPath.Path != "/mnt/nvme/c" {
					t.Errorf("hostPath volume %v", v)
				}
				if c.VolumeMounts[0].SubPathExpr != "$(POD_NAME)" {
					t.Errorf("hostPath mount %v", c.VolumeMounts[0])
				}
				// The kubelet creates the pod's directory owned by root; an
				// init container hands it to the node's user.
				if len(p.InitContainers) != 1 {
					t.Fatalf("init containers %v", p.InitContainers)
				}
				ic := p.InitContainers[0]
				if !reflect.DeepEqual(ic.Args, []string{"init-data-dir", "--dir=/var/lib/distcache-host/$(POD_NAME)", "--uid=65532", "--gid=65532"}) ||
					ic.VolumeMounts[0].Name != dataVolume || ic.VolumeMounts[0].SubPathExpr != "" {
					t.Errorf("init container %v", ic)
				}
				if caps := ic.SecurityContext.Capabilities; *ic.SecurityContext.RunAsUser != 0 || !reflect.DeepEqual(caps.Add, []corev1.Capability{"CHOWN"}) {
					t.Errorf("init container security %v", ic.SecurityContext)
				}
				if s.Spec.Template.Labels["team"] != "x" || s.Spec.Template.Labels[LabelZone] != "b" {
					t.Errorf("pod labels %v", s.Spec.Template.Labels)
				}
				if p.NodeSelector["pool"] != "cache" || len(p.Tolerations) != 1 {
					t.Errorf("nodeSelector/tolerations %v %v", p.NodeSelector, p.Tolerations)
				}
				exprs := p.Affinity.NodeAffinity.RequiredDuringSchedulingIgnoredDuringExecution.NodeSelectorTerms[0].MatchExpressions
				var keys []string
				for _, e := range exprs {
					keys = append(keys, e.Key)
				}
				if !reflect.DeepEqual(keys, []string{ZoneTopologyKey, InstanceTypeKey, "disk"}) || exprs[1].Values[0] != "i4i.2xlarge" {
					t.Errorf("node affinity %v", exprs)
				}
			},
		},
		{
			name: "volume claim template",
			dc: testCache(func(dc *cachev1alpha1.DistributedCache) {
				dc.Spec.Storage = cachev1alpha1.StorageSpec{VolumeClaimTemplate: &cachev1alpha1.VolumeClaimTemplateStorage{
					StorageClassName: ptr.To("local"), Size: resource.MustParse("20Gi")}}
			}),
			check: func(t *testing.T, dc *cachev1alpha1.DistributedCache) {
				s := buildStatefulSet(dc, "a", "img", "h")
				if volume(s.Spec.Template.Spec.Volumes, dataVolume) != nil {
					t.Error("pod volume named data shadows the claim template")
				}
				v := s.Spec.VolumeClaimTemplates
				if len(v) != 1 || v[0].Name != dataVolume || *v[0].Spec.StorageClassName != "local" ||
					v[0].Spec.Resources.Requests.Storage().String() != "20Gi" {
					t.Errorf("claim templates %v", v)
				}
			},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			before := tt.dc.DeepCopy()
			tt.check(t, tt.dc)
			if !reflect.DeepEqual(before, tt.dc) {
				t.Fatal("the builder changed the cache")
			}
		})
	}
}

func TestPodTemplateInputHash(t *testing.T) {
	base := testCache(nil)
	h0, err := podTemplateInputHash(base, "img")
	if err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name   string
		edit   func(dc *cachev1alpha1.DistributedCache)
		image  string
		change bool
	}{
		{"replicas do not roll pods", func(dc *cachev1alpha1.DistributedCache) { dc.Spec.Replicas = ptr.To[int32](7) }, "img", false},
		{"PDB does not roll pods", func(dc *cachev1alpha1.DistributedCache) {
			dc.Spec.PodDisruptionBudget.MaxUnavailable = ptr.To[int32](2)
		}, "img", false},
		{"memory size rolls pods", func(dc *cachev1alpha1.DistributedCache) { dc.Spec.MemorySize = ptr.To(resource.MustParse("2Gi")) }, "img", true},
		{"the image rolls pods", nil, "img2", true},
		{"crossZone Never (the default, as before the field) does not roll pods", func(dc *cachev1alpha1.DistributedCache) {
			dc.Spec.CrossZone = cachev1alpha1.CrossZoneNever
		}, "img", false},
		{"crossZone OnMiss rolls pods", func(dc *cachev1alpha1.DistributedCache) { dc.Spec.CrossZone = cachev1alpha1.CrossZoneOnMiss }, "img", true},
		{"a new zone does not roll the other zones' pods", func(dc *cachev1alpha1.DistributedCache) {
			dc.Spec.Zones = append(dc.Spec.Zones, cachev1alpha1.ZoneSpec{Name: "c"})
		}, "img", false},
		{"tenants' namespace selector does not roll pods", func(dc *cachev1alpha1.DistributedCache) {
			dc.Spec.TenantNamespaceSelector = &metav1.LabelSelector{MatchLabels: map[string]string{"team": "x"}}
		}, "img", false},
		{"monitoring does not roll pods", func(dc *cachev1alpha1.DistributedCache) { dc.Spec.Monitoring.ServiceMonitor.Enabled = true }, "img", false},
		{"tolerations roll pods", func(dc *cachev1alpha1.DistributedCache) {
			dc.Spec.Tolerations = []corev1.Toleration{{Key: "nvme", Operator: corev1.TolerationOpExists}}
		}, "img", true},
		{"the S3 endpoint rolls pods", func(dc *cachev1alpha1.DistributedCache) { dc.Spec.S3.Endpoint = "https://s3.example" }, "img", true},
		{"putIfAbsent Auto (as omitted, as before the field) does not roll pods", func(dc *cachev1alpha1.DistributedCache) {
			dc.Spec.S3.PutIfAbsent = cachev1alpha1.PutIfAbsentAuto
		}, "img", false},
		{"putIfAbsent Enabled rolls pods", func(dc *cachev1alpha1.DistributedCache) {
			dc.Spec.S3.PutIfAbsent = cachev1alpha1.PutIfAbsentEnabled
		}, "img", true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			dc := base.DeepCopy()
			if tt.edit != nil {
				tt.edit(dc)
			}
			h, err := podTemplateInputHash(dc, tt.image)
			if err != nil {
				t.Fatal(err)
			}
			if (h != h0) != tt.change {
				t.Fatalf("hash changed: %v, want %v", h != h0, tt.change)
			}
		})
	}
}

func TestNodeArgsCrossZone(t *testing.T) {
	has := func(args []string, want string) bool { return slices.Contains(args, want) }
	never := nodeArgs(testCache(func(dc *cachev1alpha1.DistributedCache) { dc.Spec.CrossZone = cachev1alpha1.CrossZoneNever }), "a")
	if slices.ContainsFunc(never, func(a string) bool { return strings.HasPrefix(a, "--cross-zone") || strings.HasPrefix(a, "--zones") }) {
		t.Errorf("Never: %v", never)
	}
	onMiss := nodeArgs(testCache(func(dc *cachev1alpha1.DistributedCache) { dc.Spec.CrossZone = cachev1alpha1.CrossZoneOnMiss }), "a")
	if !has(onMiss, "--cross-zone=OnMiss") || !has(onMiss, "--zones=a,b") {
		t.Errorf("OnMiss: %v", onMiss)
	}
}

// spec.s3.putIfAbsent: Enabled and Disabled say so to the nodes; Auto, or
// nothing, leaves their default (on for AWS S3 only).
func TestNodeArgsPutIfAbsent(t *testing.T) {
	for mode, want := range map[cachev1alpha1.PutIfAbsentMode]string{
		"": "", cachev1alpha1.PutIfAbsentAuto: "",
		cachev1alpha1.PutIfAbsentEnabled:  "--writeback-put-if-absent=true",
		cachev1alpha1.PutIfAbsentDisabled: "--writeback-put-if-absent=false",
	} {
		args := nodeArgs(testCache(func(dc *cachev1alpha1.DistributedCache) { dc.Spec.S3.PutIfAbsent = mode }), "a")
		var got string
		for _, a := range args {
			if strings.HasPrefix(a, "--writeback-put-if-absent") {
				got = a
			}
		}
		if got != want {
			t.Errorf("putIfAbsent %q: %q, want %q", mode, got, want)
		}
	}
}
