package monitoring

import (
	"crypto/x509"
	"encoding/json"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"

	"github.com/distcache/distcache/internal/client"
	"github.com/distcache/distcache/internal/gateway"
	"github.com/distcache/distcache/internal/metrics"
	"github.com/distcache/distcache/internal/store"
	"github.com/distcache/distcache/internal/testutil"
)

// exported records the metric families a cache node registers (as
// `cachenode serve` does) with their label names.
type exported map[string][]string

func (e exported) Register(c prometheus.Collector) error {
	ch := make(chan *prometheus.Desc, 64)
	go func() { c.Describe(ch); close(ch) }()
	descRE := regexp.MustCompile(`fqName: "([^"]+)".*constLabels: \{([^}]*)\}, variableLabels: \{([^}]*)\}`)
	for d := range ch {
		m := descRE.FindStringSubmatch(d.String())
		if m == nil {
			continue
		}
		var labels []string
		for _, kv := range strings.Split(m[2], ",") {
			if name, _, ok := strings.Cut(kv, "="); ok {
				labels = append(labels, name)
			}
		}
		for _, l := range strings.Split(m[3], ",") {
			if l != "" {
				labels = append(labels, l)
			}
		}
		e[m[1]] = labels
	}
	return nil
}

func (e exported) MustRegister(cs ...prometheus.Collector) {
	for _, c := range cs {
		_ = e.Register(c)
	}
}

func (e exported) Unregister(prometheus.Collector) bool { return false }

// nodeMetrics is every family `cachenode serve` exports, plus the
// scrape's own up.
func nodeMetrics() exported {
	e := exported{"up": nil}
	e.MustRegister(collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	metrics.NewNode(e)
	metrics.RegisterTenantReloads(e, func() (uint64, uint64) { return 0, 0 })
	metrics.RegisterStore(e, func() store.Stats { return store.Stats{} })
	metrics.RegisterCertificateExpiry(e, func() *x509.Certificate { return nil })
	metrics.NewHeld(e, func() map[string]metrics.HeldStats { return nil }, 0).ReportPinned(func() int64 { return 0 })
	return e
}

// gatewayMetrics is every family `cachenode gateway` exports (its own and
// its client's), plus the scrape's own up.
func gatewayMetrics() exported {
	e := exported{"up": nil}
	e.MustRegister(collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	gateway.NewMetrics(e)
	if err := client.RegisterMetrics(e); err != nil {
		panic(err)
	}
	metrics.RegisterCertificateExpiry(e, func() *x509.Certificate { return nil })
	return e
}

// operatorMetrics is what the operator exports about the caches
// (controllers/distributedcache_metrics.go), plus the scrape's own up.
func operatorMetrics() exported {
	e := exported{"up": nil}
	e.MustRegister(descCollector{UnschedulablePodsDesc()})
	return e
}

// descCollector describes one family.
type descCollector struct{ d *prometheus.Desc }

func (c descCollector) Describe(ch chan<- *prometheus.Desc) { ch <- c.d }
func (c descCollector) Collect(chan<- prometheus.Metric)    {}

// Target labels of a node's series (the operator's ServiceMonitor), of
// a gateway's (config/prometheus/gateway-podmonitor.yaml) and of the
// operator's own (config/prometheus/monitor.yaml).
var (
	nodeTarget     = []string{LabelNamespace, LabelService, LabelPod, LabelZone, "job", "instance", "endpoint", "container"}
	gatewayTarget  = []string{LabelNamespace, LabelCache, LabelCacheNamespace, LabelZone, LabelPod, "job", "instance", "endpoint", "container"}
	operatorTarget = []string{LabelNamespace, LabelService, LabelPod, "job", "instance", "endpoint", "container"}
)

// labelsOf returns the labels a series of name carries once scraped with
// the target labels target, and whether it is exported.
func (e exported) labelsOf(target []string, name string) ([]string, bool) {
	if l, ok := e[name]; ok {
		return append(target, l...), true
	}
	for _, suffix := range []string{"_bucket", "_sum", "_count"} {
		if base, ok := strings.CutSuffix(name, suffix); ok {
			if l, ok := e[base]; ok {
				if suffix == "_bucket" {
					l = append(l, "le")
				}
				return append(target, l...), true
			}
		}
	}
	return nil, false
}

type dashboardJSON struct {
	UID           string  `json:"uid"`
	SchemaVersion int     `json:"schemaVersion"`
	Panels        []panel `json:"panels"`
	Templating    struct {
		List []struct {
			Name  string `json:"name"`
			Type  string `json:"type"`
			Query any    `json:"query"`
		} `json:"list"`
	} `json:"templating"`
}

type panel struct {
	ID      int     `json:"id"`
	Type    string  `json:"type"`
	Title   string  `json:"title"`
	Panels  []panel `json:"panels"`
	Targets []struct {
		Expr  string `json:"expr"`
		RefID string `json:"refId"`
	} `json:"targets"`
}

func parseDashboard(t *testing.T) dashboardJSON {
	t.Helper()
	var d dashboardJSON
	if err := json.Unmarshal(Dashboard(), &d); err != nil {
		t.Fatalf("dashboard.json: %v", err)
	}
	return d
}

// DashboardExprs is every query of the dashboard, by panel title.
func dashboardExprs(t *testing.T) map[string][]string {
	t.Helper()
	out := map[string][]string{}
	var walk func([]panel)
	walk = func(ps []panel) {
		for _, p := range ps {
			for _, tg := range p.Targets {
				out[p.Title] = append(out[p.Title], tg.Expr)
			}
			walk(p.Panels)
		}
	}
	walk(parseDashboard(t).Panels)
	return out
}

func ruleExprs(t *testing.T) map[string]string {
	t.Helper()
	groups, err := RuleGroups(Target{Namespace: "ns", Cache: "c"}, "0.5")
	testutil.Must(t, err)
	out := map[string]string{}
	for _, g := range groups {
		for _, r := range g.Rules {
			out[r.Alert] = r.Expr.String()
		}
	}
	return out
}

var (
	selectorRE = regexp.MustCompile(`([a-zA-Z_:][a-zA-Z0-9_:]*)\{([^}]*)\}`)
	matcherRE  = regexp.MustCompile(`([a-zA-Z_][a-zA-Z0-9_]*)\s*(=~|!~|!=|=)\s*"`)
	byRE       = regexp.MustCompile(`by \(([^)]*)\)\s*\(\s*(?:[a-z_]+\()?\s*([a-zA-Z_:][a-zA-Z0-9_:]*)\{`)
)

// exprProblems lists what is wrong with expr: selecting series e does not
// export, matching or grouping by labels those series do not carry once
// scraped with the target labels target, or not being scoped to one cache
// by scope.
func exprProblems(e exported, target []string, expr, scope string) []string {
	var out []string
	sels := selectorRE.FindAllStringSubmatch(expr, -1)
	if len(sels) == 0 {
		out = append(out, "no series selector")
	}
	for _, s := range sels {
		labels, ok := e.labelsOf(target, s[1])
		if !ok {
			out = append(out, s[1]+" is not an exported metric")
			continue
		}
		if !strings.Contains(s[2], scope) {
			out = append(out, s[1]+"{"+s[2]+"} is not scoped to the cache ("+scope+")")
		}
		for _, m := range matcherRE.FindAllStringSubmatch(s[2], -1) {
			if !slices.Contains(labels, m[1]) {
				out = append(out, s[1]+" has no label "+m[1])
			}
		}
	}
	for _, b := range byRE.FindAllStringSubmatch(expr, -1) {
		labels, _ := e.labelsOf(target, b[2])
		for _, l := range strings.Split(b[1], ",") {
			if l = strings.TrimSpace(l); !slices.Contains(labels, l) {
				out = append(out, "groups "+b[2]+" by "+l+", which it does not carry")
			}
		}
	}
	return out
}

// gatewayRow is the title of the dashboard row whose panels query the
// gateways' series; every other panel queries the nodes'.
const gatewayRow = "Gateways"

func TestDashboardQueriesUseExportedSeries(t *testing.T) {
	nodes, gateways := nodeMetrics(), gatewayMetrics()
	checked := map[string]int{}
	row := ""
	var walk func([]panel)
	walk = func(ps []panel) {
		for _, p := range ps {
			if p.Type == "row" {
				row = p.Title
			}
			e, target, scope := nodes, nodeTarget, `namespace="$namespace", service="$cache", zone=~"$zone"`
			if row == gatewayRow {
				e, target, scope = gateways, gatewayTarget, `cache_namespace="$namespace", cache="$cache"`
			}
			for _, tg := range p.Targets {
				checked[row]++
				for _, problem := range exprProblems(e, target, tg.Expr, scope) {
					t.Errorf("panel %q (row %s): %s in %s", p.Title, row, problem, tg.Expr)
				}
			}
			walk(p.Panels)
		}
	}
	walk(parseDashboard(t).Panels)
	if checked[gatewayRow] < 8 || len(checked) < 6 {
		t.Fatalf("queries checked per row: %v", checked)
	}
}

func TestRuleExprsUseExportedSeries(t *testing.T) {
	nodes, gateways, operator := nodeMetrics(), gatewayMetrics(), operatorMetrics()
	for alert, expr := range ruleExprs(t) {
		e, target, scope := nodes, nodeTarget, `namespace="ns",service="c"`
		switch {
		case strings.HasPrefix(alert, "DistcacheGateway"):
			e, target, scope = gateways, gatewayTarget, `cache_namespace="ns",cache="c"`
		case alert == AlertNodeUnschedulable:
			e, target, scope = operator, operatorTarget, `cache_namespace="ns",cache="c"`
		}
		for _, p := range exprProblems(e, target, expr, scope) {
			t.Errorf("alert %s: %s in %s", alert, p, expr)
		}
	}
}

// The checker itself must catch the mistakes it exists for.
func TestCheckExprCatchesMistakes(t *testing.T) {
	e := nodeMetrics()
	scope := `namespace="ns"`
	for name, expr := range map[string]string{
		"unknown metric":    `rate(distcache_request_total{namespace="ns"}[5m])`,
		"unknown label":     `distcache_ring_epoch{namespace="ns", tennant="a"}`,
		"unscoped selector": `distcache_ring_epoch{service="c"}`,
		"bad grouping":      `sum by (tenant) (rate(distcache_s3_requests_total{namespace="ns"}[5m]))`,
		"no selector":       `vector(1)`,
		"gateway series":    `distcache_client_page_cache_requests_total{namespace="ns"}`,
	} {
		if len(exprProblems(e, nodeTarget, expr, scope)) == 0 {
			t.Errorf("%s: %q passed the check", name, expr)
		}
	}
	g := gatewayMetrics()
	for name, expr := range map[string]string{
		"a node's target labels": `distcache_client_page_cache_requests_total{cache_namespace="ns", cache="c", service="c"}`,
		"a node's series":        `distcache_chunk_reads_total{cache_namespace="ns", cache="c"}`,
		"bad grouping":           `sum by (tenant) (rate(distcache_gateway_requests_total{cache_namespace="ns", cache="c"}[5m]))`,
	} {
		if len(exprProblems(g, gatewayTarget, expr, `cache_namespace="ns", cache="c"`)) == 0 {
			t.Errorf("%s: %q passed the check", name, expr)
		}
	}
}

func TestDashboardModel(t *testing.T) {
	d := parseDashboard(t)
	if d.UID != DashboardUID || d.SchemaVersion < 36 {
		t.Errorf("uid %q, schemaVersion %d", d.UID, d.SchemaVersion)
	}
	var vars []string
	for _, v := range d.Templating.List {
		vars = append(vars, v.Name)
	}
	if want := []string{"datasource", "namespace", "cache", "zone", "tenant"}; !slices.Equal(vars, want) {
		t.Errorf("template variables %v, want %v", vars, want)
	}
	ids := map[int]bool{}
	var walk func([]panel)
	walk = func(ps []panel) {
		for _, p := range ps {
			if ids[p.ID] {
				t.Errorf("panel id %d used twice", p.ID)
			}
			ids[p.ID] = true
			refs := map[string]bool{}
			for _, tg := range p.Targets {
				if refs[tg.RefID] {
					t.Errorf("panel %q: refId %s used twice", p.Title, tg.RefID)
				}
				refs[tg.RefID] = true
			}
			walk(p.Panels)
		}
	}
	walk(d.Panels)
	// The panels a cache's users look for first.
	exprs := dashboardExprs(t)
	for _, title := range []string{"Byte hit ratio", "Request hit ratio (chunk lookups)", "Bytes served by tier",
		"S3 requests by operation and status", "S3 latency by operation", "Disk usage vs bound", "Evictions and rejections",
		"Ring epoch by node", "Nodes up", "Request latency by operation", "Gateway page cache hit ratio",
		"Bytes from other zones", "Gateway bytes across zones",
		"Dirty and transient objects by tenant", "Held bytes by tenant", "Oldest write not in S3 by tenant",
		"Persistence to S3 by op and result", "Pinned space used vs limit", "Write-back writes refused (pinned space full)"} {
		if len(exprs[title]) == 0 {
			t.Errorf("no panel %q", title)
		}
	}
}

func TestRuleGroups(t *testing.T) {
	tests := []struct {
		name      string
		target    Target
		threshold string
		wantErr   bool
		wantLow   string // the tail of DistcacheLowHitRatio's expression
	}{
		{name: "threshold from the spec", target: Target{"ns", "c"}, threshold: "0.75", wantLow: "< 0.75"},
		{name: "empty threshold is the default", target: Target{"ns", "c"}, threshold: "", wantLow: "< 0.5"},
		{name: "one", target: Target{"ns", "c"}, threshold: "1.0", wantLow: "< 1.0"},
		{name: "above one", target: Target{"ns", "c"}, threshold: "1.5", wantErr: true},
		{name: "not a number", target: Target{"ns", "c"}, threshold: "NaN", wantErr: true},
		{name: "PromQL injection", target: Target{"ns", "c"}, threshold: "0.5 or vector(1)", wantErr: true},
		{name: "no cache name", target: Target{Namespace: "ns"}, threshold: "0.5", wantErr: true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			groups, err := RuleGroups(tt.target, tt.threshold)
			if (err != nil) != tt.wantErr {
				t.Fatalf("err = %v, want error %v", err, tt.wantErr)
			}
			if err != nil {
				return
			}
			if len(groups) != 1 || groups[0].Name != "distcache-ns-c" {
				t.Fatalf("groups %+v", groups)
			}
			alerts := map[string]bool{}
			for _, r := range groups[0].Rules {
				alerts[r.Alert] = true
				if r.Labels["severity"] == "" || r.Annotations["summary"] == "" || r.Annotations["description"] == "" {
					t.Errorf("%s: severity, summary or description missing", r.Alert)
				}
				if r.For == nil || *r.For == "" {
					t.Errorf("%s: no for duration", r.Alert)
				}
				if r.Alert == AlertLowHitRatio && !strings.HasSuffix(r.Expr.String(), tt.wantLow) {
					t.Errorf("%s: expression %q does not end in %q", r.Alert, r.Expr.String(), tt.wantLow)
				}
			}
			for _, a := range []string{AlertLowHitRatio, AlertNodeDown, AlertS3ErrorRate, AlertDiskNearCapacity, AlertCertificateExpiring, AlertGatewayCertificateExpiring,
				AlertCrossZoneTraffic, AlertGatewayZoneFallback, AlertNodeUnschedulable,
				AlertWriteBackLagging, AlertWriteBackPersistFailing, AlertWriteBackPinnedNearFull, AlertWriteBackSlowDisk} {
				if !alerts[a] {
					t.Errorf("no alert %s", a)
				}
			}
		})
	}
}

func TestDashboardIsACopy(t *testing.T) {
	a := Dashboard()
	a[0] = 'x'
	if Dashboard()[0] == 'x' {
		t.Error("Dashboard returns the embedded bytes themselves")
	}
}
