// Package monitoring_test checks the operator's monitoring against real
// servers:
//
//   - prometheus_test.go: two real `cachenode serve` processes (a ring of
//     two, real mTLS) in front of a real MinIO (behind s3proxy), and a real
//     `cachenode gateway` in front of them, scraped every second by a real
//     Prometheus (bin/prometheus) with the target labels the operator's
//     ServiceMonitor (nodes) and its gateway PodMonitor (gateway) produce.
//     Every dashboard query and every alert expression is evaluated through
//     Prometheus's HTTP API after real traffic (reads, and write-back writes
//     that S3 refuses until the nodes' pinned space is full), and the rules
//     pass `promtool check rules`.
//   - rules_test.go: `promtool test rules` drives each alert through
//     synthetic series: fires when it should, stays quiet when it should,
//     and never for another cache.
//   - operator_test.go: the DistributedCache reconciler against envtest (a
//     real kube-apiserver and etcd) with the prometheus-operator's CRDs,
//     installed only after the manager started.
//
// Prometheus and promtool come from Debian's prometheus package through
// hack/prometheus.sh (make prometheus); PROMETHEUS_BIN and PROMTOOL_BIN
// override them. Without them the Prometheus tests are skipped, except when
// $CI is set, where a missing binary fails. The CRDs come from
// hack/prometheus-operator-crds.sh (the Go module proxy), the envtest
// binaries from hack/envtest-assets.sh, MinIO from make bin/minio.
package monitoring_test

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"testing"
	"time"

	"github.com/distcache/distcache/internal/testutil"
	"github.com/distcache/distcache/internal/testutil/freeport"
	"github.com/distcache/distcache/internal/testutil/repo"
)

// tool returns the path of a bin/ tool built by hack/prometheus.sh ($env
// overrides it). A missing tool skips the test, or fails it under CI.
func tool(t *testing.T, name, env string) string {
	t.Helper()
	if p := os.Getenv(env); p != "" {
		return p
	}
	root, err := repo.Root()
	if err != nil {
		t.Fatal(err)
	}
	p := filepath.Join(root, "bin", name)
	if fi, err := os.Stat(p); err != nil || fi.IsDir() || fi.Mode()&0o111 == 0 {
		msg := fmt.Sprintf("%s not found at %s: run `make prometheus` (hack/prometheus.sh) or set %s", name, p, env)
		if os.Getenv("CI") != "" {
			t.Fatal(msg + " (CI is set: not skipping)")
		}
		t.Skip(msg)
	}
	return p
}

// waitFor polls cond every 100ms until it returns nil or the timeout
// passes, then fails with cond's last error.
func waitFor(t *testing.T, timeout time.Duration, what string, cond func() error) {
	t.Helper()
	deadline := time.Now().Add(timeout)
	for {
		err := cond()
		if err == nil {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s: not within %s: %v", what, timeout, err)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// httpReady returns a condition that url answers 200, while p runs.
func httpReady(url string, p *testutil.Process) func() error {
	return func() error {
		select {
		case <-p.Done():
			return fmt.Errorf("process exited: %v", p.Err())
		default:
		}
		resp, err := http.Get(url)
		if err != nil {
			return err
		}
		resp.Body.Close()
		if resp.StatusCode != http.StatusOK {
			return fmt.Errorf("%s: %s", url, resp.Status)
		}
		return nil
	}
}

// promClient talks to Prometheus's HTTP API.
type promClient struct {
	base string
}

// promResult is a /api/v1/query answer.
type promResult struct {
	Status    string `json:"status"`
	ErrorType string `json:"errorType"`
	Error     string `json:"error"`
	Warnings  []string
	Data      struct {
		ResultType string `json:"resultType"`
		Result     []struct {
			Metric map[string]string `json:"metric"`
			Value  [2]any            `json:"value"`
		} `json:"result"`
	} `json:"data"`
}

// values returns each sample's value; NaN where it does not parse.
func (r *promResult) values() []float64 {
	var out []float64
	for _, s := range r.Data.Result {
		str, _ := s.Value[1].(string)
		v, err := strconv.ParseFloat(str, 64)
		if err != nil {
			v = -1
		}
		out = append(out, v)
	}
	return out
}

// query runs an instant query at the current time. It returns an error
// for a transport failure or an answer that is not JSON; a PromQL error is
// in the result's Status and Error.
func (p *promClient) query(expr string) (*promResult, error) {
	resp, body, err := testutil.ReadBody(http.PostForm(p.base+"/api/v1/query", url.Values{"query": {expr}}))
	if err != nil {
		return nil, err
	}
	var r promResult
	if err := json.Unmarshal(body, &r); err != nil {
		return nil, fmt.Errorf("%s: %s", resp.Status, body)
	}
	return &r, nil
}

// labelValues is what Grafana's label_values(match, label) lists.
func (p *promClient) labelValues(label, match string) ([]string, error) {
	resp, err := http.Get(p.base + "/api/v1/label/" + label + "/values?" + url.Values{"match[]": {match}}.Encode())
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	var r struct {
		Status string   `json:"status"`
		Error  string   `json:"error"`
		Data   []string `json:"data"`
	}
	if err := json.NewDecoder(resp.Body).Decode(&r); err != nil {
		return nil, err
	}
	if r.Status != "success" {
		return nil, fmt.Errorf("label values %s of %s: %s", label, match, r.Error)
	}
	return r.Data, nil
}

// startPrometheus runs bin/prometheus with config and waits until it is
// ready.
func startPrometheus(t *testing.T, config string) *promClient {
	t.Helper()
	bin := tool(t, "prometheus", "PROMETHEUS_BIN")
	dir := t.TempDir()
	cfg := filepath.Join(dir, "prometheus.yml")
	testutil.Must(t, os.WriteFile(cfg, []byte(config), 0o600))
	addr := freeport.Addr(t)
	p := testutil.StartProcess(t, "prometheus", exec.Command(bin,
		"--config.file="+cfg, "--storage.tsdb.path="+filepath.Join(dir, "data"),
		"--web.listen-address="+addr, "--log.level=warn"))
	waitFor(t, 60*time.Second, "prometheus ready", httpReady("http://"+addr+"/-/ready", p))
	return &promClient{base: "http://" + addr}
}

// ctx is a context for a test's requests.
func testContext(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	t.Cleanup(cancel)
	return ctx
}
