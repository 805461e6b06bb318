// Package series declares Prometheus series under one name prefix, so that
// a declaration says only what differs: its name, help and labels. The node
// (internal/metrics), the client and the gateway declare theirs with it.
package series

import "github.com/prometheus/client_golang/prometheus"

// Prefix names the series it makes Namespace_Subsystem_name (an empty
// Subsystem is left out), as prometheus.BuildFQName does.
type Prefix struct {
	Namespace, Subsystem string
}

// Counter is a counter without labels.
func (p Prefix) Counter(name, help string) prometheus.Counter {
	return prometheus.NewCounter(p.counterOpts(name, help))
}

// CounterVec is a counter with the labels given.
func (p Prefix) CounterVec(name, help string, labels ...string) *prometheus.CounterVec {
	return prometheus.NewCounterVec(p.counterOpts(name, help), labels)
}

// CounterFunc is a counter read from value at each scrape.
func (p Prefix) CounterFunc(name, help string, value func() float64) prometheus.CounterFunc {
	return prometheus.NewCounterFunc(p.counterOpts(name, help), value)
}

// Gauge is a gauge without labels.
func (p Prefix) Gauge(name, help string) prometheus.Gauge {
	return prometheus.NewGauge(p.gaugeOpts(name, help))
}

// GaugeFunc is a gauge read from value at each scrape.
func (p Prefix) GaugeFunc(name, help string, value func() float64) prometheus.GaugeFunc {
	return prometheus.NewGaugeFunc(p.gaugeOpts(name, help), value)
}

// Histogram is a histogram without labels.
func (p Prefix) Histogram(name, help string, buckets []float64) prometheus.Histogram {
	return prometheus.NewHistogram(p.histogramOpts(name, help, buckets))
}

// HistogramVec is a histogram with the labels given.
func (p Prefix) HistogramVec(name, help string, buckets []float64, labels ...string) *prometheus.HistogramVec {
	return prometheus.NewHistogramVec(p.histogramOpts(name, help, buckets), labels)
}

// Desc describes a series a collector makes at each scrape.
func (p Prefix) Desc(name, help string, labels ...string) *prometheus.Desc {
	return prometheus.NewDesc(prometheus.BuildFQName(p.Namespace, p.Subsystem, name), help, labels, nil)
}

// Outcomes registers the counter name twice, with the const label outcome
// "ok" and "failed" (and the const labels given), read from counts at each
// scrape: how many updates of something took and how many were refused.
func (p Prefix) Outcomes(reg prometheus.Registerer, name, help string, labels prometheus.Labels, counts func() (ok, failed uint64)) {
	opts := func(outcome string) prometheus.CounterOpts {
		o := p.counterOpts(name, help)
		o.ConstLabels = prometheus.Labels{"outcome": outcome}
		for k, v := range labels {
			o.ConstLabels[k] = v
		}
		return o
	}
	reg.MustRegister(
		prometheus.NewCounterFunc(opts("ok"), func() float64 { ok, _ := counts(); return float64(ok) }),
		prometheus.NewCounterFunc(opts("failed"), func() float64 { _, failed := counts(); return float64(failed) }),
	)
}

func (p Prefix) counterOpts(name, help string) prometheus.CounterOpts {
	return prometheus.CounterOpts{Namespace: p.Namespace, Subsystem: p.Subsystem, Name: name, Help: help}
}

func (p Prefix) gaugeOpts(name, help string) prometheus.GaugeOpts {
	return prometheus.GaugeOpts{Namespace: p.Namespace, Subsystem: p.Subsystem, Name: name, Help: help}
}

func (p Prefix) histogramOpts(name, help string, buckets []float64) prometheus.HistogramOpts {
	return prometheus.HistogramOpts{Namespace: p.Namespace, Subsystem: p.Subsystem, Name: name, Help: help, Buckets: buckets}
}
