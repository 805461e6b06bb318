package cluster_test

import (
	"context"
	"net"
	"strconv"

	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/distcache/distcache/controllers"
	"github.com/distcache/distcache/internal/testutil/promtext"
)

// Metrics of docs/metrics.md the specs read.
const (
	mChunkReads    = "distcache_chunk_reads_total"    // tenant, result
	mResponseBytes = "distcache_response_bytes_total" // tenant, op, result
	mS3Requests    = "distcache_s3_requests_total"    // op, status
	mPeerRequests  = "distcache_peer_requests_total"  // kind, result
	mStoreChunks   = "distcache_store_chunks"
	mRAMCapacity   = "distcache_store_ram_capacity_bytes"
	mRingEpoch     = "distcache_ring_epoch"
	mClientEpoch   = "distcache_client_ring_epoch" // the gateway's
	mClientSkipped = "distcache_client_members_skipped"
	gatewayMetrics = 9091 // the gateway's --metrics-listen
)

// scrape GETs http://ip:port/metrics.
func scrape(ctx context.Context, ip string, port int) (promtext.Samples, error) {
	return promtext.Scrape(ctx, "http://"+net.JoinHostPort(ip, strconv.Itoa(port))+"/metrics")
}

// podScrape is one cache pod's metrics.
type podScrape struct {
	uid types.UID
	m   promtext.Samples
}

// scrapes are the cache pods' metrics by pod name.
type scrapes map[string]podScrape

// scrapePods scrapes every given pod's metrics port.
func scrapePods(ctx context.Context, g Gomega, pods []corev1.Pod) scrapes {
	out := scrapes{}
	for _, p := range pods {
		g.Expect(p.Status.PodIP).NotTo(BeEmpty(), "pod %s has no IP", p.Name)
		m, err := scrape(ctx, p.Status.PodIP, controllers.MetricsPort)
		g.Expect(err).NotTo(HaveOccurred(), "metrics of pod %s", p.Name)
		out[p.Name] = podScrape{uid: p.UID, m: m}
	}
	return out
}

// scrapeCache scrapes every Ready cache pod, polling until they all answer.
func scrapeCache(ctx context.Context) scrapes {
	var out scrapes
	Eventually(ctx, func(g Gomega) {
		var ready []corev1.Pod
		for _, p := range cachePods(ctx, g) {
			if podReady(&p) {
				ready = append(ready, p)
			}
		}
		out = scrapePods(ctx, g, ready)
	}).Should(Succeed())
	return out
}

// delta is how much a counter grew from before to s, per pod: a pod that
// was replaced (new UID) or is new started from zero. Pods gone since
// before are left out.
func (s scrapes) delta(before scrapes, name string, match map[string]string) map[string]float64 {
	out := map[string]float64{}
	for pod, now := range s {
		v := now.m.Sum(name, match)
		if b, ok := before[pod]; ok && b.uid == now.uid {
			v -= b.m.Sum(name, match)
		}
		out[pod] = v
	}
	return out
}

func total(perPod map[string]float64) float64 {
	var t float64
	for _, v := range perPod {
		t += v
	}
	return t
}

// s3Gets is the S3 GETs the cache pods made (one per chunk fetched from S3).
var s3Gets = map[string]string{"op": "get"}

// hits are chunk reads served from a node's RAM or disk tier.
var hits = map[string]string{"result": "hit_ram|hit_disk"}
