package v1alpha1

// MonitoringSpec configures metrics scraping and dashboards.
type MonitoringSpec struct {
	// ServiceMonitor for the prometheus-operator.
	// +kubebuilder:default={}
	// +optional
	ServiceMonitor ServiceMonitorSpec `json:"serviceMonitor,omitempty"`

	// PrometheusRule publishes the distcache alerts for the
	// prometheus-operator: low hit ratio, node down, node unschedulable
	// (from the operator's own metrics), S3 error rate, disk near capacity,
	// certificates expiring (nodes' and gateways'), cross-zone traffic and
	// gateway zone fallback. Each carries a runbook_url into
	// docs/operations.md.
	// +kubebuilder:default={}
	// +optional
	PrometheusRule PrometheusRuleSpec `json:"prometheusRule,omitempty"`

	// GrafanaDashboard publishes the distcache dashboard.
	// +kubebuilder:default={}
	// +optional
	GrafanaDashboard GrafanaDashboardSpec `json:"grafanaDashboard,omitempty"`
}

// PrometheusRuleSpec configures the PrometheusRule with the alerts.
type PrometheusRuleSpec struct {
	// Enabled creates a PrometheusRule. Where the prometheus-operator's CRDs
	// are not installed the operator reports that in a condition and carries
	// on.
	// +kubebuilder:default=false
	// +optional
	Enabled bool `json:"enabled,omitempty"`

	// Labels on the PrometheusRule, for the Prometheus object's
	// ruleSelector (for example release: kube-prometheus-stack).
	// +optional
	Labels map[string]string `json:"labels,omitempty"`

	// HitRatioThreshold: the DistcacheLowHitRatio alert fires when a zone's
	// byte hit ratio stays below this fraction (0 to 1) for 15 minutes.
	// +kubebuilder:default="0.5"
	// +kubebuilder:validation:Pattern=`^(0(\.[0-9]+)?|1(\.0+)?)$`
	// +optional
	HitRatioThreshold string `json:"hitRatioThreshold,omitempty"`
}

// ServiceMonitorSpec configures the ServiceMonitor.
type ServiceMonitorSpec struct {
	// Enabled creates a ServiceMonitor scraping every cache node. Where the
	// prometheus-operator's CRDs are not installed the operator reports that
	// in a condition and carries on.
	// +kubebuilder:default=false
	// +optional
	Enabled bool `json:"enabled,omitempty"`

	// Interval between scrapes (prometheus-operator duration syntax).
	// +kubebuilder:default="30s"
	// +kubebuilder:validation:Pattern=`^(0|(([0-9]+)y)?(([0-9]+)w)?(([0-9]+)d)?(([0-9]+)h)?(([0-9]+)m)?(([0-9]+)s)?(([0-9]+)ms)?)$`
	// +optional
	Interval string `json:"interval,omitempty"`

	// Labels on the ServiceMonitor, for the Prometheus object's
	// serviceMonitorSelector (for example release: kube-prometheus-stack).
	// +optional
	Labels map[string]string `json:"labels,omitempty"`
}

// GrafanaDashboardSpec configures the dashboard ConfigMap.
type GrafanaDashboardSpec struct {
	// Enabled creates a ConfigMap holding the dashboard JSON, in the cache's
	// namespace, for Grafana's dashboard sidecar to load.
	// +kubebuilder:default=false
	// +optional
	Enabled bool `json:"enabled,omitempty"`

	// Labels on the ConfigMap; the default is the Grafana sidecar's default
	// label.
	// +kubebuilder:default={"grafana_dashboard":"1"}
	// +optional
	Labels map[string]string `json:"labels,omitempty"`
}
