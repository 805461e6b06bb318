package controllers

import (
	"errors"
	"strings"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller/controllerutil"

	cachev1alpha1 "github.com/distcache/distcache/api/v1alpha1"
)

// Deleting a cache, or removing a zone, while its nodes hold write-back
// data S3 does not have yet: the reconciler run step by step against a
// real API server (envtest, which runs no garbage collector: the test
// looks at the cache object and at the StatefulSets the operator itself
// deletes), with the fixture's clock and fake prober (held envtest).

// dirty is a node's answer holding n write-back objects of size bytes.
func dirty(n, bytes int64) HeldReport {
	return HeldReport{Objects: n, Bytes: bytes, Dirty: n, DirtyBytes: bytes, LimitBytes: 1 << 30}
}

// deleteCache deletes the cache after checking it carries CacheFinalizer.
func (f *heldFixture) deleteCache() {
	f.t.Helper()
	if dc := f.cache(); !controllerutil.ContainsFinalizer(dc, CacheFinalizer) {
		f.t.Fatalf("cache finalizers %v, want %s", dc.Finalizers, CacheFinalizer)
	}
	if err := f.c.Delete(f.ctx, f.dc); err != nil {
		f.t.Fatal(err)
	}
}

// gone: the cache object no longer exists.
func (f *heldFixture) gone() bool {
	f.t.Helper()
	err := f.c.Get(f.ctx, client.ObjectKeyFromObject(f.dc), &cachev1alpha1.DistributedCache{})
	if err != nil && !apierrors.IsNotFound(err) {
		f.t.Fatal(err)
	}
	return apierrors.IsNotFound(err)
}

func TestDeletionWaitsForDirtyData(t *testing.T) {
	f := newHeldFixture(t, 2)
	f.addPod(0, true)
	f.addPod(1, true)
	f.prober.set("wb-a-0", dirty(3, 3000))
	// Transient objects only: they never reach S3, and hold nothing up.
	f.prober.set("wb-a-1", HeldReport{Objects: 4, Bytes: 400, LimitBytes: 1 << 30})
	f.reconcile()
	f.deleteCache()

	t.Log("wb-a-0 holds write-back data: the cache stays, and says why")
	f.reconcile()
	if f.gone() {
		t.Fatal("the cache went while wb-a-0 holds write-back data S3 does not have")
	}
	f.statefulSet() // still there
	l := f.leaving()
	if len(l) != 1 || l[0].Name != "wb-a-0" || l[0].HeldObjects != 3 || l[0].HeldBytes != 3000 {
		t.Errorf("status leavingPods %+v, want only wb-a-0 with 3 objects, 3000 bytes", l)
	}
	c := f.progressing()
	if c.Reason != cachev1alpha1.ReasonHeldDataDraining || !strings.Contains(c.Message, "deletion waits") ||
		!strings.Contains(c.Message, "wb-a-0 holds 3 write-back objects") || strings.Contains(c.Message, "wb-a-1") {
		t.Errorf("Progressing %s: %s; want %s naming wb-a-0 only", c.Reason, c.Message, cachev1alpha1.ReasonHeldDataDraining)
	}
	if evs := f.events.take(EventWaitingForHeldData); len(evs) != 1 || !strings.Contains(evs[0].note, "wb-a-0") {
		t.Errorf("WaitingForHeldData events %v, want one naming wb-a-0", evs)
	}

	t.Log("still holding some: still there, no new event")
	f.prober.set("wb-a-0", dirty(1, 1000))
	f.advance(heldLookInterval)
	f.reconcile()
	if f.gone() {
		t.Fatal("the cache went while wb-a-0 holds write-back data")
	}
	if l := f.leaving(); len(l) != 1 || l[0].HeldObjects != 1 {
		t.Errorf("status leavingPods %+v, want wb-a-0 with 1 object", l)
	}

	t.Log("persisted: the cache goes")
	f.prober.set("wb-a-0", HeldReport{LimitBytes: 1 << 30})
	f.advance(heldLookInterval)
	f.reconcile()
	if !f.gone() {
		t.Fatal("the cache stays once no node holds write-back data")
	}
	if evs := f.events.take(EventLeavingPodUnanswered); len(evs) != 0 {
		t.Errorf("LeavingPodUnanswered events %v for pods that answered", evs)
	}
}

func TestDeletionUnansweredPodBounded(t *testing.T) {
	f := newHeldFixture(t, 2)
	f.addPod(0, true)
	f.addPod(1, true)
	f.prober.set("wb-a-0", HeldReport{LimitBytes: 1 << 30})
	f.prober.fail("wb-a-1", errors.New("connection refused"))
	f.reconcile()
	f.deleteCache()

	t.Log("wb-a-1 cannot be asked: the cache stays for the bound, counted from the first failure")
	f.reconcile()
	first := f.now
	if f.gone() {
		t.Fatal("the cache went while wb-a-1 could not be asked, within the bound")
	}
	f.wantUnanswered("wb-a-1", first)
	for range 4 {
		f.advance(time.Minute)
		f.reconcile()
	}
	if f.gone() {
		t.Fatalf("the cache went %s after the first failure, within the %s bound", f.now.Sub(first), testUnanswered)
	}

	t.Log("past the bound it goes, with a Warning")
	f.advance(time.Minute)
	f.reconcile()
	if !f.gone() {
		t.Fatal("the cache stays past the bound")
	}
	f.wantUnansweredWarning("wb-a-1")
}

func TestDeletionSkipAnnotation(t *testing.T) {
	f := newHeldFixture(t, 1)
	f.addPod(0, true)
	f.prober.set("wb-a-0", dirty(7, 7000))
	f.reconcile()
	dc := f.cache()
	dc.Annotations = map[string]string{AnnotationSkipHeldDataWait: "true"}
	if err := f.c.Update(f.ctx, dc); err != nil {
		t.Fatal(err)
	}
	f.deleteCache()
	f.reconcile()
	if !f.gone() {
		t.Fatalf("the cache stays with %s", AnnotationSkipHeldDataWait)
	}
	if evs := f.events.take(EventHeldDataWaitSkipped); len(evs) != 1 || evs[0].eventType != corev1.EventTypeWarning {
		t.Errorf("HeldDataWaitSkipped events %v, want one Warning", evs)
	}
}

func TestDeletionWithoutRunningPods(t *testing.T) {
	t.Run("no pod", func(t *testing.T) {
		// A cache created before the finalizer existed gets it at its next
		// reconcile: the fixture creates the cache without one.
		f := newHeldFixture(t, 2)
		f.deleteCache()
		if f.gone() {
			t.Fatal("the cache went before the operator looked at it")
		}
		f.reconcile()
		if !f.gone() {
			t.Fatal("a cache without pods stays")
		}
	})
	t.Run("a pending pod", func(t *testing.T) {
		f := newHeldFixture(t, 1)
		f.addPod(0, false)
		f.prober.set("wb-a-0", dirty(1, 10))
		f.reconcile()
		f.deleteCache()
		f.reconcile()
		if !f.gone() {
			t.Fatal("a cache whose only pod does not run stays")
		}
		if n := f.prober.calls["wb-a-0"]; n != 0 {
			t.Errorf("the pending pod was asked %d times", n)
		}
	})
}

func TestRemovedZoneWaitsForDirtyData(t *testing.T) {
	f, zoneB := newRemovedZoneFixture(t)
	f.prober.set("wb-b-0", dirty(2, 2<<20))

	t.Log("zone b leaves the spec while wb-b-0 holds write-back data: its StatefulSet stays")
	f.removeZoneB()
	if s := zoneB(); s == nil || s.DeletionTimestamp != nil {
		t.Fatal("zone b's StatefulSet deleted while wb-b-0 holds write-back data")
	}
	if evs := f.events.take(EventWaitingForHeldData); len(evs) != 1 || !strings.Contains(evs[0].note, "wb-b-0 holds 2 write-back objects") {
		t.Errorf("WaitingForHeldData events %v, want one naming wb-b-0", evs)
	}
	f.advance(heldLookInterval)
	f.reconcile()
	if zoneB() == nil {
		t.Fatal("zone b's StatefulSet deleted while wb-b-0 holds write-back data")
	}

	t.Log("persisted: zone b's objects go")
	f.prober.set("wb-b-0", HeldReport{LimitBytes: 1 << 30})
	f.advance(heldLookInterval)
	f.reconcile()
	if s := zoneB(); s != nil && s.DeletionTimestamp == nil {
		t.Fatal("zone b's StatefulSet stays once wb-b-0 holds nothing")
	}
	var svc corev1.Service
	if err := f.c.Get(f.ctx, client.ObjectKey{Namespace: f.dc.Namespace, Name: "wb-b"}, &svc); !apierrors.IsNotFound(err) && svc.DeletionTimestamp == nil {
		t.Errorf("zone b's Service: %v, want it deleted", err)
	}
	if f.gone() {
		t.Fatal("the cache went")
	}
}

func TestRemovedZoneUnansweredPodBounded(t *testing.T) {
	f, zoneB := newRemovedZoneFixture(t)
	f.prober.fail("wb-b-0", errors.New("connection refused"))
	f.removeZoneB()
	for range 4 {
		if zoneB() == nil {
			t.Fatalf("zone b's StatefulSet deleted within the %s bound", testUnanswered)
		}
		f.advance(time.Minute)
		f.reconcile()
	}
	if zoneB() == nil {
		t.Fatalf("zone b's StatefulSet deleted within the %s bound", testUnanswered)
	}
	f.advance(time.Minute + time.Second)
	f.reconcile()
	if s := zoneB(); s != nil && s.DeletionTimestamp == nil {
		t.Fatal("zone b's StatefulSet stays past the bound")
	}
	f.wantUnansweredWarning("wb-b-0")
}

// newRemovedZoneFixture is a cache of zones a and b, one pod each, running
// with an IP, wb-a-0 holding nothing; zoneB reads zone b's StatefulSet
// (nil once gone).
func newRemovedZoneFixture(t *testing.T) (*heldFixture, func() *appsv1.StatefulSet) {
	f := newHeldFixture(t, 1)
	f.addPod(0, true)
	f.prober.set("wb-a-0", HeldReport{LimitBytes: 1 << 30})
	dc := f.cache()
	dc.Spec.Zones = append(dc.Spec.Zones, cachev1alpha1.ZoneSpec{Name: "b"})
	if err := f.c.Update(f.ctx, dc); err != nil {
		t.Fatal(err)
	}
	f.reconcile()
	zoneB := func() *appsv1.StatefulSet {
		t.Helper()
		var sts appsv1.StatefulSet
		err := f.c.Get(f.ctx, client.ObjectKey{Namespace: f.dc.Namespace, Name: "wb-b"}, &sts)
		if apierrors.IsNotFound(err) {
			return nil
		} else if err != nil {
			t.Fatal(err)
		}
		return &sts
	}
	sts := zoneB()
	if sts == nil {
		t.Fatal("no StatefulSet wb-b")
	}
	pod := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: "wb-b-0", Namespace: f.dc.Namespace, Labels: sts.Spec.Template.Labels},
		Spec:       corev1.PodSpec{Containers: []corev1.Container{{Name: containerName, Image: "example.com/cachenode:test"}}},
	}
	if err := f.c.Create(f.ctx, pod); err != nil {
		t.Fatal(err)
	}
	pod.Status = corev1.PodStatus{Phase: corev1.PodRunning, PodIP: "10.0.1.10", PodIPs: []corev1.PodIP{{IP: "10.0.1.10"}}}
	if err := f.c.Status().Update(f.ctx, pod); err != nil {
		t.Fatal(err)
	}
	return f, zoneB
}

// removeZoneB removes zone b from the spec and reconciles.
func (f *heldFixture) removeZoneB() {
	f.t.Helper()
	dc := f.cache()
	dc.Spec.Zones = dc.Spec.Zones[:1]
	if err := f.c.Update(f.ctx, dc); err != nil {
		f.t.Fatal(err)
	}
	f.reconcile()
}
