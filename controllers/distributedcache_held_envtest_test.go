package controllers

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/utils/ptr"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"

	cachev1alpha1 "github.com/distcache/distcache/api/v1alpha1"
	"github.com/distcache/distcache/internal/testutil/sharedapi"
)

// The scale-down's wait for held data and the pinned-full events, with
// the reconciler run step by step against a real API server (envtest),
// its clock and the nodes' answers (a fake HeldProber) in the test's
// hands: the pods are created by the test, as no kubelet runs.

// sharedAPIServer is the tests' API server, with the CRDs.
var sharedAPIServer = sharedapi.New(filepath.Join("config", "crd", "bases"))

// TestMain stops the API server the envtest tests started, if any.
func TestMain(m *testing.M) { os.Exit(sharedAPIServer.Main(m)) }

var envClient struct {
	once sync.Once
	c    client.Client
	err  error
}

// apiServer starts (once) kube-apiserver and etcd with the CRDs and
// returns a client of it.
func apiServer(t *testing.T) client.Client {
	t.Helper()
	cfg := sharedAPIServer.Env(t).Config
	envClient.once.Do(func() {
		scheme := runtime.NewScheme()
		if envClient.err = AddToScheme(scheme); envClient.err == nil {
			envClient.c, envClient.err = client.New(cfg, client.Options{Scheme: scheme})
		}
	})
	if envClient.err != nil {
		t.Fatal(envClient.err)
	}
	return envClient.c
}

// fakeProber answers for pods by name: a report or an error; a pod it
// has no answer for is an error. It counts the calls per pod.
type fakeProber struct {
	mu      sync.Mutex
	answers map[string]HeldReport
	errs    map[string]error
	calls   map[string]int
}

func (f *fakeProber) set(pod string, rep HeldReport) {
	f.mu.Lock()
	defer f.mu.Unlock()
	delete(f.errs, pod)
	f.answers[pod] = rep
}

func (f *fakeProber) fail(pod string, err error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	delete(f.answers, pod)
	f.errs[pod] = err
}

func (f *fakeProber) Held(_ context.Context, pod *corev1.Pod) (HeldReport, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.calls[pod.Name]++
	if rep, ok := f.answers[pod.Name]; ok {
		return rep, nil
	}
	if err, ok := f.errs[pod.Name]; ok {
		return HeldReport{}, err
	}
	return HeldReport{}, errors.New("no answer for " + pod.Name)
}

// recordedEvent is one event the reconciler recorded.
type recordedEvent struct{ eventType, reason, note string }

// eventLog is an events.EventRecorder that keeps every event.
type eventLog struct {
	mu     sync.Mutex
	events []recordedEvent
}

func (l *eventLog) Eventf(_, _ runtime.Object, eventType, reason, _, note string, args ...any) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.events = append(l.events, recordedEvent{eventType, reason, fmt.Sprintf(note, args...)})
}

// take returns the events recorded with reason since the last take.
func (l *eventLog) take(reason string) []recordedEvent {
	l.mu.Lock()
	defer l.mu.Unlock()
	var out, rest []recordedEvent
	for _, e := range l.events {
		if e.reason == reason {
			out = append(out, e)
		} else {
			rest = append(rest, e)
		}
	}
	l.events = rest
	return out
}

// heldFixture is a cache of one zone "a" run by a reconciler with a fake
// clock and prober, in a namespace of its own.
type heldFixture struct {
	t      *testing.T
	ctx    context.Context
	c      client.Client
	r      *DistributedCacheReconciler
	dc     *cachev1alpha1.DistributedCache
	now    time.Time
	prober *fakeProber
	events *eventLog
}

const (
	testDrainGrace = time.Minute
	testUnanswered = 5 * time.Minute
)

func newHeldFixture(t *testing.T, replicas int32) *heldFixture {
	c := apiServer(t)
	ctx := context.Background()
	ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{GenerateName: "held-"}}
	if err := c.Create(ctx, ns); err != nil {
		t.Fatal(err)
	}
	f := &heldFixture{t: t, ctx: ctx, c: c, now: time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC),
		prober: &fakeProber{answers: map[string]HeldReport{}, errs: map[string]error{}, calls: map[string]int{}},
		events: &eventLog{}}
	f.r = &DistributedCacheReconciler{Client: c, Scheme: c.Scheme(), Recorder: f.events, CacheNodeImage: "example.com/cachenode:test",
		DrainGrace: testDrainGrace, UnansweredDrainTimeout: testUnanswered, HeldProber: f.prober,
		Now: func() time.Time { return f.now }}
	f.dc = &cachev1alpha1.DistributedCache{
		ObjectMeta: metav1.ObjectMeta{Name: "wb", Namespace: ns.Name},
		Spec: cachev1alpha1.DistributedCacheSpec{
			Replicas: ptr.To(replicas),
			Zones:    []cachev1alpha1.ZoneSpec{{Name: "a"}},
			Storage:  cachev1alpha1.StorageSpec{EmptyDir: &cachev1alpha1.EmptyDirStorage{}},
		},
	}
	if err := c.Create(ctx, f.dc); err != nil {
		t.Fatal(err)
	}
	f.reconcile()
	return f
}

func (f *heldFixture) reconcile() {
	f.t.Helper()
	if _, err := f.r.Reconcile(f.ctx, ctrl.Request{NamespacedName: client.ObjectKeyFromObject(f.dc)}); err != nil {
		f.t.Fatalf("reconcile: %v", err)
	}
}

func (f *heldFixture) advance(d time.Duration) { f.now = f.now.Add(d) }

func (f *heldFixture) podName(ord int) string { return fmt.Sprintf("wb-a-%d", ord) }

// addPod creates the zone's pod ord, running and ready with an IP (ip
// false: pending, without one).
func (f *heldFixture) addPod(ord int, ip bool) {
	f.t.Helper()
	sts := f.statefulSet()
	pod := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: f.podName(ord), Namespace: f.dc.Namespace, Labels: sts.Spec.Template.Labels},
		Spec:       corev1.PodSpec{Containers: []corev1.Container{{Name: containerName, Image: "example.com/cachenode:test"}}},
	}
	if err := f.c.Create(f.ctx, pod); err != nil {
		f.t.Fatal(err)
	}
	if !ip {
		return
	}
	addr := fmt.Sprintf("10.0.0.%d", ord+10)
	pod.Status = corev1.PodStatus{
		Phase: corev1.PodRunning, PodIP: addr, PodIPs: []corev1.PodIP{{IP: addr}},
		Conditions: []corev1.PodCondition{{Type: corev1.PodReady, Status: corev1.ConditionTrue, LastTransitionTime: metav1.Now()}},
	}
	if err := f.c.Status().Update(f.ctx, pod); err != nil {
		f.t.Fatal(err)
	}
}

func (f *heldFixture) statefulSet() *appsv1.StatefulSet {
	f.t.Helper()
	var sts appsv1.StatefulSet
	if err := f.c.Get(f.ctx, client.ObjectKey{Namespace: f.dc.Namespace, Name: "wb-a"}, &sts); err != nil {
		f.t.Fatal(err)
	}
	return &sts
}

func (f *heldFixture) replicas() int32 { f.t.Helper(); return *f.statefulSet().Spec.Replicas }

func (f *heldFixture) cache() *cachev1alpha1.DistributedCache {
	f.t.Helper()
	var dc cachev1alpha1.DistributedCache
	if err := f.c.Get(f.ctx, client.ObjectKeyFromObject(f.dc), &dc); err != nil {
		f.t.Fatal(err)
	}
	return &dc
}

func (f *heldFixture) progressing() *metav1.Condition {
	f.t.Helper()
	c := meta.FindStatusCondition(f.cache().Status.Conditions, cachev1alpha1.ConditionProgressing)
	if c == nil {
		f.t.Fatal("no Progressing condition")
	}
	return c
}

func (f *heldFixture) leaving() []cachev1alpha1.LeavingPodStatus {
	f.t.Helper()
	zs := f.cache().Status.Zones
	if len(zs) != 1 {
		f.t.Fatalf("status zones %v", zs)
	}
	return zs[0].LeavingPods
}

// addEmptyPods adds the pods of ordinals 0 to n-1, running, each
// answering that it holds nothing.
func (f *heldFixture) addEmptyPods(n int) {
	f.t.Helper()
	for i := range n {
		f.addPod(i, true)
		f.prober.set(f.podName(i), HeldReport{LimitBytes: 1 << 30})
	}
}

// wantReplicas fails the test unless the StatefulSet is at want
// replicas; when says when, for the message.
func (f *heldFixture) wantReplicas(want int32, when string) {
	f.t.Helper()
	if got := f.replicas(); got != want {
		f.t.Fatalf("StatefulSet at %d %s, want %d", got, when, want)
	}
}

// wantUnanswered checks that the status names pod alone as leaving,
// unanswered ("connection refused") since since, and that Progressing
// says LeavingPodUnanswered.
func (f *heldFixture) wantUnanswered(pod string, since time.Time) {
	f.t.Helper()
	l := f.leaving()
	if len(l) != 1 || l[0].Name != pod || !strings.Contains(l[0].Unanswered, "connection refused") ||
		l[0].UnansweredSince == nil || !l[0].UnansweredSince.Time.Equal(since.Truncate(time.Second)) {
		f.t.Fatalf("status leavingPods %+v, want %s unanswered since %s", l, pod, since)
	}
	if c := f.progressing(); c.Reason != cachev1alpha1.ReasonLeavingPodUnanswered {
		f.t.Errorf("Progressing %s: %s; want %s", c.Reason, c.Message, cachev1alpha1.ReasonLeavingPodUnanswered)
	}
}

// wantUnansweredWarning checks that one event was recorded since the
// last take of LeavingPodUnanswered, a Warning naming pod.
func (f *heldFixture) wantUnansweredWarning(pod string) {
	f.t.Helper()
	evs := f.events.take(EventLeavingPodUnanswered)
	if len(evs) != 1 || evs[0].eventType != corev1.EventTypeWarning || !strings.Contains(evs[0].note, pod) {
		f.t.Errorf("LeavingPodUnanswered events %v, want one Warning naming %s", evs, pod)
	}
}

func (f *heldFixture) scale(replicas int32) {
	f.t.Helper()
	dc := f.cache()
	dc.Spec.Replicas = ptr.To(replicas)
	if err := f.c.Update(f.ctx, dc); err != nil {
		f.t.Fatal(err)
	}
}

// drainPublished scales down to replicas and reconciles until the ring
// marking the pods above it draining has been published for the drain
// grace: the point where, before held data was looked at, the
// StatefulSet shrank.
func (f *heldFixture) drainPublished(replicas int32) {
	f.t.Helper()
	before := f.replicas()
	f.scale(replicas)
	f.reconcile() // publishes the ring with the pods above draining
	f.reconcile() // the ring is published: the grace runs
	if got := f.replicas(); got != before {
		f.t.Fatalf("StatefulSet at %d within the drain grace, want %d", got, before)
	}
	f.advance(testDrainGrace + time.Second)
}

func TestScaleDownWaitsForHeldData(t *testing.T) {
	f := newHeldFixture(t, 3)
	f.addEmptyPods(3)
	f.reconcile()

	t.Log("scale to 1 while wb-a-1 and wb-a-2 hold write-back data")
	f.prober.set("wb-a-1", HeldReport{Objects: 3, Bytes: 3000, LimitBytes: 1 << 30})
	f.prober.set("wb-a-2", HeldReport{Objects: 5, Bytes: 5 << 20, LimitBytes: 1 << 30})
	f.drainPublished(1)
	f.reconcile()
	f.wantReplicas(3, "while wb-a-2 holds data")
	want := []cachev1alpha1.LeavingPodStatus{
		{Name: "wb-a-1", HeldObjects: 3, HeldBytes: 3000},
		{Name: "wb-a-2", HeldObjects: 5, HeldBytes: 5 << 20},
	}
	if got := f.leaving(); !slices.Equal(got, want) {
		t.Errorf("status leavingPods %+v, want %+v", got, want)
	}
	c := f.progressing()
	if c.Reason != cachev1alpha1.ReasonHeldDataDraining || !strings.Contains(c.Message, "wb-a-2 holds 5 objects, 5.0 MiB") {
		t.Errorf("Progressing %s: %s; want %s naming wb-a-2", c.Reason, c.Message, cachev1alpha1.ReasonHeldDataDraining)
	}
	if evs := f.events.take(EventWaitingForHeldData); len(evs) != 1 || evs[0].eventType != corev1.EventTypeNormal ||
		!strings.Contains(evs[0].note, "wb-a-1") || !strings.Contains(evs[0].note, "wb-a-2") {
		t.Errorf("WaitingForHeldData events %v, want one naming wb-a-1 and wb-a-2", evs)
	}

	t.Log("the counts change: no new event; the pods are asked again only after the look interval")
	calls := f.prober.calls["wb-a-2"]
	f.prober.set("wb-a-2", HeldReport{Objects: 2, Bytes: 2000, LimitBytes: 1 << 30})
	f.reconcile()
	if f.prober.calls["wb-a-2"] != calls {
		t.Errorf("wb-a-2 asked again within %s", heldLookInterval)
	}
	f.advance(heldLookInterval)
	f.reconcile()
	if got := f.leaving(); len(got) != 2 || got[1].HeldObjects != 2 {
		t.Errorf("status leavingPods %+v, want wb-a-2 with 2 objects", got)
	}
	if evs := f.events.take(EventWaitingForHeldData); len(evs) != 0 {
		t.Errorf("WaitingForHeldData recorded again for the same pods: %v", evs)
	}
	f.wantReplicas(3, "while both leaving pods hold data")

	t.Log("wb-a-2 has handed everything over: it goes, wb-a-1 stays")
	f.prober.set("wb-a-2", HeldReport{LimitBytes: 1 << 30})
	f.advance(heldLookInterval)
	f.reconcile()
	f.wantReplicas(2, "once only wb-a-1 holds data")
	if evs := f.events.take(EventWaitingForHeldData); len(evs) != 1 || strings.Contains(evs[0].note, "wb-a-2") {
		t.Errorf("WaitingForHeldData events %v, want one naming only wb-a-1", evs)
	}

	t.Log("wb-a-1 too: the StatefulSet reaches spec.replicas and the status forgets the leaving pods")
	f.prober.set("wb-a-1", HeldReport{LimitBytes: 1 << 30})
	f.advance(heldLookInterval)
	f.reconcile()
	f.wantReplicas(1, "once no leaving pod holds data")
	f.reconcile()
	if got := f.leaving(); len(got) != 0 {
		t.Errorf("status leavingPods %+v after the scale-down, want none", got)
	}
	if c := f.progressing(); c.Reason == cachev1alpha1.ReasonHeldDataDraining {
		t.Errorf("Progressing still %s", c.Reason)
	}
	if evs := f.events.take(EventLeavingPodUnanswered); len(evs) != 0 {
		t.Errorf("LeavingPodUnanswered events %v for pods that answered", evs)
	}
}

func TestScaleDownUnansweredPod(t *testing.T) {
	f := newHeldFixture(t, 3)
	f.addEmptyPods(3)
	f.reconcile()
	f.prober.fail("wb-a-2", errors.New("connection refused"))
	f.drainPublished(2)

	t.Log("wb-a-2 cannot be asked: it stays for the bound, counted from the first failure")
	f.reconcile()
	first := f.now
	f.wantReplicas(3, "with wb-a-2 unanswered")
	f.wantUnanswered("wb-a-2", first)
	if evs := f.events.take(EventWaitingForHeldData); len(evs) != 1 || !strings.Contains(evs[0].note, "cannot be asked") {
		t.Errorf("WaitingForHeldData events %v, want one saying wb-a-2 cannot be asked", evs)
	}
	for range 4 {
		f.advance(time.Minute)
		f.reconcile()
	}
	if got := f.replicas(); got != 3 {
		t.Fatalf("StatefulSet at %d %s after the first failure, within the %s bound", got, f.now.Sub(first), testUnanswered)
	}
	if l := f.leaving(); len(l) != 1 || !l[0].UnansweredSince.Time.Equal(first.Truncate(time.Second)) {
		t.Errorf("status leavingPods %+v: the bound must run from the first failure", l)
	}
	if evs := f.events.take(EventWaitingForHeldData); len(evs) != 0 {
		t.Errorf("WaitingForHeldData recorded again for the same wait: %v", evs)
	}

	t.Log("past the bound it goes, with a Warning")
	f.advance(time.Minute)
	f.reconcile()
	f.wantReplicas(2, "past the bound")
	f.wantUnansweredWarning("wb-a-2")
}

func TestScaleDownPendingPod(t *testing.T) {
	f := newHeldFixture(t, 2)
	f.addPod(0, true)
	f.addPod(1, false) // pending: never got an IP
	f.prober.set("wb-a-0", HeldReport{LimitBytes: 1 << 30})
	f.prober.set("wb-a-1", HeldReport{})
	f.reconcile()
	f.scale(1)
	f.reconcile()
	f.reconcile()
	f.advance(testDrainGrace + time.Second)

	t.Log("a pending pod is not asked; it is kept for the bound like an unreachable one")
	f.reconcile()
	f.wantReplicas(2, "with wb-a-1 pending")
	if n := f.prober.calls["wb-a-1"]; n != 0 {
		t.Errorf("the pending pod was asked %d times", n)
	}
	if l := f.leaving(); len(l) != 1 || l[0].Unanswered != "not running (phase Pending)" {
		t.Errorf("status leavingPods %+v, want wb-a-1 not running", l)
	}
	f.advance(testUnanswered)
	f.reconcile()
	f.wantReplicas(1, "past the bound")
}

func TestPinnedSpaceFullEvents(t *testing.T) {
	f := newHeldFixture(t, 2)
	f.addPod(0, true)
	f.addPod(1, true)
	const limit = 1000
	f.prober.set("wb-a-1", HeldReport{Objects: 1, Bytes: 10, LimitBytes: limit})
	look := func(rep HeldReport) {
		f.t.Helper()
		f.prober.set("wb-a-0", rep)
		f.advance(heldWatchInterval)
		f.reconcile()
	}
	expect := func(what string, wantType string) {
		t.Helper()
		full, room := f.events.take(EventPinnedSpaceFull), f.events.take(EventPinnedSpaceAvailable)
		var got []recordedEvent
		got = append(got, full...)
		got = append(got, room...)
		switch {
		case wantType == "" && len(got) != 0:
			t.Errorf("%s: events %v, want none", what, got)
		case wantType == corev1.EventTypeWarning && (len(full) != 1 || len(room) != 0 || full[0].eventType != wantType || !strings.Contains(full[0].note, "wb-a-0")):
			t.Errorf("%s: events %v, want one Warning %s naming wb-a-0", what, got, EventPinnedSpaceFull)
		case wantType == corev1.EventTypeNormal && (len(room) != 1 || len(full) != 0 || room[0].eventType != wantType):
			t.Errorf("%s: events %v, want one Normal %s", what, got, EventPinnedSpaceAvailable)
		}
	}
	look(HeldReport{Objects: 4, Bytes: 400, LimitBytes: limit, FullTotal: 2})
	expect("first look, refusals from before", "")
	look(HeldReport{Objects: 6, Bytes: 600, LimitBytes: limit, FullTotal: 9})
	expect("refusals since the last look", corev1.EventTypeWarning)
	look(HeldReport{Objects: 6, Bytes: 600, LimitBytes: limit, FullTotal: 12})
	expect("still refusing", "")
	look(HeldReport{Objects: 2, Bytes: 200, LimitBytes: limit, FullTotal: 12})
	expect("persistence caught up", corev1.EventTypeNormal)
	look(HeldReport{Objects: 10, Bytes: 700, PinnedBytes: limit, LimitBytes: limit, FullTotal: 12})
	expect("pinned use at the limit", corev1.EventTypeWarning)
	calls := f.prober.calls["wb-a-0"]
	f.prober.set("wb-a-0", HeldReport{Objects: 1, Bytes: 10, LimitBytes: limit, FullTotal: 12})
	f.advance(heldWatchInterval - time.Second)
	f.reconcile() // within the interval: the last answer, no event
	expect("the same look", "")
	if n := f.prober.calls["wb-a-0"]; n != calls {
		t.Errorf("wb-a-0 asked %d times within %s of the last look", n-calls, heldWatchInterval)
	}
	f.prober.fail("wb-a-0", errors.New("timeout"))
	f.advance(time.Second)
	f.reconcile()
	expect("no answer", "")
}

// A restart asked with kubectl rollout restart survives the operator's
// next write of the StatefulSet (here a scale-up): the pods do not roll
// once more.
func TestRolloutRestartIsKept(t *testing.T) {
	f := newHeldFixture(t, 2)
	sts := f.statefulSet()
	patch := client.MergeFrom(sts.DeepCopy())
	if sts.Spec.Template.Annotations == nil {
		sts.Spec.Template.Annotations = map[string]string{}
	}
	sts.Spec.Template.Annotations[restartedAtAnnotation] = "2026-03-01T12:00:00Z"
	if err := f.c.Patch(f.ctx, sts, patch); err != nil {
		t.Fatal(err)
	}
	dcPatch := client.MergeFrom(f.dc.DeepCopy())
	f.dc.Spec.Replicas = ptr.To[int32](3)
	if err := f.c.Patch(f.ctx, f.dc, dcPatch); err != nil {
		t.Fatal(err)
	}
	f.reconcile()
	sts = f.statefulSet()
	if got := *sts.Spec.Replicas; got != 3 {
		t.Fatalf("the StatefulSet has %d replicas after the scale-up, want 3 (not written?)", got)
	}
	if got := sts.Spec.Template.Annotations[restartedAtAnnotation]; got != "2026-03-01T12:00:00Z" {
		t.Fatalf("the pod template's %s is %q after the operator wrote the StatefulSet: the pods roll again", restartedAtAnnotation, got)
	}
}
