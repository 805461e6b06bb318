package soak_test

import (
	"context"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/service/s3"

	"github.com/distcache/distcache/internal/testutil"
	"github.com/distcache/distcache/internal/testutil/freeport"
	"github.com/distcache/distcache/internal/testutil/gobin"
	"github.com/distcache/distcache/internal/testutil/miniotest"
	"github.com/distcache/distcache/tools/benchmark/benchkit"
)

// stack is MinIO, three `cachenode serve` processes sharing a ring and one
// `cachenode gateway` process, all real binaries on loopback, as `make stack`
// runs them.
type stack struct {
	minio   *miniotest.Server
	nodes   []*proc
	gateway *proc
	s3      *s3.Client // through the gateway
}

// proc is one running cachenode process.
type proc struct {
	*testutil.Process
	name    string
	metrics string // http://addr/metrics
	dataDir string // "" for the gateway
}

type stackOptions struct {
	chunkSize, ramBytes, diskBytes, pageCacheBytes string
}

const (
	bucket    = "soak"
	accessKey = "soak-access"
	secretKey = "soak-secret-key-0123456789"
)

func startStack(t *testing.T, opts stackOptions) *stack {
	t.Helper()
	dir := t.TempDir()
	bin := gobin.Cachenode(t)
	st := &stack{minio: miniotest.Start(t)}
	st.minio.CreateBucket(t, bucket)

	names := []string{"soak-0", "soak-1", "soak-2"}
	args := []string{"certs", "--dir", filepath.Join(dir, "certs"), "--server-dns", "localhost", "--server-ip", "127.0.0.1", "--tenant", "soak"}
	for _, n := range names {
		args = append(args, "--node", n)
	}
	if out, err := exec.Command(bin, args...).CombinedOutput(); err != nil {
		t.Fatalf("cachenode certs: %v\n%s", err, out)
	}
	certs := filepath.Join(dir, "certs")
	tenants := filepath.Join(dir, "tenants.yaml")
	testutil.Must(t, os.WriteFile(tenants, []byte("tenants:\n  - name: soak\n    buckets: ["+bucket+"]\n"), 0o600))

	listen := make([]string, len(names))
	var members []string
	for i, n := range names {
		listen[i] = freeport.Addr(t)
		members = append(members, fmt.Sprintf(`{"name":%q,"address":%q,"ordinal":%d,"weight":100,"state":"active"}`, n, listen[i], i))
	}
	ringFile := filepath.Join(dir, "ring.json")
	testutil.Must(t, os.WriteFile(ringFile, []byte(`{"epoch":1,"zone":"local","hash":{"algorithm":"rendezvous-xxhash64","seed":0},"members":[`+strings.Join(members, ",")+`]}`), 0o600))

	var seeds []string
	for i, n := range names {
		data := filepath.Join(dir, n)
		p := start(t, dir, n, bin, []string{"AWS_ACCESS_KEY_ID=" + st.minio.AccessKey, "AWS_SECRET_ACCESS_KEY=" + st.minio.SecretKey},
			"serve", "--node-name", n, "--ring-file", ringFile, "--listen", listen[i],
			"--tls-cert", filepath.Join(certs, "node-"+n+".crt"), "--tls-key", filepath.Join(certs, "node-"+n+".key"),
			"--client-ca", filepath.Join(certs, "ca.crt"), "--tenants-file", tenants, "--data-dir", data,
			"--chunk-size", opts.chunkSize, "--ram-bytes", opts.ramBytes, "--disk-bytes", opts.diskBytes,
			"--s3-endpoint", st.minio.Endpoint, "--s3-path-style", "--immutable", "--log-level", "warn")
		p.dataDir = data
		st.nodes = append(st.nodes, p)
		seeds = append(seeds, "https://"+listen[i])
	}
	gw := freeport.Addr(t)
	st.gateway = start(t, dir, "gateway", bin, nil,
		"gateway", "--listen", gw, "--nodes", strings.Join(seeds, ","),
		"--tls-cert", filepath.Join(certs, "tenant-soak.crt"), "--tls-key", filepath.Join(certs, "tenant-soak.key"),
		"--ca", filepath.Join(certs, "ca.crt"), "--access-key", accessKey, "--secret-key", secretKey,
		"--chunk-size", opts.chunkSize, "--page-cache-bytes", opts.pageCacheBytes, "--log-level", "warn")
	for _, p := range append(st.nodes, st.gateway) {
		testutil.WaitStatus(t, strings.TrimSuffix(p.metrics, "/metrics")+"/readyz", http.StatusOK, p.Done())
	}
	st.s3 = testutil.S3Client("http://"+gw, accessKey, secretKey, func(o *s3.Options) {
		o.HTTPClient = &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: 128}}
	})
	return st
}

// start runs bin with args; its output goes to dir/name.log, shown when the
// test fails. The process is stopped with SIGTERM when the test ends.
func start(t *testing.T, dir, name, bin string, env []string, args ...string) *proc {
	t.Helper()
	metrics := freeport.Addr(t)
	args = append(args, "--metrics-listen", metrics)
	logPath := filepath.Join(dir, name+".log")
	logFile, err := os.Create(logPath)
	testutil.Must(t, err)
	cmd := exec.Command(bin, args...)
	cmd.Env = append(os.Environ(), env...)
	cmd.Stdout, cmd.Stderr = logFile, logFile
	t.Cleanup(func() { // after the process stopped (cleanups run last first)
		logFile.Close()
		if t.Failed() {
			b, _ := os.ReadFile(logPath)
			t.Logf("%s log (last 8 KiB):\n%s", name, tail(b, 8<<10))
		}
	})
	return &proc{Process: testutil.StartProcess(t, name, cmd), name: name, metrics: "http://" + metrics + "/metrics"}
}

// rssBytes is the process's resident set size, from /proc.
func (p *proc) rssBytes() int64 {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", p.Cmd.Process.Pid))
	if err != nil {
		return 0
	}
	for _, line := range strings.Split(string(b), "\n") {
		if rest, ok := strings.CutPrefix(line, "VmRSS:"); ok {
			kb, _ := strconv.ParseInt(strings.TrimSuffix(strings.TrimSpace(rest), " kB"), 10, 64)
			return kb << 10
		}
	}
	return 0
}

// diskBytes is what the node's data directory occupies on disk (allocated
// blocks, as du counts).
func (p *proc) diskBytes() int64 {
	var total int64
	_ = filepath.Walk(p.dataDir, func(_ string, info os.FileInfo, err error) error {
		if err == nil {
			if st, ok := info.Sys().(*syscall.Stat_t); ok {
				total += st.Blocks * 512
			}
		}
		return nil
	})
	return total
}

// files lists the data directory's files with their allocated sizes.
func (p *proc) files() string {
	var b strings.Builder
	_ = filepath.Walk(p.dataDir, func(path string, info os.FileInfo, err error) error {
		if err == nil && !info.IsDir() {
			if st, ok := info.Sys().(*syscall.Stat_t); ok {
				rel, _ := filepath.Rel(p.dataDir, path)
				fmt.Fprintf(&b, "  %-40s %10d allocated, %10d apparent\n", rel, st.Blocks*512, info.Size())
			}
		}
		return nil
	})
	return b.String()
}

// metric sums the samples of name whose labels include every k="v" of
// want; -1 when the scrape fails.
func (p *proc) metric(name string, want ...string) float64 {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	m, err := benchkit.Scrape(ctx, p.metrics)
	if err != nil {
		return -1
	}
	return m.Sum(name, want...)
}

func tail(b []byte, n int) []byte {
	if len(b) > n {
		return b[len(b)-n:]
	}
	return b
}
