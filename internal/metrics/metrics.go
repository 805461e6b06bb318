// Package metrics defines every Prometheus series a cache node exports. The
// collectors are created against a caller-provided registry (no globals), and
// the names are listed for users in docs/metrics.md.
package metrics

import (
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/distcache/distcache/internal/metrics/series"
	"github.com/distcache/distcache/internal/ring"
)

// node names the node's series distcache_<name>.
var node = series.Prefix{Namespace: "distcache"}

// Result labels on request series. Hits name the tier that answered.
const (
	ResultHitRAM  = "hit_ram"
	ResultHitDisk = "hit_disk"
	ResultMiss    = "miss"
	ResultError   = "error"
	// ResultRelayed is a chunk this node does not own, served by asking
	// its owner (relayed); the owner counts the hit or miss, so cluster
	// hit ratios leave relayed reads out. The value, "forwarded", is what
	// dashboards, alerts and X-Distcache-Cache have always said.
	ResultRelayed = "forwarded"
)

// Node holds a cache node's request-path metrics.
type Node struct {
	Requests          *prometheus.CounterVec
	ResponseBytes     *prometheus.CounterVec
	RequestDuration   *prometheus.HistogramVec
	ChunkReads        *prometheus.CounterVec
	S3Requests        *prometheus.CounterVec
	S3Duration        *prometheus.HistogramVec
	S3Retries         *prometheus.CounterVec
	SingleflightJoins prometheus.Counter
	StoreFailures     *prometheus.CounterVec
	MetaRevalidations *prometheus.CounterVec
	PeerRequests      *prometheus.CounterVec
	RingEpoch         prometheus.Gauge
	// CrossZoneBytes counts chunk bytes received from nodes of other zones
	// (--cross-zone=OnMiss), by peer_zone and direction (in). The node's
	// own zone is the zone target label of its pod (a label of the same
	// name here would be renamed on scrape).
	CrossZoneBytes *prometheus.CounterVec
	// MetaLeaseWaits counts writes by how their acknowledgement waited
	// for the gateways that keep metadata (internal/metalease).
	MetaLeaseWaits *prometheus.CounterVec
	// MetaWatchers is the number of gateways holding metadata leases.
	MetaWatchers prometheus.Gauge

	// ring is read at every scrape for distcache_ring_members (ReportRing).
	ring ringMembers
}

// latencyBuckets span a RAM hit (tens of microseconds) to a slow S3 miss.
var latencyBuckets = []float64{
	.00005, .0001, .00025, .0005, .001, .0025, .005, .01, .025, .05, .1, .25, .5, 1, 2.5, 5, 10,
}

// NewNode creates the node metrics and registers them with reg.
func NewNode(reg prometheus.Registerer) *Node {
	m := &Node{
		Requests: node.CounterVec("requests_total",
			"Requests served, by tenant, operation and result (hit_ram, hit_disk, miss, forwarded, error); an object read counts under the highest of its chunks' results in the order hit_ram < hit_disk < miss < forwarded.", "tenant", "op", "result"),
		ResponseBytes: node.CounterVec("response_bytes_total",
			"Body bytes sent to clients, by tenant, operation and result; an object read counts each chunk's bytes under that chunk's result.", "tenant", "op", "result"),
		RequestDuration: node.HistogramVec("request_duration_seconds",
			"Request latency from routing to the last body byte, by operation and result.", latencyBuckets, "op", "result"),
		ChunkReads: node.CounterVec("chunk_reads_total",
			"Chunk lookups by tenant and result (hit_ram, hit_disk, miss, forwarded, error); the hit ratio is hits over all but forwarded (the owner counts those).", "tenant", "result"),
		S3Requests: node.CounterVec("s3_requests_total",
			"Logical requests to the S3 backend by operation (head, get, put, delete, forward) and status class (ok, not_found, precondition_failed, access_denied, invalid_range, unavailable, canceled, error).", "op", "status"),
		S3Duration: node.HistogramVec("s3_request_duration_seconds",
			"Latency of requests to the S3 backend, retries included, by operation.", latencyBuckets, "op"),
		S3Retries: node.CounterVec("s3_retries_total",
			"Retried S3 attempts (503 SlowDown, 500, throttling, timeouts), by operation.", "op"),
		SingleflightJoins: node.Counter("singleflight_joins_total",
			"Chunk or metadata misses that waited for another request's S3 fetch instead of making their own."),
		StoreFailures: node.CounterVec("store_failures_total",
			"Local store operations that failed and were bypassed (the node served from S3 instead), by operation and reason (no_space, error).", "op", "reason"),
		MetaRevalidations: node.CounterVec("metadata_revalidations_total",
			"Object metadata revalidations against S3 by outcome (unchanged, changed, stale_served, error).", "outcome"),
		PeerRequests: node.CounterVec("peer_requests_total",
			"Requests to other cache nodes by kind (forward: a chunk from its owner; handoff: a chunk from its owner of the previous ring epoch; handout: a written chunk to its owner; meta: metadata from its owner; invalidate: a changed object to its metadata owner; invalidate_passed_on: one another member sent by an older ring, to the owner under this node's; cross_zone: a missed chunk from its owner in another zone, from that node's store only; held_read, held_meta, held_drop, held_confirm: a held version's bytes, its metadata, the drop of a copy, and whether a newer version is held, from other holders) and result (ok, miss, changed, error, unreachable, skipped_down).", "kind", "result"),
		RingEpoch: node.Gauge("ring_epoch",
			"Epoch of the ring this node routes by (0 when it runs alone)."),
		CrossZoneBytes: node.CounterVec("cross_zone_bytes_total",
			"Chunk bytes exchanged with nodes of another zone (peer_zone), by direction (in: received): misses answered by the chunk's owner in another zone (--cross-zone=OnMiss) instead of S3. Inter-zone traffic is billed per GB in both directions.", "peer_zone", "direction"),
		MetaLeaseWaits: node.CounterVec("metadata_lease_waits_total",
			"Writes acknowledged after every gateway keeping metadata learnt of the change, by outcome (notified: all of them polled past it; lapsed: at least one did not and the write waited for its lease to end, a sign of a dead or partitioned gateway; owner_unreachable: the object's metadata owner could not be told, and the write waited until the leases it granted before it failed had ended).", "outcome"),
		MetaWatchers: node.Gauge("metadata_lease_watchers",
			"Clients (gateways) polling this node for metadata changes, and so holding leases that writes wait on."),
	}
	m.ring.desc = node.Desc("ring_members",
		"Members of the ring this node routes by, by state (active: they own chunks; draining: they own none and hand theirs over); 0 when the node runs alone.", "state")
	reg.MustRegister(&m.ring, m.PeerRequests, m.RingEpoch, m.Requests, m.ResponseBytes, m.RequestDuration, m.ChunkReads, m.S3Requests,
		m.S3Duration, m.S3Retries, m.SingleflightJoins, m.StoreFailures, m.MetaRevalidations, m.CrossZoneBytes,
		m.MetaLeaseWaits, m.MetaWatchers)
	return m
}

// ObserveS3 records one logical S3 request (s3backend.Observer).
func (m *Node) ObserveS3(op, status string, d time.Duration) {
	m.S3Requests.WithLabelValues(op, status).Inc()
	m.S3Duration.WithLabelValues(op).Observe(d.Seconds())
}

// ObserveRetry records one retried S3 attempt.
func (m *Node) ObserveRetry(op string) { m.S3Retries.WithLabelValues(op).Inc() }

// RegisterTenantReloads exports the tenants file watcher's reload counts.
func RegisterTenantReloads(reg prometheus.Registerer, reloads func() (ok, failed uint64)) {
	node.Outcomes(reg, "tenant_config_reloads_total",
		"Reloads of the tenants file by outcome; a failed reload keeps the previous configuration.", nil, reloads)
}

// ReportRing makes distcache_ring_members report the ring h holds, read at
// every scrape so it always matches the ring the node routes by. Without it
// (a node that runs alone) both states report 0.
func (m *Node) ReportRing(h *ring.Holder) { m.ring.holder.Store(h) }

// ringMembers counts the members of the ring in force by state.
type ringMembers struct {
	desc   *prometheus.Desc
	holder atomic.Pointer[ring.Holder]
}

func (c *ringMembers) Describe(ch chan<- *prometheus.Desc) { ch <- c.desc }

func (c *ringMembers) Collect(ch chan<- prometheus.Metric) {
	count := map[ring.State]int{ring.StateActive: 0, ring.StateDraining: 0}
	if h := c.holder.Load(); h != nil {
		if r := h.Load(); r != nil {
			for _, mb := range r.Members() {
				count[mb.State]++
			}
		}
	}
	for _, state := range []ring.State{ring.StateActive, ring.StateDraining} {
		ch <- prometheus.MustNewConstMetric(c.desc, prometheus.GaugeValue, float64(count[state]), string(state))
	}
}
