package cluster_test

import (
	"context"
	"fmt"
	"slices"
	"sync"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/clientcmd"
	watchtools "k8s.io/client-go/tools/watch"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/distcache/distcache/controllers"
)

// podRollout follows a cache's pods through a rollout by watching them: it
// sees every change the API server makes to them (not samples), so a
// moment with two pods down cannot slip between two polls.
type podRollout struct {
	expected int                // pods the cache has when settled
	old      map[types.UID]bool // the pods before the rollout
	image    string             // the cachenode image the rollout brings
	start    time.Time
	now      func() time.Time // the clock events are timed by
	cancel   context.CancelFunc
	done     chan struct{}

	mu           sync.Mutex
	pods         map[string]*corev1.Pod // by name, as last seen
	changes      int                    // watch events seen
	maxUnready   int                    // most pods missing or not Ready at one moment
	maxUnreadyAt time.Time
	maxDown      []string        // which, and why, at that moment
	readyNow     map[string]bool // each pod's readiness as last seen, by UID
	everReady    map[string]bool // the new pods that have been Ready, by UID
	// maxTakenDown is the most pods the rollout itself had down at one
	// moment: missing, terminating, or new and not yet Ready. A running
	// pod that turns unready on its own (a probe, or its node, on a loaded
	// machine) counts in maxUnready only.
	maxTakenDown   int
	maxTakenDownAt time.Time
	downs          []podMoment // old pods, as each began terminating
	ups            []podMoment // new pods on image, as each turned Ready
	seen           map[string]bool
	watchErr       error
}

// podMoment is when a pod of a zone did something.
type podMoment struct {
	pod, zone string
	at        time.Time
}

// podWatcher watches one cache's node pods.
type podWatcher struct {
	cs      kubernetes.Interface
	ns, sel string
}

func (w podWatcher) WatchWithContext(ctx context.Context, o metav1.ListOptions) (watch.Interface, error) {
	o.LabelSelector = w.sel
	return w.cs.CoreV1().Pods(w.ns).Watch(ctx, o)
}

// watchRollout lists the cache's node pods (the old ones) and follows
// them until stop. expected is how many pods the cache has when all are
// in place; image is the cachenode image the pods roll to.
func watchRollout(ctx context.Context, ns, cache string, expected int, image string) *podRollout {
	GinkgoHelper()
	cfg, err := clientcmd.BuildConfigFromFlags("", kubeconfig)
	Expect(err).NotTo(HaveOccurred())
	cs, err := kubernetes.NewForConfig(cfg)
	Expect(err).NotTo(HaveOccurred())
	sel := labels.SelectorFromSet(labels.Set{controllers.LabelName: controllers.NodeAppName, controllers.LabelInstance: cache}).String()
	list, err := cs.CoreV1().Pods(ns).List(ctx, metav1.ListOptions{LabelSelector: sel})
	Expect(err).NotTo(HaveOccurred())

	wctx, cancel := context.WithCancel(context.Background())
	r := &podRollout{expected: expected, old: map[types.UID]bool{}, image: image, start: time.Now(), now: time.Now,
		cancel: cancel, done: make(chan struct{}), pods: map[string]*corev1.Pod{}, seen: map[string]bool{}, readyNow: map[string]bool{}, everReady: map[string]bool{}}
	for i := range list.Items {
		p := &list.Items[i]
		r.old[p.UID] = true
		r.pods[p.Name] = p
		r.readyNow[string(p.UID)] = podReady(p)
	}
	r.observe(time.Now())
	rw, err := watchtools.NewRetryWatcherWithContext(wctx, list.ResourceVersion, podWatcher{cs: cs, ns: ns, sel: sel})
	Expect(err).NotTo(HaveOccurred())
	go func() {
		defer GinkgoRecover()
		defer close(r.done)
		defer rw.Stop()
		for {
			select {
			case <-wctx.Done():
				return
			case ev, ok := <-rw.ResultChan():
				if !ok {
					r.fail(fmt.Errorf("the watch of the cache's pods ended"))
					return
				}
				r.apply(ev)
			}
		}
	}()
	return r
}

func (r *podRollout) fail(err error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.watchErr == nil {
		r.watchErr = err
	}
}

func (r *podRollout) apply(ev watch.Event) {
	now := r.now()
	if ev.Type == watch.Error {
		r.fail(fmt.Errorf("watch error: %v", ev.Object))
		return
	}
	p, ok := ev.Object.(*corev1.Pod)
	if !ok {
		return // a bookmark
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	r.changes++
	zone := p.Labels[controllers.LabelZone]
	// Every change of a pod's readiness, so that a moment with two pods
	// down can be told apart afterwards.
	if ready := ev.Type != watch.Deleted && podReady(p); ready != r.readyNow[string(p.UID)] {
		r.readyNow[string(p.UID)] = ready
		r.everReady[string(p.UID)] = r.everReady[string(p.UID)] || ready
		fmt.Fprintf(GinkgoWriter, "%s rollout: %s (uid %.8s) %s\n", now.Format("15:04:05.000"), p.Name, p.UID, podState(p, ev.Type == watch.Deleted))
	}
	if r.old[p.UID] && (ev.Type == watch.Deleted || p.DeletionTimestamp != nil) && !r.seen["down/"+string(p.UID)] {
		r.seen["down/"+string(p.UID)] = true
		r.downs = append(r.downs, podMoment{pod: p.Name, zone: zone, at: now})
		fmt.Fprintf(GinkgoWriter, "%s rollout: %s (%s) terminating\n", now.Format("15:04:05.000"), p.Name, zone)
	}
	if !r.old[p.UID] && ev.Type != watch.Deleted && podReady(p) && p.Spec.Containers[0].Image == r.image && !r.seen["up/"+string(p.UID)] {
		r.seen["up/"+string(p.UID)] = true
		r.ups = append(r.ups, podMoment{pod: p.Name, zone: zone, at: now})
		fmt.Fprintf(GinkgoWriter, "%s rollout: %s (%s) Ready on %s\n", now.Format("15:04:05.000"), p.Name, zone, r.image)
	}
	if ev.Type == watch.Deleted {
		// A pod of the same name may already be back: only forget this one.
		if cur, ok := r.pods[p.Name]; ok && cur.UID == p.UID {
			delete(r.pods, p.Name)
		}
	} else {
		r.pods[p.Name] = p
	}
	r.observeLocked(now)
}

func (r *podRollout) observe(now time.Time) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.observeLocked(now)
}

// observeLocked counts the pods missing or not Ready (a terminating pod is
// not Ready) against the settled count, and those of them the rollout took
// down.
func (r *podRollout) observeLocked(now time.Time) {
	ready := 0
	var down []string
	for _, p := range r.pods {
		if podReady(p) {
			ready++
		} else {
			down = append(down, p.Name+" "+podState(p, false))
		}
	}
	unready := r.expected - ready
	missing := max(r.expected-len(r.pods), 0)
	if missing > 0 {
		down = append(down, fmt.Sprintf("%d missing", missing))
	}
	if unready > r.maxUnready {
		slices.Sort(down)
		r.maxUnready, r.maxUnreadyAt, r.maxDown = unready, now, down
	}
	taken := missing
	for _, p := range r.pods {
		if p.DeletionTimestamp != nil || !r.old[p.UID] && !r.everReady[string(p.UID)] {
			taken++
		}
	}
	if taken > r.maxTakenDown {
		r.maxTakenDown, r.maxTakenDownAt = taken, now
	}
}

// podState says why a pod is or is not Ready.
func podState(p *corev1.Pod, deleted bool) string {
	switch {
	case deleted:
		return "deleted"
	case p.DeletionTimestamp != nil:
		return "terminating"
	case p.Status.Phase != corev1.PodRunning:
		return string(p.Status.Phase)
	case podReady(p):
		return "Ready"
	}
	return "not Ready"
}

// rolloutResult is what the watch saw.
type rolloutResult struct {
	maxUnready   int
	maxUnreadyAt time.Time
	maxDown      []string
	// maxTakenDown: the most pods the rollout had down at once (podRollout).
	maxTakenDown   int
	maxTakenDownAt time.Time
	changes        int
	downs, ups     []podMoment
	err            error
}

// stop ends the watch and returns what it saw.
func (r *podRollout) stop() rolloutResult {
	r.cancel()
	<-r.done
	return r.result()
}

// result is what the watch saw so far.
func (r *podRollout) result() rolloutResult {
	r.mu.Lock()
	defer r.mu.Unlock()
	return rolloutResult{maxUnready: r.maxUnready, maxUnreadyAt: r.maxUnreadyAt, maxDown: slices.Clone(r.maxDown),
		maxTakenDown: r.maxTakenDown, maxTakenDownAt: r.maxTakenDownAt, changes: r.changes,
		downs: slices.Clone(r.downs), ups: slices.Clone(r.ups), err: r.watchErr}
}

// halt ends the watch (DeferCleanup, when a spec fails with it running).
func (r *podRollout) halt() { r.stop() }

// zoneSpan is when a zone's rollout began (its first old pod went down)
// and ended (its last new pod turned Ready).
func (res rolloutResult) zoneSpan(zone string) (first, last time.Time) {
	for _, d := range res.downs {
		if d.zone == zone && (first.IsZero() || d.at.Before(first)) {
			first = d.at
		}
	}
	for _, u := range res.ups {
		if u.zone == zone && u.at.After(last) {
			last = u.at
		}
	}
	return first, last
}

// sequence is the pods in the order they went down.
func (res rolloutResult) sequence() []string {
	var names []string
	for _, d := range res.downs {
		names = append(names, d.pod)
	}
	return names
}

// counterSampler follows a counter of the cache's node pods while they come
// and go: every interval it scrapes each running pod (terminating ones
// too, while they answer) and keeps each pod's highest value. A pod's count
// from its last scrape to its exit is missed, so what it returns is a
// floor, short by at most an interval's worth of each replaced pod.
type counterSampler struct {
	name     string
	match    map[string]string
	sampling *poller

	mu   sync.Mutex
	base map[types.UID]float64 // the pods' values when sampling began
	last map[types.UID]float64
	zone map[types.UID]string
}

func sampleCounter(ctx context.Context, ns, cache, name string, match map[string]string, every time.Duration) *counterSampler {
	GinkgoHelper()
	s := &counterSampler{name: name, match: match,
		base: map[types.UID]float64{}, last: map[types.UID]float64{}, zone: map[types.UID]string{}}
	sel := client.MatchingLabels{controllers.LabelName: controllers.NodeAppName, controllers.LabelInstance: cache}
	sample := func(ctx context.Context, first bool) error {
		var pods corev1.PodList
		if err := k8sClient.List(ctx, &pods, client.InNamespace(ns), sel); err != nil {
			return err
		}
		for _, p := range pods.Items {
			if p.Status.PodIP == "" || p.Status.Phase != corev1.PodRunning {
				continue
			}
			m, err := scrape(ctx, p.Status.PodIP, controllers.MetricsPort)
			if err != nil {
				if first {
					return fmt.Errorf("metrics of pod %s: %w", p.Name, err)
				}
				continue
			}
			v := m.Sum(name, match)
			s.mu.Lock()
			if first {
				s.base[p.UID] = v
			}
			s.last[p.UID] = max(s.last[p.UID], v)
			s.zone[p.UID] = p.Labels[controllers.LabelZone]
			s.mu.Unlock()
		}
		return nil
	}
	Eventually(ctx, func() error { return sample(ctx, true) }).Should(Succeed())
	s.sampling = poll(every, false, func(ctx context.Context) { _ = sample(ctx, false) })
	return s
}

// stop ends the sampling and returns how much the counter grew, by zone;
// pods that started meanwhile count from zero.
func (s *counterSampler) stop() map[string]float64 {
	s.sampling.stop()
	s.mu.Lock()
	defer s.mu.Unlock()
	out := map[string]float64{}
	for uid, v := range s.last {
		out[s.zone[uid]] += v - s.base[uid]
	}
	return out
}

func (s *counterSampler) halt() { s.stop() }
