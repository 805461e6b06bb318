// Package hitpath is part B1 of `make bench`: reads of cached data (whole
// chunks and 64 KiB ranges, 1/8/32 concurrent clients) from a distcache
// node, through the S3 gateway (default TTL mode and --immutable), from
// nginx's proxy_cache in front of MinIO (plain HTTP, as S3 clients reach
// the gateway, and mTLS, as Go clients reach the node), from MinIO
// directly, and from a raw TLS 1.3 loopback transfer of the same bytes,
// the ceiling. For each it reports GB/s, p50/p99/p99.9 latency,
// CPU seconds per GB (client and server) and heap allocations per read.
//
// Everything runs on one machine in one process, except MinIO and nginx
// (child processes whose CPU is read from /proc). The cells of a row run
// back to back, so their ratios are comparable; absolute figures are not.
//
// Knobs for profiling work (the default run ignores none of them; each one
// set is named in the section):
//
//	BENCH_PROFILE_DIR=dir      CPU and allocation profiles of every in-process cell
//	BENCH_B1_COLUMNS=node,raw  only these columns (node, node-http, gateway, gateway-immutable, gateway-nopc,
//	                           nginx-http, minio, nginx, raw)
//	BENCH_B1_CLIENTS=1,8       only these client counts
//	BENCH_B1_WORKLOADS=range   only these workloads (range, chunk)
//	BENCH_B1_SECONDS=2         measuring time per cell
//	BENCH_B1_ROUNDS=2          measurements per cell (the best counts)
//	BENCH_B1_GATEWAY=inprocess the gateways in the bench process (profiled), not processes of their own
package hitpath

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"time"

	"github.com/distcache/distcache/tools/benchmark/benchkit"
)

// config sizes a run.
type config struct {
	objectSize, chunkSize, rangeSize int64
	clients                          []int
	cell, warmup                     time.Duration
	rounds                           int      // every cell is measured this many times; the best counts
	columns, workloads               []string // ids; empty: all
	verifyEvery                      int      // compare every byte of one read in this many
	// gatewayInProcess runs the gateways in the bench process (where a CPU
	// profile shows them) instead of as `cachenode gateway` processes.
	gatewayInProcess bool
	profileDir       string
	knobs            benchkit.Knobs // the BENCH_* variables that changed the defaults
}

func defaultConfig(quick bool) config {
	if quick {
		return config{objectSize: 4 << 20, chunkSize: 1 << 20, rangeSize: 64 << 10, clients: []int{1, 4},
			cell: 150 * time.Millisecond, warmup: 30 * time.Millisecond, rounds: 1, verifyEvery: 1}
	}
	return config{objectSize: 64 << 20, chunkSize: 4 << 20, rangeSize: 64 << 10, clients: []int{1, 8, 32},
		cell: 2 * time.Second, warmup: 400 * time.Millisecond, rounds: 3, verifyEvery: 8}
}

// applyKnobs reads the BENCH_* variables.
func (c *config) applyKnobs() (err error) {
	if c.profileDir, err = c.knobs.ProfileDir(); err != nil {
		return err
	}
	c.columns, c.workloads = c.knobs.List("BENCH_B1_COLUMNS"), c.knobs.List("BENCH_B1_WORKLOADS")
	if clients, err := c.knobs.PositiveInts("BENCH_B1_CLIENTS"); err != nil {
		return err
	} else if clients != nil {
		c.clients = clients
	}
	switch v := os.Getenv("BENCH_B1_GATEWAY"); v {
	case "", "process":
	case "inprocess":
		c.gatewayInProcess = true
		c.knobs.Note("BENCH_B1_GATEWAY", v)
	default:
		return fmt.Errorf("BENCH_B1_GATEWAY: %q is neither process nor inprocess", v)
	}
	if err := c.knobs.PositiveInt("BENCH_B1_ROUNDS", func(n int) { c.rounds = n }); err != nil {
		return err
	}
	return c.knobs.Positive("BENCH_B1_SECONDS", func(s float64) { c.cell = time.Duration(s * float64(time.Second)) })
}

// envInfo is what startWorld needs of benchkit.Env.
type envInfo struct {
	root, workDir, minioBin, nginxBin string
	logf                              func(string, ...any)
}

// Run is part B1.
func Run(ctx context.Context, env benchkit.Env) (benchkit.Section, error) {
	r, err := measure(ctx, env)
	if err != nil {
		return benchkit.Section{}, err
	}
	return r.section(env.ImgDir)
}

// report is what a run measured.
type report struct {
	cfg       config
	workloads []workload
	columns   []column
	results   []result
	tls       string // the TLS parameters the servers negotiated
}

// get is the best of the rounds of a cell (the highest GB/s: the round
// least disturbed by anything else on the machine).
func (r *report) get(col string, wl workload, n int) (best result, ok bool) {
	for _, res := range r.results {
		if res.col.id == col && res.wl.id == wl.id && res.clients == n && (!ok || res.gbps() > best.gbps()) {
			best, ok = res, true
		}
	}
	return best, ok
}

// measure measures every cell of the configuration: the defaults of
// env.Quick, changed by the BENCH_B1_* variables.
func measure(ctx context.Context, env benchkit.Env) (*report, error) {
	cfg := defaultConfig(env.Quick)
	if err := cfg.applyKnobs(); err != nil {
		return nil, err
	}
	w, err := startWorld(ctx, envInfo{
		root: env.Root, workDir: env.WorkDir, minioBin: filepath.Join(env.Bin, "minio"), nginxBin: filepath.Join(env.Bin, "nginx"),
		logf: env.Logf,
	}, cfg)
	if err != nil {
		return nil, err
	}
	defer w.close()
	rep := &report{cfg: cfg}
	if rep.tls, err = w.checkTLS(ctx); err != nil {
		return nil, err
	}
	for _, wl := range []workload{
		{id: "range", name: benchkit.Size(cfg.rangeSize) + " range", size: cfg.rangeSize},
		{id: "chunk", name: "whole chunk (" + benchkit.Size(cfg.chunkSize) + ")", size: cfg.chunkSize},
	} {
		if len(cfg.workloads) == 0 || slices.Contains(cfg.workloads, wl.id) {
			rep.workloads = append(rep.workloads, wl)
		}
	}
	for _, c := range w.columns() {
		if len(cfg.columns) == 0 || slices.Contains(cfg.columns, c.id) {
			rep.columns = append(rep.columns, c)
		}
	}
	if len(rep.workloads) == 0 || len(rep.columns) == 0 {
		return nil, fmt.Errorf("BENCH_B1_WORKLOADS/BENCH_B1_COLUMNS select nothing")
	}
	// The columns of one row run back to back, so a disturbance of the
	// machine hits one row rather than one column; the whole table is
	// measured rounds times, so it hits one round of a cell.
	for round := 1; round <= cfg.rounds; round++ {
		for _, wl := range rep.workloads {
			for _, n := range cfg.clients {
				for _, col := range rep.columns {
					if err := ctx.Err(); err != nil {
						return nil, err
					}
					res, err := w.cell(ctx, col, wl, n)
					if err != nil {
						return nil, err
					}
					// "other processes": the servers outside this one
					// (MinIO, nginx, the gateway processes), idle or not;
					// the rest of the CPU is this process's.
					env.Logf("round %d: %-10s %-22s %2d clients: %6.3f GB/s  p50 %s  p99 %s  %.2f CPU s/GB (other processes %.2f)  %.0f allocs/read",
						round, col.id, wl.name, n, res.gbps(), benchkit.Millis(res.lat.Quantile(0.5)), benchkit.Millis(res.lat.Quantile(0.99)),
						res.cpuPerGB(), res.perGB(res.serverCPU), res.allocsPerRead())
					rep.results = append(rep.results, res)
				}
			}
		}
	}
	return rep, nil
}

// checkTLS makes sure the node, nginx's TLS listener and the raw server
// all speak TLS 1.3 with client certificates, and names the cipher suite
// each negotiated.
func (w *world) checkTLS(ctx context.Context) (string, error) {
	caOnly := w.tenantTL.Clone()
	caOnly.GetClientCertificate = nil
	if err := w.nginx.checkMTLS(ctx, w.nginxHTTP, caOnly); err != nil {
		return "", err
	}
	suites := map[string]string{}
	for name, url := range map[string]string{
		"node":  "https://" + w.nodeAddr + "/v1/ring",
		"nginx": "https://" + w.nginx.addr + "/healthz",
	} {
		c := w.nodeHTTP
		if name == "nginx" {
			c = w.nginxHTTP
		}
		req, _ := newGet(ctx, url)
		resp, err := c.Do(req)
		if err != nil {
			return "", err
		}
		resp.Body.Close()
		if resp.TLS == nil || resp.TLS.Version != tlsVersion13 {
			return "", fmt.Errorf("%s did not answer over TLS 1.3", name)
		}
		suites[name] = cipherName(resp.TLS.CipherSuite)
	}
	var rc rawConn
	defer rc.close()
	if err := w.readRaw(&rc, 0, make([]byte, 16)); err != nil {
		return "", err
	}
	suites["raw"] = cipherName(rc.c.ConnectionState().CipherSuite)
	return fmt.Sprintf("TLS 1.3 with client certificates for the node, nginx's TLS listener and the raw ceiling; cipher suites negotiated: node %s, nginx %s, raw %s",
		suites["node"], suites["nginx"], suites["raw"]), nil
}
