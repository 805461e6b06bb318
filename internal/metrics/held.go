package metrics

import (
	"time"

	"github.com/prometheus/client_golang/prometheus"
)

// ResultHeld is a write (or delete) kept by the cache nodes under a
// WriteBack or Transient policy, or a held copy read from a holder.
const ResultHeld = "held"

// HeldStats is what a node's write-back journal holds now, per tenant
// (writeback.Journal.TenantStats).
type HeldStats struct {
	Objects, Dirty int
	Bytes          int64
	OldestDirty    time.Time
}

// Held are the series of the objects a node holds for WriteBack and
// Transient policies (internal/writeback).
type Held struct {
	// Full counts held writes refused because the pinned space was full.
	Full prometheus.Counter
	// Persisted counts attempts to send held versions to S3, by op (put,
	// delete) and result (ok, error).
	Persisted *prometheus.CounterVec
	// PersistDuration is how long each attempt took.
	PersistDuration prometheus.Histogram
	// JournalSync is how long each sync of the journal took.
	JournalSync prometheus.Histogram
	// LateUploads counts uploads found in S3 after a newer delete of
	// their key and deleted again (writeback/late.go).
	LateUploads prometheus.Counter

	collector heldCollector
}

// NewHeld registers the held objects' series with reg; stats is read at
// each scrape (per tenant), limit is the pinned limit in bytes.
func NewHeld(reg prometheus.Registerer, stats func() map[string]HeldStats, limit int64) *Held {
	h := &Held{
		Full: node.Counter("writeback_full_total",
			"Held writes (WriteBack, Transient) refused with 503 SlowDown because the node's pinned space (--writeback-fraction of --disk-bytes) was full."),
		Persisted: node.CounterVec("writeback_persist_attempts_total",
			"Attempts to send held WriteBack versions to S3, by op (put, delete) and result (ok, error); errors are retried with backoff.", "op", "result"),
		PersistDuration: node.Histogram("writeback_persist_duration_seconds",
			"Time of each attempt to send a held version to S3.", latencyBuckets),
		LateUploads: node.Counter("writeback_late_uploads_total",
			"Held versions S3 applied after a newer delete of their key (their node gave up on the upload: killed with it on the wire, or an attempt timed out), found by the delete's holders and deleted again."),
		JournalSync: node.Histogram("writeback_journal_sync_duration_seconds",
			"Time of each fdatasync of the write-back journal, which every held write waits for (one for a group of writes): the disk's flush latency, part of each WriteBack PUT's.", latencyBuckets),
	}
	h.collector = heldCollector{stats: stats, limit: limit,
		objects: node.Desc("writeback_objects",
			"Objects this node holds for WriteBack (dirty: not in S3 yet) and Transient policies, by tenant and kind (dirty, transient).", "tenant", "kind"),
		bytes: node.Desc("writeback_bytes",
			"Bytes of the held objects' bodies on this node's disk (pinned: never evicted), by tenant.", "tenant"),
		oldest: node.Desc("writeback_oldest_dirty_seconds",
			"Age of the oldest held WriteBack write not yet in S3, by tenant (0: none).", "tenant"),
		limitDesc: node.Desc("writeback_limit_bytes",
			"The node's pinned space for held objects: writes past it get SlowDown."),
		pinnedDesc: node.Desc("writeback_pinned_bytes",
			"Bytes of the node's pinned space in use, what its limit bounds: every held version still kept (older ones being persisted too) and the parts of held multipart uploads."),
	}
	reg.MustRegister(h.Full, h.Persisted, h.PersistDuration, h.JournalSync, h.LateUploads, &h.collector)
	return h
}

// ReportPinned has the pinned space in use (what counts against the
// limit) read from pinned at each scrape; it is called before the first.
func (h *Held) ReportPinned(pinned func() int64) *Held {
	h.collector.pinned = pinned
	return h
}

type heldCollector struct {
	stats                                         func() map[string]HeldStats
	pinned                                        func() int64
	limit                                         int64
	objects, bytes, oldest, limitDesc, pinnedDesc *prometheus.Desc
}

func (c *heldCollector) Describe(ch chan<- *prometheus.Desc) {
	ch <- c.objects
	ch <- c.bytes
	ch <- c.oldest
	ch <- c.limitDesc
	ch <- c.pinnedDesc
}

func (c *heldCollector) Collect(ch chan<- prometheus.Metric) {
	ch <- prometheus.MustNewConstMetric(c.limitDesc, prometheus.GaugeValue, float64(c.limit))
	if c.pinned != nil {
		ch <- prometheus.MustNewConstMetric(c.pinnedDesc, prometheus.GaugeValue, float64(c.pinned()))
	}
	for tenant, s := range c.stats() {
		ch <- prometheus.MustNewConstMetric(c.objects, prometheus.GaugeValue, float64(s.Dirty), tenant, "dirty")
		ch <- prometheus.MustNewConstMetric(c.objects, prometheus.GaugeValue, float64(s.Objects-s.Dirty), tenant, "transient")
		ch <- prometheus.MustNewConstMetric(c.bytes, prometheus.GaugeValue, float64(s.Bytes), tenant)
		age := 0.0
		if !s.OldestDirty.IsZero() {
			age = time.Since(s.OldestDirty).Seconds()
		}
		ch <- prometheus.MustNewConstMetric(c.oldest, prometheus.GaugeValue, age, tenant)
	}
}
