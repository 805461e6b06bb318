package controllers

import (
	"encoding/json"
	"reflect"
	"testing"
	"time"

	"k8s.io/utils/ptr"

	cachev1alpha1 "github.com/distcache/distcache/api/v1alpha1"
	"github.com/distcache/distcache/internal/ring"
)

func member(name string, ord int, state ring.State) ring.Member {
	return ring.Member{Name: name, Address: name + ".c-a.ns.svc:8443", Ordinal: ord, Weight: 100, State: state}
}

func TestBuildRing(t *testing.T) {
	three := testCache(nil)
	two := testCache(func(dc *cachev1alpha1.DistributedCache) { dc.Spec.Replicas = ptr.To[int32](2) })
	hash := ring.HashParams{Algorithm: ring.AlgorithmRendezvousXXHash64}
	act, drain := ring.StateActive, ring.StateDraining
	published := &ring.Spec{Epoch: 4, Zone: "a", Hash: ring.HashParams{Algorithm: ring.AlgorithmRendezvousXXHash64, Seed: 7},
		Members: []ring.Member{member("c-a-0", 0, act), member("c-a-1", 1, act), member("c-a-2", 2, act)}}
	allReady := []zonePod{{Name: "c-a-2", Ordinal: 2, Ready: true}, {Name: "c-a-0", Ordinal: 0, Ready: true}, {Name: "c-a-1", Ordinal: 1, Ready: true}}

	tests := []struct {
		name      string
		dc        *cachev1alpha1.DistributedCache
		published *ring.Spec
		minEpoch  int64
		pods      []zonePod
		want      ring.Spec
	}{
		{
			name: "nothing ready, nothing published: bootstrap with the intended pods",
			dc:   three,
			want: ring.Spec{Epoch: 1, Zone: "a", Hash: hash, Members: []ring.Member{
				member("c-a-0", 0, act), member("c-a-1", 1, act), member("c-a-2", 2, act)}},
		},
		{
			name: "epoch continues from status when the document was lost",
			dc:   three, minEpoch: 9,
			pods: []zonePod{{Name: "c-a-0", Ordinal: 0, Ready: true}, {Name: "c-a-1", Ordinal: 1, Ready: false}},
			want: ring.Spec{Epoch: 10, Zone: "a", Hash: hash, Members: []ring.Member{member("c-a-0", 0, act)}},
		},
		{
			name: "ready pods in ordinal order; unchanged membership keeps the document",
			dc:   three, published: published, pods: allReady,
			want: *published,
		},
		{
			name: "a pod no longer ready leaves: next epoch, previous kept, seed kept",
			dc:   three, published: published,
			pods: []zonePod{{Name: "c-a-0", Ordinal: 0, Ready: true}, {Name: "c-a-1", Ordinal: 1, Ready: false}, {Name: "c-a-2", Ordinal: 2, Ready: true}},
			want: ring.Spec{Epoch: 5, Zone: "a", Hash: published.Hash,
				Members:  []ring.Member{member("c-a-0", 0, act), member("c-a-2", 2, act)},
				Previous: &ring.PreviousRing{Epoch: 4, Members: published.Members}},
		},
		{
			name: "scale down: pods at or above replicas are draining",
			dc:   two, published: published, pods: allReady,
			want: ring.Spec{Epoch: 5, Zone: "a", Hash: published.Hash,
				Members:  []ring.Member{member("c-a-0", 0, act), member("c-a-1", 1, act), member("c-a-2", 2, drain)},
				Previous: &ring.PreviousRing{Epoch: 4, Members: published.Members}},
		},
		{
			name: "no ready pod: the published membership stays",
			dc:   three, published: published,
			pods: []zonePod{{Name: "c-a-0", Ordinal: 0, Ready: false}},
			want: *published,
		},
		{
			name: "no ready pod while scaling down: the published members above replicas drain",
			dc:   two, published: published,
			want: ring.Spec{Epoch: 5, Zone: "a", Hash: published.Hash,
				Members:  []ring.Member{member("c-a-0", 0, act), member("c-a-1", 1, act), member("c-a-2", 2, drain)},
				Previous: &ring.PreviousRing{Epoch: 4, Members: published.Members}},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			before := tt.dc.DeepCopy()
			got := buildRing(tt.dc, "a", tt.published, tt.minEpoch, tt.pods)
			if !reflect.DeepEqual(got, tt.want) {
				g, _ := json.MarshalIndent(got, "", " ")
				w, _ := json.MarshalIndent(tt.want, "", " ")
				t.Fatalf("got\n%s\nwant\n%s", g, w)
			}
			if !reflect.DeepEqual(before, tt.dc) {
				t.Fatal("buildRing changed the cache")
			}
			doc, err := encodeRing(got)
			if err != nil {
				t.Fatal(err)
			}
			if _, err := ring.Parse([]byte(doc)); err != nil {
				t.Fatalf("published document does not parse: %v\n%s", err, doc)
			}
			if back := parsePublishedRing(doc); !reflect.DeepEqual(*back, got) {
				t.Fatalf("round trip: got %+v want %+v", *back, got)
			}
		})
	}
}

func TestStatefulSetReplicas(t *testing.T) {
	two := testCache(func(dc *cachev1alpha1.DistributedCache) { dc.Spec.Replicas = ptr.To[int32](2) })
	act, drain := ring.StateActive, ring.StateDraining
	ringOf := func(ms ...ring.Member) *ring.Spec { return &ring.Spec{Epoch: 3, Members: ms} }
	tests := []struct {
		name      string
		published *ring.Spec
		current   *int32
		want      int32
	}{
		{"new StatefulSet", nil, nil, 2},
		{"scale up is immediate", ringOf(member("c-a-0", 0, act)), ptr.To[int32](1), 2},
		{"scale down held while the ring has the pod active",
			ringOf(member("c-a-0", 0, act), member("c-a-1", 1, act), member("c-a-2", 2, act), member("c-a-3", 3, act)), ptr.To[int32](4), 4},
		{"held only down to the highest active ordinal",
			ringOf(member("c-a-0", 0, act), member("c-a-1", 1, act), member("c-a-2", 2, act), member("c-a-3", 3, drain)), ptr.To[int32](4), 3},
		{"proceeds once the published ring drains them",
			ringOf(member("c-a-0", 0, act), member("c-a-1", 1, act), member("c-a-2", 2, drain), member("c-a-3", 3, drain)), ptr.To[int32](4), 2},
		{"never above the current StatefulSet",
			ringOf(member("c-a-0", 0, act), member("c-a-5", 5, act)), ptr.To[int32](3), 3},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := statefulSetReplicas(two, tt.published, tt.current); got != tt.want {
				t.Fatalf("got %d, want %d", got, tt.want)
			}
		})
	}
}

func TestPodOrdinal(t *testing.T) {
	for _, tt := range []struct {
		pod  string
		ord  int
		okay bool
	}{{"c-a-0", 0, true}, {"c-a-12", 12, true}, {"c-a-", 0, false}, {"c-a-01", 0, false}, {"c-ab-1", 0, false}, {"c-a-x", 0, false}} {
		ord, ok := podOrdinal("c-a", tt.pod)
		if ord != tt.ord || ok != tt.okay {
			t.Errorf("podOrdinal(%q) = %d, %v; want %d, %v", tt.pod, ord, ok, tt.ord, tt.okay)
		}
	}
}

func TestDrainHold(t *testing.T) {
	two := testCache(func(dc *cachev1alpha1.DistributedCache) { dc.Spec.Replicas = ptr.To[int32](2) })
	act, drain := ring.StateActive, ring.StateDraining
	draining := &ring.Spec{Epoch: 3, Members: []ring.Member{member("c-a-0", 0, act), member("c-a-1", 1, act), member("c-a-2", 2, drain), member("c-a-3", 3, drain)}}
	at := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	tests := []struct {
		name      string
		published *ring.Spec
		now       time.Time
		grace     time.Duration
		current   *int32
		want      int32
		wantWait  time.Duration
	}{
		{"within the grace: keep the draining pods", draining, at.Add(30 * time.Second), time.Minute, ptr.To[int32](4), 4, 30 * time.Second},
		{"grace over", draining, at.Add(time.Minute), time.Minute, ptr.To[int32](4), 2, 0},
		{"no grace configured", draining, at, 0, ptr.To[int32](4), 2, 0},
		{"never above the current StatefulSet", draining, at, time.Minute, ptr.To[int32](3), 3, time.Minute},
		{"nothing draining", &ring.Spec{Epoch: 3, Members: []ring.Member{member("c-a-0", 0, act)}}, at, time.Minute, ptr.To[int32](4), 2, 0},
		{"not scaling down", draining, at, time.Minute, ptr.To[int32](2), 2, 0},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, wait := drainHold(two, tt.published, at, tt.now, tt.grace, tt.current)
			if got != tt.want || wait != tt.wantWait {
				t.Fatalf("got %d, %v; want %d, %v", got, wait, tt.want, tt.wantWait)
			}
		})
	}
}
