package controllers

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/dustin/go-humanize"

	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"

	cachev1alpha1 "github.com/distcache/distcache/api/v1alpha1"
)

// Held data: what the cache nodes hold for WriteBack and Transient
// policies (internal/writeback), as their metrics say. The operator asks
// each node pod for it (observeHeld) to hold a scale-down while a pod
// being scaled away still holds some (heldDrainHold: its node hands it to
// the holders the ring wants, internal/node/held_handoff.go), and to say
// with an event when a node's pinned space is full (its write-back and
// transient writes then get 503 SlowDown).
//
// A pod that cannot be asked (not running, no IP, its metrics endpoint
// unreachable) is waited for at most UnansweredDrainTimeout, then removed
// with a Warning event: a node that does not run cannot hand anything
// over, so waiting longer would only block the scale-down. What it held
// is still on its other holders when the policy's replicas are 2 or more
// (they copy it to the holders the ring wants once it leaves the ring),
// and on its volume claim, which a scale-down keeps
// (docs/operations.md, "Scaling down").

// The node series read (internal/metrics/held.go, docs/metrics.md).
const (
	metricHeldObjects = "distcache_writeback_objects"
	metricHeldBytes   = "distcache_writeback_bytes"
	metricHeldLimit   = "distcache_writeback_limit_bytes"
	metricHeldFull    = "distcache_writeback_full_total"
	metricHeldPinned  = "distcache_writeback_pinned_bytes"
)

// HeldReport is what a cache node holds for WriteBack and Transient
// policies, from one read of its metrics.
type HeldReport struct {
	// Objects is every held object (dirty write-back versions, deletes and
	// transient objects, copies kept for other holders included): the sum
	// of distcache_writeback_objects.
	Objects int64
	// Bytes is the sum of distcache_writeback_bytes.
	Bytes int64
	// LimitBytes is the node's pinned space (distcache_writeback_limit_bytes;
	// 0: the node has no write-back journal).
	LimitBytes int64
	// PinnedBytes is the pinned space in use, what LimitBytes bounds
	// (distcache_writeback_pinned_bytes: every held version kept and
	// multipart parts; Bytes from a node that does not report it).
	PinnedBytes int64
	// FullTotal is distcache_writeback_full_total: the held writes refused
	// with SlowDown since the node started.
	FullTotal float64
	// Dirty is the held WriteBack objects S3 does not have yet (writes and
	// deletes, copies for other holders included): the samples of
	// distcache_writeback_objects whose kind is not "transient".
	Dirty int64
	// DirtyBytes is distcache_writeback_bytes of the tenants with dirty
	// objects. The node counts bytes per tenant, not per kind, so this
	// includes the transient objects of a tenant that has both: an upper
	// bound of the dirty bytes.
	DirtyBytes int64
}

// HeldProber asks a cache node pod what it holds. The operator calls it
// only for running pods with an IP.
type HeldProber interface {
	Held(ctx context.Context, pod *corev1.Pod) (HeldReport, error)
}

// HTTPHeldProber reads a pod's /metrics: plain HTTP on the metrics port
// (MetricsPort, as the kubelet's probes and Prometheus do), by pod IP.
type HTTPHeldProber struct {
	// Client makes the requests; nil: heldProbeClient.
	Client *http.Client
	// Port is the metrics port; 0: MetricsPort.
	Port int
}

// heldProbeTimeout bounds one read of a pod's metrics.
const heldProbeTimeout = 5 * time.Second

// heldProbeClient asks pods directly: never through a proxy from the
// operator's environment (pod IPs are seldom in NO_PROXY).
var heldProbeClient = &http.Client{Timeout: heldProbeTimeout, Transport: &http.Transport{
	Proxy:        nil,
	DialContext:  (&net.Dialer{Timeout: 2 * time.Second}).DialContext,
	MaxIdleConns: 64, MaxIdleConnsPerHost: 1, IdleConnTimeout: 90 * time.Second,
}}

// maxMetricsBytes bounds the metrics page read.
const maxMetricsBytes = 32 << 20

func (p HTTPHeldProber) Held(ctx context.Context, pod *corev1.Pod) (HeldReport, error) {
	c := p.Client
	if c == nil {
		c = heldProbeClient
	}
	port := p.Port
	if port == 0 {
		port = MetricsPort
	}
	url := "http://" + net.JoinHostPort(pod.Status.PodIP, strconv.Itoa(port)) + "/metrics"
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return HeldReport{}, err
	}
	req.Header.Set("Accept", "text/plain;version=0.0.4")
	resp, err := c.Do(req)
	if err != nil {
		return HeldReport{}, err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return HeldReport{}, fmt.Errorf("GET %s: %s", url, resp.Status)
	}
	return parseHeldMetrics(io.LimitReader(resp.Body, maxMetricsBytes))
}

// parseHeldMetrics reads the held data from a node's metrics page (the
// Prometheus text format). A page without any distcache_ series is not a
// cache node's; one without the write-back series is a node that holds
// nothing.
func parseHeldMetrics(r io.Reader) (HeldReport, error) {
	p := expfmt.NewTextParser(model.UTF8Validation)
	fams, err := p.TextToMetricFamilies(r)
	if err != nil {
		return HeldReport{}, fmt.Errorf("parse metrics: %w", err)
	}
	node := false
	for name := range fams {
		node = node || strings.HasPrefix(name, "distcache_")
	}
	if !node {
		return HeldReport{}, errors.New("not a cache node's metrics: no distcache_ series")
	}
	var h HeldReport
	h.Objects = int64(sumFamily(fams[metricHeldObjects]))
	h.Bytes = int64(sumFamily(fams[metricHeldBytes]))
	h.LimitBytes = int64(sumFamily(fams[metricHeldLimit]))
	h.FullTotal = sumFamily(fams[metricHeldFull])
	h.PinnedBytes = h.Bytes
	if f, ok := fams[metricHeldPinned]; ok {
		h.PinnedBytes = int64(sumFamily(f))
	}
	dirtyTenants := map[string]bool{}
	for _, m := range fams[metricHeldObjects].GetMetric() {
		if labelOf(m, "kind") == "transient" {
			continue
		}
		if v := int64(sampleOf(m)); v > 0 {
			h.Dirty += v
			dirtyTenants[labelOf(m, "tenant")] = true
		}
	}
	for _, m := range fams[metricHeldBytes].GetMetric() {
		if dirtyTenants[labelOf(m, "tenant")] {
			h.DirtyBytes += int64(sampleOf(m))
		}
	}
	return h, nil
}

// labelOf is the value of a sample's label name ("" if it has none).
func labelOf(m *dto.Metric, name string) string {
	for _, l := range m.GetLabel() {
		if l.GetName() == name {
			return l.GetValue()
		}
	}
	return ""
}

// sumFamily adds up a gauge, counter or untyped family's samples (0 for a
// family that is absent).
func sumFamily(f *dto.MetricFamily) float64 {
	if f == nil {
		return 0
	}
	var v float64
	for _, m := range f.GetMetric() {
		v += sampleOf(m)
	}
	return v
}

// sampleOf is a gauge, counter or untyped sample's value (0 for others).
func sampleOf(m *dto.Metric) float64 {
	switch {
	case m.Gauge != nil:
		return m.Gauge.GetValue()
	case m.Counter != nil:
		return m.Counter.GetValue()
	case m.Untyped != nil:
		return m.Untyped.GetValue()
	}
	return 0
}

// Probe cadence.
const (
	// heldLookInterval: a pod being scaled away is asked at most this
	// often (a reconcile in between reuses its last answer), and a
	// scale-down waiting on held data looks again after it.
	heldLookInterval = 10 * time.Second
	// heldWatchInterval: the other pods are asked at most this often, and
	// while some node of a cache holds data, the cache is looked at again
	// after this long, for the pinned-full event.
	heldWatchInterval = time.Minute
	// heldProbeParallel bounds the pods asked at once.
	heldProbeParallel = 8
)

// heldLook is one answer of a pod (or why it gave none).
type heldLook struct {
	at     time.Time
	report HeldReport
	err    error
	// full: the pinned space was full at this look (held bytes at the
	// limit, or refusals since the look before).
	full bool
}

// heldObserver remembers each pod's last answer (by UID: a pod recreated
// under the same name starts over), for the look interval and to tell a
// pinned space that filled since the last look.
type heldObserver struct {
	mu    sync.Mutex
	looks map[types.UID]heldLook
}

func (o *heldObserver) get(uid types.UID) (heldLook, bool) {
	o.mu.Lock()
	defer o.mu.Unlock()
	l, ok := o.looks[uid]
	return l, ok
}

func (o *heldObserver) put(uid types.UID, l heldLook) {
	o.mu.Lock()
	defer o.mu.Unlock()
	if o.looks == nil {
		o.looks = map[types.UID]heldLook{}
	}
	o.looks[uid] = l
}

// prune forgets the pods not looked at since before.
func (o *heldObserver) prune(before time.Time) {
	o.mu.Lock()
	defer o.mu.Unlock()
	for uid, l := range o.looks {
		if l.at.Before(before) {
			delete(o.looks, uid)
		}
	}
}

// unaskable says why pod cannot be asked what it holds ("" if it can).
func unaskable(pod *corev1.Pod) string {
	switch {
	case pod == nil:
		return "no pod"
	case pod.DeletionTimestamp != nil:
		return "being deleted"
	case pod.Status.Phase != corev1.PodRunning:
		phase := string(pod.Status.Phase)
		if phase == "" {
			phase = "unknown"
		}
		return "not running (phase " + phase + ")"
	case pod.Status.PodIP == "":
		return "no pod IP"
	}
	return ""
}

// podHeld is a pod's held data as a reconcile knows it.
type podHeld struct {
	report     *HeldReport // nil: no answer
	unanswered string      // why there is no answer
}

// prober is the reconciler's HeldProber (an HTTPHeldProber by default).
func (r *DistributedCacheReconciler) prober() HeldProber {
	if r.HeldProber != nil {
		return r.HeldProber
	}
	return HTTPHeldProber{}
}

// unansweredTimeout is how long a leaving pod that cannot be asked is
// waited for: UnansweredDrainTimeout, or DrainGrace when that is 0.
func (r *DistributedCacheReconciler) unansweredTimeout() time.Duration {
	if r.UnansweredDrainTimeout > 0 {
		return r.UnansweredDrainTimeout
	}
	return r.DrainGrace
}

// observeHeld asks each of the cache's pods what it holds (a pod being
// scaled away at most every heldLookInterval, the others every
// heldWatchInterval: a pod that does not answer costs a reconcile up to
// heldProbeTimeout), records the answers in st.zones for the scale-down,
// and records an event when a node's pinned space becomes full or stops
// being so.
func (r *DistributedCacheReconciler) observeHeld(ctx context.Context, dc *cachev1alpha1.DistributedCache, st *reconcileState) error {
	now := r.now()
	type job struct {
		zone, pod int
		p         *corev1.Pod
		prev      *heldLook
	}
	var jobs []job
	for zi := range st.zones {
		z := &st.zones[zi]
		for pi := range z.Pods {
			zp := &z.Pods[pi]
			if why := unaskable(zp.Pod); why != "" {
				zp.Held = podHeld{unanswered: why}
				continue
			}
			maxAge := heldWatchInterval
			if zp.Ordinal >= int(desiredReplicas(dc)) {
				maxAge = heldLookInterval
			}
			prev, ok := r.held.get(zp.Pod.UID)
			if ok && now.Sub(prev.at) < maxAge && now.Sub(prev.at) >= 0 {
				zp.Held = heldOf(prev)
				continue
			}
			j := job{zone: zi, pod: pi, p: zp.Pod}
			if ok {
				j.prev = &prev
			}
			jobs = append(jobs, j)
		}
	}
	ask := make([]*corev1.Pod, len(jobs))
	for i, j := range jobs {
		ask[i] = j.p
	}
	looks := r.probeHeld(ctx, ask, now)
	for i, j := range jobs {
		l := looks[i]
		if l.err == nil {
			l.full = pinnedFull(l.report, j.prev)
		} else if j.prev != nil {
			l.full = j.prev.full // no answer: no news about the pinned space
		}
		r.held.put(j.p.UID, l)
		st.zones[j.zone].Pods[j.pod].Held = heldOf(l)
		r.recordPinned(dc, st.zones[j.zone].Name, j.p, l, j.prev)
	}
	r.held.prune(now.Add(-10 * heldWatchInterval))
	for _, z := range st.zones {
		for _, p := range z.Pods {
			if p.Held.report != nil && p.Held.report.Objects > 0 {
				st.after(heldWatchInterval)
			}
		}
	}
	return nil
}

func heldOf(l heldLook) podHeld {
	if l.err != nil {
		return podHeld{unanswered: "metrics unreachable: " + l.err.Error()}
	}
	rep := l.report
	return podHeld{report: &rep}
}

// pinnedFull: the node's pinned space is full now (its use reached its
// limit), or it refused held writes since prev (its counter grew, or
// restarted from 0 and counted some).
func pinnedFull(rep HeldReport, prev *heldLook) bool {
	if rep.LimitBytes > 0 && rep.PinnedBytes >= rep.LimitBytes {
		return true
	}
	if prev == nil || prev.err != nil {
		return false
	}
	was := prev.report.FullTotal
	return rep.FullTotal > was || (rep.FullTotal < was && rep.FullTotal > 0)
}

// recordPinned records an event when the pod's pinned space became full
// (Warning) or stopped being so (Normal) at look l; nothing when it did
// not change.
func (r *DistributedCacheReconciler) recordPinned(dc *cachev1alpha1.DistributedCache, zone string, pod *corev1.Pod, l heldLook, prev *heldLook) {
	wasFull := prev != nil && prev.full
	switch {
	case l.err != nil:
	case l.full && !wasFull:
		refused := ""
		if prev != nil && prev.err == nil && l.report.FullTotal > prev.report.FullTotal {
			refused = fmt.Sprintf("; %.0f held writes refused with 503 SlowDown since the last look", l.report.FullTotal-prev.report.FullTotal)
		}
		r.Recorder.Eventf(dc, pod, corev1.EventTypeWarning, EventPinnedSpaceFull, "WriteBack",
			"zone %s: node %s's pinned write-back space is full (%s used of %s)%s: its write-back and transient writes get 503 SlowDown until persistence catches up",
			zone, pod.Name, formatBytes(l.report.PinnedBytes), formatBytes(l.report.LimitBytes), refused)
	case !l.full && wasFull:
		r.Recorder.Eventf(dc, pod, corev1.EventTypeNormal, EventPinnedSpaceAvailable, "WriteBack",
			"zone %s: node %s's pinned write-back space has room again (%s used of %s)",
			zone, pod.Name, formatBytes(l.report.PinnedBytes), formatBytes(l.report.LimitBytes))
	}
}

// formatBytes is n bytes for people ("1.5 GiB").
func formatBytes(n int64) string { return humanize.IBytes(uint64(max(n, 0))) }

// heldDrain is what heldDrainHold decided for one zone.
type heldDrain struct {
	// keep is the replicas to keep (at least want, at most current).
	keep int32
	// leaving is what each pod being removed reported, for the status.
	leaving []cachev1alpha1.LeavingPodStatus
	// givenUp are the pods that go without having answered (past the bound).
	givenUp []cachev1alpha1.LeavingPodStatus
	// wait is how soon to look again (0: nothing to wait for).
	wait time.Duration
}

// heldDrainHold decides how far a zone's StatefulSet may shrink, from
// current to want pods, once the ring and the drain grace allow it: a pod
// being removed (ordinal in [want, current)) is kept while it holds any
// write-back or transient object, or while it cannot be asked and has not
// been for timeout (since the time prev, the zone's status before, says it
// first could not). The StatefulSet removes the highest ordinals first, so
// it keeps every pod up to the highest one kept. stsName names the pods.
func heldDrainHold(stsName string, want, current int32, pods []zonePod, prev []cachev1alpha1.LeavingPodStatus,
	now time.Time, timeout time.Duration) heldDrain {
	d := heldDrain{keep: want}
	if current <= want {
		return d
	}
	byOrdinal := map[int]*zonePod{}
	for i := range pods {
		byOrdinal[pods[i].Ordinal] = &pods[i]
	}
	type verdict struct {
		st   cachev1alpha1.LeavingPodStatus
		keep bool
	}
	var vs []verdict
	for ord := want; ord < current; ord++ {
		name := fmt.Sprintf("%s-%d", stsName, ord)
		h := podHeld{unanswered: "no pod"}
		if p := byOrdinal[int(ord)]; p != nil {
			h = p.Held
		}
		ls := cachev1alpha1.LeavingPodStatus{Name: name}
		keep := false
		switch {
		case h.report != nil:
			ls.HeldObjects, ls.HeldBytes = h.report.Objects, h.report.Bytes
			if h.report.Objects > 0 {
				keep = true
				d.wait = soonest(d.wait, heldLookInterval)
			}
		default:
			if left := unanswered(&ls, h.unanswered, prev, now, timeout); left > 0 {
				keep = true
				d.wait = soonest(d.wait, min(left, heldLookInterval))
			}
		}
		if keep {
			d.keep = max(d.keep, ord+1)
		}
		vs = append(vs, verdict{ls, keep})
	}
	for i, v := range vs {
		d.leaving = append(d.leaving, v.st)
		if want+int32(i) >= d.keep && v.st.Unanswered != "" {
			d.givenUp = append(d.givenUp, v.st)
		}
	}
	return d
}

// waitingSummary names the pods a zone keeps for held data and why, for
// the Normal event recorded when it changes ("" when none is kept).
func waitingSummary(leaving []cachev1alpha1.LeavingPodStatus, now time.Time, timeout time.Duration) string {
	return leavingSummary(leaving, now, timeout, "kept", func(cachev1alpha1.LeavingPodStatus) string {
		return "holds write-back or transient data not yet handed over or persisted"
	})
}

// probeHeld asks each of pods what it holds, heldProbeParallel at a time
// and each within heldProbeTimeout, and returns the answers in the pods'
// order, stamped now.
func (r *DistributedCacheReconciler) probeHeld(ctx context.Context, pods []*corev1.Pod, now time.Time) []heldLook {
	looks := make([]heldLook, len(pods))
	sem := make(chan struct{}, heldProbeParallel)
	var wg sync.WaitGroup
	for i, p := range pods {
		wg.Add(1)
		sem <- struct{}{}
		go func() {
			defer func() { <-sem; wg.Done() }()
			pctx, cancel := context.WithTimeout(ctx, heldProbeTimeout)
			defer cancel()
			rep, err := r.prober().Held(pctx, p)
			looks[i] = heldLook{at: now, report: rep, err: err}
		}()
	}
	wg.Wait()
	return looks
}
