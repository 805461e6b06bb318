package clickhouse

import (
	"fmt"
	"strings"

	"github.com/distcache/distcache/tools/benchmark/benchkit"
)

// ClickHouse's userspace page cache keeps blocks of remote files (1 MiB by
// default) in ClickHouse's RAM: the server settings page_cache_max_size
// (and page_cache_min_size) size it, and a query reads a disk without a
// filesystem cache through it with use_page_cache_for_disks_without_file_cache.
// Row 7 puts it on top of the gateway. Whether the engine has the cache at
// all is measured first (probeCHPage): an engine that takes the settings and
// never creates the cache would give a row 7 that is row 5 under another
// name.

// chPageProbe is what ClickHouse's page cache did in one fresh process with
// it on, reading the table from MinIO without the link (the probe is about
// the engine, not the endpoint): the scattered query cold and hot.
type chPageProbe struct {
	Bytes     int64 // the size the process was started with (and its server settings read back)
	Cold, Hot cell
}

// Works reports whether the engine looked anything up in its page cache.
func (p chPageProbe) Works() bool {
	return p.Cold.CHPageHits+p.Cold.CHPageMisses+p.Hot.CHPageHits+p.Hot.CHPageMisses > 0
}

// probeCHPage starts a ClickHouse process with a page cache of size bytes
// on ep and runs the scattered query cold and hot.
func (m *meter) probeCHPage(env benchkit.Env, ep Endpoint, size int64) (chPageProbe, error) {
	p := chPageProbe{Bytes: size}
	q := "scattered"
	out, err := m.session(ep, chOpts{PageCache: size}, q, nil, nil)
	if err != nil {
		return p, fmt.Errorf("ClickHouse page cache probe, %s: %w", q, err)
	}
	p.Cold, p.Hot = out[0], out[1]
	env.Logf("ClickHouse's page cache (%d bytes), %s query: cold %d hits, %d misses, %d bytes from MinIO; hot %d hits, %d misses, %d bytes from MinIO; row 7 measured: %v",
		size, q, p.Cold.CHPageHits, p.Cold.CHPageMisses, p.Cold.CHBytes, p.Hot.CHPageHits, p.Hot.CHPageMisses, p.Hot.CHBytes, p.Works())
	return p, nil
}

// shownRows are the indexes of the rows measured: every row but row 7 where
// the engine has no page cache.
func (r *results) shownRows() []int {
	var out []int
	for ri := range rows {
		if ri != chPageRow || r.CHPage.Works() {
			out = append(out, ri)
		}
	}
	return out
}

// chPageRatios are row 7's ratios within each run: what filling ClickHouse's
// page cache costs a cold run over row 5 cold (row 7 cold / row 5 cold),
// what it gains a hot run over the gateway's RAM (row 5 hot / row 7 hot),
// and where it leaves a hot run against ClickHouse's filesystem cache (row
// 7 hot / row 2 hot).
func (r *results) chPageRatios(qi int) (fill, gain, vsFS ratioRuns) {
	fill = newRatioRuns(r.Runs, func(c [][][2]cell) float64 { return ratio(c[chPageRow][qi][0].Seconds, c[4][qi][0].Seconds) })
	gain = newRatioRuns(r.Runs, func(c [][][2]cell) float64 { return ratio(c[4][qi][1].Seconds, c[chPageRow][qi][1].Seconds) })
	vsFS = newRatioRuns(r.Runs, func(c [][][2]cell) float64 { return ratio(c[chPageRow][qi][1].Seconds, c[1][qi][1].Seconds) })
	return fill, gain, vsFS
}

// chPageRowText is row 7's entry in the chapter's list of rows.
func chPageRowText(r *results) string {
	if !r.CHPage.Works() {
		return "7. distcache with ClickHouse's userspace page cache on top: **not measured**, this engine has no such cache " +
			"(\"ClickHouse's page cache on top\", below).\n"
	}
	return fmt.Sprintf("7. distcache with ClickHouse's userspace page cache on top: a fresh ClickHouse process through G2 again, after row 5, "+
		"started with a page cache of %s (`page_cache_max_size` and `page_cache_min_size`, so it neither grows nor shrinks; the size of G2's, both hold the table) "+
		"and every query run with `use_page_cache_for_disks_without_file_cache = 1`; empty at the cold run.\n", size(r.CHPage.Bytes))
}

// chPageReport is the chapter's "ClickHouse's page cache on top" part.
func chPageReport(r *results) string {
	var b strings.Builder
	p := func(format string, args ...any) { fmt.Fprintf(&b, format, args...) }
	pr := r.CHPage
	fi, si := indexOf("full"), indexOf("scattered")
	c := func(ri, qi, h int) cell { return r.Cells[ri][qi][h] }
	p("**ClickHouse's page cache on top.** ")
	p("Before the runs, a fresh ClickHouse process started with a page cache of %s (its server settings read `page_cache_max_size` back as that) ", size(pr.Bytes))
	p("ran the scattered query cold and hot with `use_page_cache_for_disks_without_file_cache = 1`, on MinIO without the link: ")
	p("%d page cache hits and %d misses cold, %d and %d hot (ProfileEvents `PageCacheHits`, `PageCacheMisses`); %s cold and %s hot read from MinIO. ",
		pr.Cold.CHPageHits, pr.Cold.CHPageMisses, pr.Hot.CHPageHits, pr.Hot.CHPageMisses, size(pr.Cold.CHBytes), size(pr.Hot.CHBytes))
	if !pr.Works() {
		p("**This engine (chdb %s, ClickHouse %s) takes the setting but has no userspace page cache**: nothing was looked up in it", r.Load.Chdb, r.Load.Version)
		if pr.Hot.CHBytes*10 >= pr.Cold.CHBytes*9 {
			p(", and the hot run read from MinIO what the cold run read")
		}
		p(". (chdb runs ClickHouse's `clickhouse-local` server, whose start-up, in chdb's source, creates the mark, uncompressed and index caches ")
		p("from the server settings and no page cache; `clickhouse-server` creates it.) So row 7 was not measured: it would be row 5 with a setting that does nothing. ")
		p("It is measured, in every run beside rows 2 and 5, as soon as the probe finds the cache. ")
		p("The nearest the table comes, hot (the query's second run in one process): from the gateway's RAM (row 5) the full scan took %.3f s and the scattered query %.3f s; ",
			c(4, fi, 1).Seconds, c(4, si, 1).Seconds)
		p("from ClickHouse's own filesystem cache, local files without a network hop (row 2), %.3f s and %.3f s: row 2 hot / row 5 hot = %s and %s. ",
			c(1, fi, 1).Seconds, c(1, si, 1).Seconds, benchkit.Ratio(c(1, fi, 1).Seconds, c(4, fi, 1).Seconds), benchkit.Ratio(c(1, si, 1).Seconds, c(4, si, 1).Seconds))
		p("That is the nearest measured stand-in for what a cache inside the ClickHouse process could do over the gateway's RAM on a repeated query; ")
		p("it is not a measurement of the page cache. ")
		p("Until row 7 is measured, the recommendation on top of distcache stays ClickHouse's defaults, with the RAM for caching given to the gateway's page cache, ")
		p("which every fresh ClickHouse process reads at row 5's speed (docs/clickhouse.md, \"ClickHouse's own caches on top\").")
		return b.String()
	}
	runs := ""
	if n := len(r.Runs); n > 1 {
		runs = fmt.Sprintf(" (median of %d runs, each ratio within one run)", n)
	}
	p("Row 7 measures it on top of the gateway%s:\n\n", runs)
	for _, q := range queries {
		qi := indexOf(q)
		fill, gain, vsFS := r.chPageRatios(qi)
		h := c(chPageRow, qi, 1)
		p("- %s: filling it, row 7 cold / row 5 cold = **%s**; reading from it, row 5 hot / row 7 hot = **%s** ", q, fill, gain)
		p("(row 7 hot: %d of %d page cache lookups hit, %s read from it, %s from the gateway; ClickHouse %.2f CPU-s, the gateway %.2f); ",
			h.CHPageHits, h.CHPageHits+h.CHPageMisses, size(h.CHPageBytes), size(h.CHBytes), h.CPU.ClickHouse, h.CPU.Gateway)
		p("against ClickHouse's filesystem cache, row 7 hot / row 2 hot = **%s**.\n", vsFS)
	}
	return b.String()
}
