package kubectlplugin

import (
	"cmp"
	"context"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"sigs.k8s.io/controller-runtime/pkg/client"

	cachev1alpha1 "github.com/distcache/distcache/api/v1alpha1"
	"github.com/distcache/distcache/internal/kubepod"
	"github.com/distcache/distcache/internal/ring"
)

// CacheStatus is `kubectl distcache status` of one DistributedCache: its
// status and conditions, and per zone the published ring and each node's
// pod and metrics. Counters are since each node started.
type CacheStatus struct {
	Namespace string `json:"namespace"`
	Name      string `json:"name"`
	// OperatorVersion is the version of the operator that last reconciled
	// the cache (status.operatorVersion).
	OperatorVersion string `json:"operatorVersion,omitempty"`
	// Generation and ObservedGeneration differ while the operator has not
	// caught up with a spec change.
	Generation         int64              `json:"generation"`
	ObservedGeneration int64              `json:"observedGeneration"`
	Replicas           int32              `json:"replicas"`
	ReadyReplicas      int32              `json:"readyReplicas"`
	RingEpoch          int64              `json:"ringEpoch"`
	Conditions         []metav1.Condition `json:"conditions,omitempty"`
	Zones              []ZoneStatus       `json:"zones"`
	// ChunkReads and ReadBytes add up the nodes whose metrics were read.
	ChunkReads   Reads    `json:"chunkReads"`
	ReadBytes    Reads    `json:"readBytes"`
	HitRatio     *float64 `json:"hitRatio,omitempty"`
	ByteHitRatio *float64 `json:"byteHitRatio,omitempty"`
	// Warnings say what could not be read or looks wrong.
	Warnings []string `json:"warnings,omitempty"`
}

// ZoneStatus is one zone of a cache.
type ZoneStatus struct {
	Name          string `json:"name"`
	StatefulSet   string `json:"statefulSet,omitempty"`
	Replicas      int32  `json:"replicas"`
	ReadyReplicas int32  `json:"readyReplicas"`
	// RingEpoch is the epoch of the zone's published ring document,
	// RingPublished when the operator published it.
	RingEpoch     int64        `json:"ringEpoch"`
	RingPublished *metav1.Time `json:"ringPublished,omitempty"`
	RingError     string       `json:"ringError,omitempty"`
	Active        int          `json:"activeMembers"`
	Draining      int          `json:"drainingMembers"`
	Nodes         []NodeStatus `json:"nodes"`
	ChunkReads    Reads        `json:"chunkReads"`
	ReadBytes     Reads        `json:"readBytes"`
	HitRatio      *float64     `json:"hitRatio,omitempty"`
	ByteHitRatio  *float64     `json:"byteHitRatio,omitempty"`
}

// NodeStatus is one cache node: its pod, its place in the published ring
// and its metrics.
type NodeStatus struct {
	Name string `json:"name"`
	// Ring is the node's state in the published ring: active, draining,
	// or empty when the ring does not list it (not ready yet).
	Ring string `json:"ring,omitempty"`
	// Phase is the pod's phase, "Terminating", or "Missing" for a ring
	// member without a pod.
	Phase        string       `json:"phase"`
	Ready        bool         `json:"ready"`
	Host         string       `json:"host,omitempty"`
	Metrics      *NodeMetrics `json:"metrics,omitempty"`
	MetricsError string       `json:"metricsError,omitempty"`
	HitRatio     *float64     `json:"hitRatio,omitempty"`
	ByteHitRatio *float64     `json:"byteHitRatio,omitempty"`
}

// collectStatus reads the caches and reports their status.
func collectStatus(ctx context.Context, cl client.Client, scr Scraper, caches []cachev1alpha1.DistributedCache) ([]CacheStatus, error) {
	out := make([]CacheStatus, 0, len(caches))
	for i := range caches {
		dc := &caches[i]
		cm, cmErr := ringConfigMap(ctx, cl, dc)
		pods, podsErr := cachePods(ctx, cl, dc)
		if podsErr != nil && !apierrors.IsForbidden(podsErr) {
			return nil, podsErr
		}
		st := buildCacheStatus(dc, cm, pods, scrapePods(ctx, scr, pods))
		for _, err := range []error{cmErr, podsErr} {
			if err != nil {
				st.Warnings = append(st.Warnings, err.Error())
			}
		}
		out = append(out, st)
	}
	return out, nil
}

// ringConfigMap is the cache's ring ConfigMap (nil and an error when it
// cannot be read).
func ringConfigMap(ctx context.Context, cl client.Client, dc *cachev1alpha1.DistributedCache) (*corev1.ConfigMap, error) {
	name := dc.RingConfigMapName()
	for _, z := range dc.Status.Zones {
		if z.RingConfigMap != "" {
			name = z.RingConfigMap
			break
		}
	}
	var cm corev1.ConfigMap
	if err := cl.Get(ctx, client.ObjectKey{Namespace: dc.Namespace, Name: name}, &cm); err != nil {
		return nil, fmt.Errorf("ring ConfigMap %s/%s: %w", dc.Namespace, name, err)
	}
	return &cm, nil
}

// cachePods lists the cache's node pods by status.selector.
func cachePods(ctx context.Context, cl client.Client, dc *cachev1alpha1.DistributedCache) ([]corev1.Pod, error) {
	if dc.Status.Selector == "" {
		return nil, nil
	}
	sel, err := labels.Parse(dc.Status.Selector)
	if err != nil {
		return nil, fmt.Errorf("status.selector %q: %w", dc.Status.Selector, err)
	}
	var pods corev1.PodList
	if err := cl.List(ctx, &pods, client.InNamespace(dc.Namespace), client.MatchingLabelsSelector{Selector: sel}); err != nil {
		return nil, fmt.Errorf("pods of %s/%s: %w", dc.Namespace, dc.Name, err)
	}
	return pods.Items, nil
}

// publishedRing is zone's ring in the ring ConfigMap, and when it was
// published (nil if the annotation is absent or unreadable).
func publishedRing(cm *corev1.ConfigMap, zone string) (*ring.Ring, *metav1.Time, error) {
	if cm == nil {
		return nil, nil, fmt.Errorf("no ring ConfigMap")
	}
	key := cachev1alpha1.RingConfigMapKey(zone)
	doc, ok := cm.Data[key]
	if !ok {
		return nil, nil, fmt.Errorf("ring ConfigMap %s has no key %s", cm.Name, key)
	}
	r, err := ring.Parse([]byte(doc))
	if err != nil {
		return nil, nil, fmt.Errorf("ring ConfigMap %s key %s: %w", cm.Name, key, err)
	}
	var at *metav1.Time
	if v, ok := cm.Annotations[cachev1alpha1.AnnotationRingPublishedPrefix+zone]; ok {
		if t, err := time.Parse(time.RFC3339, v); err == nil {
			at = &metav1.Time{Time: t}
		}
	}
	return r, at, nil
}

// zoneNames are the zones of spec, then any other zone status reports.
func zoneNames(dc *cachev1alpha1.DistributedCache) []string {
	var names []string
	for _, z := range dc.Spec.Zones {
		names = append(names, z.Name)
	}
	for _, z := range dc.Status.Zones {
		if !slices.Contains(names, z.Name) {
			names = append(names, z.Name)
		}
	}
	return names
}

// buildCacheStatus makes the report of a cache from what was read: the
// object, its ring ConfigMap (nil if unreadable), its pods and their
// scrapes by pod name.
func buildCacheStatus(dc *cachev1alpha1.DistributedCache, cm *corev1.ConfigMap, pods []corev1.Pod, scrapes map[string]scrapeResult) CacheStatus {
	st := CacheStatus{
		Namespace: dc.Namespace, Name: dc.Name,
		OperatorVersion: dc.Status.OperatorVersion,
		Generation:      dc.Generation, ObservedGeneration: dc.Status.ObservedGeneration,
		ReadyReplicas: dc.Status.ReadyReplicas, RingEpoch: dc.Status.RingEpoch,
		Conditions: dc.Status.Conditions,
	}
	if dc.Spec.Replicas != nil {
		st.Replicas = *dc.Spec.Replicas
	}
	if dc.Status.Selector == "" {
		st.Warnings = append(st.Warnings, "status.selector is empty: the operator has not reconciled this cache yet")
	}
	if st.ObservedGeneration != st.Generation {
		st.Warnings = append(st.Warnings, fmt.Sprintf("status describes generation %d, the spec is at %d: the operator has not caught up", st.ObservedGeneration, st.Generation))
	}
	zoneStatus := map[string]cachev1alpha1.ZoneStatus{}
	for _, z := range dc.Status.Zones {
		zoneStatus[z.Name] = z
	}
	for _, name := range zoneNames(dc) {
		zs := zoneStatus[name]
		z := ZoneStatus{Name: name, StatefulSet: zs.StatefulSet, Replicas: zs.Replicas, ReadyReplicas: zs.ReadyReplicas}
		r, at, err := publishedRing(cm, name)
		states := map[string]ring.State{}
		if err != nil {
			z.RingError = err.Error()
		} else {
			z.RingEpoch, z.RingPublished = r.Epoch(), at
			for _, m := range r.Members() {
				states[m.Name] = m.State
				if m.State == ring.StateActive {
					z.Active++
				} else {
					z.Draining++
				}
			}
		}
		z.Nodes = zoneNodes(zs.StatefulSet, pods, states, scrapes)
		for _, n := range z.Nodes {
			if n.Metrics != nil {
				z.ChunkReads = z.ChunkReads.Plus(n.Metrics.ChunkReads)
				z.ReadBytes = z.ReadBytes.Plus(n.Metrics.ReadBytes)
			}
		}
		z.HitRatio, z.ByteHitRatio = z.ChunkReads.HitRatio(), z.ReadBytes.HitRatio()
		st.ChunkReads = st.ChunkReads.Plus(z.ChunkReads)
		st.ReadBytes = st.ReadBytes.Plus(z.ReadBytes)
		st.Zones = append(st.Zones, z)
	}
	st.HitRatio, st.ByteHitRatio = st.ChunkReads.HitRatio(), st.ReadBytes.HitRatio()
	return st
}

// zoneNodes are the nodes of the zone whose StatefulSet is sts: its pods
// and the ring members without one, by ordinal.
func zoneNodes(sts string, pods []corev1.Pod, states map[string]ring.State, scrapes map[string]scrapeResult) []NodeStatus {
	var nodes []NodeStatus
	seen := map[string]bool{}
	for i := range pods {
		p := &pods[i]
		if sts == "" || !ownedByStatefulSet(p, sts) {
			continue
		}
		seen[p.Name] = true
		n := NodeStatus{Name: p.Name, Ring: string(states[p.Name]), Phase: phase(p), Ready: kubepod.Ready(p), Host: p.Spec.NodeName}
		if r, ok := scrapes[p.Name]; ok {
			if r.err != nil {
				n.MetricsError = r.err.Error()
			} else {
				n.Metrics = r.metrics
				n.HitRatio, n.ByteHitRatio = r.metrics.ChunkReads.HitRatio(), r.metrics.ReadBytes.HitRatio()
			}
		}
		nodes = append(nodes, n)
	}
	for name, s := range states {
		if !seen[name] {
			nodes = append(nodes, NodeStatus{Name: name, Ring: string(s), Phase: "Missing"})
		}
	}
	slices.SortFunc(nodes, func(a, b NodeStatus) int {
		if c := cmp.Compare(ordinalOf(a.Name), ordinalOf(b.Name)); c != 0 {
			return c
		}
		return strings.Compare(a.Name, b.Name)
	})
	return nodes
}

func ownedByStatefulSet(p *corev1.Pod, sts string) bool {
	for _, o := range p.OwnerReferences {
		if o.Kind == "StatefulSet" && o.Name == sts {
			return true
		}
	}
	return false
}

// ordinalOf is the StatefulSet ordinal at the end of a pod name (-1 if
// none), so that pod-10 sorts after pod-9.
func ordinalOf(name string) int {
	i := strings.LastIndexByte(name, '-')
	if i < 0 {
		return -1
	}
	n, err := strconv.Atoi(name[i+1:])
	if err != nil {
		return -1
	}
	return n
}
