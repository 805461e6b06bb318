package gateway

import (
	"strconv"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/distcache/distcache/internal/metrics/series"
)

// Metrics are the gateway's Prometheus series (the client's page cache and
// node request series are registered by the client itself).
type Metrics struct {
	requests      *prometheus.CounterVec
	duration      *prometheus.HistogramVec
	responseBytes *prometheus.CounterVec
	requestBytes  *prometheus.CounterVec
	inflight      prometheus.Gauge
	upstream      *prometheus.CounterVec
	// GetObject's fetched pieces: bytes held, and fetches that waited
	// for the budget (Config.ReadBufferBytes).
	readBuffer      prometheus.Gauge
	readBufferWaits prometheus.Counter
	// ops are each operation's series, resolved once (WithLabelValues
	// hashes its labels and locks on every call): *opSeries by name.
	ops sync.Map
}

// opSeries are one operation's series. Those of bytes are made on first
// use, so an operation that never carries a body has none.
type opSeries struct {
	duration prometheus.Observer
	status   sync.Map // prometheus.Counter by HTTP status (statusAborted: "aborted")
	in, out  lazyCounter
}

type lazyCounter struct {
	once sync.Once
	c    prometheus.Counter
}

func (l *lazyCounter) get(vec *prometheus.CounterVec, op string) prometheus.Counter {
	l.once.Do(func() { l.c = vec.WithLabelValues(op) })
	return l.c
}

// statusAborted is the status of a response cut off mid-body.
const statusAborted = -1

// latencyBuckets span a page-cache hit (tens of microseconds) to a slow
// upload.
var latencyBuckets = []float64{
	.0001, .00025, .0005, .001, .0025, .005, .01, .025, .05, .1, .25, .5, 1, 2.5, 5, 10, 30,
}

// NewMetrics creates the gateway metrics and registers them with reg (which
// may be nil for tests that do not look at them).
func NewMetrics(reg prometheus.Registerer) *Metrics {
	gw := series.Prefix{Namespace: "distcache", Subsystem: "gateway"}
	m := &Metrics{
		requests: gw.CounterVec("requests_total",
			"S3 requests answered, by S3 operation and HTTP status code (\"aborted\": the response was cut off mid-body).", "operation", "status"),
		duration: gw.HistogramVec("request_duration_seconds",
			"S3 request latency from arrival to the last body byte, by S3 operation.", latencyBuckets, "operation"),
		responseBytes: gw.CounterVec("response_bytes_total",
			"Response body bytes sent to S3 clients, by S3 operation.", "operation"),
		requestBytes: gw.CounterVec("request_bytes_total",
			"Request body bytes received from S3 clients (after aws-chunked decoding), by S3 operation.", "operation"),
		inflight: gw.Gauge("inflight_requests",
			"S3 requests being served."),
		upstream: gw.CounterVec("passthrough_attempts_total",
			"Pass-through attempts to cache nodes by result (ok: the node answered, failover: it could not be reached and the next node was tried, failed: no node could be reached).", "result"),
		readBuffer: gw.Gauge("read_buffer_bytes",
			"Bytes GetObjects hold in fetched pieces (being fetched, queued or being sent), bounded by --read-buffer-bytes."),
		readBufferWaits: gw.Counter("read_buffer_waits_total",
			"GetObject fetches that waited because the read buffers (--read-buffer-bytes) were all held."),
	}
	if reg != nil {
		reg.MustRegister(m.requests, m.duration, m.responseBytes, m.requestBytes, m.inflight, m.upstream,
			m.readBuffer, m.readBufferWaits)
	}
	return m
}

func (m *Metrics) observe(op string, status int, in, out int64, start time.Time) {
	s := m.series(op)
	requests, ok := s.status.Load(status)
	if !ok {
		label := "aborted"
		if status != statusAborted {
			label = strconv.Itoa(status)
		}
		requests, _ = s.status.LoadOrStore(status, m.requests.WithLabelValues(op, label))
	}
	requests.(prometheus.Counter).Inc()
	s.duration.Observe(time.Since(start).Seconds())
	if out > 0 {
		s.out.get(m.responseBytes, op).Add(float64(out))
	}
	if in > 0 {
		s.in.get(m.requestBytes, op).Add(float64(in))
	}
}

func (m *Metrics) series(op string) *opSeries {
	if s, ok := m.ops.Load(op); ok {
		return s.(*opSeries)
	}
	s, _ := m.ops.LoadOrStore(op, &opSeries{duration: m.duration.WithLabelValues(op)})
	return s.(*opSeries)
}
