package controllers

import (
	"slices"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	cachev1alpha1 "github.com/distcache/distcache/api/v1alpha1"
)

func TestDirtyHold(t *testing.T) {
	now := time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)
	const timeout = 5 * time.Minute
	at := func(d time.Duration) *metav1.Time { t := metav1.NewTime(now.Add(d)); return &t }
	answered := func(name string, rep HeldReport) podDirty { return podDirty{name, podHeld{report: &rep}} }
	unanswered := func(name string) podDirty { return podDirty{name, podHeld{unanswered: "metrics unreachable: refused"}} }
	for _, tc := range []struct {
		name        string
		pods        []podDirty
		prev        []cachev1alpha1.LeavingPodStatus
		wantPods    []string
		wantGivenUp []string
		wantWait    time.Duration
	}{
		{name: "no pods"},
		{name: "nothing held", pods: []podDirty{answered("p-0", HeldReport{LimitBytes: 1})}},
		{name: "transient only", pods: []podDirty{answered("p-0", HeldReport{Objects: 9, Bytes: 900})}},
		{name: "dirty", pods: []podDirty{answered("p-0", HeldReport{}), answered("p-1", HeldReport{Objects: 3, Dirty: 1, DirtyBytes: 10})},
			wantPods: []string{"p-1"}, wantWait: heldLookInterval},
		{name: "unanswered, first time", pods: []podDirty{unanswered("p-0")}, wantPods: []string{"p-0"}, wantWait: heldLookInterval},
		{name: "unanswered, bound nearly over", pods: []podDirty{unanswered("p-0")},
			prev:     []cachev1alpha1.LeavingPodStatus{{Name: "p-0", Unanswered: "x", UnansweredSince: at(-timeout + 3*time.Second)}},
			wantPods: []string{"p-0"}, wantWait: 3 * time.Second},
		{name: "unanswered past the bound", pods: []podDirty{unanswered("p-0"), answered("p-1", HeldReport{})},
			prev:        []cachev1alpha1.LeavingPodStatus{{Name: "p-0", Unanswered: "x", UnansweredSince: at(-timeout)}},
			wantGivenUp: []string{"p-0"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			d := dirtyHold(tc.pods, tc.prev, now, timeout)
			names := func(ls []cachev1alpha1.LeavingPodStatus) []string {
				var out []string
				for _, l := range ls {
					out = append(out, l.Name)
				}
				return out
			}
			if got := names(d.pods); !slices.Equal(got, tc.wantPods) {
				t.Errorf("pods %v, want %v", got, tc.wantPods)
			}
			if got := names(d.givenUp); !slices.Equal(got, tc.wantGivenUp) {
				t.Errorf("givenUp %v, want %v", got, tc.wantGivenUp)
			}
			if d.wait != tc.wantWait {
				t.Errorf("wait %s, want %s", d.wait, tc.wantWait)
			}
		})
	}
}
