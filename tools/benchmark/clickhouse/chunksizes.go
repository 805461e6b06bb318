package clickhouse

import (
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"

	"github.com/distcache/distcache/internal/gateway"
	"github.com/distcache/distcache/tools/benchmark/benchkit"
)

// The chunk size is every cached chunk's identity, so it cannot change on
// a running cache: its default (DistributedCache spec.chunkSize, cachenode
// --chunk-size) is chosen here, by rows 3-5 of both queries at each size.
var (
	sweepSizes      = []int64{1 << 20, 2 << 20, 4 << 20, 8 << 20}
	sweepSizesQuick = []int64{256 << 10, 4 << 20} // the quick table's column files are a few hundred KiB
)

// maxSweepRuns bounds the sweep's runs (each fills a fresh cache from S3
// for every size and query): the main runs' count, at most this.
const maxSweepRuns = 2

// sweepRows are the rows measured at every chunk size: the distcache ones.
const sweepRows = 3 // rows 3, 4 and 5

// chunkSweep is rows 3-5 of both queries at several chunk sizes.
type chunkSweep struct {
	Sizes []int64       // bytes
	Runs  [][][][2]cell // [run][size*sweepRows + row-3][query][cold, hot]
	// Cells is each cell's median run, Spread its fastest and slowest.
	Cells  [][][2]cell
	Spread [][][2]spread
}

// cell is row ri (2, 3 or 4: rows 3-5) of query qi at size si, hot h.
func (s *chunkSweep) cell(si, ri, qi, h int) cell { return s.Cells[si*sweepRows+ri-2][qi][h] }

// sizesWanted is BENCH_B2_CHUNK_SIZES (MiB, comma-separated; "none" for
// no sweep), else the default sizes.
func sizesWanted(quick bool) ([]int64, error) {
	v := strings.TrimSpace(os.Getenv("BENCH_B2_CHUNK_SIZES"))
	switch v {
	case "":
		if quick {
			return sweepSizesQuick, nil
		}
		return sweepSizes, nil
	case "none":
		return nil, nil
	}
	var sizes []int64
	for _, f := range strings.Split(v, ",") {
		n, err := strconv.ParseInt(strings.TrimSpace(f), 10, 64)
		if err != nil || n < 1 || n > 64 {
			return nil, fmt.Errorf("BENCH_B2_CHUNK_SIZES=%q: want whole MiB from 1 to 64, comma-separated, or none", v)
		}
		sizes = append(sizes, n<<20)
	}
	return sizes, nil
}

// pageBytesWanted is BENCH_B2_PAGE_KIB (KiB; 0 for whole chunks), else
// the gateway's default page.
func pageBytesWanted() (int64, error) {
	v := strings.TrimSpace(os.Getenv("BENCH_B2_PAGE_KIB"))
	if v == "" {
		return gateway.DefaultPageBytes, nil
	}
	n, err := strconv.ParseInt(v, 10, 64)
	if err != nil || n < 0 || n > 64<<10 {
		return 0, fmt.Errorf("BENCH_B2_PAGE_KIB=%q: want whole KiB from 0 (whole chunks) to 65536", v)
	}
	return n << 10, nil
}

// chunkSizes measures rows 3-5 of both queries on a fresh cache of each
// size, nRuns times, the sizes interleaved within each run.
func (m *meter) chunkSizes(env benchkit.Env, bin string, cache cacheConfig, s3 Endpoint, sizes []int64, nRuns int) (*chunkSweep, error) {
	sw := &chunkSweep{Sizes: sizes}
	for k := range nRuns {
		run := make([][][2]cell, len(sizes)*sweepRows)
		for i := range run {
			run[i] = make([][2]cell, len(queries))
		}
		for si, sz := range sizes {
			cfg := cache
			cfg.ChunkSize = sz
			for qi, q := range queries {
				env.Logf("chunk size %s, run %d/%d, %s: rows 3-5", size(sz), k+1, nRuns, q)
				cells := make([][][2]cell, len(rows))
				for i := range cells {
					cells[i] = make([][2]cell, len(queries))
				}
				dir := filepath.Join(env.WorkDir, fmt.Sprintf("chunks-%dKiB-%s-%d", sz>>10, q, k+1))
				if _, err := m.distcache(env, bin, dir, cfg, s3, q, qi, cells, 0); err != nil {
					return nil, fmt.Errorf("chunk size %s: %w", size(sz), err)
				}
				for r := range sweepRows {
					run[si*sweepRows+r][qi] = cells[2+r][qi]
				}
			}
		}
		sw.Runs = append(sw.Runs, run)
	}
	sw.Cells, sw.Spread = medianRuns(sw.Runs)
	return sw, nil
}

// chunkSizeReport is the chapter's "Chunk size" part.
func chunkSizeReport(sw *chunkSweep, def int64) string {
	var b strings.Builder
	p := func(format string, args ...any) { fmt.Fprintf(&b, format, args...) }
	fi, si := indexOf("full"), indexOf("scattered")
	p("**Chunk size.** A chunk's size is part of its identity, so a cache keeps the size it was created with; the default ")
	p("(`spec.chunkSize`, `cachenode --chunk-size`: %s) is chosen here. Rows 3-5 of both queries again, on a fresh cache at each size ", size(def))
	p("(everything else as above: the gateway's pages stay %s where that divides the chunk, whole chunks where it does not, and its read-ahead, `--parallelism` chunks, grows with the chunk)", size(gateway.DefaultPageBytes))
	if n := len(sw.Runs); n > 1 {
		p(", %d runs with the sizes interleaved; each cell is the median run", n)
	}
	p(". S3: GETs and bytes that reached S3 when the nodes filled the cache; nodes: bytes the nodes sent the fresh gateway of row 4.\n\n")
	tab := benchkit.Table{Header: []string{"chunk size", "full: row 3 cold", "S3", "row 4 cold", "nodes", "row 5 cold",
		"scattered: row 3 cold", "S3", "row 4 cold", "nodes", "row 4 hot"}}
	for i, sz := range sw.Sizes {
		c := func(ri, qi, h int) cell { return sw.cell(i, ri, qi, h) }
		tab.Rows = append(tab.Rows, []string{size(sz),
			secs(c(2, fi, 0)), fmt.Sprintf("%d GETs, %s", c(2, fi, 0).S3.GETs, size(c(2, fi, 0).S3.GETBytes)),
			secs(c(3, fi, 0)), size(int64(c(3, fi, 0).NodeSent)), secs(c(4, fi, 0)),
			secs(c(2, si, 0)), fmt.Sprintf("%d GETs, %s", c(2, si, 0).S3.GETs, size(c(2, si, 0).S3.GETBytes)),
			secs(c(3, si, 0)), size(int64(c(3, si, 0).NodeSent)), secs(c(3, si, 1))})
	}
	b.WriteString(tab.Markdown())
	best := func(what string, ri, qi, h int, of func(cell) float64) string {
		bi, worst := 0, 0
		for i := range sw.Sizes {
			if of(sw.cell(i, ri, qi, h)) < of(sw.cell(bi, ri, qi, h)) {
				bi = i
			}
			if of(sw.cell(i, ri, qi, h)) > of(sw.cell(worst, ri, qi, h)) {
				worst = i
			}
		}
		if of(sw.cell(bi, ri, qi, h)) == of(sw.cell(worst, ri, qi, h)) {
			return what + ": the same at every size"
		}
		return fmt.Sprintf("%s: %s", what, size(sw.Sizes[bi]))
	}
	seconds := func(c cell) float64 { return c.Seconds }
	p("\nLeast in each column: %s.\n", strings.Join([]string{
		best("full scan, row 3 cold", 2, fi, 0, seconds),
		best("S3 GETs filling it", 2, fi, 0, func(c cell) float64 { return float64(c.S3.GETs) }),
		best("row 4 cold", 3, fi, 0, seconds),
		best("row 5 cold", 4, fi, 0, seconds),
		best("scattered, row 3 cold", 2, si, 0, seconds),
		best("S3 bytes filling it", 2, si, 0, func(c cell) float64 { return float64(c.S3.GETBytes) }),
		best("row 4 cold", 3, si, 0, seconds),
		best("bytes from the nodes", 3, si, 0, func(c cell) float64 { return c.NodeSent }),
		best("row 4 hot", 3, si, 1, seconds),
	}, "; "))
	return b.String()
}

func secs(c cell) string { return fmt.Sprintf("%.3f s", c.Seconds) }
