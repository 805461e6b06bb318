package controllers

import (
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	cachev1alpha1 "github.com/distcache/distcache/api/v1alpha1"
	"github.com/distcache/distcache/internal/ring"
)

func TestComputeStatus(t *testing.T) {
	sts := func(n int32) *appsv1.StatefulSet {
		return &appsv1.StatefulSet{Spec: appsv1.StatefulSetSpec{Replicas: ptr.To(n)}}
	}
	pods := func(ready ...bool) []zonePod {
		var ps []zonePod
		for i, r := range ready {
			ps = append(ps, zonePod{Name: "p", Ordinal: i, Ready: r})
		}
		return ps
	}
	active := &ring.Spec{Epoch: 2, Members: []ring.Member{{Name: "x", State: ring.StateActive}}}
	draining := &ring.Spec{Epoch: 5, Members: []ring.Member{{Name: "x", State: ring.StateActive}, {Name: "y", State: ring.StateDraining}}}
	type conds struct{ ready, progressing, degraded string }
	tests := []struct {
		name         string
		zones        []zoneObservation
		prior        []metav1.Condition
		wantReplicas int32
		wantReady    int32
		wantEpoch    int64
		want         conds
	}{
		{"all ready", []zoneObservation{{Name: "a", StatefulSet: sts(3), Pods: pods(true, true, true), Ring: active}, {Name: "b", StatefulSet: sts(3), Pods: pods(true, true, true), Ring: active}},
			nil, 3, 3, 2, conds{cachev1alpha1.ReasonAvailable, cachev1alpha1.ReasonReconciled, cachev1alpha1.ReasonAsExpected}},
		{"starting up is not degraded", []zoneObservation{{Name: "a", StatefulSet: sts(3), Pods: pods(false, false, false), Ring: active}, {Name: "b", StatefulSet: sts(3), Pods: pods(true, true, true), Ring: active}},
			nil, 3, 0, 2, conds{cachev1alpha1.ReasonPodsNotReady, cachev1alpha1.ReasonReconciled, cachev1alpha1.ReasonAsExpected}},
		{"a past reconcile failure during start-up does not keep it degraded", []zoneObservation{{Name: "a", StatefulSet: sts(3), Pods: pods(false, false, false), Ring: active}, {Name: "b", StatefulSet: sts(3), Pods: pods(true, true, true), Ring: active}},
			[]metav1.Condition{{Type: cachev1alpha1.ConditionDegraded, Status: metav1.ConditionTrue, Reason: cachev1alpha1.ReasonReconcileFailed}},
			3, 0, 2, conds{cachev1alpha1.ReasonPodsNotReady, cachev1alpha1.ReasonReconciled, cachev1alpha1.ReasonAsExpected}},
		{"losing a zone after being ready is degraded", []zoneObservation{{Name: "a", StatefulSet: sts(3), Pods: pods(false, false, false), Ring: active}, {Name: "b", StatefulSet: sts(3), Pods: pods(true, true, true), Ring: active}},
			[]metav1.Condition{{Type: cachev1alpha1.ConditionReady, Status: metav1.ConditionTrue, Reason: cachev1alpha1.ReasonAvailable}},
			3, 0, 2, conds{cachev1alpha1.ReasonPodsNotReady, cachev1alpha1.ReasonReconciled, cachev1alpha1.ReasonZoneUnavailable}},
		{"scaling: fewest pods over the zones", []zoneObservation{{Name: "a", StatefulSet: sts(3), Pods: pods(true, true), Ring: active}, {Name: "b", StatefulSet: sts(3), Pods: pods(true, true, true), Ring: active}},
			nil, 2, 2, 2, conds{cachev1alpha1.ReasonPodsNotReady, cachev1alpha1.ReasonScaling, cachev1alpha1.ReasonAsExpected}},
		{"scaling down shows the handoff", []zoneObservation{{Name: "a", StatefulSet: sts(3), Pods: pods(true, true, true, true), Ring: draining}},
			nil, 4, 4, 5, conds{cachev1alpha1.ReasonAvailable, cachev1alpha1.ReasonRingHandoff, cachev1alpha1.ReasonAsExpected}},
		{"ring handoff", []zoneObservation{{Name: "a", StatefulSet: sts(3), Pods: pods(true, true, true), Ring: draining}},
			nil, 3, 3, 5, conds{cachev1alpha1.ReasonAvailable, cachev1alpha1.ReasonRingHandoff, cachev1alpha1.ReasonAsExpected}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			dc := testCache(nil)
			dc.Generation = 4
			dc.Status.Conditions = tt.prior
			computeStatus(dc, tt.zones)
			st := dc.Status
			if st.Replicas != tt.wantReplicas || st.ReadyReplicas != tt.wantReady || st.RingEpoch != tt.wantEpoch || st.ObservedGeneration != 4 {
				t.Errorf("replicas %d ready %d epoch %d gen %d", st.Replicas, st.ReadyReplicas, st.RingEpoch, st.ObservedGeneration)
			}
			if st.Selector != "app.kubernetes.io/instance=c,app.kubernetes.io/name=cachenode" {
				t.Errorf("selector %q", st.Selector)
			}
			for typ, want := range map[string]string{cachev1alpha1.ConditionReady: tt.want.ready, cachev1alpha1.ConditionProgressing: tt.want.progressing, cachev1alpha1.ConditionDegraded: tt.want.degraded} {
				c := meta.FindStatusCondition(st.Conditions, typ)
				if c == nil || c.Reason != want || c.ObservedGeneration != 4 {
					t.Errorf("%s: %+v, want reason %s", typ, c, want)
				}
			}
		})
	}
}
