package controllers

import (
	"context"
	"encoding/json"
	"fmt"
	"math"
	"slices"
	"strconv"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	cachev1alpha1 "github.com/distcache/distcache/api/v1alpha1"
	"github.com/distcache/distcache/internal/kubepod"
	"github.com/distcache/distcache/internal/ring"
)

// Ring membership: the cache's pods as each reconcile sees them, the ring
// document built from them for each zone and published in the ring
// ConfigMap, and what the published document allows a scale-down to do.

// zonePod is what the ring needs to know of one of a zone's pods.
type zonePod struct {
	Name    string
	Ordinal int
	Ready   bool // PodReady and not being deleted
	// Pod is the pod as listed (nil in tests of the ring alone).
	Pod *corev1.Pod
	// Held is what the pod holds for WriteBack and Transient policies
	// (observeHeld).
	Held podHeld
}

// observePods lists the cache's pods into st.zones, per zone of the spec.
func (r *DistributedCacheReconciler) observePods(ctx context.Context, dc *cachev1alpha1.DistributedCache, st *reconcileState) error {
	var pods corev1.PodList
	if err := r.List(ctx, &pods, client.InNamespace(dc.Namespace), client.MatchingLabels(cacheLabels(dc))); err != nil {
		return err
	}
	zones := make([]zoneObservation, len(dc.Spec.Zones))
	for i, z := range dc.Spec.Zones {
		zones[i].Name = z.Name
		sts := zoneObjectName(dc, z.Name)
		for j := range pods.Items {
			p := &pods.Items[j]
			if p.Labels[LabelZone] != z.Name {
				continue
			}
			ord, ok := podOrdinal(sts, p.Name)
			if !ok {
				continue
			}
			zones[i].Pods = append(zones[i].Pods, zonePod{Name: p.Name, Ordinal: ord, Ready: kubepod.Ready(p), Pod: p})
		}
	}
	st.zones = zones
	return nil
}

// podOrdinal is the StatefulSet ordinal of pod in the zone's StatefulSet
// stsName, or false if the name is not <stsName>-<n>.
func podOrdinal(stsName, pod string) (int, bool) {
	rest, ok := strings.CutPrefix(pod, stsName+"-")
	if !ok || rest == "" {
		return 0, false
	}
	n, err := strconv.Atoi(rest)
	if err != nil || n < 0 || strconv.Itoa(n) != rest {
		return 0, false
	}
	return n, true
}

// publishedRing is a zone's ring document as it was before this reconcile,
// and when its epoch was published.
type publishedRing struct {
	spec *ring.Spec
	at   time.Time
}

// reconcileRing publishes each zone's ring document, with the time its
// epoch was published in an annotation, and records in st the documents
// that were published before this reconcile (by zone), which decide whether
// a scale-down may proceed.
func (r *DistributedCacheReconciler) reconcileRing(ctx context.Context, dc *cachev1alpha1.DistributedCache, st *reconcileState) error {
	var existing corev1.ConfigMap
	err := r.Get(ctx, types.NamespacedName{Namespace: dc.Namespace, Name: ringConfigMapName(dc)}, &existing)
	if client.IgnoreNotFound(err) != nil {
		return err
	}
	minEpochs := map[string]int64{}
	for _, zs := range dc.Status.Zones {
		minEpochs[zs.Name] = zs.RingEpoch
	}
	published := map[string]publishedRing{}
	cm := &corev1.ConfigMap{
		ObjectMeta: metav1.ObjectMeta{
			Name: ringConfigMapName(dc), Namespace: dc.Namespace, Labels: objectLabels(dc, ""),
			Annotations: map[string]string{},
		},
		Data: map[string]string{},
	}
	now := r.now().UTC().Truncate(time.Second)
	var changed []ring.Spec
	for i := range st.zones {
		z := &st.zones[i]
		prev := parsePublishedRing(existing.Data[ringKey(z.Name)])
		annKey := AnnotationRingPublishedPrefix + z.Name
		at, err := time.Parse(time.RFC3339, existing.Annotations[annKey])
		if err != nil {
			at = now // unknown: count the grace from now
		}
		published[z.Name] = publishedRing{spec: prev, at: at}
		next := buildRing(dc, z.Name, prev, minEpochs[z.Name], z.Pods)
		doc, err := encodeRing(next)
		if err != nil {
			return err
		}
		cm.Data[ringKey(z.Name)] = doc
		z.Ring = &next
		if prev == nil || prev.Epoch != next.Epoch {
			changed = append(changed, next)
			at = now
		}
		cm.Annotations[annKey] = at.Format(time.RFC3339)
	}
	if _, err := apply(ctx, r.Client, r.Scheme, dc, cm, &corev1.ConfigMap{}, func(existing, desired *corev1.ConfigMap) {
		existing.Data = desired.Data
		existing.BinaryData = nil
	}); err != nil {
		return err
	}
	for _, s := range changed {
		active, draining := 0, 0
		for _, m := range s.Members {
			if m.State == ring.StateDraining {
				draining++
			} else {
				active++
			}
		}
		r.Recorder.Eventf(dc, nil, corev1.EventTypeNormal, EventRingPublished, "PublishRing",
			"zone %s: ring epoch %d with %d active and %d draining members", s.Zone, s.Epoch, active, draining)
	}
	st.published = published
	return nil
}

// memberAddress is the host:port of a node's mTLS API, through the zone's
// headless Service.
func memberAddress(dc *cachev1alpha1.DistributedCache, zone, pod string) string {
	return fmt.Sprintf("%s.%s.%s.svc:%d", pod, zoneObjectName(dc, zone), dc.Namespace, APIPort)
}

// ringMembers is the membership of a zone as its pods say: every ready pod,
// active if its ordinal is below spec.replicas and draining otherwise (it is
// being scaled away). Sorted by ordinal.
func ringMembers(dc *cachev1alpha1.DistributedCache, zone string, pods []zonePod) []ring.Member {
	replicas := int(desiredReplicas(dc))
	var ms []ring.Member
	for _, p := range pods {
		if !p.Ready {
			continue
		}
		state := ring.StateActive
		if p.Ordinal >= replicas {
			state = ring.StateDraining
		}
		ms = append(ms, ring.Member{
			Name: p.Name, Address: memberAddress(dc, zone, p.Name),
			Ordinal: p.Ordinal, Weight: ring.DefaultWeight, State: state,
		})
	}
	sortMembers(ms)
	return ms
}

// bootstrapMembers is the membership of a zone that has never had a ready
// node: the pods the StatefulSet is about to create. A ring needs an active
// member and a node does not start without a valid ring, so the first
// document names the intended pods; it is replaced by the ready ones as
// they come up.
func bootstrapMembers(dc *cachev1alpha1.DistributedCache, zone string) []ring.Member {
	var ms []ring.Member
	for i := range int(desiredReplicas(dc)) {
		name := fmt.Sprintf("%s-%d", zoneObjectName(dc, zone), i)
		ms = append(ms, ring.Member{
			Name: name, Address: memberAddress(dc, zone, name),
			Ordinal: i, Weight: ring.DefaultWeight, State: ring.StateActive,
		})
	}
	return ms
}

// withDraining is a copy of ms with the members whose ordinal is at least
// spec.replicas draining.
func withDraining(dc *cachev1alpha1.DistributedCache, ms []ring.Member) []ring.Member {
	out := slices.Clone(ms)
	for i := range out {
		if out[i].Ordinal >= int(desiredReplicas(dc)) {
			out[i].State = ring.StateDraining
		}
	}
	return out
}

func sortMembers(ms []ring.Member) {
	slices.SortFunc(ms, func(a, b ring.Member) int {
		if a.Ordinal != b.Ordinal {
			return a.Ordinal - b.Ordinal
		}
		switch {
		case a.Name < b.Name:
			return -1
		case a.Name > b.Name:
			return 1
		}
		return 0
	})
}

func hasActive(ms []ring.Member) bool {
	return slices.ContainsFunc(ms, func(m ring.Member) bool { return m.State == ring.StateActive })
}

// buildRing is the ring document to publish for a zone, given the one
// published now (nil if none) and the zone's pods. minEpoch is the highest
// epoch known to have been published (from status), in case the published
// document was lost or mangled: epochs never go back.
//
//   - The membership is ringMembers; if it has no active member, the
//     published membership stays (no ready node: nothing to hand off to),
//     with members above spec.replicas draining, or, if that has no active
//     member either, bootstrapMembers.
//   - An unchanged membership returns the published document as it is.
//   - A changed one gets the next epoch, and the published membership
//     becomes previous (warm handoff).
func buildRing(dc *cachev1alpha1.DistributedCache, zone string, published *ring.Spec, minEpoch int64, pods []zonePod) ring.Spec {
	members := ringMembers(dc, zone, pods)
	if !hasActive(members) && published != nil {
		members = withDraining(dc, published.Members)
	}
	if !hasActive(members) {
		members = bootstrapMembers(dc, zone)
	}
	if published != nil && slices.Equal(published.Members, members) && published.Zone == zone {
		return *published
	}
	next := ring.Spec{
		Epoch:   max(minEpoch, 0) + 1,
		Zone:    zone,
		Hash:    ring.HashParams{Algorithm: ring.AlgorithmRendezvousXXHash64},
		Members: members,
	}
	if published != nil {
		next.Epoch = max(published.Epoch, minEpoch) + 1
		next.Hash.Seed = published.Hash.Seed // never change the seed
		if hasActive(published.Members) {
			next.Previous = &ring.PreviousRing{Epoch: published.Epoch, Members: published.Members}
		}
	}
	return next
}

// parsePublishedRing reads a published document leniently: nil if absent,
// unreadable or invalid (then buildRing starts over from the epoch in
// status). An invalid document (one edited by hand, say) must not be kept:
// its members would become the next document's previous membership, which
// would fail validation at every reconcile until someone repaired it; nor
// one whose epoch has no successor.
func parsePublishedRing(data string) *ring.Spec {
	if data == "" {
		return nil
	}
	var s ring.Spec
	if err := json.Unmarshal([]byte(data), &s); err != nil {
		return nil
	}
	if s.Validate() != nil || s.Epoch == math.MaxInt64 {
		return nil
	}
	return &s
}

// encodeRing is the published form of a ring document: validated, compact,
// with every field explicit.
func encodeRing(s ring.Spec) (string, error) {
	if err := s.Validate(); err != nil {
		return "", fmt.Errorf("ring of zone %s: %w", s.Zone, err)
	}
	b, err := json.Marshal(s)
	if err != nil {
		return "", err
	}
	return string(b) + "\n", nil
}

// statefulSetReplicas is how many pods the zone's StatefulSet should run:
// spec.replicas, except that a scale-down waits for the ring. Pods above
// spec.replicas are removed only once the published ring (the document
// before this reconcile's write) no longer has them active, so their
// chunks' new owners already know to fetch from them while they drain.
// current is the StatefulSet's replicas now (nil: no StatefulSet yet); the
// result never exceeds it unless spec.replicas does.
func statefulSetReplicas(dc *cachev1alpha1.DistributedCache, published *ring.Spec, current *int32) int32 {
	want := desiredReplicas(dc)
	if published == nil || current == nil || *current <= want {
		return want
	}
	hold := want
	for _, m := range published.Members {
		if m.State == ring.StateActive && int32(m.Ordinal) >= hold {
			hold = int32(m.Ordinal) + 1
		}
	}
	return min(hold, *current)
}

// AnnotationRingPublishedPrefix + zone, on the ring ConfigMap, is when the
// zone's current epoch was published (RFC 3339).
const AnnotationRingPublishedPrefix = cachev1alpha1.AnnotationRingPublishedPrefix

// drainHold is how many pods a zone must keep for the drain grace period:
// members above spec.replicas that the published ring (published at at)
// marks draining stay until grace has passed, so every node has read the
// document (the kubelet takes up to a minute to update a mounted
// ConfigMap) and fetched what it needs from them. It returns the replicas
// to keep (at most current) and how long until they may go.
func drainHold(dc *cachev1alpha1.DistributedCache, published *ring.Spec, at, now time.Time, grace time.Duration, current *int32) (int32, time.Duration) {
	want := desiredReplicas(dc)
	if published == nil || current == nil || *current <= want || grace <= 0 {
		return want, 0
	}
	wait := at.Add(grace).Sub(now)
	if wait <= 0 {
		return want, 0
	}
	hold := want
	for _, m := range published.Members {
		if m.State == ring.StateDraining && int32(m.Ordinal) >= hold {
			hold = int32(m.Ordinal) + 1
		}
	}
	if hold == want {
		return want, 0
	}
	return min(hold, *current), wait
}
