package controllers

import (
	"context"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	corev1 "k8s.io/api/core/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/log"

	"github.com/distcache/distcache/internal/monitoring"
)

// The operator's own metrics about the caches it runs, served on its
// metrics endpoint (main.go registers them in controller-runtime's
// registry): what a cache's pods cannot report because they do not run.
//
// A cache pod the scheduler cannot place has no IP, so the ServiceMonitor
// has no target for it and DistcacheNodeDown never sees it; the operator
// watches those pods anyway (readiness, the ring) and counts them here, per
// cache and zone, for DistcacheNodeUnschedulable. The labels are named
// cache_namespace and cache, as a gateway's are: the operator's own scrape
// gives its series the operator's namespace and pod.

// cachePodsCollector counts the cache node pods the scheduler reported
// unschedulable, from the manager's cache of the operator's pods, at each
// scrape. Only the elected leader reports (its caches are the ones being
// reconciled): with several operator replicas, one series per zone.
type cachePodsCollector struct {
	reader  client.Reader
	elected <-chan struct{}
	desc    *prometheus.Desc
}

// collectTimeout bounds a scrape's read of the pods (a cache that is not
// synced yet waits at most this long).
const collectTimeout = 5 * time.Second

func newCachePodsCollector(reader client.Reader, elected <-chan struct{}) *cachePodsCollector {
	return &cachePodsCollector{
		reader: reader, elected: elected, desc: monitoring.UnschedulablePodsDesc(),
	}
}

func (c *cachePodsCollector) Describe(ch chan<- *prometheus.Desc) { ch <- c.desc }

func (c *cachePodsCollector) Collect(ch chan<- prometheus.Metric) {
	select {
	case <-c.elected:
	default:
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), collectTimeout)
	defer cancel()
	var pods corev1.PodList
	if err := c.reader.List(ctx, &pods, client.MatchingLabels{LabelName: NodeAppName, LabelManagedBy: ManagedByValue}); err != nil {
		// The operator's other metrics are still worth a scrape: no
		// series of this family this time, and a log line.
		log.FromContext(ctx).WithName("metrics").Error(err, "listing cache pods for "+monitoring.MetricUnschedulablePods)
		return
	}
	for zone, n := range unschedulableByZone(pods.Items) {
		ch <- prometheus.MustNewConstMetric(c.desc, prometheus.GaugeValue, float64(n), zone.namespace, zone.cache, zone.zone)
	}
}

// cacheZone names one zone of one cache.
type cacheZone struct{ namespace, cache, zone string }

// unschedulableByZone counts the unschedulable pods of every zone that has
// cache pods (0 for the zones whose pods are all placed).
func unschedulableByZone(pods []corev1.Pod) map[cacheZone]int {
	out := map[cacheZone]int{}
	for i := range pods {
		p := &pods[i]
		z := cacheZone{p.Namespace, p.Labels[LabelInstance], p.Labels[LabelZone]}
		if z.cache == "" || z.zone == "" {
			continue
		}
		n := out[z]
		if podUnschedulable(p) {
			n++
		}
		out[z] = n
	}
	return out
}

// podUnschedulable: the scheduler tried and found no node for the pod.
func podUnschedulable(p *corev1.Pod) bool {
	if p.DeletionTimestamp != nil || p.Spec.NodeName != "" {
		return false
	}
	for _, c := range p.Status.Conditions {
		if c.Type == corev1.PodScheduled {
			return c.Status == corev1.ConditionFalse && c.Reason == corev1.PodReasonUnschedulable
		}
	}
	return false
}
