// Package monitoring holds what the operator publishes for watching a
// DistributedCache: the Grafana dashboard (dashboard.json) and the alert
// rules for a PrometheusRule.
//
// Both query the series a cache node exports (docs/metrics.md) with the
// target labels that the operator's ServiceMonitor on the cache's client
// Service gives them:
//
//   - namespace: the cache's namespace;
//   - service: the cache's name (its client Service is named after it; job
//     carries the same value);
//   - pod: the cache node's pod;
//   - zone: the node's zone, relabelled from the pod's
//     cache.distcache.io/zone label;
//   - endpoint ("metrics"), container, instance.
//
// Gateways run next to compute, in their users' namespaces: a PodMonitor
// (the operator's, for the gateways it runs for a CacheTenant) scrapes pods
// labelled app.kubernetes.io/name=distcache-gateway and names the cache
// they read through from two pod labels (GatewayPodLabelCache,
// GatewayPodLabelCacheNamespace), and their zone from the zone label,
// giving their series:
//
//   - cache, cache_namespace: the DistributedCache the gateway reads
//     through;
//   - zone: the gateway's zone (absent for a gateway whose pod has no zone
//     label);
//   - namespace, pod: the gateway's own;
//   - job (<namespace>/distcache-gateway), endpoint ("metrics"), container,
//     instance.
//
// The dashboard's Gateways row selects them by cache and cache_namespace,
// so they never mix with the nodes' series (which have service, not cache).
//
// The operator itself exports MetricUnschedulablePods on its own metrics
// endpoint (controllers/distributedcache_metrics.go), scraped by the
// operator's ServiceMonitor (config/prometheus), with the labels
// cache_namespace, cache and zone: a pod the scheduler cannot place has no
// scrape target of its own.
//
// Every alert carries a runbook_url annotation: its section of
// docs/operations.md (RunbookURL).
//
// The rules are rendered per cache (RuleGroups) with the cache's namespace
// and name in every selector, so two caches never share an alert. The
// dashboard is one for all caches: namespace, cache, zone and tenant are
// template variables.
package monitoring

import (
	"bytes"
	_ "embed"
	"fmt"
	"regexp"
	"strconv"
	"strings"

	monitoringv1 "github.com/prometheus-operator/prometheus-operator/pkg/apis/monitoring/v1"
	"github.com/prometheus/client_golang/prometheus"
	"k8s.io/apimachinery/pkg/util/intstr"
)

// Target labels on every series the ServiceMonitor scrapes.
const (
	LabelNamespace = "namespace"
	LabelService   = "service"
	LabelPod       = "pod"
	LabelZone      = "zone"
)

// Target labels of a gateway's series (the PodMonitor's relabelling), and
// the pod labels they come from.
const (
	LabelCache                    = "cache"
	LabelCacheNamespace           = "cache_namespace"
	GatewayPodLabelCache          = "cache.distcache.io/cache"
	GatewayPodLabelCacheNamespace = "cache.distcache.io/cache-namespace"
	GatewayAppName                = "distcache-gateway" // app.kubernetes.io/name of gateway pods
)

// DashboardKey is the key of the dashboard ConfigMap holding the dashboard
// (Grafana's sidecar writes it to a file of that name), and DashboardUID its
// Grafana uid. Every cache publishes the same dashboard under the same uid
// and file name, so several caches show up as one dashboard.
const (
	DashboardKey = "distcache.json"
	DashboardUID = "distcache"
)

// DefaultHitRatioThreshold is spec.monitoring.prometheusRule's default
// hitRatioThreshold (the API server applies it; RuleGroups uses it for "").
const DefaultHitRatioThreshold = "0.5"

// Alert names.
const (
	AlertLowHitRatio      = "DistcacheLowHitRatio"
	AlertNodeDown         = "DistcacheNodeDown"
	AlertS3ErrorRate      = "DistcacheS3ErrorRate"
	AlertDiskNearCapacity = "DistcacheDiskNearCapacity"
	// Certificates the operator should have renewed (renewBefore, 720h by
	// default) and did not, or that never reached the process.
	AlertCertificateExpiring        = "DistcacheCertificateExpiring"
	AlertGatewayCertificateExpiring = "DistcacheGatewayCertificateExpiring"
	// Inter-zone bytes, billed per GB: a zone that leans on the others on
	// its misses (spec.crossZone OnMiss), and gateways reading through
	// another zone because none of their own zone's nodes answers.
	AlertCrossZoneTraffic    = "DistcacheCrossZoneTraffic"
	AlertGatewayZoneFallback = "DistcacheGatewayZoneFallback"
	// Cache pods the scheduler cannot place, from the operator's metric.
	AlertNodeUnschedulable = "DistcacheNodeUnschedulable"
	// Write-back (docs/write-back.md): writes acknowledged by the nodes
	// that S3 has not had for long, a node whose uploads to S3 all fail,
	// and a node's pinned space (held objects, never evicted) nearly full.
	AlertWriteBackLagging        = "DistcacheWriteBackLagging"
	AlertWriteBackPersistFailing = "DistcacheWriteBackPersistFailing"
	AlertWriteBackPinnedNearFull = "DistcacheWriteBackPinnedNearFull"
	AlertWriteBackSlowDisk       = "DistcacheWriteBackSlowDisk"
)

// MetricUnschedulablePods is the operator's gauge of a zone's cache pods
// that the scheduler reports unschedulable (UnschedulablePodsDesc).
const MetricUnschedulablePods = "distcache_operator_cache_pods_unschedulable"

// UnschedulablePodsDesc describes MetricUnschedulablePods, with its labels
// cache_namespace, cache and zone in that order.
func UnschedulablePodsDesc() *prometheus.Desc {
	return prometheus.NewDesc(MetricUnschedulablePods,
		"Cache node pods of a zone that the scheduler cannot place (condition PodScheduled=False, reason Unschedulable), "+
			"reported by the operator's leader for every zone that has pods.",
		[]string{LabelCacheNamespace, LabelCache, LabelZone}, nil)
}

// RunbookURL is the page with a section per alert (named after the alert,
// so its anchor is the alert's name in lower case); runbookURL links one.
const RunbookURL = "https://github.com/distcache/distcache/blob/main/docs/operations.md"

func runbookURL(alert string) string { return RunbookURL + "#" + strings.ToLower(alert) }

// Fixed thresholds: the share of failed S3 requests and of the disk bound
// in use that alert.
const (
	s3ErrorRatioThreshold   = "0.05"
	diskUsageRatioThreshold = "0.9"
	certificateDaysLeft     = "7"
	// crossZoneRatioThreshold: the share of a zone's chunk bytes served
	// that came from other zones.
	crossZoneRatioThreshold = "0.25"
	// writeBackLagSeconds: the age of the oldest write-back write not in
	// S3 yet (persisting takes S3's tens of milliseconds per object; a
	// backlog drains in seconds to minutes). pinnedRatioThreshold: the
	// share of a node's pinned limit its held objects use.
	writeBackLagSeconds  = "600"
	pinnedRatioThreshold = "0.85"
	// journalSyncSeconds: the p99 of a node's write-back journal syncs
	// (each held write waits for one; 0.14-0.9 ms on the virtual disks
	// measured here; etcd's fsync alert fires at half a second).
	journalSyncSeconds = "0.1"
)

//go:embed dashboard.json
var dashboard []byte

// Dashboard returns the Grafana dashboard JSON (a copy).
func Dashboard() []byte { return bytes.Clone(dashboard) }

// Target names the cache whose series the rules select.
type Target struct {
	Namespace string
	Cache     string
}

// selector is the label matchers of the cache's series, without braces.
func (t Target) selector() string {
	return LabelNamespace + "=" + strconv.Quote(t.Namespace) + "," + LabelService + "=" + strconv.Quote(t.Cache)
}

// gatewaySelector is the label matchers of the series of the cache's
// gateways (relabelled by the PodMonitor), without braces.
func (t Target) gatewaySelector() string {
	return LabelCacheNamespace + "=" + strconv.Quote(t.Namespace) + "," + LabelCache + "=" + strconv.Quote(t.Cache)
}

// alertRule is an alert as RuleGroups declares it: Expr selects with SEL
// (the cache's series) and GWSEL (its gateways'), For is a Prometheus
// duration, Severity the severity label, Summary and Description its
// annotations (every alert also gets a runbook_url).
type alertRule struct {
	Alert, Expr, For, Severity string
	Summary, Description       string
}

// fraction is the API's pattern for hitRatioThreshold; the value goes into
// PromQL as written.
var fraction = regexp.MustCompile(`^(0(\.[0-9]+)?|1(\.0+)?)$`)

// RuleGroups returns the alert rules for the cache t. hitRatioThreshold is
// a fraction from 0 to 1 (spec.monitoring.prometheusRule.hitRatioThreshold;
// "" means DefaultHitRatioThreshold).
func RuleGroups(t Target, hitRatioThreshold string) ([]monitoringv1.RuleGroup, error) {
	if t.Namespace == "" || t.Cache == "" {
		return nil, fmt.Errorf("monitoring: rules need a namespace and a cache name, got %q/%q", t.Namespace, t.Cache)
	}
	if hitRatioThreshold == "" {
		hitRatioThreshold = DefaultHitRatioThreshold
	}
	if !fraction.MatchString(hitRatioThreshold) {
		return nil, fmt.Errorf("monitoring: hit ratio threshold %q is not a fraction from 0 to 1", hitRatioThreshold)
	}
	sel := t.selector()
	expr := func(s string) intstr.IntOrString {
		s = strings.ReplaceAll(s, "GWSEL", t.gatewaySelector())
		return intstr.FromString(strings.TrimSpace(strings.ReplaceAll(s, "SEL", sel)))
	}
	dur := func(s string) *monitoringv1.Duration { d := monitoringv1.Duration(s); return &d }
	alerts := []alertRule{
		{
			Alert: AlertLowHitRatio,
			// Bytes served from RAM or disk over all bytes served, per zone.
			// Chunks a node forwarded to their owner are left out: the owner
			// counts them as its hit or miss.
			Expr: `
(
  sum by (namespace, service, zone) (rate(distcache_response_bytes_total{SEL,op=~"get_chunk|get_object",result=~"hit_ram|hit_disk"}[15m]))
/
  sum by (namespace, service, zone) (rate(distcache_response_bytes_total{SEL,op=~"get_chunk|get_object",result!="forwarded"}[15m]))
) < ` + hitRatioThreshold,
			For:      "15m",
			Severity: "warning",
			Summary:  "distcache {{ $labels.namespace }}/{{ $labels.service }}: byte hit ratio in zone {{ $labels.zone }} is {{ $value | humanizePercentage }}, below " + hitRatioThreshold,
			Description: "Less than " + hitRatioThreshold + " of the bytes the cache served in zone {{ $labels.zone }} over the last 15 minutes came from RAM or disk; " +
				"the rest was read from S3. Check, in the distcache dashboard: whether the working set outgrew the cache (evictions rising, disk " +
				"usage at its bound: raise spec.diskSize or spec.replicas); whether nodes restarted or the ring changed recently (emptyDir storage " +
				"starts cold, ring epoch panel); whether objects are being overwritten in S3 (metadata revalidations with outcome changed); " +
				"whether the store bypasses itself (store failures). A new workload reading data once also lowers the ratio until it repeats reads.",
		},
		{
			Alert:    AlertNodeDown,
			Expr:     `up{SEL} == 0`,
			For:      "5m",
			Severity: "warning",
			Summary:  "distcache {{ $labels.namespace }}/{{ $labels.service }}: node {{ $labels.pod }} cannot be scraped",
			Description: "Prometheus has failed to scrape the cache node {{ $labels.pod }} (zone {{ $labels.zone }}) for 5 minutes. " +
				"Reads of the chunks it owns go to S3 (or to its ring successor) until it is back. Check the pod " +
				"(kubectl -n {{ $labels.namespace }} describe pod {{ $labels.pod }}; logs of the cachenode container): a crash loop, " +
				"an image that cannot be pulled, a failing readiness or an unreachable metrics port (9090: a NetworkPolicy?). " +
				"A pod that was never scheduled has no target at all: DistcacheNodeUnschedulable covers it.",
		},
		{
			Alert: AlertS3ErrorRate,
			// access_denied, unavailable and error are the backend's
			// failures; not_found, precondition_failed and invalid_range are
			// answers, canceled is a client that went away.
			Expr: `
(
  sum by (namespace, service) (rate(distcache_s3_requests_total{SEL,status=~"error|unavailable|access_denied"}[5m]))
/
  sum by (namespace, service) (rate(distcache_s3_requests_total{SEL}[5m]))
) > ` + s3ErrorRatioThreshold,
			For:      "10m",
			Severity: "critical",
			Summary:  "distcache {{ $labels.namespace }}/{{ $labels.service }}: {{ $value | humanizePercentage }} of S3 requests fail",
			Description: "More than 5% of the cache's requests to its S3 backend failed (status error, unavailable or access_denied, " +
				"after retries) over the last 5 minutes, for 10 minutes. Cache misses and writes fail with it. Check the S3 panels for the " +
				"operation and status: access_denied points at the credentials (spec.s3.credentialsSecret, a tenant's credentials, IAM); " +
				"unavailable and error at the endpoint (spec.s3.endpoint, network, throttling: see the retries panel).",
		},
		{
			Alert:    AlertDiskNearCapacity,
			Expr:     `distcache_store_disk_usage_bytes{SEL} / (distcache_store_disk_capacity_bytes{SEL} > 0) > ` + diskUsageRatioThreshold,
			For:      "15m",
			Severity: "warning",
			Summary:  "distcache {{ $labels.namespace }}/{{ $labels.service }}: node {{ $labels.pod }} uses {{ $value | humanizePercentage }} of its disk bound",
			Description: "The disk tier of {{ $labels.pod }} has held more than 90% of its bound (spec.diskSize) for 15 minutes. " +
				"Live chunks are kept to 60% of the bound, so the rest is value-log garbage the store has not reclaimed yet; at the bound " +
				"new chunks are refused (distcache_store_rejected_total) and reads are served from S3. Check the evictions, rejected and " +
				"store failure panels and the node's log for value-log GC errors; raise spec.diskSize (and the volume) if it persists.",
		},
		{
			Alert:    AlertCertificateExpiring,
			Expr:     `distcache_tls_certificate_expiration_timestamp_seconds{SEL} - time() < ` + certificateDaysLeft + ` * 86400`,
			For:      "15m",
			Severity: "critical",
			Summary:  "distcache {{ $labels.namespace }}/{{ $labels.service }}: the certificate of node {{ $labels.pod }} expires in {{ $value | humanizeDuration }}",
			Description: "The serving (and peer) certificate node {{ $labels.pod }} presents expires within " + certificateDaysLeft + " days. The operator " +
				"renews it spec.tls.renewBefore (720h by default) ahead, into the Secret <cache>-node-tls, and nodes reload it: either the " +
				"operator has not renewed it (is it running? its log and the cache's events say why; with spec.tls.issuerRef, cert-manager's " +
				"Certificate <cache>-node) or the pod does not see the new Secret. Once it expires, gateways and peers cannot connect.",
		},
		{
			Alert:    AlertGatewayCertificateExpiring,
			Expr:     `distcache_tls_certificate_expiration_timestamp_seconds{GWSEL} - time() < ` + certificateDaysLeft + ` * 86400`,
			For:      "15m",
			Severity: "critical",
			Summary:  "distcache gateway {{ $labels.namespace }}/{{ $labels.pod }}: its client certificate expires in {{ $value | humanizeDuration }}",
			Description: "The tenant certificate the gateway {{ $labels.pod }} presents to the cache {{ $labels.cache_namespace }}/{{ $labels.cache }} " +
				"expires within " + certificateDaysLeft + " days. The operator renews it into the CacheTenant's Secret spec.tls.renewBefore " +
				"(720h by default) ahead and the gateway re-reads it for new connections: check the CacheTenant's status (Ready, " +
				"certificateRenewalTime) and that the gateway mounts that Secret (a copy is never renewed). Once it expires, the " +
				"gateway cannot reach the cache.",
		},
		{
			Alert: AlertCrossZoneTraffic,
			// Bytes a zone's nodes received from other zones on their
			// misses, over the chunk bytes the zone served (as in the hit
			// ratio, forwarded reads are counted by their owner).
			Expr: `
(
  sum by (namespace, service, zone) (rate(distcache_cross_zone_bytes_total{SEL}[30m]))
/
  sum by (namespace, service, zone) (rate(distcache_response_bytes_total{SEL,op=~"get_chunk|get_object",result!="forwarded"}[30m]))
) > ` + crossZoneRatioThreshold,
			For:      "1h",
			Severity: "warning",
			Summary:  "distcache {{ $labels.namespace }}/{{ $labels.service }}: {{ $value | humanizePercentage }} of zone {{ $labels.zone }}'s reads come from other zones",
			Description: "For an hour, more than " + crossZoneRatioThreshold + " of the chunk bytes zone {{ $labels.zone }} served were fetched from the chunk's owner in another zone " +
				"on a miss (spec.crossZone: OnMiss). Each such byte is inter-zone traffic, billed per GB in both directions by AWS and GCP " +
				"(about $0.01/GB each way): a little is the point of OnMiss (cheaper and much faster than S3 GETs), a large share for this long " +
				"means the zone's own cache does not hold its working set. Check, for that zone, the Bytes from other zones panel, evictions " +
				"and disk usage (raise spec.diskSize or spec.replicas) and whether its nodes restarted recently (a cold zone fills from the " +
				"others, then stops); set spec.crossZone: Never to read S3 instead.",
		},
		{
			Alert: AlertGatewayZoneFallback,
			// Gateways exchanging bytes with another zone's nodes: they do
			// only when no node of their own zone answers.
			Expr:     `sum by (cache_namespace, cache, namespace, zone, peer_zone) (rate(distcache_cross_zone_bytes_total{GWSEL}[5m])) > 0`,
			For:      "10m",
			Severity: "warning",
			Summary:  "distcache gateways in {{ $labels.namespace }} (zone {{ $labels.zone }}) read through zone {{ $labels.peer_zone }} of {{ $labels.cache_namespace }}/{{ $labels.cache }}",
			Description: "For 10 minutes the gateways of zone {{ $labels.zone }} in {{ $labels.namespace }} have read or written through the cache nodes of zone " +
				"{{ $labels.peer_zone }}, which they do only when none of their own zone's nodes can be reached. Reads keep working, but every " +
				"byte crosses zones (billed per GB in both directions on AWS and GCP) and adds a zone's latency. Check zone {{ $labels.zone }}'s " +
				"cache nodes (the Nodes up by zone panel, alert DistcacheNodeDown, the StatefulSet of that zone and its pods' events) and " +
				"whether the gateways reach them (their --nodes Service, network policies).",
		},
		{
			Alert: AlertNodeUnschedulable,
			// The operator's gauge; max over its replicas (only the leader
			// reports, but a scrape may catch two leaders' series during a
			// hand-over).
			Expr:     `max by (cache_namespace, cache, zone) (` + MetricUnschedulablePods + `{GWSEL}) > 0`,
			For:      "10m",
			Severity: "warning",
			Summary:  "distcache {{ $labels.cache_namespace }}/{{ $labels.cache }}: {{ $value }} cache pod(s) of zone {{ $labels.zone }} cannot be scheduled",
			Description: "For 10 minutes the scheduler has found no node for {{ $value }} cache pod(s) of zone {{ $labels.zone }} " +
				"(condition PodScheduled=False, reason Unschedulable). The zone runs with fewer nodes than spec.replicas: their share " +
				"of the ring is read from S3, and a scale-up or a rollout waits. Check the pods' events " +
				"(kubectl -n {{ $labels.cache_namespace }} get pods -l app.kubernetes.io/instance={{ $labels.cache }},cache.distcache.io/zone={{ $labels.zone }}; " +
				"kubectl describe pod): no node in the zone with the instance types, node selector or tolerations of the spec, " +
				"not enough CPU or memory for spec.resources, a volume claim that cannot bind, or a cluster autoscaler that cannot add a node.",
		},
		{
			Alert: AlertWriteBackLagging,
			// Every holder of a version reports it: the max over them is
			// the tenant's oldest write not in S3 yet in the zone.
			Expr:     `max by (namespace, service, zone, tenant) (distcache_writeback_oldest_dirty_seconds{SEL}) > ` + writeBackLagSeconds,
			For:      "10m",
			Severity: "warning",
			Summary:  "distcache {{ $labels.namespace }}/{{ $labels.service }}: tenant {{ $labels.tenant }} has a write-back write not in S3 for {{ $value | humanizeDuration }}",
			Description: "For 10 minutes the oldest WriteBack write of tenant {{ $labels.tenant }} in zone {{ $labels.zone }} that the cache acknowledged " +
				"has been waiting more than " + writeBackLagSeconds + "s to reach S3. Until it does, it exists only on the cache nodes holding it " +
				"(a policy's replicas), and it pins their disk. Check, in the dashboard's Write-back row: persistence attempts by result " +
				"(errors: the S3 panels and the DistcacheWriteBackPersistFailing alert say why), the persistence latency (a slow or throttling " +
				"S3), the dirty objects (a burst of writes larger than S3 takes in that time) and whether the holders are up; the nodes' logs " +
				"name the keys and errors.",
		},
		{
			Alert: AlertWriteBackPersistFailing,
			// Errors and no success: S3 refuses this node's uploads (a node
			// that persists some keys and fails others is seen by the lag).
			Expr: `
sum by (namespace, service, zone, pod) (rate(distcache_writeback_persist_attempts_total{SEL,result="error"}[10m])) > 0
unless
sum by (namespace, service, zone, pod) (rate(distcache_writeback_persist_attempts_total{SEL,result="ok"}[10m])) > 0`,
			For:      "10m",
			Severity: "critical",
			Summary:  "distcache {{ $labels.namespace }}/{{ $labels.service }}: node {{ $labels.pod }} cannot persist write-back writes to S3",
			Description: "For 10 minutes every attempt of node {{ $labels.pod }} to send held WriteBack writes (uploads and deletes) to S3 failed, " +
				"and none succeeded. The node keeps them and retries with backoff; meanwhile they exist only on the cache nodes, and once the " +
				"pinned space is full new write-back writes get 503 SlowDown. Check the S3 panels (status access_denied: the cache's or the " +
				"tenant's credentials lack s3:PutObject or s3:DeleteObject; unavailable or error: the endpoint) and the node's log, which " +
				"names the key and S3's error.",
		},
		{
			Alert: AlertWriteBackPinnedNearFull,
			// The pinned space in use (every held version kept, upload
			// parts) over the node's pinned limit; a node without a
			// journal exports no limit.
			Expr: `
(
  max by (namespace, service, zone, pod) (distcache_writeback_pinned_bytes{SEL})
/
  max by (namespace, service, zone, pod) (distcache_writeback_limit_bytes{SEL} > 0)
) > ` + pinnedRatioThreshold,
			For:      "5m",
			Severity: "warning",
			Summary:  "distcache {{ $labels.namespace }}/{{ $labels.service }}: node {{ $labels.pod }} uses {{ $value | humanizePercentage }} of its write-back pinned space",
			Description: "For 5 minutes the objects node {{ $labels.pod }} holds for WriteBack (not in S3 yet) and Transient policies have used more than " +
				pinnedRatioThreshold + " of its pinned limit (30% of spec.diskSize; --writeback-fraction of --disk-bytes). They are never evicted; past the limit " +
				"write-back and transient writes get 503 SlowDown (distcache_writeback_full_total). Check the Write-back row: whether " +
				"persistence keeps up (errors, the oldest unpersisted write) or transient data piles up (by tenant: deletes and expiry " +
				"free it); raise spec.diskSize (or --writeback-fraction on nodes run by hand) or spec.replicas if the steady state needs more.",
		},
		{
			Alert: AlertWriteBackSlowDisk,
			Expr: `
histogram_quantile(0.99,
  sum by (namespace, service, zone, pod, le) (rate(distcache_writeback_journal_sync_duration_seconds_bucket{SEL}[10m]))
) > ` + journalSyncSeconds,
			For:      "15m",
			Severity: "warning",
			Summary:  "distcache {{ $labels.namespace }}/{{ $labels.service }}: node {{ $labels.pod }}'s write-back journal syncs take {{ $value | humanizeDuration }} (p99)",
			Description: "For 15 minutes the 99th percentile of node {{ $labels.pod }}'s write-back journal syncs (the fdatasync every WriteBack and " +
				"Transient write waits for before it is acknowledged) has been above " + journalSyncSeconds + "s: such writes wait at least that long. " +
				"Check the node's disk: a network volume instead of local NVMe " +
				"(spec.storage), a cloud volume at its IOPS or throughput limit, other I/O on the same device, a failing device (the host's kernel log).",
		},
	}
	rules := make([]monitoringv1.Rule, len(alerts))
	for i, a := range alerts {
		rules[i] = monitoringv1.Rule{
			Alert:  a.Alert,
			Expr:   expr(a.Expr),
			For:    dur(a.For),
			Labels: map[string]string{"severity": a.Severity},
			Annotations: map[string]string{
				"summary":     a.Summary,
				"description": a.Description,
				"runbook_url": runbookURL(a.Alert),
			},
		}
	}
	return []monitoringv1.RuleGroup{{Name: "distcache-" + t.Namespace + "-" + t.Cache, Rules: rules}}, nil
}
