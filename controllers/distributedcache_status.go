package controllers

import (
	"context"
	"fmt"
	"strings"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"sigs.k8s.io/controller-runtime/pkg/client"

	cachev1alpha1 "github.com/distcache/distcache/api/v1alpha1"
	"github.com/distcache/distcache/internal/ring"
)

// zoneObservation is what one reconcile saw and did in a zone.
type zoneObservation struct {
	Name        string
	StatefulSet *appsv1.StatefulSet // as written (nil if not reached)
	Pods        []zonePod
	Ring        *ring.Spec // as published (nil if not reached)
	// Leaving is what the pods a scale-down removes hold (heldDrainHold;
	// empty when none waits on held data).
	Leaving []cachev1alpha1.LeavingPodStatus
}

func (z *zoneObservation) ready() int32 {
	var n int32
	for _, p := range z.Pods {
		if p.Ready {
			n++
		}
	}
	return n
}

// updateStatus writes the status of a successful reconcile.
func (r *DistributedCacheReconciler) updateStatus(ctx context.Context, dc *cachev1alpha1.DistributedCache, zones []zoneObservation, problems []finding) error {
	return r.patchStatus(ctx, client.ObjectKeyFromObject(dc), func(latest *cachev1alpha1.DistributedCache) {
		// Describe the generation this reconcile acted on, not a newer one.
		gen := latest.Generation
		latest.Generation = dc.Generation
		computeStatus(latest, zones, problems...)
		latest.Status.OperatorVersion = r.Version
		latest.Generation = gen
	})
}

// patchStatus writes the cache's status through the patchStatus helper.
func (r *DistributedCacheReconciler) patchStatus(ctx context.Context, key client.ObjectKey, mutate func(dc *cachev1alpha1.DistributedCache)) error {
	return patchStatus(ctx, r.Client, key, &cachev1alpha1.DistributedCache{},
		func(dc *cachev1alpha1.DistributedCache) any { return dc.Status }, mutate)
}

// patchStatus is the one way status is written: it re-reads the object into
// latest, applies mutate, skips the write when the status did not change,
// and otherwise patches the status subresource with optimistic locking (a
// conflict is returned for the caller to requeue, never retried in a loop).
func patchStatus[T client.Object](ctx context.Context, c client.Client, key client.ObjectKey, latest T,
	status func(T) any, mutate func(T)) error {
	if err := c.Get(ctx, key, latest); err != nil {
		return client.IgnoreNotFound(err)
	}
	orig := latest.DeepCopyObject().(T)
	mutate(latest)
	if equality.Semantic.DeepEqual(status(orig), status(latest)) {
		return nil
	}
	return c.Status().Patch(ctx, latest, client.MergeFromWithOptions(orig, client.MergeFromWithOptimisticLock{}))
}

// computeStatus sets the status of dc from a complete reconcile's zones and
// the problems its steps found that do not stop it (Degraded, before the
// zones' own checks).
func computeStatus(dc *cachev1alpha1.DistributedCache, zones []zoneObservation, problems ...finding) {
	st := &dc.Status
	st.ObservedGeneration = dc.Generation
	st.Selector = labels.SelectorFromSet(cacheLabels(dc)).String()
	st.Zones = nil
	st.RingEpoch = 0
	for i, z := range zones {
		zs := cachev1alpha1.ZoneStatus{
			Name: z.Name, StatefulSet: zoneObjectName(dc, z.Name), RingConfigMap: ringConfigMapName(dc),
			Replicas: int32(len(z.Pods)), ReadyReplicas: z.ready(), LeavingPods: z.Leaving,
		}
		if z.Ring != nil {
			zs.RingEpoch = z.Ring.Epoch
			st.RingEpoch = max(st.RingEpoch, z.Ring.Epoch)
		}
		if i == 0 || zs.Replicas < st.Replicas {
			st.Replicas = zs.Replicas
		}
		if i == 0 || zs.ReadyReplicas < st.ReadyReplicas {
			st.ReadyReplicas = zs.ReadyReplicas
		}
		st.Zones = append(st.Zones, zs)
	}
	wasReady := meta.IsStatusConditionTrue(st.Conditions, cachev1alpha1.ConditionReady)
	setCondition(dc, cachev1alpha1.ConditionReady, firstMatch(dc, zones, readyChecks), metav1.ConditionFalse,
		cachev1alpha1.ReasonAvailable, "every zone has all its nodes ready and its ring published", metav1.ConditionTrue)
	setCondition(dc, cachev1alpha1.ConditionProgressing, firstMatch(dc, zones, progressingChecks), metav1.ConditionTrue,
		cachev1alpha1.ReasonReconciled, "nothing in flight", metav1.ConditionFalse)
	degraded := firstMatch(dc, zones, degradedChecks)
	if len(problems) > 0 {
		degraded = &problems[0]
	}
	// Still starting up (never Ready, and not already degraded for a zone):
	// not degraded, just not ready yet. A past reconcile failure does not
	// count as having been degraded for a zone.
	prev := meta.FindStatusCondition(st.Conditions, cachev1alpha1.ConditionDegraded)
	zoneDegraded := prev != nil && prev.Status == metav1.ConditionTrue && prev.Reason == cachev1alpha1.ReasonZoneUnavailable
	if degraded != nil && degraded.reason == cachev1alpha1.ReasonZoneUnavailable && !wasReady && !zoneDegraded {
		degraded = nil
	}
	setCondition(dc, cachev1alpha1.ConditionDegraded, degraded, metav1.ConditionTrue,
		cachev1alpha1.ReasonAsExpected, "nothing is wrong", metav1.ConditionFalse)
}

// failedStatus records a failed reconcile step: Degraded=True with the error.
func failedStatus(dc *cachev1alpha1.DistributedCache, err error) {
	meta.SetStatusCondition(&dc.Status.Conditions, metav1.Condition{
		Type: cachev1alpha1.ConditionDegraded, Status: metav1.ConditionTrue,
		Reason: cachev1alpha1.ReasonReconcileFailed, Message: err.Error(), ObservedGeneration: dc.Generation,
	})
}

// finding is a check's verdict: the reason and message of a condition.
type finding struct{ reason, message string }

// check looks at the zones and returns a finding, or nil.
type check func(dc *cachev1alpha1.DistributedCache, zones []zoneObservation) *finding

// firstMatch runs checks in order and returns the first finding.
func firstMatch(dc *cachev1alpha1.DistributedCache, zones []zoneObservation, checks []check) *finding {
	for _, c := range checks {
		if f := c(dc, zones); f != nil {
			return f
		}
	}
	return nil
}

// setCondition sets condType to matchStatus with f's reason when f is
// non-nil, else to okStatus with okReason.
func setCondition(dc *cachev1alpha1.DistributedCache, condType string, f *finding, matchStatus metav1.ConditionStatus,
	okReason, okMessage string, okStatus metav1.ConditionStatus) {
	c := metav1.Condition{Type: condType, Status: okStatus, Reason: okReason, Message: okMessage, ObservedGeneration: dc.Generation}
	if f != nil {
		c.Status, c.Reason, c.Message = matchStatus, f.reason, f.message
	}
	meta.SetStatusCondition(&dc.Status.Conditions, c)
}

// zonesWhere is a finding with reason whose message is prefix and
// "zone (detail)" for the zones where bad says so, or nil where it says so
// of none.
func zonesWhere(zones []zoneObservation, reason, prefix string, bad func(z *zoneObservation) (string, bool)) *finding {
	var out []string
	for i := range zones {
		if detail, ok := bad(&zones[i]); ok {
			out = append(out, fmt.Sprintf("%s (%s)", zones[i].Name, detail))
		}
	}
	if len(out) == 0 {
		return nil
	}
	return &finding{reason, prefix + strings.Join(out, ", ")}
}

var readyChecks = []check{
	func(dc *cachev1alpha1.DistributedCache, zones []zoneObservation) *finding {
		want := desiredReplicas(dc)
		return zonesWhere(zones, cachev1alpha1.ReasonPodsNotReady, "zones short of ready nodes: ", func(z *zoneObservation) (string, bool) {
			return fmt.Sprintf("%d/%d ready", z.ready(), want), z.ready() < want || z.Ring == nil
		})
	},
}

// progressingChecks: a scale-down waiting on held data, then a ring
// handoff, are the most telling of a scale-down, which also shows as
// Scaling until the pods are gone.
var progressingChecks = []check{
	func(dc *cachev1alpha1.DistributedCache, zones []zoneObservation) *finding {
		return zonesWhere(zones, cachev1alpha1.ReasonHeldDataDraining, "scale-down waits for pods to hand over their write-back and transient data: ", func(z *zoneObservation) (string, bool) {
			var held []string
			for _, l := range z.Leaving {
				if l.Unanswered == "" && l.HeldObjects > 0 {
					held = append(held, fmt.Sprintf("%s holds %d objects, %s", l.Name, l.HeldObjects, formatBytes(l.HeldBytes)))
				}
			}
			return strings.Join(held, "; "), len(held) > 0
		})
	},
	func(dc *cachev1alpha1.DistributedCache, zones []zoneObservation) *finding {
		return zonesWhere(zones, cachev1alpha1.ReasonLeavingPodUnanswered, "scale-down waits for pods that cannot be asked what they hold: ", func(z *zoneObservation) (string, bool) {
			var un []string
			for _, l := range z.Leaving {
				if l.Unanswered != "" && keptBy(z.StatefulSet, l.Name) {
					un = append(un, fmt.Sprintf("%s: %s since %s", l.Name, l.Unanswered, l.UnansweredSince.UTC().Format(time.RFC3339)))
				}
			}
			return strings.Join(un, "; "), len(un) > 0
		})
	},
	func(dc *cachev1alpha1.DistributedCache, zones []zoneObservation) *finding {
		return zonesWhere(zones, cachev1alpha1.ReasonRingHandoff, "ring handoff: ", func(z *zoneObservation) (string, bool) {
			var draining []string
			if z.Ring != nil {
				for _, m := range z.Ring.Members {
					if m.State == ring.StateDraining {
						draining = append(draining, m.Name)
					}
				}
			}
			return "draining " + strings.Join(draining, " "), len(draining) > 0
		})
	},
	func(dc *cachev1alpha1.DistributedCache, zones []zoneObservation) *finding {
		want := desiredReplicas(dc)
		return zonesWhere(zones, cachev1alpha1.ReasonScaling, "scaling: ", func(z *zoneObservation) (string, bool) {
			if z.StatefulSet == nil || z.StatefulSet.Spec.Replicas == nil {
				return "no StatefulSet yet", true
			}
			r := *z.StatefulSet.Spec.Replicas
			return fmt.Sprintf("%d pods, StatefulSet %d, want %d", len(z.Pods), r, want), r != want || int32(len(z.Pods)) != want
		})
	},
	func(dc *cachev1alpha1.DistributedCache, zones []zoneObservation) *finding {
		return zonesWhere(zones, cachev1alpha1.ReasonRollingOut, "rolling out: ", func(z *zoneObservation) (string, bool) {
			if z.StatefulSet == nil {
				return "", false
			}
			s := z.StatefulSet.Status
			return "revision " + s.UpdateRevision, s.UpdateRevision != "" && s.CurrentRevision != s.UpdateRevision
		})
	},
}

// keptBy: the StatefulSet sts, as written, keeps the pod named pod.
func keptBy(sts *appsv1.StatefulSet, pod string) bool {
	if sts == nil || sts.Spec.Replicas == nil {
		return false
	}
	ord, ok := podOrdinal(sts.Name, pod)
	return ok && int32(ord) < *sts.Spec.Replicas
}

var degradedChecks = []check{
	func(dc *cachev1alpha1.DistributedCache, zones []zoneObservation) *finding {
		return zonesWhere(zones, cachev1alpha1.ReasonZoneUnavailable, "zones without a ready node: ", func(z *zoneObservation) (string, bool) { return "no ready node", z.ready() == 0 })
	},
}
