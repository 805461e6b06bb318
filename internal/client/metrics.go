package client

import (
	"github.com/prometheus/client_golang/prometheus"

	"github.com/distcache/distcache/internal/metrics/series"
)

// Results of node requests (the result label of
// distcache_client_node_requests_total).
const (
	resultOK           = "ok"
	resultNotFound     = "not_found"
	resultDenied       = "access_denied"
	resultChanged      = "changed"
	resultInvalidRange = "invalid_range"
	resultBadRequest   = "bad_request"    // any other 4xx
	resultUpstream     = "upstream_error" // the node answered a 5xx: its S3 failed
	resultNodeError    = "node_error"     // a 5xx that is not the node API's, or a broken answer
	resultUnreachable  = "unreachable"    // connection refused, timeout, body cut off
	resultWrongZone    = "wrong_zone"     // a ring of another zone than Config.Zone, refused
)

// Operations (the op label).
const (
	opStat     = "stat"
	opGetChunk = "get_chunk"
	opPut      = "put"
	opDelete   = "delete"
	opRing     = "ring"
)

// clientMetrics are the client's series; they exist (unregistered) even
// without a Registerer so the code never checks for nil.
type clientMetrics struct {
	reg           prometheus.Registerer
	pageCache     *prometheus.CounterVec
	pageFills     *prometheus.CounterVec
	requests      *prometheus.CounterVec
	failovers     prometheus.Counter
	ringEpoch     prometheus.Gauge
	ringRefreshes *prometheus.CounterVec
	// Requests another zone answered, and the bytes that crossed.
	zoneFallbacks  *prometheus.CounterVec
	crossZoneBytes *prometheus.CounterVec
	// Stats answered from kept metadata, and the polls that keep it valid.
	metaCache  *prometheus.CounterVec
	leasePolls *prometheus.CounterVec
	all        []prometheus.Collector
	// The series every hit counts in, resolved once (WithLabelValues
	// hashes its labels and locks on each call).
	pageHit, pageMiss, metaHit, metaMiss prometheus.Counter
}

// newMetrics makes the series; skipped counts the members skipped now,
// pool says what the page pool holds and how often it had nothing free.
func newMetrics(reg prometheus.Registerer, skipped func() float64, pool func() (bytes, refused float64)) (*clientMetrics, error) {
	dc := series.Prefix{Namespace: "distcache"}
	cl := series.Prefix{Namespace: dc.Namespace, Subsystem: "client"}
	m := &clientMetrics{
		reg: reg,
		pageCache: cl.CounterVec("page_cache_requests_total",
			"Chunk lookups in the client's RAM page cache by result (hit, miss).", "result"),
		pageFills: cl.CounterVec("page_fills_total",
			"Whole chunks fetched from the nodes into the page cache, by mode (read: a read waited for it; background: filled behind a read of part of the chunk; ahead: read ahead of a reader moving through the object).", "mode"),
		requests: cl.CounterVec("node_requests_total",
			"Requests to cache nodes by operation (stat, get_chunk, put, delete, ring) and result (ok, not_found, access_denied, changed, invalid_range, bad_request, upstream_error, node_error, unreachable, wrong_zone: a ring of another zone, refused).", "op", "result"),
		failovers: cl.Counter("failovers_total",
			"Requests retried on the next member after a member failed."),
		ringEpoch: cl.Gauge("ring_epoch",
			"Epoch of the ring the client routes by (0 for standalone nodes without a ring)."),
		ringRefreshes: cl.CounterVec("ring_refreshes_total",
			"Ring fetches by outcome (updated: a newer epoch, unchanged, error: no member answered).", "result"),
		zoneFallbacks: cl.CounterVec("zone_fallbacks_total",
			"Requests answered by a node of another zone (peer_zone) because no node of the client's own zone could be reached, by operation.", "peer_zone", "op"),
		crossZoneBytes: dc.CounterVec("cross_zone_bytes_total",
			"Payload bytes exchanged with nodes of another zone (peer_zone), by direction (in: received, out: sent): reads and writes that fell back to another zone because no node of the client's own zone could be reached. Inter-zone traffic is billed per GB in both directions.", "peer_zone", "direction"),
		metaCache: cl.CounterVec("metadata_cache_requests_total",
			"Stats (one per GetObject or HeadObject through the gateway) by result: hit, answered from metadata kept on a lease from its owner, with no round trip; miss, asked of a node.", "result"),
		leasePolls: cl.CounterVec("metadata_lease_polls_total",
			"Polls of the nodes for metadata changes that keep the client's metadata leases, by result (ok, reset: the node restarted or the client fell too far behind, everything kept from it dropped; error: no answer, kept metadata from that node unused once its lease ends).", "result"),
	}
	m.pageHit, m.pageMiss = m.pageCache.WithLabelValues("hit"), m.pageCache.WithLabelValues("miss")
	m.metaHit, m.metaMiss = m.metaCache.WithLabelValues("hit"), m.metaCache.WithLabelValues("miss")
	skippedGauge := cl.GaugeFunc("members_skipped",
		"Members the client skips (tries only after all others) because a request to them failed in the last 5 seconds.", skipped)
	poolBytes := cl.GaugeFunc("page_memory_bytes",
		"Memory the page cache's buffer pool holds (faulted in, reused after eviction): the page cache and pages still read after their eviction.",
		func() float64 { b, _ := pool(); return b })
	poolRefused := cl.CounterFunc("page_memory_exhausted_total",
		"Page fills that found every buffer of the pool held and took fresh memory instead.",
		func() float64 { _, r := pool(); return r })
	m.all = []prometheus.Collector{m.pageCache, m.pageFills, m.requests, m.failovers, m.ringEpoch, m.ringRefreshes, skippedGauge,
		poolBytes, poolRefused, m.zoneFallbacks, m.crossZoneBytes, m.metaCache, m.leasePolls}
	if reg == nil {
		return m, nil
	}
	for i, c := range m.all {
		if err := reg.Register(c); err != nil {
			for _, r := range m.all[:i] {
				reg.Unregister(r)
			}
			return nil, err
		}
	}
	return m, nil
}

// RegisterMetrics registers with reg the series a client registers, with
// no client behind them (every value zero): what dashboards and rules can
// select, for the tests that check them.
func RegisterMetrics(reg prometheus.Registerer) error {
	_, err := newMetrics(reg, func() float64 { return 0 }, func() (float64, float64) { return 0, 0 })
	return err
}

func (m *clientMetrics) unregister() {
	if m.reg == nil {
		return
	}
	for _, c := range m.all {
		m.reg.Unregister(c)
	}
}

// resultOf is the result label of an answered error.
func resultOf(e *Error) string {
	switch {
	case e.Status >= 500 && e.Code != "":
		return resultUpstream
	case e.Status >= 500:
		return resultNodeError
	}
	switch e.Kind {
	case ErrNotFound:
		return resultNotFound
	case ErrAccessDenied:
		return resultDenied
	case ErrChanged:
		return resultChanged
	case ErrInvalidRange:
		return resultInvalidRange
	}
	if e.Status == 0 {
		return resultNodeError // an answer the client could not use
	}
	return resultBadRequest
}
