package hitpath

import (
	"context"
	"crypto/tls"
	"fmt"
	"net/http"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/distcache/distcache/tools/benchmark/benchkit"
)

const tlsVersion13 = tls.VersionTLS13

func cipherName(id uint16) string { return tls.CipherSuiteName(id) }

func newGet(ctx context.Context, url string) (*http.Request, error) {
	return http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
}

// goalShare is the target for node hits, as a share of the raw TLS
// ceiling.
const goalShare = 0.80

// section is the part's section of the report.
func (r *report) section(imgDir string) (benchkit.Section, error) {
	md, err := r.markdown(imgDir)
	if err != nil {
		return benchkit.Section{}, err
	}
	return benchkit.Section{Title: "B1 — hit path", Markdown: md}, nil
}

// markdown renders the section: setup, tables per workload, a summary of
// the ratios, plots and a reading computed from the numbers.
func (r *report) markdown(imgDir string) (string, error) {
	var b strings.Builder
	c := r.cfg
	fmt.Fprintf(&b, "Reads of cached data: %s ranges at random %s-aligned offsets and whole %s chunks of one %s object, "+
		"%s concurrent clients, each client one read at a time, %s per cell after a %s warm-up. "+
		"The whole table is measured %d times, round after round; each cell shows its best round (highest GB/s), all of whose figures come from that round.\n\n",
		benchkit.Size(c.rangeSize), benchkit.Size(c.rangeSize), benchkit.Size(c.chunkSize), benchkit.Size(c.objectSize),
		joinInts(c.clients), c.cell, c.warmup, c.rounds)
	b.WriteString("```sh\nmake bench BENCH_PARTS=b1        # this section (tools/benchmark/hitpath)\n" +
		"BENCH_PROFILE_DIR=/tmp/b1 make bench BENCH_PARTS=b1   # plus CPU/allocation profiles of the in-process cells\n```\n\n")
	if len(c.knobs) > 0 {
		fmt.Fprintf(&b, "**This run was narrowed with %s.**\n\n", strings.Join(c.knobs, ", "))
	}
	b.WriteString(`The columns, all reading the same bytes, checked against the object (both ends of every read, every byte of one read in ` +
		strconv.Itoa(c.verifyEvery) + `):

- **distcache node (internal/client)**: the ring-aware Go client (` + "`ReadAt`" + ` with the version of one ` + "`Stat`" + `, no page cache) against one cache node in this process, over mTLS (TLS 1.3) on read connections (ALPN ` + "`distcache-read/1`" + `: HTTP/1.1 chunk GETs answered by the node's own loop, see docs/architecture.md), served from the node's RAM tier. This is what Go users use, and what the gateway uses to reach the nodes.
- **distcache node (bare net/http)**: the same node API with a bare ` + "`net/http`" + ` GET ` + "`?chunk=N`" + ` + Range over plain HTTP/1.1 connections (net/http on both ends), to show what the read connections and the client library save.
- **gateway, default: TTL mode, page cache on**: aws-sdk-go-v2 ` + "`GetObject`" + ` with a Range, SigV4-signed (and verified), through a gateway in its default configuration: a ` + "`cachenode gateway`" + ` process built from this tree, a server of its own as nginx is (` + "`BENCH_B1_GATEWAY=inprocess`" + ` runs the gateways in the bench process instead, where a CPU profile shows them) (plain HTTP on loopback, as S3 clients next to compute reach it; RAM page cache of 1 MiB pages, here big enough for the object, warmed) in front of a cache node in its default mode (` + "`--meta-ttl`" + ` 30 s, not ` + "`--immutable`" + `). The gateway keeps the object's metadata on a lease from the node (docs/architecture.md, "Metadata at the gateways: leases"), so a hit is served from the gateway's RAM without a round trip; once per TTL a read asks the node again.
- **gateway, --immutable nodes, page cache on**: the same in front of a node started ` + "`--immutable`" + `: the metadata is kept for good.
- **gateway, TTL mode, page cache off**: the default gateway without its page cache: every read is a chunk request to the node over mTLS (the network path gateway → node).
- **nginx proxy_cache, plain HTTP**: Debian's nginx (hack/nginx.sh) as one would put it in front of S3 for an S3 client: ` + "`proxy_cache`" + ` with the ` + "`slice`" + ` module (slice = chunk size) in front of MinIO, plain HTTP like the gateway's port, read with the same aws-sdk-go-v2 client, warm: every read is checked to be an ` + "`X-Cache-Status: HIT`" + `. nginx verifies no signature: it drops it and reads MinIO anonymously (the bucket has an anonymous read policy), so it does less work per request than the gateway.
- **MinIO direct**: the same aws-sdk-go-v2 ` + "`GetObject`" + ` against MinIO itself (signed with MinIO's keys, plain HTTP on loopback; its bytes come from this machine's page cache).
- **nginx proxy_cache, mTLS**: the same nginx cache on a second listener terminating TLS 1.3 with ` + "`ssl_verify_client on`" + ` (the same CA and server certificate as the node), read with the bare ` + "`net/http`" + ` client of the node column: the comparison for the node, not for the gateway.
- **raw TLS 1.3 ceiling**: a bare TLS connection (the node's TLS configuration) per client that asks for (offset, length) and gets the bytes from memory: no HTTP, no cache, no copy. Nothing serving these bytes over TLS in Go can beat it on this machine.

Keep-alive everywhere (idle pools of 256 connections per host). ` + r.tls + `.
**CPU s/GB** is the CPU time (user + system) of everything involved, per GB (10⁹ bytes) read: this process (clients, and the nodes and raw server, which run in it) plus MinIO's, nginx's and the gateways' processes (from /proc/<pid>/stat), so server and client are counted for every column. **allocs/read** is heap allocations of this process per read (clients included; nginx and MinIO allocate in their own processes).

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
	t := benchkit.Table{Header: []string{"workload", "clients", "node / ceiling", "node / nginx (mTLS)", "node: client vs bare HTTP",
		"gateway / nginx (plain HTTP)", "gateway immutable / nginx (plain HTTP)", "gateway / MinIO",
		"gateway CPU/GB / nginx CPU/GB", "node CPU/GB / nginx (mTLS) CPU/GB"}}
	for _, wl := range r.workloads {
		for _, n := range r.cfg.clients {
			g := func(id string) float64 { res, _ := r.get(id, wl, n); return res.gbps() }
			cpu := func(id string) float64 { res, _ := r.get(id, wl, n); return res.cpuPerGB() }
			t.Rows = append(t.Rows, []string{wl.name, strconv.Itoa(n),
				benchkit.Percent(g("node"), g("raw")), benchkit.Ratio(g("node"), g("nginx")), benchkit.Ratio(g("node"), g("node-http")),
				benchkit.Ratio(g("gateway"), g("nginx-http")), benchkit.Ratio(g("gateway-immutable"), g("nginx-http")),
				benchkit.Ratio(g("gateway"), g("minio")),
				benchkit.Ratio(cpu("gateway"), cpu("nginx-http")), benchkit.Ratio(cpu("node"), cpu("nginx"))})
		}
	}
	return t
}

// gatewayGoals are issue 24's goals for the gateway's hit path, judged on
// the numbers: ahead of nginx (plain HTTP) in every cell, in the default
// TTL mode and with --immutable nodes; a 64 KiB hit with one client at p50
// <= 0.3 ms; CPU per GB at most nginx's.
func (r *report) gatewayGoals() string {
	var b strings.Builder
	for _, id := range []string{"gateway", "gateway-immutable"} {
		var cells, ahead int
		var behind []string
		for _, wl := range r.workloads {
			for _, n := range r.cfg.clients {
				gw, ok1 := r.get(id, wl, n)
				ng, ok2 := r.get("nginx-http", wl, n)
				if !ok1 || !ok2 {
					continue
				}
				cells++
				if gw.gbps() > ng.gbps() {
					ahead++
				} else {
					behind = append(behind, fmt.Sprintf("%s × %d clients (%s)", wl.name, n, benchkit.Ratio(gw.gbps(), ng.gbps())))
				}
			}
		}
		if cells == 0 {
			continue
		}
		fmt.Fprintf(&b, "- **Goal: %s ahead of nginx proxy_cache (plain HTTP)**: in %d of %d cells.", id, ahead, cells)
		if len(behind) > 0 {
			fmt.Fprintf(&b, " Behind: %s.", strings.Join(behind, ", "))
		}
		b.WriteString("\n")
	}
	for _, wl := range r.workloads {
		if wl.id != "range" {
			continue
		}
		if gw, ok := r.get("gateway", wl, 1); ok {
			p50 := gw.lat.Quantile(0.5)
			verdict := "met"
			if p50 > 300*time.Microsecond {
				verdict = "not met"
			}
			fmt.Fprintf(&b, "- **Goal: a %s hit through the gateway (default) with one client at p50 ≤ 0.3 ms**: %s (p50 %s).\n",
				wl.name, verdict, benchkit.Millis(p50))
		}
	}
	var cpuCells, cpuMet int
	var cpuMissed []string
	for _, wl := range r.workloads {
		for _, n := range r.cfg.clients {
			gw, ok1 := r.get("gateway", wl, n)
			ng, ok2 := r.get("nginx-http", wl, n)
			if !ok1 || !ok2 {
				continue
			}
			cpuCells++
			if gw.cpuPerGB() <= ng.cpuPerGB() {
				cpuMet++
			} else {
				cpuMissed = append(cpuMissed, fmt.Sprintf("%s × %d clients (%.2f vs %.2f s/GB)", wl.name, n, gw.cpuPerGB(), ng.cpuPerGB()))
			}
		}
	}
	if cpuCells > 0 {
		fmt.Fprintf(&b, "- **Goal: the gateway's CPU per GB at most nginx's** (both with the same client in this process): in %d of %d cells.", cpuMet, cpuCells)
		if len(cpuMissed) > 0 {
			fmt.Fprintf(&b, " Above: %s.", strings.Join(cpuMissed, ", "))
		}
		b.WriteString("\n")
	}
	return b.String()
}

// reading states what the numbers say, computed from them.
func (r *report) reading() string {
	var b strings.Builder
	b.WriteString(r.gatewayGoals())
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
		fmt.Fprintf(&b, "- **Goal: node ahead of nginx (mTLS)**: the node is faster than nginx's proxy_cache over mTLS in %d of %d cells.\n", aheadOfNginx, cells)
	}
	for _, wl := range r.workloads {
		var parts []string
		for _, n := range r.cfg.clients {
			node, _ := r.get("node", wl, n)
			ng, _ := r.get("nginx", wl, n)
			gw, _ := r.get("gateway", wl, n)
			ngh, _ := r.get("nginx-http", wl, n)
			raw, _ := r.get("raw", wl, n)
			if raw.gbps() == 0 {
				continue
			}
			parts = append(parts, fmt.Sprintf("%d clients: node %s and nginx (mTLS) %s of the ceiling; gateway %s of nginx (plain HTTP); CPU per GB node %.2f s, nginx (mTLS) %.2f s, gateway %.2f s, nginx (plain HTTP) %.2f s, raw %.2f s",
				n, benchkit.Percent(node.gbps(), raw.gbps()), benchkit.Percent(ng.gbps(), raw.gbps()),
				benchkit.Ratio(gw.gbps(), ngh.gbps()),
				node.cpuPerGB(), ng.cpuPerGB(), gw.cpuPerGB(), ngh.cpuPerGB(), raw.cpuPerGB()))
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
		"CPU s/GB column is the fairer measure of the work each system does per byte. The plain HTTP columns (gateway, nginx, MinIO) carry no encryption.\n")
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
