package writepath

import (
	"fmt"
	"maps"
	"runtime"
	"slices"
	"strings"
	"time"

	"github.com/distcache/distcache/tools/benchmark/benchkit"
)

// report is what a run measured: every row's columns, rounds pooled.
type report struct {
	cfg     config
	columns []column
	nodes   int
	cells   map[string]*sample // row id + "/" + column id
	// The ClickHouse row: by column id; the fingerprint every ClickHouse
	// read, and the engine's versions.
	ch                  map[string]*chSample
	chAnswer, chVersion string
}

func (r *report) cell(row row, col string) *sample { return r.cells[row.id+"/"+col] }

// Goals of issue #24 for write-through.
const (
	goalSmallP50 = 1.1 // small PUTs' p50 through the gateway, at most this times S3's
	goalBigMBps  = 0.9 // 16 MiB PUTs' throughput through the gateway, at least this share of S3's
)

// section is the part's section of the report.
func (r *report) section() benchkit.Section {
	return benchkit.Section{Title: "B5 — write-through", Markdown: r.markdown()}
}

func (r *report) markdown() string {
	var b strings.Builder
	p := func(format string, args ...any) { fmt.Fprintf(&b, format, args...) }
	c := r.cfg
	p("Writes through the cache against writes straight to S3: the same aws-sdk-go-v2 client (path-style, SigV4, ")
	p("`PutObject` with a seekable body of known length, the SDK's defaults otherwise: it signs the payload's SHA-256 over plain HTTP ")
	p("and sends `Expect: 100-continue` above 2 MiB) PUTs fresh keys, each client one PUT at a time, ")
	p("for %s per cell and round, %d round(s) pooled; the first PUT of every client in a cell only warms its connections. ", c.cell, c.rounds)
	p("The two columns of a row run back to back, S3 first in odd rounds, the gateway first in even ones. ")
	p("After each cell the objects are compared with what was PUT (%s) in MinIO directly; ",
		map[bool]string{true: "all of them", false: "each client's last"}[c.verifyAll])
	p("after each row they are removed and MinIO gets %s to finish its work on them.\n\n", c.settle)
	p("```sh\nmake bench BENCH_PARTS=b5        # this section (tools/benchmark/writepath)\n")
	p("BENCH_PROFILE_DIR=/tmp/b5 BENCH_B5_ROWS=big make bench BENCH_PARTS=b5   # CPU and block profiles of the gateway cells\n")
	p("BENCH_B5_ROWS=clickhouse BENCH_B5_CH_ROWS=100000 BENCH_B5_CH_BATCHES=10 make bench BENCH_PARTS=b5   # only ClickHouse's INSERTs, other sizes\n```\n\n")
	if len(c.knobs) > 0 {
		p("**This run was narrowed with %s.**\n\n", strings.Join(c.knobs, ", "))
	}
	p("- **S3** is MinIO on this machine behind B2's link (toxiproxy, embedded): every request reaches MinIO %s later",
		c.link.Latency)
	if c.link.Bandwidth > 0 {
		p(", answers at most %.0f MB/s per connection", float64(c.link.Bandwidth)/1e6)
	}
	p(". A counting proxy behind the link counts what reaches S3.\n")
	p("- **S3 directly**: the client against the link, with MinIO's credentials.\n")
	p("- **through the gateway**: the client against an in-process gateway in its default configuration (plain HTTP on loopback, ")
	p("256 MiB page cache of 1 MiB pages), in front of %d in-process cache node(s) in one ring over mTLS, in `cachenode serve`'s ", r.nodes)
	p("default TTL mode with its default write cache (64 MiB per upload) and S3 settings, %s chunks, reading and writing S3 through the same link. ",
		benchkit.Size(c.chunkSize))
	p("A PUT is answered once S3 has the object; the nodes keep its chunks and metadata, so the GET right after it is a hit.\n\n")

	if len(c.rows) > 0 {
		r.putTables(&b)
	}
	if reading := r.reading(); reading != "" {
		b.WriteString("\n**Reading it.** " + reading + "\n")
	}
	b.WriteString(r.clickHouse())
	return b.String()
}

// putTables are the PUT rows' tables and goals.
func (r *report) putTables(b *strings.Builder) {
	p := func(format string, args ...any) { fmt.Fprintf(b, format, args...) }
	c := r.cfg
	t := benchkit.Table{Header: []string{"write", "S3 directly", "through the gateway", "gateway / S3"}}
	for _, row := range c.rows {
		s3, gw := r.cell(row, "s3"), r.cell(row, "gateway")
		if s3 == nil || gw == nil {
			continue
		}
		ratio := fmt.Sprintf("p50 %s, p99 %s", benchkit.Ratio(ms(gw.lat.Quantile(0.5)), ms(s3.lat.Quantile(0.5))),
			benchkit.Ratio(ms(gw.lat.Quantile(0.99)), ms(s3.lat.Quantile(0.99))))
		if !row.getAfter {
			ratio += ", throughput " + benchkit.Ratio(gw.mbps(), s3.mbps())
		}
		t.Rows = append(t.Rows, []string{row.name(), r.figures(row, s3), r.figures(row, gw), ratio})
	}
	b.WriteString(t.Markdown())
	b.WriteString("\n")

	p("What each operation cost (per PUT, or per GET on the last row): the requests that reached S3, and the CPU time of this process ")
	p("(clients, gateway, nodes) and MinIO together.\n\n")
	t = benchkit.Table{Header: []string{"write", "column", "S3 PUT/POST", "S3 HEAD", "S3 GET", "CPU ms"}}
	for _, row := range c.rows {
		for _, col := range r.columns {
			s := r.cell(row, col.id)
			if s == nil {
				continue
			}
			t.Rows = append(t.Rows, []string{row.name(), col.name, fmt.Sprintf("%.2f", s.perOp(float64(s.s3.Others))),
				fmt.Sprintf("%.2f", s.perOp(float64(s.s3.HEADs))), fmt.Sprintf("%.2f", s.perOp(float64(s.s3.GETs))),
				fmt.Sprintf("%.1f", s.perOp(ms(s.cpu)))})
		}
	}
	b.WriteString(t.Markdown())
	b.WriteString("\n")

	p("Where a PUT's time goes through the gateway (means): the client's whole PUT, the gateway's PutObject from arrival to answer ")
	p("(its duration histogram), the node's write-through (its PUT handler, timed around it), and in it the upload to S3 ")
	p("(all of its requests, the node's S3 duration histogram); the mean of a PUT straight to S3 for comparison.\n\n")
	t = benchkit.Table{Header: []string{"write", "S3 directly", "client", "gateway", "node", "upload to S3"}}
	for _, row := range c.rows {
		s3, gw := r.cell(row, "s3"), r.cell(row, "gateway")
		if row.getAfter || s3 == nil || gw == nil {
			continue
		}
		t.Rows = append(t.Rows, []string{row.name(), benchkit.Millis(s3.mean()), benchkit.Millis(gw.mean()),
			benchkit.Millis(gw.hops.gateway.mean()), benchkit.Millis(gw.hops.node.mean()), benchkit.Millis(gw.hops.upload.mean())})
	}
	b.WriteString(t.Markdown())
	b.WriteString("\n")
	b.WriteString(r.goals())
	b.WriteString(r.writeBack())
}

// reading explains the rows that miss their goal from the figures.
func (r *report) reading() string {
	var parts []string
	for _, row := range r.cfg.rows {
		s3, gw := r.cell(row, "s3"), r.cell(row, "gateway")
		if s3 == nil || gw == nil || s3.ops == 0 || gw.ops == 0 {
			continue
		}
		switch {
		case row.getAfter && gw.s3.GETs > 0:
			parts = append(parts, fmt.Sprintf("%d of the %d GETs right after their PUT read S3 (at p99: %s): a write-through "+
				"hands the chunks that other members own to them in the background (peer POSTs started as the PUT is answered), "+
				"and a GET that reaches the chunk's owner before its chunk misses.",
				gw.s3.GETs, gw.ops, benchkit.Millis(gw.lat.Quantile(0.99))))
		case !row.getAfter && row.size >= 1<<20 && gw.mbps() < goalBigMBps*s3.mbps():
			cpuS3, cpuGW := s3.perOp(ms(s3.cpu)), gw.perOp(ms(gw.cpu))
			text := fmt.Sprintf("A %s PUT through the gateway cost %.0f ms of CPU (this process and MinIO) against %.0f "+
				"straight to S3 (%.1fx): the gateway verifies the body's SHA-256 and passes it over TLS to a node, which sends it on "+
				"to S3 and keeps it (its disk tier; the chunks other members own go to them over TLS).",
				benchkit.Size(row.size), cpuGW, cpuS3, cpuGW/cpuS3)
			if tput, inverse := gw.mbps()/s3.mbps(), cpuS3/cpuGW; tput < inverse*1.15 && tput > inverse*0.85 {
				text += fmt.Sprintf(" With %d writers on this machine's %d cores the CPU is what runs out: the gateway's throughput "+
					"was %.2fx S3's, about the inverse of its CPU per PUT (1/%.1f = %.2f).", row.clients, runtime.NumCPU(),
					tput, cpuGW/cpuS3, inverse)
			}
			parts = append(parts, text)
		}
	}
	return strings.Join(parts, " ")
}

// figures is one cell of the main table.
func (r *report) figures(row row, s *sample) string {
	f := fmt.Sprintf("p50 %s, p99 %s", benchkit.Millis(s.lat.Quantile(0.5)), benchkit.Millis(s.lat.Quantile(0.99)))
	if row.getAfter {
		return f + fmt.Sprintf("; %.0f GETs/s", s.perSecond())
	}
	return f + fmt.Sprintf("; %.1f PUTs/s, %.1f MB/s", s.perSecond(), s.mbps())
}

// Goal of issue #27 for write-back.
const goalWriteBackSmall = 10.0 // small PUTs' p50 at least this many times lower than S3's

// writeBack is the write-back part: the same rows through the gateway with
// the keys under a WriteBack prefix (acknowledged once 1 or 2 nodes keep
// them on disk), and how long S3 took to have them all.
func (r *report) writeBack() string {
	var b strings.Builder
	t := benchkit.Table{Header: []string{"write", "S3 directly", "write-through", "write-back, 1 replica", "write-back, 2 replicas", "S3 / write-back (2)", "S3 had them all after"}}
	var goals []string
	for _, row := range r.cfg.rows {
		s3, wt, wb1, wb2 := r.cell(row, "s3"), r.cell(row, "gateway"), r.cell(row, "writeback1"), r.cell(row, "writeback2")
		if s3 == nil || wt == nil || wb1 == nil || wb2 == nil {
			continue
		}
		ratio := ms(s3.lat.Quantile(0.5)) / ms(wb2.lat.Quantile(0.5))
		t.Rows = append(t.Rows, []string{row.name(), r.figures(row, s3), r.figures(row, wt), r.figures(row, wb1), r.figures(row, wb2),
			fmt.Sprintf("p50 %.1fx", ratio), fmt.Sprintf("%s / %s", benchkit.Millis(wb1.catchUp), benchkit.Millis(wb2.catchUp))})
		if !row.getAfter && row.size < 1<<20 {
			verdict := "**not met**"
			if ratio >= goalWriteBackSmall {
				verdict = "**met**"
			}
			goal := fmt.Sprintf("- %s: write-back (2 replicas) p50 at least %.0fx lower than S3's: %s (%.1fx).",
				row.name(), goalWriteBackSmall, verdict, ratio)
			if ratio < goalWriteBackSmall {
				goal += cpuBound(row, s3, wb2)
			}
			goals = append(goals, goal)
		}
	}
	if len(t.Rows) == 0 {
		return ""
	}
	b.WriteString("\n### Write-back\n\nThe same rows through the same gateway, the keys under a `WriteBack` prefix (docs/write-back.md): ")
	b.WriteString("a PUT is answered once 1 or 2 cache nodes keep it on disk (fsync'd), and S3 gets it in the background")
	if r.cfg.putIfAbsent {
		b.WriteString(" (a new key of up to 1 MiB in one conditional PUT, If-None-Match: *, as `cachenode serve` sends to AWS S3 by default: `--writeback-put-if-absent`)")
	} else {
		b.WriteString(" (each key after a HEAD: `BENCH_B5_PUT_IF_ABSENT=0`, `--writeback-put-if-absent=false`)")
	}
	b.WriteString(". ")
	b.WriteString("After each cell the bench waits until MinIO holds every object written, compares them as above, and reports how long after ")
	b.WriteString("the cell's end that was (the longest of the rounds, 1 replica / 2 replicas).\n\n")
	b.WriteString(t.Markdown())
	b.WriteString("\n")
	if len(goals) > 0 {
		b.WriteString("**Goals** (issue #27, write-back):\n\n" + strings.Join(goals, "\n") + "\n")
	}
	return b.String()
}

// cpuBound says, for a write-back row that missed its goal, whether the
// goal needs more CPU than this machine has: clients each waiting for
// their PUT at the goal's p50 make clients/p50 PUTs a second, each costing
// the CPU that write-back PUTs cost in the row (clients, gateway, nodes,
// and MinIO for what was persisted meanwhile; less than the whole, the
// persistence left after the cell not counted).
func cpuBound(row row, s3, wb *sample) string {
	target := ms(s3.lat.Quantile(0.5)) / goalWriteBackSmall
	perPut := wb.perOp(ms(wb.cpu))
	if target <= 0 || perPut <= 0 {
		return ""
	}
	rate := float64(row.clients) * 1000 / target
	cores := rate * perPut / 1000
	if cores <= float64(runtime.NumCPU()) {
		return ""
	}
	return fmt.Sprintf(" Out of reach on this machine: %d clients each waiting for its PUT at p50 %.2f ms make about %.0f PUTs/s, "+
		"and at the %.1f ms of CPU a write-back PUT cost in this row (clients, gateway, nodes, MinIO; not counting what was persisted "+
		"after the cell) that is %.1f cores of this machine's %d.", row.clients, target, rate, perPut, cores, runtime.NumCPU())
}

// goals judges the run against issue #24's write-through goals.
func (r *report) goals() string {
	var lines []string
	verdict := func(ok bool) string {
		if ok {
			return "**met**"
		}
		return "**not met**"
	}
	for _, row := range r.cfg.rows {
		s3, gw := r.cell(row, "s3"), r.cell(row, "gateway")
		if s3 == nil || gw == nil {
			continue
		}
		switch {
		case row.getAfter:
			// A write-through may confirm its metadata with one HEAD
			// afterwards; more would be the GETs asking S3.
			hit := gw.s3.GETs == 0 && gw.misses == 0 && gw.s3.HEADs <= gw.s3.Others
			lines = append(lines, fmt.Sprintf("- %s is a hit: %s (%d S3 GETs, %d HEADs for %d PUTs, %.0f chunk misses on the nodes for %d GETs through the gateway; p50 %s against %s from S3).",
				row.name(), verdict(hit), gw.s3.GETs, gw.s3.HEADs, gw.s3.Others, gw.misses, gw.ops,
				benchkit.Millis(gw.lat.Quantile(0.5)), benchkit.Millis(s3.lat.Quantile(0.5))))
		case row.size < 1<<20:
			ratio := ms(gw.lat.Quantile(0.5)) / ms(s3.lat.Quantile(0.5))
			lines = append(lines, fmt.Sprintf("- %s: p50 at most %.1fx S3's: %s (%.2fx).", row.name(), goalSmallP50, verdict(ratio <= goalSmallP50), ratio))
		default:
			ratio := gw.mbps() / s3.mbps()
			lines = append(lines, fmt.Sprintf("- %s: throughput at least %.1fx S3's: %s (%.2fx).", row.name(), goalBigMBps, verdict(ratio >= goalBigMBps), ratio))
		}
	}
	if len(lines) == 0 {
		return ""
	}
	return "**Goals** (issue #24, write-through):\n\n" + strings.Join(lines, "\n") + "\n"
}

func ms(d time.Duration) float64 { return float64(d) / float64(time.Millisecond) }

// Goal of issue #27 for ClickHouse's inserts.
const goalCHInsert = 5.0 // the INSERTs through write-back at least this many times faster than S3 directly

// clickHouse is the ClickHouse row's section.
func (r *report) clickHouse() string {
	ch := r.cfg.ch
	s3 := r.ch["s3"]
	if ch == nil || s3 == nil || len(s3.rounds) == 0 {
		return ""
	}
	var b strings.Builder
	p := func(format string, args ...any) { fmt.Fprintf(&b, format, args...) }
	nRounds := len(s3.rounds)
	p("\n### ClickHouse INSERT of B2's table in batches\n\n")
	p("ClickHouse's engine as B2 runs it (%s, one fresh process per column and round) creates B2's `reviews` table ", r.chVersion)
	p("(its definition: 15 columns, `CODEC(ZSTD(1))`, `ORDER BY (review_date, product_category)`, on an `s3_plain_rewritable` disk) ")
	p("empty under a fresh prefix, and inserts B2's first %d rows (B2's generator) in %d INSERTs of about %d rows, one after the other: ",
		ch.rows, ch.batches, ch.rows/ch.batches)
	p("`INSERT INTO reviews SELECT * FROM` a table in memory, the rows generated beforehand and not timed. ")
	p("The table's background merges are stopped (`SYSTEM STOP MERGES`), so the INSERTs' parts are all it writes. ")
	p("%d round(s), the columns in the PUT rows' order (reversed in even rounds). **S3 directly**: the disk's endpoint is the link, with MinIO's credentials; ", nRounds)
	p("the other columns: the gateway above, the table's keys under an ordinary (write-through) prefix or under the `WriteBack` prefixes of ")
	p("1 and 2 replicas. After its INSERTs, each process answers `SELECT count(), sum(cityHash64(*)) FROM reviews` from its endpoint; ")
	p("meanwhile, for the gateway columns, the bench lists the table's prefix through the gateway (held objects as S3 will list them) and ")
	p("waits until MinIO itself lists exactly that (keys, sizes, ETags): \"S3 had everything after\" is how long after the last INSERT's ")
	p("answer that was, each round. The write-back tables are then read again by another fresh ClickHouse process from MinIO directly. ")
	p("**%s**, last in each round: the same INSERTs into the table on the process's own local disk (ClickHouse's defaults, ", chLocal.name)
	p("which do not fsync parts): no S3 and no cache, the most any cache in front of S3 could give on this machine.\n\n")

	t := benchkit.Table{Header: []string{"column", "INSERTs, one after the other", "per INSERT", "S3 / column",
		"ClickHouse's S3 requests per INSERT", "reached S3 per INSERT: writes / HEAD / GET", "CPU s per round: ClickHouse / the rest", "S3 had everything after"}}
	for _, col := range append(slices.Clone(r.columns), chLocal) {
		s := r.ch[col.id]
		if s == nil || len(s.rounds) == 0 {
			continue
		}
		n := float64(s.inserts.Count())
		rounds := float64(len(s.rounds))
		total := fmt.Sprintf("%.3f s", s.total().Seconds()/rounds)
		if len(s.rounds) > 1 {
			var each []string
			for _, d := range s.rounds {
				each = append(each, fmt.Sprintf("%.3f", d.Seconds()))
			}
			total += " (rounds: " + strings.Join(each, ", ") + " s)"
		}
		reached := s3Requests(s.s3, n)
		if col.replicas > 0 {
			reached += "; until S3 had everything: " + s3Requests(s.s3Caught, n)
		}
		caught := "—"
		if col.replicas > 0 {
			var each []string
			for _, d := range s.catchUp {
				each = append(each, benchkit.Millis(d))
			}
			caught = strings.Join(each, ", ")
		}
		t.Rows = append(t.Rows, []string{col.name, total,
			fmt.Sprintf("p50 %s, p99 %s", benchkit.Millis(s.inserts.Quantile(0.5)), benchkit.Millis(s.inserts.Quantile(0.99))),
			fmt.Sprintf("%.2fx", s3.total().Seconds()/s.total().Seconds()), chRequests(s.events, n), reached,
			fmt.Sprintf("%.2f / %.2f", s.cpuCH.Seconds()/rounds, s.cpu.Seconds()/rounds), caught})
	}
	b.WriteString(t.Markdown())
	p("\nThe gateway's requests during the INSERTs, per INSERT: how many of each S3 operation and their mean time from arrival to answer ")
	p("(its duration histogram); ClickHouse makes some of them at once.\n\n")
	t = benchkit.Table{Header: []string{"column", "requests per INSERT: count × mean"}}
	for _, col := range r.columns {
		s := r.ch[col.id]
		if s == nil || !col.gateway || len(s.ops) == 0 {
			continue
		}
		n := float64(s.inserts.Count())
		var each []string
		for _, op := range slices.Sorted(maps.Keys(s.ops)) {
			h := s.ops[op]
			each = append(each, fmt.Sprintf("%s %.1f × %s", op, float64(h.n)/n, benchkit.Millis(h.mean())))
		}
		t.Rows = append(t.Rows, []string{col.name, strings.Join(each, ", ")})
	}
	b.WriteString(t.Markdown())
	p("\n\"S3 / column\" is S3 directly's INSERT time over the column's, all rounds together. \"Reached S3\": the requests that ")
	p("reached MinIO through the link (PUT, POST and DELETE / HEAD / GET, listings included), during the INSERTs, and for write-back ")
	p("from the first INSERT until S3 had everything (with the bench's one listing through the gateway). CPU: ClickHouse's process, and this process (gateway, nodes, link) with MinIO, during the INSERTs.\n\n")
	if r.chAnswer != "" {
		p("Every ClickHouse process read the same table: %s, right after its INSERTs in every column, and from MinIO directly ", r.chAnswer)
		p("(a fresh process) once S3 had everything of the write-back tables.\n\n")
	}
	if wb := r.ch["writeback2"]; wb != nil && wb.total() > 0 {
		ratio := s3.total().Seconds() / wb.total().Seconds()
		verdict := "**not met**"
		if ratio >= goalCHInsert {
			verdict = "**met**"
		}
		p("**Goal** (issue #27, write-back):\n\n")
		p("- ClickHouse insert at least %.0fx faster than S3 directly: %s (%.2fx, write-back with 2 replicas", goalCHInsert, verdict, ratio)
		if wb1 := r.ch["writeback1"]; wb1 != nil && wb1.total() > 0 {
			p("; with 1 replica %.2fx", s3.total().Seconds()/wb1.total().Seconds())
		}
		p(")")
		if local := r.ch[chLocal.id]; local != nil && local.total() > 0 {
			floor := s3.total().Seconds() / local.total().Seconds()
			p(". On ClickHouse's own local disk, with no S3 at all, the same INSERTs were %.2fx faster than S3 directly", floor)
			if floor < goalCHInsert {
				p(": at these batches the goal is out of reach on this machine for any cache, ClickHouse's own work per INSERT being more than a fifth of S3 directly's time")
			}
		}
		p(".\n")
	}
	if reading := r.chReading(); reading != "" {
		p("\n**Reading it.** %s\n", reading)
	}
	return b.String()
}

// chReading explains the ClickHouse row from its figures: what an INSERT
// waits for straight to S3, and what bounds it through write-back.
func (r *report) chReading() string {
	s3, wb := r.ch["s3"], r.ch["writeback2"]
	if s3 == nil || wb == nil || s3.inserts.Count() == 0 || wb.inserts.Count() == 0 || r.cfg.link.Latency <= 0 {
		return ""
	}
	n := float64(s3.inserts.Count())
	writes := float64(s3.events["S3PutObject"]+s3.events["S3CreateMultipartUpload"]+s3.events["S3UploadPart"]+
		s3.events["S3CompleteMultipartUpload"]) / n
	heads := float64(s3.events["S3HeadObject"]) / n
	nwb := float64(wb.inserts.Count())
	p50 := s3.inserts.Quantile(0.5)
	trips := ms(p50) / ms(r.cfg.link.Latency)
	text := fmt.Sprintf("Each INSERT writes one part: ClickHouse made %.1f S3 writes and %.1f HEADs per INSERT. Straight to S3 an INSERT "+
		"took %s (p50), %.1f times the link's %s", writes, heads, benchkit.Millis(p50), trips, r.cfg.link.Latency)
	if trips < writes+heads {
		text += ": fewer than its requests, so ClickHouse sends some of them at once, and waits for the others one after another."
	} else {
		text += "."
	}
	wall := wb.total().Seconds()
	busy := (wb.cpuCH + wb.cpu).Seconds() / wall / float64(runtime.NumCPU())
	text += fmt.Sprintf(" Through write-back with 2 replicas an INSERT took %s (p50)", benchkit.Millis(wb.inserts.Quantile(0.5)))
	if put := wb.ops["PutObject"]; put.n > 0 {
		text += fmt.Sprintf(", the gateway answering its PutObjects in %s on average (%s written per INSERT, some at once, "+
			"while the nodes persisted the earlier INSERTs' files", benchkit.Millis(put.mean()),
			mib(float64(wb.events["WriteBufferFromS3Bytes"])/nwb))
		if small := r.cell(row{id: "small1"}, "writeback2"); small != nil && small.ops > 0 {
			text += fmt.Sprintf("; a 10 KiB PUT of one client took %s on average in the write-back row above", benchkit.Millis(small.mean()))
		}
		text += ")"
	}
	text += fmt.Sprintf(". During those INSERTs (%.2f s in all) this machine's %d cores were %.0f%% busy: ClickHouse used %.2f CPU-seconds "+
		"(%s per INSERT), the gateway, the nodes (persisting to S3 meanwhile), the link and MinIO %.2f.",
		wall, runtime.NumCPU(), 100*busy, wb.cpuCH.Seconds(), benchkit.Millis(time.Duration(float64(wb.cpuCH)/nwb)), wb.cpu.Seconds())
	if busy >= 0.8 {
		text += " So here the INSERTs through write-back are bound by the CPU of this one machine, on which ClickHouse, the cache and S3 all run, " +
			"more than by the write path's latency."
	}
	return text
}

// chRequests are ClickHouse's own S3 requests per INSERT (its
// ProfileEvents): writes (PutObject, and the requests of multipart
// uploads), HEADs, GETs, listings, and copies and batch deletes when it
// made any.
func chRequests(ev map[string]int64, n float64) string {
	per := func(keys ...string) float64 {
		var v int64
		for _, k := range keys {
			v += ev[k]
		}
		return float64(v) / n
	}
	out := fmt.Sprintf("%.1f writes (%s), %.1f HEAD, %.1f GET, %.1f LIST",
		per("S3PutObject", "S3CreateMultipartUpload", "S3UploadPart", "S3CompleteMultipartUpload"),
		mib(per("WriteBufferFromS3Bytes")), per("S3HeadObject"), per("S3GetObject"), per("S3ListObjects"))
	if v := per("S3CopyObject"); v > 0 {
		out += fmt.Sprintf(", %.1f copy", v)
	}
	if v := per("S3DeleteObjects"); v > 0 {
		out += fmt.Sprintf(", %.1f delete", v)
	}
	return out
}

func mib(b float64) string { return fmt.Sprintf("%.2f MiB", b/(1<<20)) }

// s3Requests are requests that reached S3 per INSERT.
func s3Requests(c benchkit.S3Counts, n float64) string {
	return fmt.Sprintf("%.1f / %.1f / %.1f", float64(c.Others)/n, float64(c.HEADs)/n, float64(c.GETs)/n)
}
