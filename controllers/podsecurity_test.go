package controllers

import (
	"reflect"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	"k8s.io/pod-security-admission/api"
	"k8s.io/pod-security-admission/policy"
	"k8s.io/utils/ptr"

	cachev1alpha1 "github.com/distcache/distcache/api/v1alpha1"
)

// podSecurityViolations evaluates a pod template against a Pod Security
// level (the latest version), with the checks the PodSecurity admission
// plugin runs, and returns the reasons it would be forbidden ("" if none).
func podSecurityViolations(t *testing.T, level api.Level, tmpl *corev1.PodTemplateSpec) string {
	t.Helper()
	eval, err := policy.NewEvaluator(policy.DefaultChecks(), nil)
	if err != nil {
		t.Fatal(err)
	}
	res := policy.AggregateCheckResults(eval.EvaluatePod(api.LevelVersion{Level: level, Version: api.LatestVersion()}, &tmpl.ObjectMeta, &tmpl.Spec))
	if res.Allowed {
		return ""
	}
	return res.ForbiddenReason() + ": " + res.ForbiddenDetail()
}

// TestPodSecurityLevels: the pods the operator builds meet the Pod
// Security level docs/operations.md names for their namespace: restricted
// for cache nodes on a volume claim or emptyDir and for the gateways;
// privileged, and nothing less, for cache nodes on a hostPath.
func TestPodSecurityLevels(t *testing.T) {
	cache := func(edit func(dc *cachev1alpha1.DistributedCache)) *corev1.PodTemplateSpec {
		return &buildStatefulSet(testCache(edit), "a", "img:1", "h").Spec.Template
	}
	gateway := func(edit func(t *cachev1alpha1.CacheTenant)) *corev1.PodTemplateSpec {
		return &buildGatewayDeployment(testTenant(edit), testCache(nil), "a", "img:1", "h").Spec.Template
	}
	claim := func(dc *cachev1alpha1.DistributedCache) {
		dc.Spec.Storage = cachev1alpha1.StorageSpec{VolumeClaimTemplate: &cachev1alpha1.VolumeClaimTemplateStorage{Size: resource.MustParse("20Gi")}}
	}
	hostPath := func(dc *cachev1alpha1.DistributedCache) {
		dc.Spec.Storage = cachev1alpha1.StorageSpec{HostPath: &cachev1alpha1.HostPathStorage{Path: "/mnt/nvme"}}
	}
	tests := []struct {
		name  string
		pod   *corev1.PodTemplateSpec
		level api.Level
		// forbidden: substrings of the reasons, none if allowed.
		forbidden []string
	}{
		{name: "cache on emptyDir", pod: cache(nil), level: api.LevelRestricted},
		{name: "cache on emptyDir with a size limit, over two zones reading across them", pod: cache(func(dc *cachev1alpha1.DistributedCache) {
			dc.Spec.Storage.EmptyDir.SizeLimit = ptr.To(resource.MustParse("100Gi"))
			dc.Spec.CrossZone = cachev1alpha1.CrossZoneOnMiss
		}), level: api.LevelRestricted},
		{name: "cache on a volume claim", pod: cache(claim), level: api.LevelRestricted},
		{name: "cache on a volume claim with pod overrides that leave security alone", pod: cache(func(dc *cachev1alpha1.DistributedCache) {
			claim(dc)
			dc.Spec.PodTemplate = &cachev1alpha1.PodTemplateOverrides{
				Env:               []corev1.EnvVar{{Name: "DISTCACHE_LOG_LEVEL", Value: "debug"}},
				PriorityClassName: "cache",
			}
		}), level: api.LevelRestricted},
		{name: "cache on a hostPath: restricted refuses the root init container and the volume", pod: cache(hostPath), level: api.LevelRestricted,
			forbidden: []string{"restricted volume types", "runAsNonRoot", "runAsUser=0"}},
		{name: "cache on a hostPath: baseline refuses the volume", pod: cache(hostPath), level: api.LevelBaseline,
			forbidden: []string{"hostPath volumes"}},
		{name: "cache on a hostPath under privileged", pod: cache(hostPath), level: api.LevelPrivileged},
		{name: "cache whose pod securityContext override replaces the defaults whole", pod: cache(func(dc *cachev1alpha1.DistributedCache) {
			dc.Spec.PodTemplate = &cachev1alpha1.PodTemplateOverrides{SecurityContext: &corev1.PodSecurityContext{RunAsUser: ptr.To[int64](1000)}}
		}), level: api.LevelRestricted, forbidden: []string{"seccompProfile", "runAsNonRoot"}},
		{name: "gateway", pod: gateway(nil), level: api.LevelRestricted},
		{name: "gateway with overrides that leave security alone", pod: gateway(func(tn *cachev1alpha1.CacheTenant) {
			tn.Spec.Gateway.PodTemplate = &cachev1alpha1.PodTemplateOverrides{
				Metadata:           cachev1alpha1.PodMetadata{Labels: map[string]string{"team": "analytics"}},
				ServiceAccountName: "gateway",
			}
		}), level: api.LevelRestricted},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := podSecurityViolations(t, tt.level, tt.pod)
			if len(tt.forbidden) == 0 {
				if got != "" {
					t.Fatalf("the %s level forbids the pod: %s", tt.level, got)
				}
				return
			}
			if got == "" {
				t.Fatalf("the %s level allows the pod; want it forbidden for %q", tt.level, tt.forbidden)
			}
			for _, want := range tt.forbidden {
				if !strings.Contains(got, want) {
					t.Errorf("the %s level forbids the pod for %q, not for %q", tt.level, got, want)
				}
			}
		})
	}
}

// TestCacheVolumeWritableByTheNode: under the restricted level the node
// runs as 65532, not root, so a volume claim's filesystem must be given to
// its group (fsGroup), and without a walk of the whole disk tier on every
// start.
func TestCacheVolumeWritableByTheNode(t *testing.T) {
	dc := testCache(func(dc *cachev1alpha1.DistributedCache) {
		dc.Spec.Storage = cachev1alpha1.StorageSpec{VolumeClaimTemplate: &cachev1alpha1.VolumeClaimTemplateStorage{Size: resource.MustParse("20Gi")}}
	})
	p := buildStatefulSet(dc, "a", "img", "h").Spec.Template.Spec
	sc := p.SecurityContext
	if sc == nil || ptr.Deref(sc.RunAsUser, 0) != defaultNodeUser || ptr.Deref(sc.FSGroup, 0) != defaultNodeUser ||
		ptr.Deref(sc.FSGroupChangePolicy, "") != corev1.FSGroupChangeOnRootMismatch {
		t.Fatalf("pod security context %+v", sc)
	}
	if c := p.Containers[0].SecurityContext; c == nil || !ptr.Deref(c.ReadOnlyRootFilesystem, false) {
		t.Fatalf("container security context %+v", c)
	}
	// An override is taken as it is.
	own := &corev1.PodSecurityContext{RunAsUser: ptr.To[int64](1000), FSGroup: ptr.To[int64](2000)}
	dc.Spec.PodTemplate = &cachev1alpha1.PodTemplateOverrides{SecurityContext: own}
	if got := buildStatefulSet(dc, "a", "img", "h").Spec.Template.Spec.SecurityContext; !reflect.DeepEqual(got, own) {
		t.Fatalf("pod security context %+v, want the override %+v", got, own)
	}
}
