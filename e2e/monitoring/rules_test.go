package monitoring_test

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"sigs.k8s.io/yaml"

	"github.com/distcache/distcache/internal/monitoring"
	"github.com/distcache/distcache/internal/testutil"
)

// series is one input series of a promtool rule test: labels and values in
// promtool's expanding notation ("0+100x60": 0, 100, 200, ... every
// interval).
type series struct {
	Series string `json:"series"`
	Values string `json:"values"`
}

type expAlert struct {
	ExpLabels map[string]string `json:"exp_labels"`
}

type alertTest struct {
	EvalTime  string     `json:"eval_time"`
	Alertname string     `json:"alertname"`
	ExpAlerts []expAlert `json:"exp_alerts"`
}

// TestAlertRulesFire runs `promtool test rules`: with a minute's
// resolution over an hour of synthetic series, each alert of cache ns/c
// fires after its `for` duration, not before, only for the zone, pod or
// cache that misbehaves, and never for the series of another cache
// (ns/other misbehaves in every way). The rules are the ones the operator
// publishes for a threshold of 0.5, without annotations (promtool would
// compare their rendered text; `promtool check rules` in
// TestDashboardAndAlertsAgainstRealNodes checks their templates).
func TestAlertRulesFire(t *testing.T) {
	promtool := tool(t, "promtool", "PROMTOOL_BIN")
	groups, err := monitoring.RuleGroups(monitoring.Target{Namespace: "ns", Cache: "c"}, "0.5")
	testutil.Must(t, err)
	for i := range groups {
		for j := range groups[i].Rules {
			groups[i].Rules[j].Annotations = nil
		}
	}

	bytes := func(cache, zone, pod, result string) string {
		return `distcache_response_bytes_total{namespace="ns",service="` + cache + `",zone="` + zone + `",pod="` + pod +
			`",tenant="t",op="get_chunk",result="` + result + `"}`
	}
	up := func(cache, pod string) string {
		return `up{namespace="ns",service="` + cache + `",zone="a",pod="` + pod + `"}`
	}
	s3 := func(cache, status string) string {
		return `distcache_s3_requests_total{namespace="ns",service="` + cache + `",zone="a",pod="` + cache + `-a-0",op="get",status="` + status + `"}`
	}
	disk := func(metric, cache, pod string) string {
		return `distcache_store_disk_` + metric + `_bytes{namespace="ns",service="` + cache + `",zone="a",pod="` + pod + `"}`
	}
	input := []series{
		// Zone a serves a quarter of its bytes from the cache: too few.
		{bytes("c", "a", "c-a-0", "hit_ram"), "0+100x60"},
		{bytes("c", "a", "c-a-0", "miss"), "0+300x60"},
		// Zone b serves 90% from the cache; it also forwards many chunks,
		// which the owners count: they are not misses.
		{bytes("c", "b", "c-b-0", "hit_disk"), "0+900x60"},
		{bytes("c", "b", "c-b-0", "miss"), "0+100x60"},
		{bytes("c", "b", "c-b-1", "forwarded"), "0+10000x60"},
		// c-a-1 stops answering scrapes at minute 5.
		{up("c", "c-a-0"), "1x60"},
		{up("c", "c-a-1"), "1x4 0x60"},
		// 10% of S3 requests fail.
		{s3("c", "ok"), "0+90x60"},
		{s3("c", "error"), "0+10x60"},
		// c-a-0's disk is 95% full, c-a-1's half; c-b-0 reports no bound.
		{disk("usage", "c", "c-a-0"), "95x60"},
		{disk("capacity", "c", "c-a-0"), "100x60"},
		{disk("usage", "c", "c-a-1"), "50x60"},
		{disk("capacity", "c", "c-a-1"), "100x60"},
		{disk("usage", "c", "c-b-0"), "10x60"},
		{disk("capacity", "c", "c-b-0"), "0x60"},
		// Another cache in the same namespace, failing in every way.
		{bytes("other", "a", "other-a-0", "miss"), "0+1000x60"},
		{up("other", "other-a-0"), "0x60"},
		{s3("other", "unavailable"), "0+100x60"},
		{disk("usage", "other", "other-a-0"), "99x60"},
		{disk("capacity", "other", "other-a-0"), "100x60"},
	}
	// Certificates: c-a-0's expires in 3 days (not renewed), c-a-1's in 60;
	// of cache c's gateways, gw-0's expires in a day, gw-1's in 90; cache
	// other's node and gateway expire too, and are not c's.
	cert := func(days int, kv ...string) series {
		l := make([]string, 0, len(kv)/2)
		for i := 0; i < len(kv); i += 2 {
			l = append(l, kv[i]+`="`+kv[i+1]+`"`)
		}
		return series{`distcache_tls_certificate_expiration_timestamp_seconds{` + strings.Join(l, ",") + `}`, fmt.Sprintf("%dx60", days*86400)}
	}
	input = append(input,
		cert(3, "namespace", "ns", "service", "c", "zone", "a", "pod", "c-a-0"),
		cert(60, "namespace", "ns", "service", "c", "zone", "a", "pod", "c-a-1"),
		cert(1, "namespace", "analytics", "pod", "gw-0", "cache_namespace", "ns", "cache", "c"),
		cert(90, "namespace", "analytics", "pod", "gw-1", "cache_namespace", "ns", "cache", "c"),
		cert(1, "namespace", "ns", "service", "other", "zone", "a", "pod", "other-a-0"),
		cert(1, "namespace", "analytics", "pod", "gw-2", "cache_namespace", "ns", "cache", "other"),
	)
	// A third cache, d, whose S3 answers are normal outcomes, not failures.
	input = append(input,
		series{s3("d", "ok"), "0+50x60"},
		series{s3("d", "not_found"), "0+50x60"},
		series{s3("d", "precondition_failed"), "0+50x60"},
		series{s3("d", "canceled"), "0+50x60"},
	)
	// Inter-zone bytes. Zone z of cache c serves 1000 bytes a minute, 400
	// of them fetched from zone a on misses (OnMiss): too many, for the
	// hour DistcacheCrossZoneTraffic waits; zone b gets 1%. Cache c's
	// gateway gw-0 (zone b) reads through zone a, gw-1 does not; a gateway
	// of cache other does too, and is not c's.
	crossZone := func(cache, zone, pod, peer, values string) series {
		return series{`distcache_cross_zone_bytes_total{namespace="ns",service="` + cache + `",zone="` + zone + `",pod="` + pod +
			`",peer_zone="` + peer + `",direction="in"}`, values}
	}
	gwCrossZone := func(cache, pod, values string) series {
		return series{`distcache_cross_zone_bytes_total{namespace="analytics",pod="` + pod + `",cache_namespace="ns",cache="` + cache +
			`",zone="b",peer_zone="a",direction="in"}`, values}
	}
	input = append(input,
		series{bytes("c", "z", "c-z-0", "hit_ram"), "0+1000x120"},
		crossZone("c", "z", "c-z-0", "a", "0+400x120"),
		crossZone("c", "b", "c-b-0", "a", "0+10x60"),
		gwCrossZone("c", "gw-0", "0+1000x60"),
		gwCrossZone("c", "gw-1", "5x60"),
		gwCrossZone("other", "gw-2", "0+1000x60"),
	)
	// Cache pods the scheduler cannot place, from the operator's gauge
	// (scraped from the operator, so the target's namespace and pod are
	// the operator's). Cache c: zone a has a pod unschedulable from minute
	// 5 on, reported by the leader op-0 and, for a while around a leader
	// hand-over, by op-1 too (one alert, not two); zone b never; zone z's
	// pod waits 3 minutes for a node (a cluster autoscaler adding one) and
	// is placed. Cache other has two pods that never are.
	unschedulablePods := func(op, cache, zone, values string) series {
		return series{monitoring.MetricUnschedulablePods + `{namespace="distcache-system",pod="` + op + `",job="distcache-controller-manager-metrics-service",` +
			`cache_namespace="ns",cache="` + cache + `",zone="` + zone + `"}`, values}
	}
	input = append(input,
		unschedulablePods("op-0", "c", "a", "0x4 1x60"),
		unschedulablePods("op-1", "c", "a", "_x20 1x10"),
		unschedulablePods("op-0", "c", "b", "0x60"),
		unschedulablePods("op-0", "c", "z", "0x4 1x3 0x60"),
		unschedulablePods("op-0", "other", "a", "2x60"),
	)
	// Write-back. Cache c: tenant t1's oldest write not in S3 ages a
	// minute a minute (over 600s from minute 11), t2's is a few seconds
	// old on both holders. c-a-0's uploads all fail; c-a-1's fail for one
	// tenant and succeed for another (the lag alert's case, not this
	// one); c-b-1's failed until minute 5, then succeeded. c-a-0's pinned
	// space in use reaches 90% of its limit at minute 5, c-a-1 holds
	// 80%; c-b-0 keeps no journal (no limit series). c-a-0's journal
	// syncs take 0.1-0.25 s, c-a-1's under 0.05 s. Cache other: all of
	// it, for ever.
	wbSeries := func(metric, cache, pod, extra, values string) series {
		return series{`distcache_writeback_` + metric + `{namespace="ns",service="` + cache + `",zone="a",pod="` + pod + `"` + extra + `}`, values}
	}
	tenant := func(t string) string { return `,tenant="` + t + `"` }
	persist := func(result string) string { return `,op="put",result="` + result + `"` }
	input = append(input,
		wbSeries("oldest_dirty_seconds", "c", "c-a-0", tenant("t1"), "0+60x60"),
		wbSeries("oldest_dirty_seconds", "c", "c-a-1", tenant("t1"), "0+60x60"),
		wbSeries("oldest_dirty_seconds", "c", "c-a-0", tenant("t2"), "3x60"),
		wbSeries("oldest_dirty_seconds", "c", "c-a-1", tenant("t2"), "4x60"),
		wbSeries("persist_attempts_total", "c", "c-a-0", persist("error"), "0+5x60"),
		wbSeries("persist_attempts_total", "c", "c-a-1", persist("error"), "0+5x60"),
		wbSeries("persist_attempts_total", "c", "c-a-1", persist("ok"), "0+50x60"),
		wbSeries("persist_attempts_total", "c", "c-b-1", persist("error"), "0+5x5 25x60"),
		wbSeries("persist_attempts_total", "c", "c-b-1", persist("ok"), "0x5 0+50x60"),
		wbSeries("pinned_bytes", "c", "c-a-0", "", "50x4 90x60"),
		wbSeries("limit_bytes", "c", "c-a-0", "", "100x60"),
		wbSeries("pinned_bytes", "c", "c-a-1", "", "80x60"),
		wbSeries("limit_bytes", "c", "c-a-1", "", "100x60"),
		wbSeries("pinned_bytes", "c", "c-b-0", "", "99x60"),
		wbSeries("journal_sync_duration_seconds_bucket", "c", "c-a-0", `,le="0.05"`, "0x60"),
		wbSeries("journal_sync_duration_seconds_bucket", "c", "c-a-0", `,le="0.1"`, "0+1x60"),
		wbSeries("journal_sync_duration_seconds_bucket", "c", "c-a-0", `,le="0.25"`, "0+100x60"),
		wbSeries("journal_sync_duration_seconds_bucket", "c", "c-a-0", `,le="+Inf"`, "0+100x60"),
		wbSeries("journal_sync_duration_seconds_bucket", "c", "c-a-1", `,le="0.05"`, "0+100x60"),
		wbSeries("journal_sync_duration_seconds_bucket", "c", "c-a-1", `,le="0.1"`, "0+100x60"),
		wbSeries("journal_sync_duration_seconds_bucket", "c", "c-a-1", `,le="0.25"`, "0+100x60"),
		wbSeries("journal_sync_duration_seconds_bucket", "c", "c-a-1", `,le="+Inf"`, "0+100x60"),
		wbSeries("journal_sync_duration_seconds_bucket", "other", "other-a-0", `,le="0.1"`, "0x60"),
		wbSeries("journal_sync_duration_seconds_bucket", "other", "other-a-0", `,le="+Inf"`, "0+100x60"),
		wbSeries("oldest_dirty_seconds", "other", "other-a-0", tenant("t1"), "3600x60"),
		wbSeries("persist_attempts_total", "other", "other-a-0", persist("error"), "0+5x60"),
		wbSeries("pinned_bytes", "other", "other-a-0", "", "99x60"),
		wbSeries("limit_bytes", "other", "other-a-0", "", "100x60"),
	)
	labels := func(kv ...string) map[string]string {
		m := map[string]string{"namespace": "ns", "service": "c"}
		for i := 0; i < len(kv); i += 2 {
			m[kv[i]] = kv[i+1]
		}
		return m
	}
	firing := map[string][]expAlert{
		monitoring.AlertLowHitRatio:         {{labels("severity", "warning", "zone", "a")}},
		monitoring.AlertNodeDown:            {{labels("severity", "warning", "zone", "a", "pod", "c-a-1")}},
		monitoring.AlertS3ErrorRate:         {{labels("severity", "critical")}},
		monitoring.AlertDiskNearCapacity:    {{labels("severity", "warning", "zone", "a", "pod", "c-a-0")}},
		monitoring.AlertCertificateExpiring: {{labels("severity", "critical", "zone", "a", "pod", "c-a-0")}},
		monitoring.AlertGatewayCertificateExpiring: {{map[string]string{
			"severity": "critical", "namespace": "analytics", "pod": "gw-0", "cache_namespace": "ns", "cache": "c"}}},
		monitoring.AlertGatewayZoneFallback: {{map[string]string{
			"severity": "warning", "namespace": "analytics", "cache_namespace": "ns", "cache": "c", "zone": "b", "peer_zone": "a"}}},
		monitoring.AlertNodeUnschedulable: {{map[string]string{
			"severity": "warning", "cache_namespace": "ns", "cache": "c", "zone": "a"}}},
		monitoring.AlertWriteBackLagging:        {{labels("severity", "warning", "zone", "a", "tenant", "t1")}},
		monitoring.AlertWriteBackPersistFailing: {{labels("severity", "critical", "zone", "a", "pod", "c-a-0")}},
		monitoring.AlertWriteBackPinnedNearFull: {{labels("severity", "warning", "zone", "a", "pod", "c-a-0")}},
		monitoring.AlertWriteBackSlowDisk:       {{labels("severity", "warning", "zone", "a", "pod", "c-a-0")}},
	}
	var tests []alertTest
	for alert, exp := range firing {
		// Minute 9: every condition holds, none for its whole `for`
		// (NodeDown's 5 minutes and NodeUnschedulable's 10 start at
		// minute 5, as WriteBackPinnedNearFull's 5; WriteBackLagging's
		// condition holds from minute 11, WriteBackSlowDisk's 15 minutes
		// from minute 1).
		tests = append(tests, alertTest{EvalTime: "9m", Alertname: alert, ExpAlerts: []expAlert{}})
		tests = append(tests, alertTest{EvalTime: "30m", Alertname: alert, ExpAlerts: exp})
	}
	// The first minutes have too few samples for any rate.
	tests = append(tests, alertTest{EvalTime: "0m", Alertname: monitoring.AlertLowHitRatio, ExpAlerts: []expAlert{}})
	// Cross-zone traffic is expected for a while (a cold zone fills from
	// the others): only an hour of it alerts.
	tests = append(tests,
		alertTest{EvalTime: "30m", Alertname: monitoring.AlertCrossZoneTraffic, ExpAlerts: []expAlert{}},
		alertTest{EvalTime: "100m", Alertname: monitoring.AlertCrossZoneTraffic, ExpAlerts: []expAlert{{labels("severity", "warning", "zone", "z")}}})

	dir := t.TempDir()
	rules, err := yaml.Marshal(map[string]any{"groups": groups})
	testutil.Must(t, err)
	testutil.Must(t, os.WriteFile(filepath.Join(dir, "rules.yaml"), rules, 0o600))
	// Cache d's rules too: an S3 alert for d (answers taken for failures)
	// would show up next to c's at minute 30.
	dGroups, err := monitoring.RuleGroups(monitoring.Target{Namespace: "ns", Cache: "d"}, "0.5")
	testutil.Must(t, err)
	for i := range dGroups {
		for j := range dGroups[i].Rules {
			dGroups[i].Rules[j].Annotations = nil
		}
	}
	dRules, err := yaml.Marshal(map[string]any{"groups": dGroups})
	testutil.Must(t, err)
	testutil.Must(t, os.WriteFile(filepath.Join(dir, "rules-d.yaml"), dRules, 0o600))

	spec := map[string]any{
		"rule_files":          []string{"rules.yaml", "rules-d.yaml"},
		"evaluation_interval": "1m",
		"tests": []map[string]any{{
			"interval":        "1m",
			"input_series":    input,
			"alert_rule_test": tests,
		}},
	}
	b, err := yaml.Marshal(spec)
	testutil.Must(t, err)
	file := filepath.Join(dir, "test.yaml")
	testutil.Must(t, os.WriteFile(file, b, 0o600))
	out, err := exec.Command(promtool, "test", "rules", file).CombinedOutput()
	if err != nil || !strings.Contains(string(out), "SUCCESS") {
		t.Fatalf("promtool test rules: %v\n%s\nrules:\n%s\ntest:\n%s", err, out, rules, b)
	}
}
