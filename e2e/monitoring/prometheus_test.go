package monitoring_test

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"sort"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/credentials"
	"github.com/aws/aws-sdk-go-v2/service/s3"
	"github.com/aws/smithy-go"
	monitoringv1 "github.com/prometheus-operator/prometheus-operator/pkg/apis/monitoring/v1"
	"sigs.k8s.io/yaml"

	"github.com/distcache/distcache/internal/monitoring"
	"github.com/distcache/distcache/internal/pki"
	"github.com/distcache/distcache/internal/ring"
	"github.com/distcache/distcache/internal/testutil"
	"github.com/distcache/distcache/internal/testutil/freeport"
	"github.com/distcache/distcache/internal/testutil/gobin"
	"github.com/distcache/distcache/internal/testutil/miniotest"
	"github.com/distcache/distcache/internal/testutil/promtext"
	"github.com/distcache/distcache/internal/testutil/s3proxy"
)

// The cache as the operator would run it: DistributedCache "demo" in
// namespace "dc-ns", zone "z1", pods demo-z1-0 and demo-z1-1.
const (
	testNamespace = "dc-ns"
	testCache     = "demo"
	testZone      = "z1"
	testTenant    = "analytics"
	testBucket    = "data"
	chunkSize     = 64 << 10
	objectChunks  = 6

	// The tenant's keys under heldPrefix are WriteBack, two replicas: both
	// nodes hold them until S3 has them, in a pinned space of
	// pinnedFraction of each node's 256 MiB disk bound (2.56 MiB), which
	// heldObjectSize objects fill in about 40 writes.
	heldPrefix     = "held/"
	pinnedFraction = "0.01"
	heldObjectSize = 64 << 10

	// The gateway next to compute, in its own namespace, as the PodMonitor
	// of a CacheTenant's gateways scrapes it.
	gatewayNamespace = "compute-ns"
	gatewayPod       = "clickhouse-gateway-0"
	gatewayKey       = "gateway-key"
	gatewaySecret    = "gateway-secret"
)

// cacheNode is one `cachenode serve` process.
type cacheNode struct {
	name string
	api  string // host:port of the mTLS API
	ops  string // host:port of /metrics
	proc *testutil.Process
}

func (n *cacheNode) metricsURL() string { return "http://" + n.ops + "/metrics" }

// testCluster is MinIO and a ring of cache nodes, and a tenant's client.
type testCluster struct {
	dir    string // CA, certificates, ring file
	nodes  []*cacheNode
	client *http.Client
	data   map[string][]byte // objects in the bucket
	s3     *s3proxy.Proxy    // the nodes' S3: MinIO behind a proxy that can refuse requests
}

// gatewayProc is a `cachenode gateway` process reading through the cluster
// with the tenant's certificate.
type gatewayProc struct {
	listen, ops string
	proc        *testutil.Process
}

func (g *gatewayProc) metricsURL() string { return "http://" + g.ops + "/metrics" }

// startCluster starts MinIO with objects, and n cache nodes in one ring,
// configured as the operator configures pods.
func startCluster(t *testing.T, n int, objects ...string) *testCluster {
	t.Helper()
	bin := gobin.Cachenode(t)
	minio := miniotest.Start(t)
	minio.CreateBucket(t, testBucket)
	c := &testCluster{data: map[string][]byte{}, dir: t.TempDir(), s3: s3proxy.New(t, minio.Endpoint)}
	for _, key := range objects {
		b := make([]byte, objectChunks*chunkSize-1000)
		_, _ = rand.Read(b)
		_, err := minio.Client(t).PutObject(testContext(t), &s3.PutObjectInput{
			Bucket: aws.String(testBucket), Key: aws.String(key), Body: bytes.NewReader(b),
		})
		testutil.Must(t, err)
		c.data[key] = b
	}

	dir := c.dir
	ca, err := pki.NewCA("monitoring e2e CA", time.Hour)
	testutil.Must(t, err)
	testutil.Must(t, os.WriteFile(filepath.Join(dir, "ca.crt"), ca.CertPEM, 0o600))
	tenant, err := ca.IssueClient(pki.Identity{Kind: pki.KindTenant, Name: testTenant}, time.Hour)
	testutil.Must(t, err)
	testutil.Must(t, pki.WriteFiles(dir, "tenant", tenant))
	tenants := filepath.Join(dir, "tenants.yaml")
	testutil.Must(t, os.WriteFile(tenants, []byte("tenants:\n  - name: "+testTenant+"\n    buckets: ["+testBucket+"]\n"+
		"    policies:\n      - {bucket: "+testBucket+", prefix: "+heldPrefix+", mode: WriteBack, replicas: 2}\n"), 0o600))

	spec := ring.Spec{Epoch: 1, Zone: testZone, Hash: ring.HashParams{Algorithm: ring.AlgorithmRendezvousXXHash64}}
	for i := 0; i < n; i++ {
		node := &cacheNode{name: fmt.Sprintf("%s-%s-%d", testCache, testZone, i), api: freeport.Addr(t), ops: freeport.Addr(t)}
		leaf, err := ca.IssueServer(node.name, []string{"localhost"}, []net.IP{net.IPv4(127, 0, 0, 1)}, time.Hour,
			pki.WithIdentity(pki.Identity{Kind: pki.KindPeer, Name: node.name}))
		testutil.Must(t, err)
		testutil.Must(t, pki.WriteFiles(dir, node.name, leaf))
		spec.Members = append(spec.Members, ring.Member{Name: node.name, Address: node.api, Ordinal: i, Weight: 100, State: ring.StateActive})
		c.nodes = append(c.nodes, node)
	}
	doc, err := json.Marshal(spec)
	testutil.Must(t, err)
	ringFile := filepath.Join(dir, "ring.json")
	testutil.Must(t, os.WriteFile(ringFile, doc, 0o600))

	// The first node has a RAM tier, the others none: their hits come from
	// disk, so both tiers serve.
	ramBytes := []string{"16Mi", "0"}
	for i, node := range c.nodes {
		cmd := exec.Command(bin, "serve", "--node-name", node.name, "--ring-file", ringFile,
			"--listen", node.api, "--metrics-listen", node.ops,
			"--tls-cert", filepath.Join(dir, node.name+".crt"), "--tls-key", filepath.Join(dir, node.name+".key"),
			"--client-ca", filepath.Join(dir, "ca.crt"), "--tenants-file", tenants,
			"--s3-endpoint", c.s3.URL(), "--s3-path-style", "--log-level", "error")
		cmd.Env = append(os.Environ(),
			"AWS_ACCESS_KEY_ID="+minio.AccessKey, "AWS_SECRET_ACCESS_KEY="+minio.SecretKey,
			"DISTCACHE_DATA_DIR="+filepath.Join(dir, node.name), "DISTCACHE_DISK_BYTES=256Mi",
			"DISTCACHE_RAM_BYTES="+ramBytes[min(i, len(ramBytes)-1)], "DISTCACHE_CHUNK_SIZE="+strconv.Itoa(chunkSize),
			"DISTCACHE_WRITEBACK_FRACTION="+pinnedFraction)
		node.proc = testutil.StartProcess(t, node.name, cmd)
	}
	for _, node := range c.nodes {
		waitFor(t, 60*time.Second, node.name+" ready", httpReady("http://"+node.ops+"/readyz", node.proc))
	}
	tlsConfig, err := pki.ClientTLSConfig(filepath.Join(dir, "tenant.crt"), filepath.Join(dir, "tenant.key"), filepath.Join(dir, "ca.crt"))
	testutil.Must(t, err)
	c.client = &http.Client{Transport: &http.Transport{TLSClientConfig: tlsConfig}, Timeout: 30 * time.Second}
	return c
}

// startGateway runs a gateway in front of the cluster's nodes, with a page
// cache that holds every object.
func (c *testCluster) startGateway(t *testing.T) *gatewayProc {
	t.Helper()
	g := &gatewayProc{listen: freeport.Addr(t), ops: freeport.Addr(t)}
	var seeds []string
	for _, n := range c.nodes {
		seeds = append(seeds, "https://"+n.api)
	}
	cmd := exec.Command(gobin.Cachenode(t), "gateway", "--listen", g.listen, "--metrics-listen", g.ops,
		"--nodes", strings.Join(seeds, ","), "--access-key", gatewayKey,
		"--tls-cert", filepath.Join(c.dir, "tenant.crt"), "--tls-key", filepath.Join(c.dir, "tenant.key"),
		"--ca", filepath.Join(c.dir, "ca.crt"), "--page-cache-bytes", "4Mi", "--log-level", "warn")
	cmd.Env = append(os.Environ(), "DISTCACHE_SECRET_KEY="+gatewaySecret)
	g.proc = testutil.StartProcess(t, "gateway", cmd)
	waitFor(t, 60*time.Second, "gateway ready", httpReady("http://"+g.ops+"/readyz", g.proc))
	return g
}

// s3Client is an S3 SDK client of the gateway g.
func (g *gatewayProc) s3Client(optFns ...func(*s3.Options)) *s3.Client {
	return s3.New(s3.Options{Region: "us-east-1", BaseEndpoint: aws.String("http://" + g.listen), UsePathStyle: true,
		Credentials: credentials.NewStaticCredentialsProvider(gatewayKey, gatewaySecret, "")}, optFns...)
}

// readThrough reads key whole through the gateway with an S3 SDK client
// and checks the bytes.
func (c *testCluster) readThrough(t *testing.T, g *gatewayProc, key string) {
	t.Helper()
	out, err := g.s3Client().GetObject(testContext(t), &s3.GetObjectInput{Bucket: aws.String(testBucket), Key: aws.String(key)})
	testutil.Must(t, err)
	body, err := io.ReadAll(out.Body)
	out.Body.Close()
	testutil.Must(t, err)
	if !bytes.Equal(body, c.data[key]) {
		t.Fatalf("%s through the gateway: %d bytes, not the object's %d", key, len(body), len(c.data[key]))
	}
}

// readChunks reads every chunk of key through node, as a gateway does
// (get_chunk), and checks the bytes.
func (c *testCluster) readChunks(t *testing.T, node *cacheNode, key string) {
	t.Helper()
	data := c.data[key]
	for i := 0; i*chunkSize < len(data); i++ {
		resp, err := c.client.Get(fmt.Sprintf("https://%s/v1/objects/%s/%s?chunk=%d", node.api, testBucket, key, i))
		testutil.Must(t, err)
		body, err := io.ReadAll(resp.Body)
		resp.Body.Close()
		testutil.Must(t, err)
		want := data[i*chunkSize : min((i+1)*chunkSize, len(data))]
		if resp.StatusCode != http.StatusOK || !bytes.Equal(body, want) {
			t.Fatalf("chunk %d of %s through %s: %s, %d bytes (want %d): %s", i, key, node.name, resp.Status, len(body), len(want), body[:min(len(body), 200)])
		}
	}
}

// fillPinned writes heldObjectSize objects under heldPrefix through the
// gateway, one at a time and without retries, until one is refused with
// SlowDown (the nodes' pinned space is full), and returns how many were
// acknowledged.
func fillPinned(t *testing.T, g *gatewayProc) int {
	t.Helper()
	s3c := g.s3Client(func(o *s3.Options) { o.RetryMaxAttempts = 1 })
	limit := (256 << 20) / 100 // pinnedFraction (0.01) of DISTCACHE_DISK_BYTES
	for i := 0; ; i++ {
		if i*heldObjectSize > 2*limit {
			t.Fatalf("%d write-back writes of %d bytes acknowledged, none refused: the pinned limit (%d bytes) is not enforced", i, heldObjectSize, limit)
		}
		body := make([]byte, heldObjectSize)
		_, _ = rand.Read(body)
		_, err := s3c.PutObject(testContext(t), &s3.PutObjectInput{Bucket: aws.String(testBucket),
			Key: aws.String(fmt.Sprintf("%spart-%03d.bin", heldPrefix, i)), Body: bytes.NewReader(body)})
		var apiErr smithy.APIError
		switch {
		case err == nil:
		case errors.As(err, &apiErr) && apiErr.ErrorCode() == "SlowDown":
			if i == 0 {
				t.Fatalf("the first write-back write was refused: %v", err)
			}
			return i
		default:
			t.Fatalf("write-back write %d: %v", i, err)
		}
	}
}

// scrapeConfig scrapes the nodes every second with the target labels the
// operator's ServiceMonitor gives them (namespace, service and job = the
// cache, pod, zone from the pod label, endpoint, container), and the
// gateway with those of the operator's gateway PodMonitor (its own
// namespace and pod, job = namespace/PodMonitor, cache and cache_namespace
// from its pod labels).
func scrapeConfig(nodes []*cacheNode, g *gatewayProc) string {
	var b strings.Builder
	fmt.Fprintf(&b, "global:\n  scrape_interval: 1s\n  scrape_timeout: 1s\n  evaluation_interval: 1s\n")
	fmt.Fprintf(&b, "scrape_configs:\n  - job_name: serviceMonitor/%s/%s/0\n    metrics_path: /metrics\n    static_configs:\n", testNamespace, testCache)
	for _, n := range nodes {
		fmt.Fprintf(&b, "      - targets: [%q]\n        labels: {namespace: %q, service: %q, job: %q, endpoint: metrics, container: cachenode, pod: %q, %s: %q}\n",
			n.ops, testNamespace, testCache, testCache, n.name, monitoring.LabelZone, testZone)
	}
	fmt.Fprintf(&b, "  - job_name: podMonitor/%s/distcache-gateway/0\n    metrics_path: /metrics\n    static_configs:\n", gatewayNamespace)
	fmt.Fprintf(&b, "      - targets: [%q]\n        labels: {namespace: %q, job: %q, endpoint: metrics, container: gateway, pod: %q, %s: %q, %s: %q}\n",
		g.ops, gatewayNamespace, gatewayNamespace+"/distcache-gateway", gatewayPod,
		monitoring.LabelCache, testCache, monitoring.LabelCacheNamespace, testNamespace)
	return b.String()
}

// nodeSeries and gatewaySeries select the nodes' and the gateway's series.
var (
	nodeSeries    = fmt.Sprintf(`namespace=%q,service=%q`, testNamespace, testCache)
	gatewaySeries = fmt.Sprintf(`%s=%q,%s=%q`, monitoring.LabelCacheNamespace, testNamespace, monitoring.LabelCache, testCache)
)

// nodeURLs lists the nodes' /metrics.
func nodeURLs(nodes []*cacheNode) []string {
	var out []string
	for _, n := range nodes {
		out = append(out, n.metricsURL())
	}
	return out
}

// waitIngested waits until Prometheus holds the current totals of family
// that the targets at urls export, under the label matchers sel, and at
// least two samples of each of its series, so rates over the last minutes
// include everything done so far.
func waitIngested(t *testing.T, prom *promClient, urls []string, sel, family string) {
	t.Helper()
	waitFor(t, 30*time.Second, "prometheus ingesting "+family, func() error {
		var want float64
		for _, u := range urls {
			m, err := promtext.Scrape(context.Background(), u)
			if err != nil {
				return err
			}
			want += m.Sum(family, nil)
		}
		r, err := prom.query(fmt.Sprintf(`sum(%s{%s})`, family, sel))
		if err != nil {
			return err
		}
		if got := r.values(); len(got) != 1 || got[0] != want || want == 0 {
			return fmt.Errorf("prometheus has %v, the nodes %v", got, want)
		}
		// A rate needs two samples of a series: a series that appeared at
		// the last scrape (the first hit of a tier) has one.
		r, err = prom.query(fmt.Sprintf(`min(count_over_time(%s{%s}[5m]))`, family, sel))
		if err != nil {
			return err
		}
		if got := r.values(); len(got) != 1 || got[0] < 2 {
			return fmt.Errorf("a series of %s has fewer than 2 samples (fewest: %v)", family, got)
		}
		return nil
	})
}

// grafana substitutes the dashboard's template variables as Grafana would
// for the selection given, with the time variables of a short range.
func grafana(expr string, vars map[string]string) string {
	pairs := []string{
		"$__rate_interval", "2m", // >= 4 scrapes of 1s, and covers the whole test on a loaded machine
		"$__interval", "15s",
		"$__range", "5m",
	}
	for k, v := range vars {
		pairs = append(pairs, "$"+k, v)
	}
	return strings.NewReplacer(pairs...).Replace(expr)
}

type dashboardTarget struct {
	panel, refID, expr string
}

type dashboardVar struct {
	name, query string
}

func parseDashboard(t *testing.T) ([]dashboardTarget, []dashboardVar) {
	t.Helper()
	type panel struct {
		Title   string            `json:"title"`
		Panels  []json.RawMessage `json:"panels"`
		Targets []struct {
			Expr  string `json:"expr"`
			RefID string `json:"refId"`
		} `json:"targets"`
	}
	var d struct {
		Panels     []json.RawMessage `json:"panels"`
		Templating struct {
			List []struct {
				Name       string `json:"name"`
				Type       string `json:"type"`
				Definition string `json:"definition"`
			} `json:"list"`
		} `json:"templating"`
	}
	testutil.Must(t, json.Unmarshal(monitoring.Dashboard(), &d))
	var targets []dashboardTarget
	var walk func([]json.RawMessage)
	walk = func(raw []json.RawMessage) {
		for _, r := range raw {
			var p panel
			testutil.Must(t, json.Unmarshal(r, &p))
			for _, tg := range p.Targets {
				targets = append(targets, dashboardTarget{p.Title, tg.RefID, tg.Expr})
			}
			walk(p.Panels)
		}
	}
	walk(d.Panels)
	var vars []dashboardVar
	for _, v := range d.Templating.List {
		if v.Type == "query" {
			vars = append(vars, dashboardVar{v.Name, v.Definition})
		}
	}
	return targets, vars
}

// mayBeEmpty are the dashboard queries that show no data on a healthy cache
// that just served a few reads: they count failures and events that did
// not happen (S3 errors and retries, revalidations, store failures) or need
// more time than the test has.
var mayBeEmpty = map[string]bool{
	"S3 error ratio/A": true, // no S3 request failed: the numerator has no series
	"S3 retries/A":     true, // no retries
	"Store failures/A": true, // distcache_store_failures_total: no bypassed operation
	"Singleflight joins and metadata revalidations/B": true, // metadata not older than its TTL yet
	"Gateway requests to cache nodes that failed/A":   true, // no node request failed
	"Bytes from other zones/A":                        true, // one zone, nothing crosses zones
	"Gateway bytes across zones/A":                    true, // the gateway's zone is up
}

func TestDashboardAndAlertsAgainstRealNodes(t *testing.T) {
	if testing.Short() {
		t.Skip("starts MinIO, two cache nodes and Prometheus")
	}
	tool(t, "prometheus", "PROMETHEUS_BIN") // skip or fail before starting anything
	promtool := tool(t, "promtool", "PROMTOOL_BIN")
	c := startCluster(t, 2, "tables/one.bin", "tables/two.bin")
	gw := c.startGateway(t)
	prom := startPrometheus(t, scrapeConfig(c.nodes, gw))
	waitFor(t, 30*time.Second, "both nodes scraped", func() error {
		r, err := prom.query(fmt.Sprintf(`sum(up{namespace=%q,service=%q})`, testNamespace, testCache))
		if err != nil {
			return err
		}
		if v := r.values(); len(v) != 1 || v[0] != 2 {
			return fmt.Errorf("up: %v", v)
		}
		return nil
	})

	// Misses, then hits, through both nodes: every result series exists.
	// Chunks a node does not own are forwarded to the owner.
	// The gateway's first read of an object misses its page cache, the
	// second hits it.
	for _, n := range c.nodes {
		c.readChunks(t, n, "tables/one.bin")
	}
	c.readThrough(t, gw, "tables/one.bin")
	c.readThrough(t, gw, "tables/one.bin")
	waitIngested(t, prom, nodeURLs(c.nodes), nodeSeries, "distcache_chunk_reads_total")
	waitIngested(t, prom, []string{gw.metricsURL()}, gatewaySeries, "distcache_client_page_cache_requests_total")
	// Now counters Prometheus has seen rise: new misses, then hits.
	c.readChunks(t, c.nodes[0], "tables/two.bin")
	c.readChunks(t, c.nodes[0], "tables/two.bin")
	c.readChunks(t, c.nodes[1], "tables/one.bin")
	c.readThrough(t, gw, "tables/two.bin")
	c.readThrough(t, gw, "tables/two.bin")
	waitIngested(t, prom, nodeURLs(c.nodes), nodeSeries, "distcache_chunk_reads_total")
	waitIngested(t, prom, nodeURLs(c.nodes), nodeSeries, "distcache_response_bytes_total")
	waitIngested(t, prom, []string{gw.metricsURL()}, gatewaySeries, "distcache_client_page_cache_requests_total")
	waitIngested(t, prom, []string{gw.metricsURL()}, gatewaySeries, "distcache_gateway_requests_total")

	// Write-back: S3 refuses the uploads of the held prefix, so what the
	// tenant writes there stays on both nodes (WriteBack, two replicas),
	// each node's persister retrying the keys it persists, until the
	// pinned space is full and a write is refused.
	c.s3.Inject(s3proxy.Rule{Method: http.MethodPut, PathPrefix: "/" + testBucket + "/" + heldPrefix,
		Fault: s3proxy.Fault{Kind: s3proxy.Status, Status: http.StatusForbidden, Code: "AccessDenied"}})
	held := fillPinned(t, gw)
	t.Logf("%d write-back writes of %d bytes acknowledged, then SlowDown", held, heldObjectSize)
	waitIngested(t, prom, nodeURLs(c.nodes), nodeSeries, "distcache_writeback_full_total")
	waitIngested(t, prom, nodeURLs(c.nodes), nodeSeries, "distcache_writeback_bytes")
	waitIngested(t, prom, nodeURLs(c.nodes), nodeSeries, "distcache_writeback_pinned_bytes")
	waitFor(t, 60*time.Second, "both nodes' failed persistence attempts in prometheus", func() error {
		r, err := prom.query(fmt.Sprintf(`count_over_time(distcache_writeback_persist_attempts_total{%s,result="error"}[5m]) >= 2`, nodeSeries))
		if err != nil {
			return err
		}
		if len(r.Data.Result) != len(c.nodes) {
			return fmt.Errorf("%d nodes' error series with 2 samples or more: %v", len(r.Data.Result), r.Data.Result)
		}
		return nil
	})

	targets, vars := parseDashboard(t)
	t.Run("template variables list the cache", func(t *testing.T) {
		want := map[string]string{"namespace": testNamespace, "cache": testCache, "zone": testZone, "tenant": testTenant}
		selection := map[string]string{"namespace": testNamespace, "cache": testCache}
		re := regexp.MustCompile(`^label_values\((.+), *([a-zA-Z_]+)\)$`)
		for _, v := range vars {
			m := re.FindStringSubmatch(v.query)
			if m == nil {
				t.Errorf("variable %s: query %q is not label_values(series, label)", v.name, v.query)
				continue
			}
			got, err := prom.labelValues(m[2], grafana(m[1], selection))
			if err != nil {
				t.Errorf("variable %s: %v", v.name, err)
				continue
			}
			if !slices.Contains(got, want[v.name]) {
				t.Errorf("variable %s (%s) lists %v, not %q", v.name, v.query, got, want[v.name])
			}
		}
	})

	t.Run("every dashboard query succeeds and has data", func(t *testing.T) {
		selections := []map[string]string{
			{"namespace": testNamespace, "cache": testCache, "zone": ".*", "tenant": ".*"},           // All
			{"namespace": testNamespace, "cache": testCache, "zone": testZone, "tenant": testTenant}, // one of each
		}
		for _, sel := range selections {
			for _, tg := range targets {
				expr := grafana(tg.expr, sel)
				if strings.Contains(expr, "$") {
					t.Errorf("%s/%s: a variable is left after substitution: %s", tg.panel, tg.refID, expr)
					continue
				}
				r, err := prom.query(expr)
				if err != nil {
					t.Fatalf("%s/%s: %v", tg.panel, tg.refID, err)
				}
				if r.Status != "success" || r.Error != "" || len(r.Warnings) > 0 {
					t.Errorf("%s/%s: %s %s: %s %v\n%s", tg.panel, tg.refID, r.Status, r.ErrorType, r.Error, r.Warnings, expr)
					continue
				}
				switch empty := len(r.Data.Result) == 0; {
				case empty && !mayBeEmpty[tg.panel+"/"+tg.refID]:
					t.Errorf("%s/%s (zone %s, tenant %s): no data\n%s", tg.panel, tg.refID, sel["zone"], sel["tenant"], expr)
				case !empty && mayBeEmpty[tg.panel+"/"+tg.refID]:
					t.Logf("%s/%s has data although it may be empty", tg.panel, tg.refID)
				}
			}
		}
	})

	// Both nodes hold every acknowledged write-back write (two replicas
	// of two nodes), none in S3.
	t.Run("write-back panels show the held writes", func(t *testing.T) {
		sel := map[string]string{"namespace": testNamespace, "cache": testCache, "zone": ".*", "tenant": ".*"}
		panel := func(title string) map[string]float64 {
			t.Helper()
			out := map[string]float64{}
			for _, tg := range targets {
				if tg.panel != title || tg.refID != "A" {
					continue
				}
				r, err := prom.query(grafana(tg.expr, sel))
				testutil.Must(t, err)
				for i, v := range r.values() {
					m := r.Data.Result[i].Metric
					out[m["tenant"]+m["kind"]+m["pod"]] = v
				}
				return out
			}
			t.Fatalf("no panel %q", title)
			return nil
		}
		copies := float64(len(c.nodes) * held)
		if got := panel("Dirty and transient objects by tenant"); got[testTenant+"dirty"] != copies || got[testTenant+"transient"] != 0 || len(got) != 2 {
			t.Errorf("dirty and transient objects: %v, want %v dirty copies of %s's writes, none transient", got, copies, testTenant)
		}
		if got := panel("Held bytes by tenant"); got[testTenant] != copies*heldObjectSize || len(got) != 1 {
			t.Errorf("held bytes: %v, want %v", got, copies*heldObjectSize)
		}
		ratios := panel("Pinned space used ratio by node")
		if len(ratios) != len(c.nodes) {
			t.Errorf("pinned space ratio: %v, want one per node", ratios)
		}
		for pod, v := range ratios {
			if v <= 0.85 || v > 1 {
				t.Errorf("pinned space ratio of %s: %v, want it above 0.85 (writes were refused) and at most 1", pod, v)
			}
		}
	})

	t.Run("hit ratio panels show the hits", func(t *testing.T) {
		sel := map[string]string{"namespace": testNamespace, "cache": testCache, "zone": ".*", "tenant": ".*"}
		for _, tg := range targets {
			if !strings.Contains(tg.panel, "hit ratio") {
				continue
			}
			r, err := prom.query(grafana(tg.expr, sel))
			testutil.Must(t, err)
			vals := r.values()
			// Per node, a ratio may be NaN: a node whose reads were all
			// forwarded served nothing itself. Overall it is a number.
			if len(vals) == 0 || !slices.ContainsFunc(vals, func(v float64) bool { return v > 0 && v <= 1 }) {
				t.Errorf("%s/%s: values %v, want one in (0, 1]", tg.panel, tg.refID, vals)
			}
			if !strings.Contains(tg.panel, "by") {
				if vals[0] <= 0 || vals[0] >= 1 {
					t.Errorf("%s/%s: %v, want a ratio strictly between 0 and 1 (hits and misses)", tg.panel, tg.refID, vals[0])
				}
			}
		}
	})

	// Threshold 1: the byte hit ratio (misses happened) is below it.
	groups, err := monitoring.RuleGroups(monitoring.Target{Namespace: testNamespace, Cache: testCache}, "1")
	testutil.Must(t, err)
	alerts := map[string]string{}
	for _, r := range groups[0].Rules {
		alerts[r.Alert] = r.Expr.String()
	}

	t.Run("promtool check rules", func(t *testing.T) {
		for _, threshold := range []string{"", "0.5", "1"} {
			g, err := monitoring.RuleGroups(monitoring.Target{Namespace: testNamespace, Cache: testCache}, threshold)
			testutil.Must(t, err)
			out := checkRules(t, promtool, g)
			if !strings.Contains(out, fmt.Sprintf("SUCCESS: %d rules found", len(g[0].Rules))) {
				t.Errorf("promtool check rules: %s", out)
			}
		}
	})

	t.Run("alert expressions evaluate", func(t *testing.T) {
		want := map[string]int{ // samples on a cache with misses whose S3 refuses the held writes
			monitoring.AlertLowHitRatio: 1, // zone z1, below threshold 1
			// The persisters' refused uploads, retried, outnumber the
			// reads' S3 requests.
			monitoring.AlertS3ErrorRate:      1,
			monitoring.AlertDiskNearCapacity: 0,
			// Both nodes hold every write-back write, up to their limit,
			// and each persists some of them, in vain.
			monitoring.AlertWriteBackPinnedNearFull: 2,
			monitoring.AlertWriteBackPersistFailing: 2,
			// The held writes are seconds old, not minutes (see below).
			monitoring.AlertWriteBackLagging: 0,
			// The test's certificates last an hour: every node's and the
			// gateway's is within the alerts' 7 days.
			monitoring.AlertCertificateExpiring:        2,
			monitoring.AlertGatewayCertificateExpiring: 1,
			// The operator's series: no operator is scraped here.
			monitoring.AlertNodeUnschedulable: 0,
		}
		names := make([]string, 0, len(alerts))
		for name := range alerts {
			names = append(names, name)
		}
		sort.Strings(names)
		for _, name := range names {
			r, err := prom.query(alerts[name])
			testutil.Must(t, err)
			if r.Status != "success" || r.Error != "" {
				t.Errorf("%s: %s: %s\n%s", name, r.Status, r.Error, alerts[name])
				continue
			}
			if n, ok := want[name]; ok && len(r.Data.Result) != n {
				t.Errorf("%s: %d samples %v, want %d", name, len(r.Data.Result), r.Data.Result, n)
			}
			for _, smp := range r.Data.Result {
				if strings.HasPrefix(name, "DistcacheWriteBack") && (smp.Metric["namespace"] != testNamespace || smp.Metric["service"] != testCache ||
					smp.Metric["zone"] != testZone || smp.Metric["pod"] == "" && smp.Metric["tenant"] != testTenant) {
					t.Errorf("%s: labels %v", name, smp.Metric)
				}
			}
			if name == monitoring.AlertLowHitRatio && len(r.Data.Result) == 1 {
				if m := r.Data.Result[0].Metric; m["zone"] != testZone || m["service"] != testCache || m["namespace"] != testNamespace {
					t.Errorf("%s: labels %v", name, m)
				}
			}
		}
	})

	// The lag alert's threshold is minutes: with its threshold at 0 its
	// expression selects the tenant whose writes S3 refuses, once.
	t.Run("write-back lag", func(t *testing.T) {
		expr := regexp.MustCompile(`> [0-9.]+$`).ReplaceAllString(alerts[monitoring.AlertWriteBackLagging], "> 0")
		if expr == alerts[monitoring.AlertWriteBackLagging] {
			t.Fatalf("no threshold at the end of %s", expr)
		}
		r, err := prom.query(expr)
		testutil.Must(t, err)
		if len(r.Data.Result) != 1 || r.Data.Result[0].Metric["tenant"] != testTenant || r.Data.Result[0].Metric["zone"] != testZone {
			t.Errorf("%s: %v, want one sample for tenant %s", expr, r.Data.Result, testTenant)
		}
	})

	// The certificate alerts select a series every node and gateway
	// exports: the time left on the certificate it presents.
	t.Run("certificate expiry", func(t *testing.T) {
		for sel, n := range map[string]int{
			monitoring.LabelNamespace + `="` + testNamespace + `",` + monitoring.LabelService + `="` + testCache + `"`:    len(c.nodes),
			monitoring.LabelCacheNamespace + `="` + testNamespace + `",` + monitoring.LabelCache + `="` + testCache + `"`: 1,
		} {
			r, err := prom.query(`distcache_tls_certificate_expiration_timestamp_seconds{` + sel + `} - time()`)
			testutil.Must(t, err)
			if len(r.Data.Result) != n {
				t.Errorf("{%s}: %d samples %v, want %d", sel, len(r.Data.Result), r.Data.Result, n)
			}
			for _, smp := range r.Data.Result {
				if left, _ := strconv.ParseFloat(fmt.Sprint(smp.Value[1]), 64); left <= 0 {
					t.Errorf("{%s} %v: %v seconds left on the certificate", sel, smp.Metric, smp.Value[1])
				}
			}
		}
	})

	t.Run("node down", func(t *testing.T) {
		down := c.nodes[1]
		down.proc.Stop()
		waitFor(t, 60*time.Second, monitoring.AlertNodeDown+" for "+down.name, func() error {
			r, err := prom.query(alerts[monitoring.AlertNodeDown])
			if err != nil {
				return err
			}
			for _, s := range r.Data.Result {
				if s.Metric["pod"] == down.name && s.Metric["zone"] == testZone {
					return nil
				}
			}
			return fmt.Errorf("%s: %v", r.Status, r.Data.Result)
		})
	})
}

// checkRules runs `promtool check rules` on the groups as a rule file and
// returns its output; it fails the test if promtool does.
func checkRules(t *testing.T, promtool string, groups []monitoringv1.RuleGroup) string {
	t.Helper()
	b, err := yaml.Marshal(map[string]any{"groups": groups})
	testutil.Must(t, err)
	file := filepath.Join(t.TempDir(), "rules.yaml")
	testutil.Must(t, os.WriteFile(file, b, 0o600))
	out, err := exec.Command(promtool, "check", "rules", file).CombinedOutput()
	if err != nil {
		t.Fatalf("promtool check rules: %v\n%s\n%s", err, out, b)
	}
	return string(out)
}
