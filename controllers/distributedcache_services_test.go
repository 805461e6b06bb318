package controllers

import (
	"testing"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/utils/ptr"

	cachev1alpha1 "github.com/distcache/distcache/api/v1alpha1"
)

func TestBuildServicesAndPDB(t *testing.T) {
	dc := testCache(func(dc *cachev1alpha1.DistributedCache) {
		dc.Spec.PodDisruptionBudget.MaxUnavailable = ptr.To[int32](2)
	})
	tests := []struct {
		name string
		ok   func() bool
	}{
		{"zone Service is headless, publishes not-ready pods, selects its zone", func() bool {
			s := buildZoneService(dc, "a")
			return s.Name == "c-a" && s.Spec.ClusterIP == corev1.ClusterIPNone && s.Spec.PublishNotReadyAddresses &&
				s.Spec.Selector[LabelZone] == "a" && len(s.Spec.Ports) == 2 && s.Spec.Ports[0].Port == APIPort
		}},
		{"client Service selects all zones", func() bool {
			s := buildClientService(dc)
			_, zoned := s.Spec.Selector[LabelZone]
			return s.Name == "c" && !zoned && s.Spec.Selector[LabelInstance] == "c" && s.Spec.ClusterIP == ""
		}},
		{"PDB per zone with maxUnavailable", func() bool {
			p := buildPDB(dc, "b")
			return p.Name == "c-b" && p.Spec.MaxUnavailable.IntVal == 2 && p.Spec.Selector.MatchLabels[LabelZone] == "b"
		}},
		{"PDB defaults to 1", func() bool {
			return buildPDB(testCache(nil), "a").Spec.MaxUnavailable.IntVal == 1
		}},
		{"owned objects carry the managed-by label the cache selects on", func() bool {
			return buildZoneService(dc, "a").Labels[LabelManagedBy] == ManagedByValue &&
				buildClientService(dc).Labels[LabelManagedBy] == ManagedByValue &&
				buildPDB(dc, "a").Labels[LabelManagedBy] == ManagedByValue &&
				buildStatefulSet(dc, "a", "i", "h").Spec.Template.Labels[LabelManagedBy] == ManagedByValue
		}},
	}
	for _, tt := range tests {
		if !tt.ok() {
			t.Errorf("%s: failed", tt.name)
		}
	}
}
