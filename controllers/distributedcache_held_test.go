package controllers

import (
	"context"
	"errors"
	"net"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	cachev1alpha1 "github.com/distcache/distcache/api/v1alpha1"
	"github.com/distcache/distcache/internal/metrics"
)

// nodeMetricsServer serves /metrics as a cache node does, with the held
// series of internal/metrics (NewHeld) over stats and limit, refused
// counted into Full. It returns the prober's pod (IP 127.0.0.1) and a
// prober of the server's port.
func nodeMetricsServer(t *testing.T, stats map[string]metrics.HeldStats, limit, pinned int64, refused int) (*corev1.Pod, HTTPHeldProber) {
	t.Helper()
	reg := prometheus.NewRegistry()
	held := metrics.NewHeld(reg, func() map[string]metrics.HeldStats { return stats }, limit).ReportPinned(func() int64 { return pinned })
	held.Full.Add(float64(refused))
	mux := http.NewServeMux()
	mux.Handle("/metrics", promhttp.HandlerFor(reg, promhttp.HandlerOpts{}))
	srv := httptest.NewServer(mux)
	t.Cleanup(srv.Close)
	return podAt(t, srv.URL)
}

func podAt(t *testing.T, url string) (*corev1.Pod, HTTPHeldProber) {
	t.Helper()
	host, port, err := net.SplitHostPort(strings.TrimPrefix(url, "http://"))
	if err != nil {
		t.Fatal(err)
	}
	n, err := strconv.Atoi(port)
	if err != nil {
		t.Fatal(err)
	}
	pod := &corev1.Pod{Status: corev1.PodStatus{Phase: corev1.PodRunning, PodIP: host}}
	return pod, HTTPHeldProber{Port: n}
}

func TestHTTPHeldProber(t *testing.T) {
	ctx := context.Background()
	t.Run("a node holding write-back and transient objects", func(t *testing.T) {
		pod, p := nodeMetricsServer(t, map[string]metrics.HeldStats{
			"team-a": {Objects: 5, Dirty: 3, Bytes: 4000, OldestDirty: time.Now()},
			"team-b": {Objects: 2, Dirty: 0, Bytes: 96},
		}, 1<<20, 5000, 7)
		got, err := p.Held(ctx, pod)
		if err != nil {
			t.Fatal(err)
		}
		// Dirty: team-a's 3 write-back objects and its bytes; team-b holds
		// transient objects only.
		want := HeldReport{Objects: 7, Bytes: 4096, LimitBytes: 1 << 20, PinnedBytes: 5000, FullTotal: 7, Dirty: 3, DirtyBytes: 4000}
		if got != want {
			t.Errorf("Held = %+v, want %+v", got, want)
		}
	})
	t.Run("a node holding nothing", func(t *testing.T) {
		pod, p := nodeMetricsServer(t, nil, 1<<20, 0, 0)
		got, err := p.Held(ctx, pod)
		if err != nil {
			t.Fatal(err)
		}
		if want := (HeldReport{LimitBytes: 1 << 20}); got != want {
			t.Errorf("Held = %+v, want %+v", got, want)
		}
	})
	t.Run("not a cache node", func(t *testing.T) {
		reg := prometheus.NewRegistry()
		reg.MustRegister(prometheus.NewGauge(prometheus.GaugeOpts{Name: "something_else"}))
		srv := httptest.NewServer(promhttp.HandlerFor(reg, promhttp.HandlerOpts{}))
		defer srv.Close()
		pod, p := podAt(t, srv.URL)
		if _, err := p.Held(ctx, pod); err == nil || !strings.Contains(err.Error(), "not a cache node") {
			t.Errorf("Held = %v, want not a cache node's metrics", err)
		}
	})
	t.Run("an error status", func(t *testing.T) {
		srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
			http.Error(w, "no", http.StatusServiceUnavailable)
		}))
		defer srv.Close()
		pod, p := podAt(t, srv.URL)
		if _, err := p.Held(ctx, pod); err == nil || !strings.Contains(err.Error(), "503") {
			t.Errorf("Held = %v, want the 503", err)
		}
	})
	t.Run("nothing listening", func(t *testing.T) {
		srv := httptest.NewServer(http.NotFoundHandler())
		url := srv.URL
		srv.Close()
		pod, p := podAt(t, url)
		if _, err := p.Held(ctx, pod); err == nil {
			t.Error("Held of a closed port succeeded")
		}
	})
}

func TestUnaskable(t *testing.T) {
	running := corev1.PodStatus{Phase: corev1.PodRunning, PodIP: "10.0.0.1"}
	now := metav1.Now()
	for _, tc := range []struct {
		name string
		pod  *corev1.Pod
		want string
	}{
		{"running with an IP", &corev1.Pod{Status: running}, ""},
		{"absent", nil, "no pod"},
		{"pending", &corev1.Pod{Status: corev1.PodStatus{Phase: corev1.PodPending}}, "not running (phase Pending)"},
		{"running without an IP", &corev1.Pod{Status: corev1.PodStatus{Phase: corev1.PodRunning}}, "no pod IP"},
		{"being deleted", &corev1.Pod{ObjectMeta: metav1.ObjectMeta{DeletionTimestamp: &now}, Status: running}, "being deleted"},
	} {
		if got := unaskable(tc.pod); got != tc.want {
			t.Errorf("%s: unaskable = %q, want %q", tc.name, got, tc.want)
		}
	}
}

func TestPinnedFull(t *testing.T) {
	look := func(bytes int64, refused float64) *heldLook {
		return &heldLook{report: HeldReport{Objects: 1, Bytes: bytes, PinnedBytes: bytes, LimitBytes: 100, FullTotal: refused}}
	}
	for _, tc := range []struct {
		name string
		rep  HeldReport
		prev *heldLook
		want bool
	}{
		{"first look, room left, refusals from before", look(10, 4).report, nil, false},
		{"first look, at the limit", look(100, 0).report, nil, true},
		{"bodies below the limit, pinned use at it", HeldReport{Objects: 1, Bytes: 40, PinnedBytes: 100, LimitBytes: 100}, nil, true},
		{"refusals since the last look", look(10, 5).report, look(10, 4), true},
		{"no refusal since the last look", look(10, 4).report, look(10, 4), false},
		{"restarted and refused", look(10, 2).report, look(10, 4), true},
		{"restarted, no refusal", look(10, 0).report, look(10, 4), false},
		{"the last look failed", look(10, 9).report, &heldLook{err: errors.New("down")}, false},
		{"no journal", HeldReport{}, nil, false},
	} {
		if got := pinnedFull(tc.rep, tc.prev); got != tc.want {
			t.Errorf("%s: pinnedFull = %v, want %v", tc.name, got, tc.want)
		}
	}
}

func TestHeldDrainHold(t *testing.T) {
	now := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	const timeout = 5 * time.Minute
	holds := func(n int64) podHeld { return podHeld{report: &HeldReport{Objects: n, Bytes: 10 * n}} }
	pods := func(held ...podHeld) []zonePod {
		var ps []zonePod
		for i, h := range held {
			ps = append(ps, zonePod{Name: "c-a-" + strconv.Itoa(i), Ordinal: i, Ready: true, Held: h})
		}
		return ps
	}
	since := func(d time.Duration) *metav1.Time { t := metav1.NewTime(now.Add(-d)); return &t }
	for _, tc := range []struct {
		name             string
		want, current    int32
		pods             []zonePod
		prev             []cachev1alpha1.LeavingPodStatus
		keep             int32
		wait             time.Duration
		unansweredSince  map[string]time.Time
		givenUp          []string
		leavingHeldCount map[string]int64
	}{
		{name: "not shrinking", want: 3, current: 3, pods: pods(holds(1), holds(1), holds(1)), keep: 3},
		{name: "the leaving pods hold nothing", want: 1, current: 3, pods: pods(holds(4), holds(0), holds(0)), keep: 1,
			leavingHeldCount: map[string]int64{"c-a-1": 0, "c-a-2": 0}},
		{name: "the highest pod holds: every pod stays", want: 1, current: 3, pods: pods(holds(0), holds(0), holds(2)), keep: 3,
			wait: heldLookInterval, leavingHeldCount: map[string]int64{"c-a-1": 0, "c-a-2": 2}},
		{name: "a middle pod holds: the ones above it go", want: 1, current: 3, pods: pods(holds(0), holds(7), holds(0)), keep: 2,
			wait: heldLookInterval, leavingHeldCount: map[string]int64{"c-a-1": 7, "c-a-2": 0}},
		{name: "a pod that cannot be asked is kept from now", want: 1, current: 2,
			pods: pods(holds(0), podHeld{unanswered: "no pod IP"}), keep: 2, wait: heldLookInterval,
			unansweredSince: map[string]time.Time{"c-a-1": now}},
		{name: "it stays within the bound the status started", want: 1, current: 2,
			pods: pods(holds(0), podHeld{unanswered: "no pod IP"}),
			prev: []cachev1alpha1.LeavingPodStatus{{Name: "c-a-1", Unanswered: "no pod IP", UnansweredSince: since(timeout - 3*time.Second)}},
			keep: 2, wait: 3 * time.Second, unansweredSince: map[string]time.Time{"c-a-1": now.Add(-timeout + 3*time.Second)}},
		{name: "past the bound it goes", want: 1, current: 2,
			pods: pods(holds(0), podHeld{unanswered: "metrics unreachable: refused"}),
			prev: []cachev1alpha1.LeavingPodStatus{{Name: "c-a-1", Unanswered: "no pod IP", UnansweredSince: since(timeout)}},
			keep: 1, givenUp: []string{"c-a-1"}, unansweredSince: map[string]time.Time{"c-a-1": now.Add(-timeout)}},
		{name: "an absent pod counts as unanswered", want: 1, current: 3, pods: pods(holds(0), holds(0)), keep: 3, wait: heldLookInterval,
			unansweredSince: map[string]time.Time{"c-a-2": now}},
		{name: "one given up below one that holds is not removed", want: 1, current: 3,
			pods: pods(holds(0), podHeld{unanswered: "no pod IP"}, holds(1)),
			prev: []cachev1alpha1.LeavingPodStatus{{Name: "c-a-1", Unanswered: "no pod IP", UnansweredSince: since(time.Hour)}},
			keep: 3, wait: heldLookInterval, unansweredSince: map[string]time.Time{"c-a-1": now.Add(-time.Hour)}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			d := heldDrainHold("c-a", tc.want, tc.current, tc.pods, tc.prev, now, timeout)
			if d.keep != tc.keep || d.wait != tc.wait {
				t.Errorf("keep %d, wait %s; want keep %d, wait %s", d.keep, d.wait, tc.keep, tc.wait)
			}
			var givenUp []string
			for _, g := range d.givenUp {
				givenUp = append(givenUp, g.Name)
			}
			if strings.Join(givenUp, ",") != strings.Join(tc.givenUp, ",") {
				t.Errorf("given up %v, want %v", givenUp, tc.givenUp)
			}
			if tc.current > tc.want && len(d.leaving) != int(tc.current-tc.want) {
				t.Errorf("leaving %v: want one entry per ordinal from %d to %d", d.leaving, tc.want, tc.current-1)
			}
			for _, l := range d.leaving {
				if n, ok := tc.leavingHeldCount[l.Name]; ok && (l.HeldObjects != n || l.HeldBytes != 10*n || l.Unanswered != "") {
					t.Errorf("%s: %+v, want %d objects answered", l.Name, l, n)
				}
				s, ok := tc.unansweredSince[l.Name]
				switch {
				case ok && (l.UnansweredSince == nil || !l.UnansweredSince.Time.Equal(s) || l.Unanswered == ""):
					t.Errorf("%s: %+v, want unanswered since %s", l.Name, l, s)
				case !ok && l.UnansweredSince != nil:
					t.Errorf("%s: %+v, want answered", l.Name, l)
				}
			}
		})
	}
}
