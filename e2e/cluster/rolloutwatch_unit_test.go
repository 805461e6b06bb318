package cluster_test

import (
	"slices"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/watch"

	"github.com/distcache/distcache/controllers"
)

// The rollout watch's bookkeeping, without a cluster: it must report two
// pods down at once, and zones that overlap, when that is what happened.
func TestPodRolloutBookkeeping(t *testing.T) {
	const oldImage, newImage = "cachenode:v1", "cachenode:v2"
	pod := func(name, zone, uid, image string, ready, terminating bool) *corev1.Pod {
		p := &corev1.Pod{
			ObjectMeta: metav1.ObjectMeta{Name: name, UID: types.UID(uid), Labels: map[string]string{controllers.LabelZone: zone}},
			Spec:       corev1.PodSpec{Containers: []corev1.Container{{Image: image}}},
			Status:     corev1.PodStatus{Phase: corev1.PodRunning},
		}
		st := corev1.ConditionFalse
		if ready {
			st = corev1.ConditionTrue
		}
		p.Status.Conditions = []corev1.PodCondition{{Type: corev1.PodReady, Status: st}}
		if terminating {
			p.DeletionTimestamp = &metav1.Time{Time: time.Now()}
		}
		return p
	}
	start := func() *podRollout {
		// A clock that moves a second per event.
		clock := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
		tick := func() time.Time { clock = clock.Add(time.Second); return clock }
		r := &podRollout{expected: 4, old: map[types.UID]bool{}, image: newImage, now: tick,
			pods: map[string]*corev1.Pod{}, seen: map[string]bool{}, readyNow: map[string]bool{}, everReady: map[string]bool{}}
		for _, p := range []*corev1.Pod{
			pod("c-zone-a-0", "zone-a", "a0", oldImage, true, false), pod("c-zone-a-1", "zone-a", "a1", oldImage, true, false),
			pod("c-zone-b-0", "zone-b", "b0", oldImage, true, false), pod("c-zone-b-1", "zone-b", "b1", oldImage, true, false),
		} {
			r.old[p.UID] = true
			r.pods[p.Name] = p
			r.readyNow[string(p.UID)] = true
		}
		r.observe(r.now())
		return r
	}
	// takeDown is the rollout deleting an old pod: it turns terminating.
	takeDown := func(r *podRollout, name, zone, uid string) {
		r.apply(watch.Event{Type: watch.Modified, Object: pod(name, zone, uid, oldImage, false, true)})
	}
	// succeed removes a terminating old pod and adds its successor, ready
	// at once or not yet.
	succeed := func(r *podRollout, name, zone, oldUID, newUID string, ready bool) {
		r.apply(watch.Event{Type: watch.Deleted, Object: pod(name, zone, oldUID, oldImage, false, true)})
		r.apply(watch.Event{Type: watch.Added, Object: pod(name, zone, newUID, newImage, ready, false)})
	}
	// replace takes a pod down and brings its successor up.
	replace := func(r *podRollout, name, zone, oldUID, newUID string) {
		takeDown(r, name, zone, oldUID)
		succeed(r, name, zone, oldUID, newUID, false)
		r.apply(watch.Event{Type: watch.Modified, Object: pod(name, zone, newUID, newImage, true, false)})
	}
	// wantMax checks the most pods down at once: unready, and taken down
	// by the rollout.
	wantMax := func(t *testing.T, res rolloutResult, unready, takenDown int) {
		t.Helper()
		if res.maxUnready != unready || res.maxTakenDown != takenDown {
			t.Errorf("maxUnready = %d, maxTakenDown = %d, want %d and %d", res.maxUnready, res.maxTakenDown, unready, takenDown)
		}
	}
	// zoneBounds is when zone-a's rollout ended and zone-b's began.
	zoneBounds := func(res rolloutResult) (lastA, firstB time.Time) {
		_, lastA = res.zoneSpan("zone-a")
		firstB, _ = res.zoneSpan("zone-b")
		return lastA, firstB
	}

	t.Run("one at a time, zone by zone", func(t *testing.T) {
		r := start()
		replace(r, "c-zone-a-1", "zone-a", "a1", "a1'")
		replace(r, "c-zone-a-0", "zone-a", "a0", "a0'")
		replace(r, "c-zone-b-1", "zone-b", "b1", "b1'")
		replace(r, "c-zone-b-0", "zone-b", "b0", "b0'")
		res := r.result()
		wantMax(t, res, 1, 1)
		if got := res.sequence(); len(got) != 4 || got[0] != "c-zone-a-1" || got[3] != "c-zone-b-0" {
			t.Errorf("sequence = %v", got)
		}
		if len(res.ups) != 4 {
			t.Errorf("ups = %v, want 4", res.ups)
		}
		if lastA, firstB := zoneBounds(res); !firstB.After(lastA) {
			t.Errorf("zone-b began %v, not after zone-a ended %v", firstB, lastA)
		}
	})

	t.Run("two zones at once", func(t *testing.T) {
		r := start()
		takeDown(r, "c-zone-a-1", "zone-a", "a1")
		takeDown(r, "c-zone-b-1", "zone-b", "b1")
		succeed(r, "c-zone-b-1", "zone-b", "b1", "b1'", true)
		succeed(r, "c-zone-a-1", "zone-a", "a1", "a1'", true)
		res := r.result()
		wantMax(t, res, 2, 2)
		if lastA, firstB := zoneBounds(res); !firstB.Before(lastA) {
			t.Errorf("the zones' spans do not overlap: zone-b began %v, zone-a ended %v", firstB, lastA)
		}
	})

	t.Run("a pod that turns unready without being deleted", func(t *testing.T) {
		r := start()
		r.apply(watch.Event{Type: watch.Modified, Object: pod("c-zone-a-0", "zone-a", "a0", oldImage, false, false)})
		takeDown(r, "c-zone-a-1", "zone-a", "a1")
		res := r.result()
		if res.maxUnready != 2 || !slices.Equal(res.maxDown, []string{"c-zone-a-0 not Ready", "c-zone-a-1 terminating"}) {
			t.Errorf("maxUnready = %d (%v), want 2 (c-zone-a-0 not Ready, c-zone-a-1 terminating)", res.maxUnready, res.maxDown)
		}
		if res.maxTakenDown != 1 {
			t.Errorf("maxTakenDown = %d, want 1: a-0 turned unready on its own, only a-1 was taken down", res.maxTakenDown)
		}
	})
}
