package metrics

import "github.com/prometheus/client_golang/prometheus"

// RegisterAPIWatch exports the updates a node's watch of one object
// through the API server (internal/kubewatch) handed over: object is
// "ring" or "tenants"; a failed update keeps the configuration in force.
func RegisterAPIWatch(reg prometheus.Registerer, object string, updates func() (ok, failed uint64)) {
	opts := func(outcome string) prometheus.CounterOpts {
		return prometheus.CounterOpts{
			Namespace: namespace, Name: "api_watch_updates_total",
			Help:        "Changed versions of the ring ConfigMap or tenants Secret received through the API server, by outcome; a failed one (invalid, stale or without the key) keeps the configuration in force.",
			ConstLabels: prometheus.Labels{"object": object, "outcome": outcome},
		}
	}
	reg.MustRegister(
		prometheus.NewCounterFunc(opts("ok"), func() float64 { ok, _ := updates(); return float64(ok) }),
		prometheus.NewCounterFunc(opts("failed"), func() float64 { _, failed := updates(); return float64(failed) }),
	)
}
