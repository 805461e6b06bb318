package metrics

import (
	"github.com/prometheus/client_golang/prometheus"

	"github.com/distcache/distcache/internal/metrics/series"
	"github.com/distcache/distcache/internal/store"
)

// storeCollector reads the store's counters at scrape time, so the store
// itself stays free of Prometheus.
type storeCollector struct {
	stats func() store.Stats

	bytes, usage, chunks                 *prometheus.Desc
	capacity, ramCapacity                *prometheus.Desc
	limit, free, resets                  *prometheus.Desc
	tenantBytes, tenantChunks            *prometheus.Desc
	evictions, checksum, errors, rejects *prometheus.Desc
}

// RegisterStore exports a store's Stats on reg.
func RegisterStore(reg prometheus.Registerer, stats func() store.Stats) {
	d := series.Prefix{Namespace: node.Namespace, Subsystem: "store"}.Desc
	reg.MustRegister(&storeCollector{
		stats:        stats,
		bytes:        d("bytes", "Cached payload bytes by tier (ram, disk).", "tier"),
		usage:        d("disk_usage_bytes", "Bytes on disk under the store directory, value-log garbage included, as last measured."),
		capacity:     d("disk_capacity_bytes", "The hard bound on disk usage."),
		ramCapacity:  d("ram_capacity_bytes", "The size of the RAM tier (0: no RAM tier)."),
		limit:        d("disk_limit_bytes", "The disk bound in force: the capacity, or less when the filesystem holding the store has less room."),
		free:         d("filesystem_free_bytes", "Free bytes on the filesystem holding the store, as last measured."),
		chunks:       d("chunks", "Chunks held on disk."),
		tenantBytes:  d("tenant_bytes", "Disk bytes held per tenant (counted against its quota).", "tenant"),
		tenantChunks: d("tenant_chunks", "Chunks held per tenant.", "tenant"),
		evictions:    d("evictions_total", "Chunks evicted to stay under the disk bound or a tenant quota."),
		checksum:     d("checksum_failures_total", "Disk reads whose checksum did not match; each was dropped and refetched."),
		errors:       d("errors_total", "Local store operations that failed with an I/O or database error."),
		rejects:      d("rejected_total", "Chunks not admitted because the disk bound could not be kept."),
		resets:       d("resets_total", "Times the store was found damaged at start and deleted to start empty."),
	})
}

func (c *storeCollector) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range []*prometheus.Desc{c.bytes, c.usage, c.capacity, c.ramCapacity, c.limit, c.free, c.chunks, c.tenantBytes,
		c.tenantChunks, c.evictions, c.checksum, c.errors, c.rejects, c.resets} {
		ch <- d
	}
}

func (c *storeCollector) Collect(ch chan<- prometheus.Metric) {
	s := c.stats()
	gauge := func(d *prometheus.Desc, v float64, labels ...string) {
		ch <- prometheus.MustNewConstMetric(d, prometheus.GaugeValue, v, labels...)
	}
	counter := func(d *prometheus.Desc, v uint64) {
		ch <- prometheus.MustNewConstMetric(d, prometheus.CounterValue, float64(v))
	}
	gauge(c.bytes, float64(s.RAMBytes), "ram")
	gauge(c.bytes, float64(s.DiskBytes), "disk")
	gauge(c.usage, float64(s.DiskUsage))
	gauge(c.capacity, float64(s.DiskCapacity))
	gauge(c.ramCapacity, float64(s.RAMCapacity))
	gauge(c.limit, float64(s.DiskLimit))
	if s.DiskFree >= 0 {
		gauge(c.free, float64(s.DiskFree))
	}
	gauge(c.chunks, float64(s.Chunks))
	for name, t := range s.Tenants {
		gauge(c.tenantBytes, float64(t.Bytes), name)
		gauge(c.tenantChunks, float64(t.Chunks), name)
	}
	counter(c.evictions, s.Evictions)
	counter(c.checksum, s.ChecksumFailures)
	counter(c.errors, s.Errors)
	counter(c.rejects, s.Rejected)
	counter(c.resets, s.Resets)
}
