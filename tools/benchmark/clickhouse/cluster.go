package clickhouse

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"fmt"

	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"time"

	"github.com/distcache/distcache/internal/freeport"
	"github.com/distcache/distcache/internal/gateway"
	"github.com/distcache/distcache/tools/benchmark/benchkit"
)

// cacheConfig sizes the cache.
type cacheConfig struct {
	Nodes          int
	ChunkSize      int64
	RAMBytes       int64 // per node
	DiskBytes      int64 // per node
	PageCacheBytes int64 // per gateway
	PageBytes      int64 // the gateway's page (--page-bytes; whole chunks when it does not divide them)
	// ProfileDir (BENCH_PROFILE_DIR): every cachenode process writes a CPU
	// profile of its whole life there (DISTCACHE_CPU_PROFILE).
	ProfileDir string
}

// pageBytes is the gateway's page size: PageBytes where it divides the
// chunk size, else whole chunks.
func (c cacheConfig) pageBytes() int64 {
	piece, _ := gateway.ReadGeometry(c.ChunkSize, c.PageBytes, true, 1)
	return piece
}

// profileEnv is the environment that makes process name (of the cache in
// dir) write its CPU profile, if profiles are asked for.
func (c cacheConfig) profileEnv(dir, name string) []string {
	if c.ProfileDir == "" {
		return nil
	}
	return []string{"DISTCACHE_CPU_PROFILE=" + filepath.Join(c.ProfileDir, filepath.Base(dir)+"-"+name+".cpu.pprof")}
}

// cluster is a distcache on loopback, as hack/stack.sh starts it: cache
// nodes sharing one ring over mTLS, reading S3 through the Link, and
// gateways next to "compute" (ClickHouse).
type cluster struct {
	bin, dir  string
	cfg       cacheConfig
	nodes     []*benchkit.Process
	nodeURLs  []string // https://127.0.0.1:PORT
	nodeStats []string // http://127.0.0.1:PORT/metrics
	tenant    string
	seq       int
}

// gatewayProc is one `cachenode gateway`.
type gatewayProc struct {
	*benchkit.Process
	endpoint Endpoint
	metrics  string
	// start is what the process took to be ready: the time, and its CPU
	// (faulting its page cache in, --page-cache-prefault).
	start startCost
}

// startCost is what a gateway took to start, before any query.
type startCost struct {
	Seconds, CPUSeconds float64
}

const tenantName = "bench"

func startCluster(ctx context.Context, bin, dir string, cfg cacheConfig, s3 Endpoint) (c *cluster, err error) {
	c = &cluster{bin: bin, dir: dir, cfg: cfg, tenant: tenantName}
	started := c // the returns below set c to nil
	defer func() {
		if err != nil {
			started.stop()
		}
	}()
	certs := filepath.Join(dir, "certs")
	args := []string{"certs", "--dir", certs, "--server-dns", "localhost", "--server-ip", "127.0.0.1", "--tenant", c.tenant}
	names := make([]string, cfg.Nodes)
	for i := range names {
		names[i] = fmt.Sprintf("cache-%d", i)
		args = append(args, "--node", names[i])
	}
	if b, err := exec.CommandContext(ctx, bin, args...).CombinedOutput(); err != nil {
		return nil, fmt.Errorf("cachenode certs: %v\n%s", err, b)
	}
	tenants := filepath.Join(dir, "tenants.yaml")
	if err := os.WriteFile(tenants, fmt.Appendf(nil, "tenants:\n  - name: %s\n    buckets: [%s]\n", c.tenant, s3.Bucket), 0o600); err != nil {
		return nil, err
	}
	type member struct {
		Name    string `json:"name"`
		Address string `json:"address"`
		Ordinal int    `json:"ordinal"`
		Weight  int    `json:"weight"`
		State   string `json:"state"`
	}
	var members []member
	api, ops := make([]string, cfg.Nodes), make([]string, cfg.Nodes)
	for i, n := range names {
		if api[i], err = freeport.Next(); err != nil {
			return nil, err
		}
		if ops[i], err = freeport.Next(); err != nil {
			return nil, err
		}
		members = append(members, member{Name: n, Address: api[i], Ordinal: i, Weight: 100, State: "active"})
	}
	ring, _ := json.Marshal(map[string]any{"epoch": 1, "zone": "local",
		"hash": map[string]any{"algorithm": "rendezvous-xxhash64", "seed": 0}, "members": members})
	ringFile := filepath.Join(dir, "ring.json")
	if err := os.WriteFile(ringFile, ring, 0o600); err != nil {
		return nil, err
	}
	for i, n := range names {
		p, err := benchkit.StartProcess(bin, filepath.Join(dir, n+".log"), n,
			append(cfg.profileEnv(dir, n), "AWS_ACCESS_KEY_ID="+s3.AccessKey, "AWS_SECRET_ACCESS_KEY="+s3.SecretKey),
			"serve", "--node-name", n, "--ring-file", ringFile,
			"--listen", api[i], "--metrics-listen", ops[i],
			"--tls-cert", filepath.Join(certs, "node-"+n+".crt"), "--tls-key", filepath.Join(certs, "node-"+n+".key"),
			"--client-ca", filepath.Join(certs, "ca.crt"), "--tenants-file", tenants,
			"--data-dir", filepath.Join(dir, n), "--disk-bytes", fmt.Sprint(cfg.DiskBytes), "--chunk-size", fmt.Sprint(cfg.ChunkSize), "--ram-bytes", fmt.Sprint(cfg.RAMBytes),
			"--immutable", "--s3-endpoint", s3.URL, "--s3-path-style", "--log-level", "warn")
		if err != nil {
			return nil, err
		}
		c.nodes = append(c.nodes, p)
		c.nodeURLs = append(c.nodeURLs, "https://"+api[i])
		c.nodeStats = append(c.nodeStats, "http://"+ops[i]+"/metrics")
	}
	for i, p := range c.nodes {
		if err := p.WaitReady(ctx, "http://"+ops[i]+"/readyz"); err != nil {
			return nil, err
		}
	}
	return c, nil
}

// startGateway starts a fresh gateway process (empty RAM page cache).
func (c *cluster) startGateway(ctx context.Context, bucket string) (*gatewayProc, error) {
	c.seq++
	name := fmt.Sprintf("gateway-%d", c.seq)
	addrs, err := freeport.Several(2)
	if err != nil {
		return nil, err
	}
	listen, ops := addrs[0], addrs[1]
	key, secret := "bench-"+randomHex(6), randomHex(20)
	certs := filepath.Join(c.dir, "certs")
	started := time.Now()
	p, err := benchkit.StartProcess(c.bin, filepath.Join(c.dir, name+".log"), name,
		append(c.cfg.profileEnv(c.dir, name), "DISTCACHE_SECRET_KEY="+secret),
		"gateway", "--listen", listen, "--metrics-listen", ops, "--nodes", strings.Join(c.nodeURLs, ","),
		"--tls-cert", filepath.Join(certs, "tenant-"+c.tenant+".crt"), "--tls-key", filepath.Join(certs, "tenant-"+c.tenant+".key"),
		"--ca", filepath.Join(certs, "ca.crt"), "--access-key", key,
		"--page-cache-bytes", fmt.Sprint(c.cfg.PageCacheBytes), "--page-bytes", fmt.Sprint(c.cfg.pageBytes()),
		"--chunk-size", fmt.Sprint(c.cfg.ChunkSize), "--log-level", "warn")
	if err != nil {
		return nil, err
	}
	g := &gatewayProc{Process: p, metrics: "http://" + ops + "/metrics",
		endpoint: Endpoint{URL: "http://" + listen, AccessKey: key, SecretKey: secret, Bucket: bucket}}
	if err := p.WaitReady(ctx, "http://"+ops+"/readyz"); err != nil {
		p.Stop()
		return nil, err
	}
	g.start = startCost{Seconds: time.Since(started).Seconds(), CPUSeconds: benchkit.PidCPU(p.Pid()).Seconds()}
	return g, nil
}

func (c *cluster) stop() {
	for _, p := range c.nodes {
		p.Stop()
	}
}

func randomHex(n int) string {
	b := make([]byte, n)
	_, _ = rand.Read(b)
	return hex.EncodeToString(b)
}
