package cluster_test

import (
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"strconv"
	"strings"
	"time"

	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/distcache/distcache/controllers"
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

// sample is one line of the Prometheus text format.
type sample struct {
	name   string
	labels map[string]string
	value  float64
}

// metrics are the samples of one scrape.
type metrics []sample

// sum adds up the samples of name whose labels have the given values; a
// value may list alternatives separated by '|'.
func (ms metrics) sum(name string, match map[string]string) float64 {
	var total float64
next:
	for _, s := range ms {
		if s.name != name {
			continue
		}
		for k, want := range match {
			if !strings.Contains("|"+want+"|", "|"+s.labels[k]+"|") {
				continue next
			}
		}
		total += s.value
	}
	return total
}

// parseMetrics reads the Prometheus text exposition format (what the nodes
// serve to a scrape without an Accept header).
func parseMetrics(text string) (metrics, error) {
	var out metrics
	for line := range strings.SplitSeq(text, "\n") {
		line = strings.TrimSpace(line)
		if line == "" || line[0] == '#' {
			continue
		}
		s := sample{labels: map[string]string{}}
		i := strings.IndexAny(line, "{ ")
		if i < 0 {
			return nil, fmt.Errorf("metrics line %q: no value", line)
		}
		s.name, line = line[:i], line[i:]
		if line[0] == '{' {
			rest, err := parseLabels(line[1:], s.labels)
			if err != nil {
				return nil, fmt.Errorf("metrics line of %s: %w", s.name, err)
			}
			line = rest
		}
		fields := strings.Fields(line)
		if len(fields) == 0 {
			return nil, fmt.Errorf("metrics line of %s: no value", s.name)
		}
		v, err := strconv.ParseFloat(fields[0], 64)
		if err != nil {
			return nil, fmt.Errorf("metrics line of %s: %w", s.name, err)
		}
		s.value = v
		out = append(out, s)
	}
	return out, nil
}

// parseLabels reads `k="v",...}` into labels and returns what follows.
func parseLabels(s string, labels map[string]string) (string, error) {
	for {
		s = strings.TrimLeft(s, " ,")
		if strings.HasPrefix(s, "}") {
			return s[1:], nil
		}
		eq := strings.Index(s, `="`)
		if eq <= 0 {
			return "", fmt.Errorf("bad labels %q", s)
		}
		name := s[:eq]
		s = s[eq+2:]
		var v strings.Builder
		for {
			if s == "" {
				return "", fmt.Errorf("unterminated value of label %s", name)
			}
			c := s[0]
			s = s[1:]
			if c == '"' {
				break
			}
			if c == '\\' && s != "" {
				switch s[0] {
				case 'n':
					v.WriteByte('\n')
				default:
					v.WriteByte(s[0])
				}
				s = s[1:]
				continue
			}
			v.WriteByte(c)
		}
		labels[name] = v.String()
	}
}

var metricsClient = &http.Client{Timeout: 10 * time.Second}

// scrape GETs http://ip:port/metrics.
func scrape(ctx context.Context, ip string, port int) (metrics, error) {
	ctx, cancel := context.WithTimeout(ctx, 15*time.Second)
	defer cancel()
	url := "http://" + net.JoinHostPort(ip, strconv.Itoa(port)) + "/metrics"
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return nil, err
	}
	resp, err := metricsClient.Do(req)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		return nil, err
	}
	if resp.StatusCode != http.StatusOK {
		return nil, fmt.Errorf("GET %s: %s", url, resp.Status)
	}
	return parseMetrics(string(body))
}

// podScrape is one cache pod's metrics.
type podScrape struct {
	uid types.UID
	m   metrics
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

// sum adds up a metric over all pods.
func (s scrapes) sum(name string, match map[string]string) float64 {
	var total float64
	for _, p := range s {
		total += p.m.sum(name, match)
	}
	return total
}

// delta is how much a counter grew from before to s, per pod: a pod that
// was replaced (new UID) or is new started from zero. Pods gone since
// before are left out.
func (s scrapes) delta(before scrapes, name string, match map[string]string) map[string]float64 {
	out := map[string]float64{}
	for pod, now := range s {
		v := now.m.sum(name, match)
		if b, ok := before[pod]; ok && b.uid == now.uid {
			v -= b.m.sum(name, match)
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
