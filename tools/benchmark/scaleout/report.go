package scaleout

import (
	"fmt"
	"path/filepath"
	"strings"
	"time"

	"github.com/distcache/distcache/internal/client"
	"github.com/distcache/distcache/tools/benchmark/benchkit"
)

// Plot files under Env.ImgDir.
const (
	throughputPNG = "b3-scaleout-throughput.png"
	s3GetsPNG     = "b3-scaleout-s3-gets.png"
)

func render(res results, env benchkit.Env) (benchkit.Section, error) {
	cfg, h, c := res.cfg, res.handoff, res.cold
	if err := plots(res, env.ImgDir); err != nil {
		return benchkit.Section{}, err
	}
	mib := func(n int64) string { return fmt.Sprintf("%.1f MiB", float64(n)/(1<<20)) }
	mb := func(v float64) string { return fmt.Sprintf("%.0f MB/s", v) }
	secs := func(d time.Duration) string { return fmt.Sprintf("%.2f s", d.Seconds()) }
	both := func(f func(caseResult) string) []string { return []string{f(h), f(c)} }
	row := func(name string, f func(caseResult) string) []string { return append([]string{name}, both(f)...) }

	var b strings.Builder
	fmt.Fprintf(&b, "A warm cache of 3 nodes grows to 4 while %d readers keep reading the whole dataset in a loop through one "+
		"ring-aware Go client (`internal/client`, page cache off, %d chunk requests in flight per read), checking every byte. "+
		"The change: a 4th node starts and a new ring epoch is given to every node at once (as the ring ConfigMap does); the "+
		"client learns the epoch from its next answer. Once the client routes by the new ring, the whole dataset is read again "+
		"(the re-read); reading goes on for at least %s after the change and %s after the re-read. The same growth runs twice on fresh nodes: **with warm handoff** "+
		"(the ring document names the previous epoch's members, as the operator publishes it: a new owner that misses asks the "+
		"chunk's previous owner before S3) and **without** (no previous ring: a new owner that misses reads S3).\n\n",
		cfg.readers, client.DefaultParallelism, cfg.after, cfg.tail)
	fmt.Fprintf(&b, "Each run has its own MinIO on loopback behind a counting proxy, so S3 GETs and bytes are counted at the S3 side; "+
		"the nodes are real `node.Server`s over mTLS with RAM and badger tiers, assembled as `cachenode serve` assembles them "+
		"(`internal/embed`), each with its own S3 backend at `cachenode serve`'s defaults.\n\n")
	b.WriteString(benchkit.Table{Header: []string{"setup", ""}, Rows: [][]string{
		{"dataset", fmt.Sprintf("%d objects × %s = %s", cfg.objects, size(cfg.objectSize), size(int64(cfg.objects)*cfg.objectSize))},
		{"chunk size", size(cfg.chunkSize)},
		{"chunks", fmt.Sprint(h.Chunks)},
		{"per node: RAM tier / disk bound", fmt.Sprintf("%s / %s", size(cfg.ramBytes), size(cfg.diskBytes))},
		{"S3", fmt.Sprintf("MinIO on loopback behind the counting proxy, which waits %s before passing on each GET and HEAD (S3's first-byte latency)", cfg.s3Latency)},
		{"readers", fmt.Sprint(cfg.readers)},
		{"throughput buckets", cfg.bucket.String()},
	}}.Markdown())
	b.WriteString("\nReproduce: `make bench BENCH_PARTS=b3` (`go run ./tools/benchmark -parts b3`).\n\n")

	b.WriteString(benchkit.Table{Header: []string{"", "with warm handoff", "without"}, Rows: [][]string{
		row("S3 GETs during the re-read", func(r caseResult) string { return fmt.Sprint(r.Reread.GETs) }),
		row("bytes from S3 during the re-read", func(r caseResult) string { return mib(r.Reread.GETBytes) }),
		row("S3 HEADs during the re-read", func(r caseResult) string { return fmt.Sprint(r.Reread.HEADs) }),
		row("chunks handed over by their previous owner", func(r caseResult) string { return fmt.Sprint(r.HandedOff) }),
		row("handoff probes the previous owner missed", func(r caseResult) string { return fmt.Sprint(r.HandoffMisses) }),
		row("S3 GETs after the re-read, to the end", func(r caseResult) string { return fmt.Sprint(r.Rest.GETs) }),
		row("S3 GETs warming / in the steady phase before the change", func(r caseResult) string {
			return fmt.Sprintf("%d / %d", r.Warm.GETs, r.Steady.GETs)
		}),
		row("client on the new ring after", func(r caseResult) string { return secs(r.RefreshTook) }),
		row("whole dataset re-read after", func(r caseResult) string { return secs(r.RereadTook) }),
		row("read throughput before the change (mean)", func(r caseResult) string { return mb(r.BeforeMBps) }),
		row("read throughput from the change to the end of the re-read (mean)", func(r caseResult) string { return mb(r.RereadMBps) }),
		row("lowest "+cfg.bucket.String()+" bucket after the change", func(r caseResult) string { return mb(r.MinAfterMBps) }),
		row("reads (failed, wrong bytes)", func(r caseResult) string { return fmt.Sprintf("%d (%d, %d)", r.Reads, r.Failed, r.Wrong) }),
	}}.Markdown())

	b.WriteString("\nPlacement of the dataset's chunks, ring before against ring after (rendezvous hashing; the same data, " +
		"so the same placement, in both runs):\n\n")
	b.WriteString(benchkit.Table{Header: []string{"", "chunks", "share"}, Rows: [][]string{
		{"owner changed (measured)", fmt.Sprint(h.Moved), benchkit.Percent(float64(h.Moved), float64(h.Chunks))},
		{"of them to the new node", fmt.Sprint(h.MovedToNew), benchkit.Percent(float64(h.MovedToNew), float64(h.Chunks))},
		{"theory for 3 → 4 nodes: 1/4", fmt.Sprintf("%.1f", float64(h.Chunks)/4), "25%"},
	}}.Markdown())

	fmt.Fprintf(&b, "\n![read throughput across the change](img/%s)\n\n![S3 GETs across the change](img/%s)\n\n", throughputPNG, s3GetsPNG)
	b.WriteString("**Reading it.** " + reading(res) + "\n")
	return benchkit.Section{Title: "B3 — scale-out", Markdown: b.String()}, nil
}

// size is n in the largest binary unit that divides it.
func size(n int64) string {
	for _, u := range []struct {
		shift uint
		name  string
	}{{30, "GiB"}, {20, "MiB"}, {10, "KiB"}} {
		if n >= 1<<u.shift && n%(1<<u.shift) == 0 {
			return fmt.Sprintf("%d %s", n>>u.shift, u.name)
		}
	}
	return fmt.Sprintf("%d B", n)
}

// reading is the commentary, computed from the numbers.
func reading(res results) string {
	h, c := res.handoff, res.cold
	var s []string
	s = append(s, fmt.Sprintf("Growing 3 → 4 nodes changed the owner of %d of %d chunks (%s; theory 25%%), %d of them to the new node.",
		h.Moved, h.Chunks, benchkit.Percent(float64(h.Moved), float64(h.Chunks)), h.MovedToNew))
	if h.MovedToNew == h.Moved {
		s = append(s, "No chunk moved between the old nodes, as rendezvous hashing promises.")
	} else {
		s = append(s, fmt.Sprintf("%d chunks moved between old nodes, which rendezvous hashing should never do.", h.Moved-h.MovedToNew))
	}
	switch {
	case h.Reread.GETs == 0:
		s = append(s, fmt.Sprintf("Without warm handoff the re-read made %d S3 GETs (%.1f MiB); with it, none: the new node took %.0f chunks from their previous owners.",
			c.Reread.GETs, float64(c.Reread.GETBytes)/(1<<20), h.HandedOff))
	default:
		s = append(s, fmt.Sprintf("Without warm handoff the re-read made %d S3 GETs (%.1f MiB), with it %d (%.1f MiB, %s fewer); the new node took %.0f chunks from their previous owners.",
			c.Reread.GETs, float64(c.Reread.GETBytes)/(1<<20), h.Reread.GETs, float64(h.Reread.GETBytes)/(1<<20),
			benchkit.Ratio(float64(c.Reread.GETs), float64(h.Reread.GETs)), h.HandedOff))
	}
	switch {
	case c.Reread.GETs == int64(c.Moved):
		s = append(s, fmt.Sprintf("Without it, one GET per moved chunk (%d): the new owner fetched each once.", c.Moved))
	case c.Reread.GETs > int64(c.Moved):
		s = append(s, fmt.Sprintf("Without it, %d GETs more than the %d moved chunks (retries or chunks fetched twice).", c.Reread.GETs-int64(c.Moved), c.Moved))
	}
	s = append(s, fmt.Sprintf("Read throughput from the change to the end of the re-read was %.0f MB/s with handoff and %.0f MB/s without "+
		"(%s and %s of the rate before the change); the lowest %s bucket after the change was %.0f and %.0f MB/s.",
		h.RereadMBps, c.RereadMBps, benchkit.Ratio(h.RereadMBps, h.BeforeMBps), benchkit.Ratio(c.RereadMBps, c.BeforeMBps),
		res.cfg.bucket, h.MinAfterMBps, c.MinAfterMBps))
	switch r := h.RereadMBps / c.RereadMBps; {
	case c.RereadMBps == 0 || h.RereadMBps == 0:
	case r > 1.1:
		s = append(s, fmt.Sprintf("Handoff made the re-read %s faster.", benchkit.Ratio(h.RereadMBps, c.RereadMBps)))
	case r < 0.9:
		s = append(s, fmt.Sprintf("The re-read was %s as fast with handoff:", benchkit.Ratio(h.RereadMBps, c.RereadMBps))+
			" the previous owner is a TLS hop away on the same 2 cores, and S3 here is only the injected latency away.")
	default:
		s = append(s, "The re-read ran at about the same speed either way: with few moved chunks spread over many readers, "+
			"the injected S3 latency of the misses hides behind the reads of chunks that did not move; handoff saves S3 requests and bytes.")
	}
	if failed := h.Failed + c.Failed + h.Wrong + c.Wrong; failed == 0 {
		s = append(s, fmt.Sprintf("All %d reads succeeded and were byte-exact.", h.Reads+c.Reads))
	} else {
		s = append(s, fmt.Sprintf("%d reads failed and %d returned wrong bytes (first: %s).", h.Failed+c.Failed, h.Wrong+c.Wrong, firstError(h, c)))
	}
	s = append(s, "Counts are exact; MB/s depend on the machine and its load, compare the two columns.")
	return strings.Join(s, " ")
}

func firstError(rs ...caseResult) string {
	for _, r := range rs {
		if r.FirstError != "" {
			return r.FirstError
		}
	}
	return "none recorded"
}

func plots(res results, dir string) error {
	series := func(f func(point) float64) []benchkit.Series {
		var out []benchkit.Series
		for _, r := range []caseResult{res.handoff, res.cold} {
			s := benchkit.Series{Name: map[bool]string{true: "with warm handoff", false: "without"}[r.Handoff]}
			for _, p := range r.Series {
				s.X = append(s.X, p.At)
				s.Y = append(s.Y, f(p))
			}
			out = append(out, s)
		}
		return out
	}
	if err := benchkit.LinePlot(filepath.Join(dir, throughputPNG), "Read throughput, 3 → 4 nodes at t = 0",
		"seconds since the ring change", "MB/s ("+res.cfg.bucket.String()+" buckets)", series(func(p point) float64 { return p.MBps })); err != nil {
		return err
	}
	return benchkit.LinePlot(filepath.Join(dir, s3GetsPNG), "S3 GETs, 3 → 4 nodes at t = 0",
		"seconds since the ring change", "S3 GETs since the warm cache's steady phase", series(func(p point) float64 { return p.Gets }))
}
