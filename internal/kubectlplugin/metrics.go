package kubectlplugin

import (
	"bytes"
	"fmt"
	"math"

	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"
)

// The series of a cache node's /metrics (internal/metrics, docs/metrics.md)
// the reports are made of.
const (
	metricBuildInfo      = "distcache_build_info"
	metricRingEpoch      = "distcache_ring_epoch"
	metricChunkReads     = "distcache_chunk_reads_total"
	metricResponseBytes  = "distcache_response_bytes_total"
	metricStoreBytes     = "distcache_store_bytes"
	metricRAMCapacity    = "distcache_store_ram_capacity_bytes"
	metricDiskUsage      = "distcache_store_disk_usage_bytes"
	metricDiskLimit      = "distcache_store_disk_limit_bytes"
	metricDiskCapacity   = "distcache_store_disk_capacity_bytes"
	metricStoreChunks    = "distcache_store_chunks"
	metricTenantBytes    = "distcache_store_tenant_bytes"
	resultHitRAM         = "hit_ram"
	resultHitDisk        = "hit_disk"
	resultMiss           = "miss"
	resultForwarded      = "forwarded"
	resultError          = "error"
	opGetChunk, opGetObj = "get_chunk", "get_object"
)

// Reads counts chunk reads (distcache_chunk_reads_total) or the bytes of
// reads (distcache_response_bytes_total of get_chunk and get_object) by
// where they came from, since the node started.
type Reads struct {
	HitRAM    int64 `json:"hitRAM"`
	HitDisk   int64 `json:"hitDisk"`
	Miss      int64 `json:"miss"`
	Forwarded int64 `json:"forwarded"`
	Error     int64 `json:"error"`
}

func (r *Reads) add(result string, v float64) {
	n := int64(math.Round(v))
	switch result {
	case resultHitRAM:
		r.HitRAM += n
	case resultHitDisk:
		r.HitDisk += n
	case resultMiss:
		r.Miss += n
	case resultForwarded:
		r.Forwarded += n
	case resultError:
		r.Error += n
	}
}

// Plus is the sum of r and o.
func (r Reads) Plus(o Reads) Reads {
	return Reads{r.HitRAM + o.HitRAM, r.HitDisk + o.HitDisk, r.Miss + o.Miss, r.Forwarded + o.Forwarded, r.Error + o.Error}
}

// HitRatio is hits over every read but the forwarded ones (their owner
// counted them), as docs/metrics.md defines the cluster hit ratio; nil when
// there is no such read.
func (r Reads) HitRatio() *float64 {
	total := r.HitRAM + r.HitDisk + r.Miss + r.Error
	if total == 0 {
		return nil
	}
	v := float64(r.HitRAM+r.HitDisk) / float64(total)
	return &v
}

// Store is a node's local store, as last measured.
type Store struct {
	RAMBytes          int64 `json:"ramBytes"`
	RAMCapacityBytes  int64 `json:"ramCapacityBytes"`
	DiskBytes         int64 `json:"diskBytes"`
	DiskUsageBytes    int64 `json:"diskUsageBytes"`
	DiskLimitBytes    int64 `json:"diskLimitBytes"`
	DiskCapacityBytes int64 `json:"diskCapacityBytes"`
	Chunks            int64 `json:"chunks"`
}

// NodeMetrics is what one scrape of a cache node says.
type NodeMetrics struct {
	// Version is distcache_build_info's version label.
	Version string `json:"version,omitempty"`
	// RingEpoch is the epoch the node routes by (0: it runs alone).
	RingEpoch int64 `json:"ringEpoch"`
	// ChunkReads and ReadBytes count reads by result since the node started.
	ChunkReads Reads `json:"chunkReads"`
	ReadBytes  Reads `json:"readBytes"`
	Store      Store `json:"store"`
	// TenantBytes is each tenant's disk bytes on the node (its quota use).
	TenantBytes map[string]int64 `json:"tenantBytes,omitempty"`
}

// parseNodeMetrics reads a node's /metrics in the Prometheus text format.
func parseNodeMetrics(text []byte) (*NodeMetrics, error) {
	p := expfmt.NewTextParser(model.UTF8Validation)
	fams, err := p.TextToMetricFamilies(bytes.NewReader(text))
	if err != nil {
		return nil, fmt.Errorf("parse metrics: %w", err)
	}
	if _, ok := fams[metricChunkReads]; !ok {
		if _, ok := fams[metricStoreBytes]; !ok {
			return nil, fmt.Errorf("not a cache node's metrics: neither %s nor %s", metricChunkReads, metricStoreBytes)
		}
	}
	m := &NodeMetrics{}
	each(fams, metricBuildInfo, func(l map[string]string, _ float64) { m.Version = l["version"] })
	each(fams, metricRingEpoch, func(_ map[string]string, v float64) { m.RingEpoch = int64(v) })
	each(fams, metricChunkReads, func(l map[string]string, v float64) { m.ChunkReads.add(l["result"], v) })
	each(fams, metricResponseBytes, func(l map[string]string, v float64) {
		if op := l["op"]; op == opGetChunk || op == opGetObj {
			m.ReadBytes.add(l["result"], v)
		}
	})
	each(fams, metricStoreBytes, func(l map[string]string, v float64) {
		switch l["tier"] {
		case "ram":
			m.Store.RAMBytes = int64(v)
		case "disk":
			m.Store.DiskBytes = int64(v)
		}
	})
	gauge := func(name string, into *int64) {
		each(fams, name, func(_ map[string]string, v float64) { *into = int64(v) })
	}
	gauge(metricRAMCapacity, &m.Store.RAMCapacityBytes)
	gauge(metricDiskUsage, &m.Store.DiskUsageBytes)
	gauge(metricDiskLimit, &m.Store.DiskLimitBytes)
	gauge(metricDiskCapacity, &m.Store.DiskCapacityBytes)
	gauge(metricStoreChunks, &m.Store.Chunks)
	each(fams, metricTenantBytes, func(l map[string]string, v float64) {
		if m.TenantBytes == nil {
			m.TenantBytes = map[string]int64{}
		}
		m.TenantBytes[l["tenant"]] += int64(v)
	})
	return m, nil
}

// each calls f with the labels and value of every sample of the family
// name (counters, gauges and untyped series; NaN samples are skipped).
func each(fams map[string]*dto.MetricFamily, name string, f func(labels map[string]string, v float64)) {
	fam, ok := fams[name]
	if !ok {
		return
	}
	for _, s := range fam.GetMetric() {
		var v float64
		switch {
		case s.Counter != nil:
			v = s.Counter.GetValue()
		case s.Gauge != nil:
			v = s.Gauge.GetValue()
		case s.Untyped != nil:
			v = s.Untyped.GetValue()
		default:
			continue
		}
		if math.IsNaN(v) {
			continue
		}
		labels := make(map[string]string, len(s.GetLabel()))
		for _, lp := range s.GetLabel() {
			labels[lp.GetName()] = lp.GetValue()
		}
		f(labels, v)
	}
}
