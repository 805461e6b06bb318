// Package clickhouse is part B2 of `make bench`: ClickHouse's MergeTree table
// on an S3 disk, cold and hot, read by a real ClickHouse engine (chdb) five
// ways: S3 directly, through ClickHouse's own filesystem cache, and through
// distcache (cold; warm cache nodes with a fresh gateway; warm gateway RAM);
// and a sixth, ClickHouse's userspace page cache on top of the warm gateway,
// where the engine has that cache (chpagecache.go).
//
// Everything runs on this machine as separate processes: MinIO behind an
// S3-like link (toxiproxy: per-request latency, per-connection bandwidth;
// s3link.go), three `cachenode serve` processes and `cachenode gateway`
// processes (cluster.go), and one fresh chdb process per "compute node"
// (chbench.py, driven by chdb.go). Every cell is measured several times
// (runs.go), and the distcache rows again at other chunk sizes
// (chunksizes.go), which is how the default chunk size is chosen. Run
// writes the chapter of docs/benchmarks.md (report.go).
package clickhouse

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/distcache/distcache/internal/gobuild"
	"github.com/distcache/distcache/internal/minioproc"
	"github.com/distcache/distcache/tools/benchmark/benchkit"
)

// Sizes and injected S3 properties of a full run and of Quick.
const (
	fullRows  = 6_000_000 // ~2.3 GB uncompressed, ~0.8 GB compressed
	quickRows = 30_000    // ~11 MB uncompressed

	bucket = "reviews"
)

// DefaultLink is B2's S3-like link (B5 writes through the same): AWS
// documents S3 first-byte latencies of tens of milliseconds and sizes one
// connection at 85-90 MB/s.
var DefaultLink = LinkConfig{Latency: 30 * time.Millisecond, Bandwidth: 85_000_000}

// Queries, in the order they are measured.
var queries = []string{"full", "scattered"}

// rowSpec is one way of reading the table.
type rowSpec struct {
	Name string
	Key  string // short id
}

var rows = []rowSpec{
	{"1. S3 directly", "s3"},
	{"2. ClickHouse filesystem cache", "fscache"},
	{"3. distcache cold (first compute node, gateway G1)", "dc-cold"},
	{"4. distcache warm, gateway RAM cold (fresh node, fresh G2)", "dc-warm"},
	{"5. distcache, gateway RAM warm (fresh node, G2 again)", "dc-ram"},
	{"6. reference: S3 disk on MinIO without the link", "no-link"},
	{"7. distcache, gateway RAM warm, with ClickHouse's page cache (fresh node, G2 again)", "dc-ch-page"},
}

// refRow is the index of row 6, the reference: ClickHouse's S3 disk
// against MinIO with no latency and no bandwidth cap, the fastest any S3
// endpoint can answer on this machine.
const refRow = 5

// chPageRow is the index of row 7: a fresh ClickHouse process through G2
// after row 5, with ClickHouse's userspace page cache on. It is measured
// only where the engine has that cache (chpagecache.go).
const chPageRow = 6

// cell is one measured run: a row, a query, cold or hot.
type cell struct {
	Seconds float64
	S3      Counts // what reached MinIO through the link
	// ClickHouse's own view: its requests to its endpoint and the bytes it
	// read from it, and (row 2) bytes it read from its local cache.
	CHGets, CHBytes, CHCacheBytes int64
	// ClickHouse's userspace page cache (row 7): block lookups that found
	// their block, those that did not, and the bytes read from it.
	CHPageHits, CHPageMisses, CHPageBytes int64
	// distcache rows: the gateway's page cache (lookups, and whole chunks
	// filled in the background behind reads of part of a chunk) and the
	// nodes' chunk reads.
	PageHits, PageMisses, BGFills float64
	AheadFills                    float64 // chunks read ahead of a reader moving through a file
	FreshPages                    float64 // page fills that found the gateway's page pool all held
	ReadBufferWaits               float64 // GetObject fetches that waited for the gateway's read buffers
	NodeRAM, NodeDisk, NodeMisses float64
	// Body bytes the gateway wrote to ClickHouse's connections (more than
	// ClickHouse read when it drops a response part-way) and the nodes
	// wrote to the gateway.
	GatewaySent, NodeSent float64
	// CPU seconds of the run, by process: ClickHouse, the gateway, the cache
	// nodes, and S3's side (MinIO and this process, which runs the link).
	CPU    cpuSplit
	Answer string
}

// cpuSplit is where a run's CPU time went, in seconds.
type cpuSplit struct{ ClickHouse, Gateway, Nodes, S3 float64 }

func (c cpuSplit) sub(o cpuSplit) cpuSplit {
	return cpuSplit{c.ClickHouse - o.ClickHouse, c.Gateway - o.Gateway, c.Nodes - o.Nodes, c.S3 - o.S3}
}

// results holds every cell: [row][query][0 cold, 1 hot].
type results struct {
	Load  *loadInfo
	Probe probe
	Runs  [][][][2]cell // every run's cells: [run][row][query][cold, hot]
	// Cells is each cell's median run, Spread its fastest and slowest.
	Cells   [][][2]cell
	Spread  [][][2]spread
	Checked map[string]string // query -> the answer every row gave
	Cache   cacheConfig
	G2Start map[string][]startCost // query -> what G2 took to be ready, per run
	Chunks  *chunkSweep            // rows 3-5 at other chunk sizes; nil when BENCH_B2_CHUNK_SIZES=none
	// CHSettings (BENCH_B2_CH_SETTINGS, "name = value, ..."): ClickHouse
	// settings every query of every row runs with; chbench.py reads the
	// variable itself.
	CHSettings string
	// CHPage is whether the engine has ClickHouse's userspace page cache,
	// as measured before the runs; row 7 is measured only if it has.
	CHPage chPageProbe
}

// Run measures the rows for both queries, defaultRuns times, and
// returns the chapter.
func Run(ctx context.Context, env benchkit.Env) (benchkit.Section, error) {
	res, err := measure(ctx, env)
	if err != nil {
		return benchkit.Section{}, err
	}
	return report(env, res)
}

func measure(ctx context.Context, env benchkit.Env) (*results, error) {
	// The settings first: a mistyped one fails now, not after the runs.
	nRuns, err := runsWanted(env.Quick)
	if err != nil {
		return nil, err
	}
	sizes, err := sizesWanted(env.Quick)
	if err != nil {
		return nil, err
	}
	pageBytes, err := pageBytesWanted()
	if err != nil {
		return nil, err
	}
	root := env.Root
	python, err := findPython(ctx, root)
	if err != nil {
		return nil, err
	}
	ch, err := newChdb(python, filepath.Join(env.WorkDir, "chdb"))
	if err != nil {
		return nil, err
	}
	env.Logf("building cachenode")
	bin, err := gobuild.Build(ctx, root, gobuild.Cachenode, "")
	if err != nil {
		return nil, err
	}
	minio, err := minioproc.Start(ctx, filepath.Join(env.Bin, "minio"), filepath.Join(env.WorkDir, "minio"))
	if err != nil {
		return nil, err
	}
	defer minio.Stop()
	if err := minio.CreateBucket(ctx, bucket); err != nil {
		return nil, err
	}
	link, err := StartLink(minio.Endpoint, DefaultLink)
	if err != nil {
		return nil, err
	}
	defer link.Close()
	direct := Endpoint{URL: minio.Endpoint, AccessKey: minio.AccessKey, SecretKey: minio.SecretKey, Bucket: bucket}
	viaLink := direct
	viaLink.URL = link.URL

	res := &results{Checked: map[string]string{}, CHSettings: strings.TrimSpace(os.Getenv("BENCH_B2_CH_SETTINGS"))}
	if res.Probe, err = probeLink(ctx, minio, link); err != nil {
		return nil, err
	}
	env.Logf("link: %s", res.Probe)

	n := int64(fullRows)
	if env.Quick {
		n = quickRows
	}
	env.Logf("loading %d rows straight into MinIO", n)
	if res.Load, err = ch.load(ctx, direct, n); err != nil {
		return nil, err
	}
	if res.Load.Rows != n {
		return nil, fmt.Errorf("loaded %d rows, want %d", res.Load.Rows, n)
	}
	env.Logf("table: %d rows, %d parts, %.1f MB uncompressed, %.1f MB compressed (load %.0fs)",
		res.Load.Rows, res.Load.Parts, mb(res.Load.Uncompressed), mb(res.Load.Compressed), res.Load.Seconds)

	// The cache holds the whole table with room to spare (chunks of the
	// default 4 MiB): each node's RAM
	// 0.6x the table (1.8x over three nodes), its disk 2x, each gateway's
	// page cache 1.5x.
	t := res.Load.Compressed
	res.Cache = cacheConfig{Nodes: 3, ChunkSize: 4 << 20, RAMBytes: max(64<<20, t*6/10), DiskBytes: max(256<<20, 2*t), PageCacheBytes: max(64<<20, t*3/2),
		PageBytes:  pageBytes,
		ProfileDir: os.Getenv("BENCH_PROFILE_DIR")}
	if d := res.Cache.ProfileDir; d != "" {
		if err := os.MkdirAll(d, 0o755); err != nil {
			return nil, err
		}
	}

	res.G2Start = map[string][]startCost{}
	m := &meter{ctx: ctx, ch: ch, link: link, minio: minio, checked: res.Checked, g2Start: res.G2Start}
	// ClickHouse's page cache gets the size of the gateway's: both hold the
	// whole table.
	if res.CHPage, err = m.probeCHPage(env, direct, res.Cache.PageCacheBytes); err != nil {
		return nil, err
	}
	if res.CHPage.Works() {
		m.chPageBytes = res.CHPage.Bytes
	}
	// Runs follow one another whole (every row of both queries), so that a
	// slow minute of the machine slows some of every row, not one row.
	for k := range nRuns {
		cells, err := m.run(env, bin, res.Cache, direct, viaLink, k, nRuns)
		if err != nil {
			return nil, err
		}
		res.Runs = append(res.Runs, cells)
	}
	res.Cells, res.Spread = medianRuns(res.Runs)
	if len(sizes) > 0 {
		if res.Chunks, err = m.chunkSizes(env, bin, res.Cache, viaLink, sizes, min(nRuns, maxSweepRuns)); err != nil {
			return nil, err
		}
	}
	return res, nil
}

// run measures every cell once: [row][query][cold, hot].
func (m *meter) run(env benchkit.Env, bin string, cache cacheConfig, direct, viaLink Endpoint, k, nRuns int) ([][][2]cell, error) {
	cells := make([][][2]cell, len(rows))
	for i := range cells {
		cells[i] = make([][2]cell, len(queries))
	}
	var err error
	for qi, q := range queries {
		env.Logf("run %d/%d, %s: row 1 (S3 directly)", k+1, nRuns, q)
		if cells[0][qi], err = m.session(viaLink, chOpts{}, q, nil, nil); err != nil {
			return nil, fmt.Errorf("row 1, %s: %w", q, err)
		}
		env.Logf("run %d/%d, %s: row 2 (ClickHouse filesystem cache)", k+1, nRuns, q)
		if cells[1][qi], err = m.session(viaLink, chOpts{FSCache: true}, q, nil, nil); err != nil {
			return nil, fmt.Errorf("row 2, %s: %w", q, err)
		}
		dir := filepath.Join(env.WorkDir, fmt.Sprintf("cache-%s-%d", q, k+1))
		g2, err := m.distcache(env, bin, dir, cache, viaLink, q, qi, cells, m.chPageBytes)
		if err != nil {
			return nil, err
		}
		m.g2Start[q] = append(m.g2Start[q], g2)
		env.Logf("run %d/%d, %s: row 6 (reference: MinIO without the link)", k+1, nRuns, q)
		if cells[refRow][qi], err = m.session(direct, chOpts{}, q, nil, nil); err != nil {
			return nil, fmt.Errorf("row 6, %s: %w", q, err)
		}
		for h := range cells[refRow][qi] {
			// Its requests bypass the link and its counter: ClickHouse's
			// own count is what reached MinIO.
			c := &cells[refRow][qi][h]
			c.S3.GETs, c.S3.GETBytes = c.CHGets, c.CHBytes
		}
		for ri := range rows {
			if ri == chPageRow && m.chPageBytes == 0 {
				continue // not measured
			}
			env.Logf("run %d/%d, %s: row %d: cold %.2fs (%d S3 GETs), hot %.2fs (%d S3 GETs)", k+1, nRuns, q, ri+1,
				cells[ri][qi][0].Seconds, cells[ri][qi][0].S3.GETs, cells[ri][qi][1].Seconds, cells[ri][qi][1].S3.GETs)
		}
	}
	return cells, nil
}

// distcache measures rows 3-5 of one query on a fresh cache (empty nodes),
// so the query's own cold and warm states are measured, not what the other
// query left behind; and row 7 after them when chPage, ClickHouse's page
// cache size, is not 0. It returns what G2 took to start.
func (m *meter) distcache(env benchkit.Env, bin, dir string, cfg cacheConfig, s3 Endpoint, q string, qi int, cells [][][2]cell, chPage int64) (g2Start startCost, err error) {
	cl, err := startCluster(m.ctx, bin, dir, cfg, s3)
	if err != nil {
		return g2Start, err
	}
	defer cl.stop()
	g1, err := cl.startGateway(m.ctx, bucket)
	if err != nil {
		return g2Start, err
	}
	env.Logf("%s: row 3 (distcache cold, gateway G1)", q)
	cells[2][qi], err = m.session(g1.endpoint, chOpts{}, q, g1, cl)
	g1.Stop()
	if err != nil {
		return g2Start, fmt.Errorf("row 3, %s: %w\ngateway log:\n%s", q, err, g1.LogTail())
	}
	g2, err := cl.startGateway(m.ctx, bucket)
	if err != nil {
		return g2Start, err
	}
	defer g2.Stop()
	env.Logf("%s: G2 ready in %.2fs (%.2f CPU-s)", q, g2.start.Seconds, g2.start.CPUSeconds)
	env.Logf("%s: row 4 (distcache warm, fresh gateway G2)", q)
	if cells[3][qi], err = m.session(g2.endpoint, chOpts{}, q, g2, cl); err != nil {
		return g2Start, fmt.Errorf("row 4, %s: %w\ngateway log:\n%s", q, err, g2.LogTail())
	}
	env.Logf("%s: row 5 (distcache, G2's RAM warm)", q)
	if cells[4][qi], err = m.session(g2.endpoint, chOpts{}, q, g2, cl); err != nil {
		return g2Start, fmt.Errorf("row 5, %s: %w\ngateway log:\n%s", q, err, g2.LogTail())
	}
	if chPage > 0 {
		env.Logf("%s: row 7 (distcache, G2's RAM warm, ClickHouse's page cache)", q)
		if cells[chPageRow][qi], err = m.session(g2.endpoint, chOpts{PageCache: chPage}, q, g2, cl); err != nil {
			return g2Start, fmt.Errorf("row 7, %s: %w\ngateway log:\n%s", q, err, g2.LogTail())
		}
	}
	return g2.start, nil
}

// meter runs sessions and takes counter snapshots around each run.
type meter struct {
	ctx     context.Context
	ch      *chdb
	link    *Link
	minio   *minioproc.Server
	checked map[string]string
	g2Start map[string][]startCost
	// chPageBytes is ClickHouse's page cache size for row 7; 0 where the
	// engine has no such cache (row 7 is not measured).
	chPageBytes int64
}

type snapshot struct {
	s3      Counts
	gateway benchkit.Metrics
	nodes   benchkit.Metrics
	cpu     cpuSplit
}

// cpu reads the CPU time of the processes of a run so far.
func (m *meter) cpu(chPid int, gw *gatewayProc, cl *cluster) cpuSplit {
	secs := func(pid int) float64 { return benchkit.PidCPU(pid).Seconds() }
	c := cpuSplit{ClickHouse: secs(chPid), S3: secs(m.minio.Pid()) + benchkit.ProcessCPU().Seconds()}
	if gw != nil {
		c.Gateway = secs(gw.Pid())
	}
	if cl != nil {
		for _, p := range cl.nodes {
			c.Nodes += secs(p.Pid())
		}
	}
	return c
}

func (m *meter) snap(gw, nodes []string) (snapshot, error) {
	s := snapshot{s3: m.link.Counts()}
	var err error
	if len(gw) > 0 {
		if s.gateway, err = benchkit.Scrape(m.ctx, gw...); err != nil {
			return s, err
		}
	}
	if len(nodes) > 0 {
		if s.nodes, err = benchkit.Scrape(m.ctx, nodes...); err != nil {
			return s, err
		}
	}
	return s, nil
}

// session is one fresh ClickHouse process on ep: the query cold, then hot,
// then (scattered) its checksum, which must equal every other row's.
func (m *meter) session(ep Endpoint, opts chOpts, q string, g *gatewayProc, cl *cluster) (out [2]cell, err error) {
	var gw, nodes []string
	if g != nil {
		gw = []string{g.metrics}
	}
	if cl != nil {
		nodes = cl.nodeStats
	}
	s, err := m.ch.serve(m.ctx, ep, opts)
	if err != nil {
		return out, err
	}
	defer func() {
		if cerr := s.close(); err == nil {
			err = cerr
		}
	}()
	for i := range out {
		before, err := m.snap(gw, nodes)
		if err != nil {
			return out, err
		}
		before.cpu = m.cpu(s.cmd.Process.Pid, g, cl)
		r, err := s.run(q)
		if err != nil {
			return out, err
		}
		cpuAfter := m.cpu(s.cmd.Process.Pid, g, cl)
		after, err := m.snap(gw, nodes)
		if err != nil {
			return out, err
		}
		after.cpu = cpuAfter
		c := cell{Seconds: r.Seconds, S3: after.s3.Sub(before.s3), CPU: after.cpu.sub(before.cpu),
			CHGets: r.Events["S3GetObject"], CHBytes: r.Events["ReadBufferFromS3Bytes"],
			CHCacheBytes: r.Events["CachedReadBufferReadFromCacheBytes"],
			CHPageHits:   r.Events["PageCacheHits"], CHPageMisses: r.Events["PageCacheMisses"], CHPageBytes: r.Events["PageCacheReadBytes"]}
		if gw != nil {
			d := after.gateway.Sub(before.gateway)
			c.PageHits = d.Sum("distcache_client_page_cache_requests_total", `result="hit"`)
			c.PageMisses = d.Sum("distcache_client_page_cache_requests_total", `result="miss"`)
			c.BGFills = d.Sum("distcache_client_page_fills_total", `mode="background"`)
			c.AheadFills = d.Sum("distcache_client_page_fills_total", `mode="ahead"`)
			c.FreshPages = d.Sum("distcache_client_page_memory_exhausted_total")
			c.GatewaySent = d.Sum("distcache_gateway_response_bytes_total")
			c.ReadBufferWaits = d.Sum("distcache_gateway_read_buffer_waits_total")
		}
		if nodes != nil {
			d := after.nodes.Sub(before.nodes)
			c.NodeRAM = d.Sum("distcache_chunk_reads_total", `result="hit_ram"`)
			c.NodeDisk = d.Sum("distcache_chunk_reads_total", `result="hit_disk"`)
			c.NodeMisses = d.Sum("distcache_chunk_reads_total", `result="miss"`)
			c.NodeSent = d.Sum("distcache_response_bytes_total")
		}
		if q == "full" {
			c.Answer = fmt.Sprint(r.Rows)
			if err := m.check(q, c.Answer); err != nil {
				return out, err
			}
		}
		out[i] = c
	}
	if q != "full" {
		r, err := s.verify(q)
		if err != nil {
			return out, err
		}
		a := fmt.Sprint(r.Rows)
		out[0].Answer, out[1].Answer = a, a
		if err := m.check(q, a); err != nil {
			return out, err
		}
	}
	return out, nil
}

// check requires every run of q to give the same answer.
func (m *meter) check(q, answer string) error {
	if want, ok := m.checked[q]; ok && want != answer {
		return fmt.Errorf("%s: %w: %s, earlier runs %s", q, errAnswer, answer, want)
	}
	m.checked[q] = answer
	return nil
}

func mb(b int64) float64 { return float64(b) / 1e6 }
