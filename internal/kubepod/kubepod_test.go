package kubepod

import (
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

func TestReady(t *testing.T) {
	now := metav1.Now()
	cond := func(s corev1.ConditionStatus) []corev1.PodCondition {
		return []corev1.PodCondition{{Type: corev1.PodScheduled, Status: corev1.ConditionTrue}, {Type: corev1.PodReady, Status: s}}
	}
	for _, tc := range []struct {
		name string
		pod  corev1.Pod
		want bool
	}{
		{"ready", corev1.Pod{Status: corev1.PodStatus{Conditions: cond(corev1.ConditionTrue)}}, true},
		{"not ready", corev1.Pod{Status: corev1.PodStatus{Conditions: cond(corev1.ConditionFalse)}}, false},
		{"unknown", corev1.Pod{Status: corev1.PodStatus{Conditions: cond(corev1.ConditionUnknown)}}, false},
		{"no Ready condition", corev1.Pod{}, false},
		{"ready but being deleted", corev1.Pod{ObjectMeta: metav1.ObjectMeta{DeletionTimestamp: &now},
			Status: corev1.PodStatus{Conditions: cond(corev1.ConditionTrue)}}, false},
	} {
		if got := Ready(&tc.pod); got != tc.want {
			t.Errorf("%s: Ready = %v, want %v", tc.name, got, tc.want)
		}
	}
}
