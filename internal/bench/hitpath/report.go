package hitpath

import (
	"context"
	"crypto/tls"
	"fmt"
	"net/http"
	"path/filepath"
	"strconv"
	"strings"

	"github.com/distcache/distcache/internal/bench/benchkit"
)

const tlsVersion13 = tls.VersionTLS13

func cipherName(id uint16) string { return tls.CipherSuiteName(id) }

func newGet(ctx context.Context, url string) (*http.Request, error) {
	return http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
}

// goalShare is the target for node hits, as a share of the raw TLS
// ceiling.
const goalShare = 0.80

// markdown renders the section: setup, tables per workload, a summary of
// the ratios, plots and a reading computed from the numbers.
func (r *report) markdown(imgDir string) (string, error) {
	var b strings.Builder
	c := r.cfg
	fmt.Fprintf(&b, "Reads of cached data: %s ranges at random %s-aligned offsets and whole %s chunks of one %s object, "+
		"%s concurrent clients, each client one read at a time, %s per cell after a %s warm-up. "+
		"The whole table is measured %d times, round after round; each cell shows its best round (highest GB/s), all of whose figures come from that round.\n\n",
		sizeName(c.rangeSize), sizeName(c.rangeSize), sizeName(c.chunkSize), sizeName(c.objectSize),
		joinInts(c.clients), c.cell, c.warmup, c.rounds)
	b.WriteString("```sh\nmake bench BENCH_PARTS=b1        # this section (internal/bench/hitpath)\n" +
		"BENCH_PROFILE_DIR=/tmp/b1 make bench BENCH_PARTS=b1   # plus CPU/allocation profiles of the in-process cells\n```\n\n")
	if len(c.knobs) > 0 {
		fmt.Fprintf(&b, "**This run was narrowed with %s.**\n\n", strings.Join(c.knobs, ", "))
	}
	b.WriteString(`The columns, all reading the same bytes, checked against the object (both ends of every read, every byte of one read in ` +
		strconv.Itoa(c.verifyEvery) + `):

- **distcache node (internal/client)**: the ring-aware Go client (` + "`ReadAt`" + ` with the version of one ` + "`Stat`" + `, no page cache) against one cache node in this process, over mTLS (TLS 1.3) on read connections (ALPN ` + "`distcache-read/1`" + `: HTTP/1.1 chunk GETs answered by the node's own loop, see docs/architecture.md), served from the node's RAM tier. This is what Go users use, and what the gateway uses to reach the nodes.
- **distcache node (bare net/http)**: the same node API with a bare ` + "`net/http`" + ` GET ` + "`?chunk=N`" + ` + Range over plain HTTP/1.1 connections (net/http on both ends), to show what the read connections and the client library save.
- **gateway, page cache off**: aws-sdk-go-v2 ` + "`GetObject`" + ` with a Range, SigV4-signed, through an in-process gateway (plain HTTP on loopback, as S3 clients next to compute reach it) that reads from the node over mTLS with the tenant's certificate. Each GetObject is a metadata request (Stat) plus the chunk request to the node: the network path gateway → node.
- **gateway, page cache on**: the same with the gateway's RAM page cache on (its default configuration: 1 MiB pages, 256 MiB in production; here big enough for the object, warmed): the chunk bytes come from the gateway's RAM, the Stat still goes to the node.
- **nginx proxy_cache**: Debian's nginx (hack/nginx.sh) terminating TLS 1.3 with ` + "`ssl_verify_client on`" + ` (the same CA and server certificate as the node), ` + "`proxy_cache`" + ` with the ` + "`slice`" + ` module (slice = chunk size) in front of MinIO, warm: every read is checked to be an ` + "`X-Cache-Status: HIT`" + `. MinIO's bucket has an anonymous read policy so nginx proxies unsigned requests.
- **MinIO direct**: the same ranged GETs from MinIO itself, plain HTTP on loopback (MinIO does no client-certificate TLS; its bytes come from this machine's page cache). Unsigned (anonymous read), with the same ` + "`net/http`" + ` client as the node and nginx columns.
- **raw TLS 1.3 ceiling**: a bare TLS connection (the node's TLS configuration) per client that asks for (offset, length) and gets the bytes from memory: no HTTP, no cache, no copy. Nothing serving these bytes over TLS in Go can beat it on this machine.

Keep-alive everywhere (idle pools of 256 connections per host). ` + r.tls + `.
**CPU s/GB** is the CPU time (user + system) of everything involved, per GB (10⁹ bytes) read: this process (clients, and the node, gateways and raw server, which run in it) plus MinIO's and nginx's processes (from /proc/<pid>/stat), so server and client are counted for every column. **allocs/read** is heap allocations of this process per read (clients included; nginx and MinIO allocate in their own processes).

`)
	for _, wl := range r.workloads {
		fmt.Fprintf(&b, "### %s\n\n", wl.name)
		t := benchkit.Table{Header: []string{"clients", "system", "GB/s", "reads/s", "p50", "p99", "p99.9", "CPU s/GB", "allocs/read", "of ceiling"}}
		for _, n := range r.cfg.clients {
			ceiling, _ := r.get("raw", wl, n)
			for _, col := range r.columns {
				res, ok := r.get(col.id, wl, n)
				if !ok {
					continue
				}
				t.Rows = append(t.Rows, []string{strconv.Itoa(n), col.name, fmt.Sprintf("%.3f", res.gbps()),
					fmt.Sprintf("%.0f", float64(res.reads)/res.elapsed.Seconds()),
					benchkit.Millis(res.lat.Quantile(0.5)), benchkit.Millis(res.lat.Quantile(0.99)), benchkit.Millis(res.lat.Quantile(0.999)),
					fmt.Sprintf("%.2f", res.cpuPerGB()), fmt.Sprintf("%.0f", res.allocsPerRead()), benchkit.Percent(res.gbps(), ceiling.gbps())})
			}
		}
		b.WriteString(t.Markdown())
		b.WriteString("\n")
		file := "b1-" + wl.id + ".png"
		if err := r.plot(filepath.Join(imgDir, file), wl); err != nil {
			return "", err
		}
		fmt.Fprintf(&b, "![GB/s, %s](img/%s)\n\n", wl.name, file)
	}
	b.WriteString("### Ratios\n\n")
	b.WriteString(r.ratios().Markdown())
	b.WriteString("\n### Reading it\n\n")
	b.WriteString(r.reading())
	return b.String(), nil
}

func (r *report) plot(path string, wl workload) error {
	groups := make([]string, len(r.cfg.clients))
	for i, n := range r.cfg.clients {
		groups[i] = strconv.Itoa(n) + " clients"
	}
	var series []benchkit.Series
	for _, col := range r.columns {
		s := benchkit.Series{Name: col.name}
		for i, n := range r.cfg.clients {
			res, _ := r.get(col.id, wl, n)
			s.X = append(s.X, float64(i))
			s.Y = append(s.Y, res.gbps())
		}
		series = append(series, s)
	}
	return benchkit.BarPlot(path, "B1 hit path: "+wl.name, "GB/s", groups, series)
}

// ratios is one row per workload and client count.
func (r *report) ratios() benchkit.Table {
	t := benchkit.Table{Header: []string{"workload", "clients", "node / ceiling", "node / nginx", "node / MinIO",
		"node: client vs bare HTTP", "gateway / ceiling", "gateway+page cache / ceiling", "node CPU/GB / nginx CPU/GB"}}
	for _, wl := range r.workloads {
		for _, n := range r.cfg.clients {
			g := func(id string) float64 { res, _ := r.get(id, wl, n); return res.gbps() }
			cpu := func(id string) float64 { res, _ := r.get(id, wl, n); return res.cpuPerGB() }
			t.Rows = append(t.Rows, []string{wl.name, strconv.Itoa(n),
				benchkit.Percent(g("node"), g("raw")), benchkit.Ratio(g("node"), g("nginx")), benchkit.Ratio(g("node"), g("minio")),
				benchkit.Ratio(g("node"), g("node-http")), benchkit.Percent(g("gateway"), g("raw")), benchkit.Percent(g("gateway-pc"), g("raw")),
				benchkit.Ratio(cpu("node"), cpu("nginx"))})
		}
	}
	return t
}

// reading states what the numbers say, computed from them.
func (r *report) reading() string {
	var b strings.Builder
	var cells, atGoal, aheadOfNginx int
	lo, hi := 10.0, 0.0
	var missedGoal []string
	for _, wl := range r.workloads {
		for _, n := range r.cfg.clients {
			node, ok1 := r.get("node", wl, n)
			raw, ok2 := r.get("raw", wl, n)
			if !ok1 || !ok2 || raw.gbps() == 0 {
				continue
			}
			cells++
			share := node.gbps() / raw.gbps()
			lo, hi = min(lo, share), max(hi, share)
			if share >= goalShare {
				atGoal++
			} else {
				missedGoal = append(missedGoal, fmt.Sprintf("%s × %d clients (%.0f%%)", wl.name, n, 100*share))
			}
			if ng, ok := r.get("nginx", wl, n); ok && node.gbps() > ng.gbps() {
				aheadOfNginx++
			}
		}
	}
	if cells > 0 {
		fmt.Fprintf(&b, "- **Goal: node hits at ≥ %.0f%% of the ceiling**: met in %d of %d cells (node at %.0f–%.0f%% of the raw TLS ceiling).",
			100*goalShare, atGoal, cells, 100*lo, 100*hi)
		if len(missedGoal) > 0 {
			fmt.Fprintf(&b, " Missed: %s.", strings.Join(missedGoal, ", "))
		}
		b.WriteString("\n")
		fmt.Fprintf(&b, "- **Goal: ahead of nginx**: the node is faster than nginx's proxy_cache in %d of %d cells.\n", aheadOfNginx, cells)
	}
	for _, wl := range r.workloads {
		var parts []string
		for _, n := range r.cfg.clients {
			node, _ := r.get("node", wl, n)
			ng, _ := r.get("nginx", wl, n)
			gw, _ := r.get("gateway", wl, n)
			gpc, _ := r.get("gateway-pc", wl, n)
			raw, _ := r.get("raw", wl, n)
			if raw.gbps() == 0 {
				continue
			}
			parts = append(parts, fmt.Sprintf("%d clients: node %s, nginx %s, gateway %s (page cache %s) of the ceiling; CPU per GB node %.2f s, nginx %.2f s, raw %.2f s",
				n, benchkit.Percent(node.gbps(), raw.gbps()), benchkit.Percent(ng.gbps(), raw.gbps()),
				benchkit.Percent(gw.gbps(), raw.gbps()), benchkit.Percent(gpc.gbps(), raw.gbps()),
				node.cpuPerGB(), ng.cpuPerGB(), raw.cpuPerGB()))
		}
		if len(parts) > 0 {
			fmt.Fprintf(&b, "- **%s**: %s.\n", wl.name, strings.Join(parts, "; "))
		}
	}
	if beaten := r.ceilingBeaten(); len(beaten) > 0 {
		fmt.Fprintf(&b, "- **Caution**: a TLS column beat the raw TLS ceiling in %s. The ceiling is a bare request/response loop "+
			"whose server writes each TLS record (16 KiB at most) with a system call of its own, as crypto/tls does; the node's read "+
			"connections send the records of an answer in one write (up to 128 KiB, `node.BatchingListener`), which on long answers "+
			"is less work per byte. The ceiling is also one measurement, not a bound the others cannot cross by noise (the best of "+
			"%d rounds is shown for every column; a busy machine, see the load average above, widens the spread), so read ratios "+
			"near 100%% as \"at the ceiling\".\n", strings.Join(beaten, ", "), r.cfg.rounds)
	}
	b.WriteString("- The client and the servers share this machine's cores, so every GB/s figure is also bounded by CPU: the " +
		"CPU s/GB column is the fairer measure of the work each system does per byte. MinIO's column carries no encryption.\n")
	return b.String()
}

// ceilingBeaten lists the cells where a column that carries TLS on every
// byte (the node, nginx) was faster than the raw TLS transfer, which does
// strictly less work: only a disturbed measurement does that.
func (r *report) ceilingBeaten() []string {
	var out []string
	for _, wl := range r.workloads {
		for _, n := range r.cfg.clients {
			raw, ok := r.get("raw", wl, n)
			if !ok {
				continue
			}
			for _, id := range []string{"node", "node-http", "nginx"} {
				if res, ok := r.get(id, wl, n); ok && res.gbps() > raw.gbps() {
					out = append(out, fmt.Sprintf("%s × %d clients (%s)", wl.name, n, id))
				}
			}
		}
	}
	return out
}

func joinInts(ns []int) string {
	s := make([]string, len(ns))
	for i, n := range ns {
		s[i] = strconv.Itoa(n)
	}
	return strings.Join(s, "/")
}
