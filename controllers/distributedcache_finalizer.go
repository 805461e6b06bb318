package controllers

import (
	"context"
	"fmt"
	"slices"
	"sort"
	"strings"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller/controllerutil"

	cachev1alpha1 "github.com/distcache/distcache/api/v1alpha1"
)

// Deletion while nodes hold write-back data. The garbage collector deletes
// a cache's StatefulSets, and so every node pod at once, as soon as the
// DistributedCache is gone; WriteBack writes the nodes acknowledged but S3
// does not have yet would then be left on the volume claims (which the
// StatefulSets keep) or lost with emptyDir storage. So a DistributedCache
// carries CacheFinalizer: deleted, it stays (and with it its StatefulSets,
// untouched) until no running node pod holds dirty WriteBack data, its
// nodes persisting it meanwhile; the same wait holds the objects of a zone
// removed from spec.zones (deleteRemovedZones).
//
// Transient objects do not hold either: they are never persisted, so
// waiting would never end. The nodes' metrics tell them apart
// (distcache_writeback_objects{kind}; HeldReport.Dirty).
//
// The wait is bounded where the operator cannot tell: a pod that is not
// running, has no IP or is being deleted does not hold (its node persists
// nothing, waiting would change nothing); a running pod whose metrics
// cannot be read is waited for at most unansweredTimeout (as a scale-down
// does), then the deletion goes on with a Warning event. A pod that
// answers with dirty data is waited for as long as it has some: that is
// S3 refusing or being slow, which the status and events show, and
// AnnotationSkipHeldDataWait ends it.

// CacheFinalizer holds a deleted DistributedCache until its nodes hold no
// WriteBack data S3 does not have yet.
const CacheFinalizer = "cache.distcache.io/held-data"

// AnnotationSkipHeldDataWait set to "true" on a DistributedCache lets its
// deletion, and the removal of its zones, go without waiting for held
// WriteBack data.
const AnnotationSkipHeldDataWait = "cache.distcache.io/skip-held-data-wait"

// EventHeldDataWaitSkipped (Warning): a deletion or zone removal went
// without waiting for held data, as AnnotationSkipHeldDataWait asked.
const EventHeldDataWaitSkipped = "HeldDataWaitSkipped"

func skipHeldDataWait(dc *cachev1alpha1.DistributedCache) bool {
	return dc.Annotations[AnnotationSkipHeldDataWait] == "true"
}

// ensureFinalizer adds CacheFinalizer to a cache that lacks it (new ones,
// and those created before it existed).
func (r *DistributedCacheReconciler) ensureFinalizer(ctx context.Context, dc *cachev1alpha1.DistributedCache) error {
	if !controllerutil.AddFinalizer(dc, CacheFinalizer) {
		return nil
	}
	return r.Update(ctx, dc)
}

// finalize lets a deleted cache go once its nodes hold no dirty write-back
// data (or the wait is skipped, or bounded out).
func (r *DistributedCacheReconciler) finalize(ctx context.Context, dc *cachev1alpha1.DistributedCache) (ctrl.Result, error) {
	if !controllerutil.ContainsFinalizer(dc, CacheFinalizer) {
		return ctrl.Result{}, nil
	}
	wait, err := r.deletionWait(ctx, dc)
	if apierrors.IsConflict(err) {
		// The status was written meanwhile: a retry, not a failure.
		return retryAfterConflict, nil
	}
	if err != nil || wait > 0 {
		return ctrl.Result{RequeueAfter: wait}, err
	}
	return removeFinalizer(ctx, r.Client, dc, CacheFinalizer)
}

// removeFinalizer takes finalizer off obj and writes it: the last step of a
// cache's or a tenant's deletion. A conflict (obj was written meanwhile) is
// a retry, not a failure; an obj already gone is done.
func removeFinalizer(ctx context.Context, c client.Client, obj client.Object, finalizer string) (ctrl.Result, error) {
	controllerutil.RemoveFinalizer(obj, finalizer)
	if err := c.Update(ctx, obj); err != nil {
		if apierrors.IsConflict(err) {
			return retryAfterConflict, nil
		}
		return ctrl.Result{}, client.IgnoreNotFound(err)
	}
	return ctrl.Result{}, nil
}

// deletionWait asks every running node pod of the deleted cache what it
// holds, shows the wait in the status (status.zones[].leavingPods and
// Progressing) and events, and says how soon to look again (0: the
// deletion may go on).
func (r *DistributedCacheReconciler) deletionWait(ctx context.Context, dc *cachev1alpha1.DistributedCache) (time.Duration, error) {
	if skipHeldDataWait(dc) {
		r.Recorder.Eventf(dc, nil, corev1.EventTypeWarning, EventHeldDataWaitSkipped, "Delete",
			"deleted without waiting for held write-back data (%s): writes S3 does not have yet stay on the volume claims, or are lost with emptyDir storage",
			AnnotationSkipHeldDataWait)
		return 0, nil
	}
	var pods corev1.PodList
	if err := r.List(ctx, &pods, client.InNamespace(dc.Namespace), client.MatchingLabels(cacheLabels(dc))); err != nil {
		return 0, err
	}
	byZone := map[string][]*corev1.Pod{}
	for i := range pods.Items {
		p := &pods.Items[i]
		byZone[p.Labels[LabelZone]] = append(byZone[p.Labels[LabelZone]], p)
	}
	now, timeout := r.now(), r.unansweredTimeout()
	var wait time.Duration
	waits := map[string]dirtyWait{}
	for zone, zp := range byZone {
		var prev []cachev1alpha1.LeavingPodStatus
		if i := slices.IndexFunc(dc.Status.Zones, func(z cachev1alpha1.ZoneStatus) bool { return z.Name == zone }); i >= 0 {
			prev = dc.Status.Zones[i].LeavingPods
		}
		d := dirtyHold(r.lookDirty(ctx, zp), prev, now, timeout)
		waits[zone] = d
		wait = soonest(wait, d.wait)
	}
	zones := sortedKeys(waits)
	if wait == 0 {
		for _, zone := range zones {
			r.recordGivenUp(dc, zone, "deletion", waits[zone].givenUp)
		}
		return 0, nil
	}
	var msgs, prevMsgs []string
	for _, zone := range zones {
		if m := dirtySummary(waits[zone].pods, now, timeout); m != "" {
			msgs = append(msgs, "zone "+zone+": "+m)
		}
	}
	for _, zs := range dc.Status.Zones {
		if m := dirtySummary(zs.LeavingPods, now, timeout); m != "" {
			prevMsgs = append(prevMsgs, "zone "+zs.Name+": "+m)
		}
	}
	msg := strings.Join(msgs, "; ")
	if msg != strings.Join(prevMsgs, "; ") {
		r.Recorder.Eventf(dc, nil, corev1.EventTypeNormal, EventWaitingForHeldData, "Delete",
			"deletion waits for the nodes to persist their write-back data: %s", msg)
	}
	return wait, r.patchStatus(ctx, client.ObjectKeyFromObject(dc), func(latest *cachev1alpha1.DistributedCache) {
		deletionStatus(latest, waits, msg)
	})
}

// deletionStatus shows a deletion's wait: each zone's leavingPods are the
// pods it waits for, and Progressing says why.
func deletionStatus(dc *cachev1alpha1.DistributedCache, waits map[string]dirtyWait, msg string) {
	reason := cachev1alpha1.ReasonLeavingPodUnanswered
	for i := range dc.Status.Zones {
		dc.Status.Zones[i].LeavingPods = nil
	}
	for _, zone := range sortedKeys(waits) {
		d := waits[zone]
		for _, p := range d.pods {
			if p.Unanswered == "" {
				reason = cachev1alpha1.ReasonHeldDataDraining
			}
		}
		i := slices.IndexFunc(dc.Status.Zones, func(z cachev1alpha1.ZoneStatus) bool { return z.Name == zone })
		if i < 0 {
			dc.Status.Zones = append(dc.Status.Zones, cachev1alpha1.ZoneStatus{Name: zone})
			i = len(dc.Status.Zones) - 1
		}
		dc.Status.Zones[i].LeavingPods = d.pods
	}
	meta.SetStatusCondition(&dc.Status.Conditions, metav1.Condition{
		Type: cachev1alpha1.ConditionProgressing, Status: metav1.ConditionTrue, Reason: reason,
		Message: "deletion waits for the nodes to persist their write-back data: " + msg, ObservedGeneration: dc.Generation,
	})
}

// recordGivenUp records a Warning per pod that goes (what) without having
// said what it holds.
func (r *DistributedCacheReconciler) recordGivenUp(dc *cachev1alpha1.DistributedCache, zone, what string, givenUp []cachev1alpha1.LeavingPodStatus) {
	for _, p := range givenUp {
		r.Recorder.Eventf(dc, nil, corev1.EventTypeWarning, EventLeavingPodUnanswered, "Delete",
			"zone %s: %s goes on without knowing what write-back data pod %s holds: it could not be asked (%s) since %s; "+
				"with replicas >= 2 its other holders have its data, and its volume claim is kept",
			zone, what, p.Name, p.Unanswered, p.UnansweredSince.UTC().Format(time.RFC3339))
	}
}

// podDirty is what a running pod said of its dirty data (or why it did not).
type podDirty struct {
	name string
	held podHeld
}

// lookDirty asks the running pods of pods (those that can be asked: the
// others hold nothing up) what they hold, each at most every
// heldLookInterval (a reconcile in between reuses its last answer).
func (r *DistributedCacheReconciler) lookDirty(ctx context.Context, pods []*corev1.Pod) []podDirty {
	now := r.now()
	var out []podDirty
	var ask []*corev1.Pod
	for _, p := range pods {
		if unaskable(p) != "" {
			continue
		}
		if prev, ok := r.held.get(p.UID); ok && now.Sub(prev.at) < heldLookInterval && now.Sub(prev.at) >= 0 {
			out = append(out, podDirty{p.Name, heldOf(prev)})
			continue
		}
		ask = append(ask, p)
	}
	looks := r.probeHeld(ctx, ask, now)
	for i, p := range ask {
		l := looks[i]
		if prev, ok := r.held.get(p.UID); ok {
			l.full = prev.full // the pinned-full events are observeHeld's
		}
		r.held.put(p.UID, l)
		out = append(out, podDirty{p.Name, heldOf(l)})
	}
	sort.Slice(out, func(i, j int) bool { return out[i].name < out[j].name })
	return out
}

// dirtyWait is what dirtyHold decided for pods that are going.
type dirtyWait struct {
	// pods are the pods waited for: what each reported, or since when it
	// could not be asked.
	pods []cachev1alpha1.LeavingPodStatus
	// givenUp are the pods that go without having answered (past the bound).
	givenUp []cachev1alpha1.LeavingPodStatus
	// wait is how soon to look again (0: nothing to wait for).
	wait time.Duration
}

// dirtyHold decides whether pods that are all going (a deleted cache's, a
// removed zone's) must wait: while one holds dirty write-back data, or
// cannot be asked and has not been for timeout (since the time prev, the
// status before, says it first could not). Transient data does not hold.
func dirtyHold(pods []podDirty, prev []cachev1alpha1.LeavingPodStatus, now time.Time, timeout time.Duration) dirtyWait {
	var d dirtyWait
	for _, p := range pods {
		ls := cachev1alpha1.LeavingPodStatus{Name: p.name}
		if rep := p.held.report; rep != nil {
			if rep.Dirty > 0 {
				ls.HeldObjects, ls.HeldBytes = rep.Dirty, rep.DirtyBytes
				d.pods = append(d.pods, ls)
				d.wait = soonest(d.wait, heldLookInterval)
			}
			continue
		}
		if left := unanswered(&ls, p.held.unanswered, prev, now, timeout); left > 0 {
			d.pods = append(d.pods, ls)
			d.wait = soonest(d.wait, min(left, heldLookInterval))
		} else {
			d.givenUp = append(d.givenUp, ls)
		}
	}
	return d
}

// dirtySummary names the pods waited for and why ("" when none is).
func dirtySummary(pods []cachev1alpha1.LeavingPodStatus, now time.Time, timeout time.Duration) string {
	return leavingSummary(pods, now, timeout, "waited for", func(l cachev1alpha1.LeavingPodStatus) string {
		return fmt.Sprintf("holds %d write-back objects not in S3 yet (its tenants hold %s)", l.HeldObjects, formatBytes(l.HeldBytes))
	})
}

// unanswered records in ls that its pod could not be asked what it holds
// (why), since the time prev, the status before, says it first could not,
// else since now; it returns how much of timeout is left from then.
func unanswered(ls *cachev1alpha1.LeavingPodStatus, why string, prev []cachev1alpha1.LeavingPodStatus, now time.Time, timeout time.Duration) time.Duration {
	ls.Unanswered = why
	since := metav1.NewTime(now).Rfc3339Copy()
	if i := slices.IndexFunc(prev, func(p cachev1alpha1.LeavingPodStatus) bool { return p.Name == ls.Name }); i >= 0 && prev[i].UnansweredSince != nil {
		since = prev[i].UnansweredSince.Rfc3339Copy()
	}
	ls.UnansweredSince = &since
	return since.Add(timeout).Sub(now)
}

// leavingSummary names the pods of leaving that hold data (holds says
// what) or cannot be asked and are within timeout of it, and why, for an
// event; how says what is done with them. It is "" when there are none.
func leavingSummary(leaving []cachev1alpha1.LeavingPodStatus, now time.Time, timeout time.Duration, how string,
	holds func(cachev1alpha1.LeavingPodStatus) string) string {
	var out []string
	for _, l := range leaving {
		switch {
		case l.Unanswered == "" && l.HeldObjects > 0:
			out = append(out, l.Name+" "+holds(l))
		case l.Unanswered != "" && l.UnansweredSince != nil && l.UnansweredSince.Add(timeout).After(now):
			out = append(out, fmt.Sprintf("%s cannot be asked what it holds (%s), %s until %s at most",
				l.Name, l.Unanswered, how, l.UnansweredSince.Add(timeout).UTC().Format(time.RFC3339)))
		}
	}
	return strings.Join(out, "; ")
}

func sortedKeys[V any](m map[string]V) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	return keys
}

// removedZoneWaits remembers, per zone removed from a cache's spec whose
// objects wait for held data, what its pods last said (the status no
// longer lists a removed zone): the start of an unanswered pod's bound.
// In memory only: an operator restart starts the bound again.
type removedZoneWaits struct {
	mu    sync.Mutex
	waits map[string][]cachev1alpha1.LeavingPodStatus
}

func (w *removedZoneWaits) get(key string) []cachev1alpha1.LeavingPodStatus {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.waits[key]
}

// set records pods for key (none: forgets key).
func (w *removedZoneWaits) set(key string, pods []cachev1alpha1.LeavingPodStatus) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if len(pods) == 0 {
		delete(w.waits, key)
		return
	}
	if w.waits == nil {
		w.waits = map[string][]cachev1alpha1.LeavingPodStatus{}
	}
	w.waits[key] = pods
}

// removedZoneWait says how soon to look again at zone, removed from dc's
// spec, before its objects may be deleted (0: now), recording an event
// when the pods waited for, or why, change.
func (r *DistributedCacheReconciler) removedZoneWait(ctx context.Context, dc *cachev1alpha1.DistributedCache, zone string) (time.Duration, error) {
	if skipHeldDataWait(dc) {
		return 0, nil
	}
	var pods corev1.PodList
	if err := r.List(ctx, &pods, client.InNamespace(dc.Namespace), client.MatchingLabels(zoneSelectorLabels(dc, zone))); err != nil {
		return 0, err
	}
	zp := make([]*corev1.Pod, len(pods.Items))
	for i := range pods.Items {
		zp[i] = &pods.Items[i]
	}
	key := dc.Namespace + "/" + dc.Name + "/" + zone
	prev := r.removedZones.get(key)
	now, timeout := r.now(), r.unansweredTimeout()
	d := dirtyHold(r.lookDirty(ctx, zp), prev, now, timeout)
	r.removedZones.set(key, d.pods)
	if d.wait == 0 {
		r.recordGivenUp(dc, zone, "removing the zone", d.givenUp)
		return 0, nil
	}
	if msg := dirtySummary(d.pods, now, timeout); msg != dirtySummary(prev, now, timeout) {
		r.Recorder.Eventf(dc, nil, corev1.EventTypeNormal, EventWaitingForHeldData, "RemoveZone",
			"zone %s, removed from the spec: its StatefulSet stays until its nodes persist their write-back data: %s", zone, msg)
	}
	return d.wait, nil
}
