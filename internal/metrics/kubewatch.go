package metrics

import "github.com/prometheus/client_golang/prometheus"

// RegisterAPIWatch exports the updates a node's watch of one object
// through the API server (internal/kubewatch) handed over: object is
// "ring" or "tenants"; a failed update keeps the configuration in force.
func RegisterAPIWatch(reg prometheus.Registerer, object string, updates func() (ok, failed uint64)) {
	node.Outcomes(reg, "api_watch_updates_total",
		"Changed versions of the ring ConfigMap or tenants Secret received through the API server, by outcome; a failed one (invalid, stale or without the key) keeps the configuration in force.",
		prometheus.Labels{"object": object}, updates)
}
