// Package hitratio is part B4 of `make bench`: the byte hit ratio of the
// disk tier's eviction policy against plain LRU, on Zipf chunk traces and on
// a Zipf trace mixed with sequential scans of cold data (the ClickHouse
// pattern), at three capacities.
//
// Each trace is replayed against the real store (internal/store: ristretto
// RAM tier + badger in a scratch directory) once with the policy in use
// (S3-FIFO) and once with the previous one (LRU), the way a cache node reads
// through it: GetChunk, and on a miss PutChunk of the bytes S3 would return;
// every hit is checked byte for byte. The same trace also runs through
// byte-capacity simulators (LRU, CLOCK, SLRU, S3-FIFO and the ristretto
// library) with the store's live target as their capacity, and, for the RAM
// tier, at the RAM tier's capacity.
package hitratio

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"time"

	"golang.org/x/sync/errgroup"

	"github.com/distcache/distcache/internal/store"
	"github.com/distcache/distcache/tools/benchmark/benchkit"
)

// config sizes a run.
type config struct {
	chunkSize int64
	disks     []int64 // store DiskBytes, one per capacity
	ramDiv    int64   // RAM tier = DiskBytes / ramDiv
	hotBytes  int64   // Zipf working set
	requests  int     // Zipf requests per trace
	warmup    float64 // share of requests not counted
	scanEvery int     // mixed trace: Zipf requests between scans
	scanBytes int64   // mixed trace: bytes per scan
}

var (
	fullConfig = config{
		chunkSize: 64 << 10,
		disks:     []int64{32 << 20, 64 << 20, 128 << 20},
		ramDiv:    8,
		hotBytes:  512 << 20,
		requests:  24000,
		warmup:    0.25,
		scanEvery: 3000,
		scanBytes: 64 << 20,
	}
	// quickConfig is for the test in `make test`: two capacities, short
	// traces, the same code paths.
	quickConfig = config{
		chunkSize: 64 << 10,
		disks:     []int64{store.MinDiskBytes, 24 << 20},
		ramDiv:    8,
		hotBytes:  96 << 20,
		requests:  800,
		warmup:    0.25,
		scanEvery: 300,
		scanBytes: 16 << 20,
	}
)

func (c config) specs() []traceSpec {
	specs := []traceSpec{
		{name: "zipf-0.8", s: 0.8},
		{name: "zipf-0.9", s: 0.9},
		{name: "zipf-1.0", s: 1.0},
		{name: "mixed", s: 0.9, scanEvery: c.scanEvery, scanBytes: c.scanBytes},
	}
	for i := range specs {
		specs[i].chunkSize, specs[i].hotBytes, specs[i].requests, specs[i].warmup = c.chunkSize, c.hotBytes, c.requests, c.warmup
		specs[i].seed = uint64(i + 1)
	}
	return specs
}

// Simulated policies, in table order.
var simPolicies = []string{"LRU", "CLOCK", "SLRU", "S3-FIFO", "ristretto"}

func newSim(name string, n int, capacity int64) (cache, func(), error) {
	nop := func() {}
	switch name {
	case "LRU":
		return newLRU(n, capacity), nop, nil
	case "CLOCK":
		return newClock(n, capacity), nop, nil
	case "SLRU":
		return newSLRU(n, capacity, 0.8), nop, nil
	case "S3-FIFO":
		return newS3FIFO(n, capacity, 0.1, 1), nop, nil
	case "ristretto":
		// The store's RAM tier configuration (store.Open).
		r, err := newRistretto(capacity, max(1000, capacity/(32<<10)))
		if err != nil {
			return nil, nil, err
		}
		return r, r.close, nil
	}
	return nil, nil, fmt.Errorf("unknown policy %q", name)
}

var storePolicies = []store.Eviction{store.EvictS3FIFO, store.EvictLRU}

// cell is every measurement of one trace at one capacity.
type cell struct {
	disk, live, ram int64
	sim             map[string]result // at the live target
	ramSim          map[string]result // at the RAM tier's capacity
	store           map[store.Eviction]storeRun
}

// measurement is everything a run measured.
type measurement struct {
	cfg    config
	specs  []traceSpec
	traces []*trace
	cells  [][]*cell // [trace][capacity]
	wall   time.Duration
	cpu    time.Duration // of the real-store replays
}

// Run is part B4.
func Run(ctx context.Context, env benchkit.Env) (benchkit.Section, error) {
	m, err := measure(ctx, env)
	if err != nil {
		return benchkit.Section{}, err
	}
	return m.report(env)
}

func measure(ctx context.Context, env benchkit.Env) (*measurement, error) {
	cfg := fullConfig
	if env.Quick {
		cfg = quickConfig
	}
	specs := cfg.specs()
	traces := make([]*trace, len(specs))
	cells := make([][]*cell, len(specs))
	for i, sp := range specs {
		traces[i] = genTrace(sp)
		cells[i] = make([]*cell, len(cfg.disks))
		for j, disk := range cfg.disks {
			live := int64(store.DefaultLiveFraction * float64(disk))
			c := &cell{disk: disk, live: live, ram: disk / cfg.ramDiv, sim: map[string]result{}, ramSim: map[string]result{}, store: map[store.Eviction]storeRun{}}
			cells[i][j] = c
			for _, p := range simPolicies {
				if err := runSim(traces[i], p, c.live, c.sim); err != nil {
					return nil, err
				}
				if p == "LRU" || p == "S3-FIFO" || p == "ristretto" {
					if err := runSim(traces[i], p, c.ram, c.ramSim); err != nil {
						return nil, err
					}
				}
			}
		}
		env.Logf("trace %s: %d reads, %d distinct chunks; simulated", sp.name, len(traces[i].reqs), len(traces[i].chunks))
	}

	// Real store replays, two at a time: each is one reader plus badger's
	// background work, and the results do not depend on speed (the usage
	// gate aside, which the report checks).
	type job struct{ i, j, p int }
	var jobs []job
	for i := range specs {
		for j := range cfg.disks {
			for p := range storePolicies {
				jobs = append(jobs, job{i, j, p})
			}
		}
	}
	runs := make([]storeRun, len(jobs))
	g, gctx := errgroup.WithContext(ctx)
	g.SetLimit(min(2, runtime.NumCPU()))
	cpu0, start := benchkit.ProcessCPU(), time.Now()
	for n, jb := range jobs {
		g.Go(func() error {
			c, pol := cells[jb.i][jb.j], storePolicies[jb.p]
			dir := filepath.Join(env.WorkDir, fmt.Sprintf("%s-%dMiB-%s", specs[jb.i].name, c.disk>>20, pol))
			defer os.RemoveAll(dir)
			r, err := replayStore(gctx, dir, traces[jb.i], cfg.chunkSize, c.disk, c.ram, pol)
			if err != nil {
				return fmt.Errorf("replay %s at %d MiB with %s: %w", specs[jb.i].name, c.disk>>20, pol, err)
			}
			runs[n] = r
			env.Logf("store %s %3d MiB %-6s: byte hit ratio %.3f (%d reads in %s)", specs[jb.i].name, c.disk>>20, pol, r.byteRatio(), len(traces[jb.i].reqs), r.took.Round(time.Millisecond))
			return nil
		})
	}
	if err := g.Wait(); err != nil {
		return nil, err
	}
	m := &measurement{cfg: cfg, specs: specs, traces: traces, cells: cells, wall: time.Since(start), cpu: benchkit.ProcessCPU() - cpu0}
	for n, jb := range jobs {
		cells[jb.i][jb.j].store[storePolicies[jb.p]] = runs[n]
	}
	return m, nil
}

func runSim(t *trace, name string, capacity int64, into map[string]result) error {
	c, done, err := newSim(name, len(t.chunks), capacity)
	if err != nil {
		return err
	}
	defer done()
	into[name] = simulate(t, c)
	return nil
}

func pct(x float64) string { return fmt.Sprintf("%.1f%%", 100*x) }

func mib(b int64) string { return fmt.Sprintf("%d MiB", b>>20) }

func mibf(b float64) string { return fmt.Sprintf("%.1f MiB", b/(1<<20)) }

func (m *measurement) report(env benchkit.Env) (benchkit.Section, error) {
	cfg, specs, traces, cells := m.cfg, m.specs, m.traces, m.cells
	var b strings.Builder
	w := func(format string, args ...any) { fmt.Fprintf(&b, format, args...) }
	s3, lru := store.EvictS3FIFO, store.EvictLRU

	w("How much of what is read the disk tier serves, with the eviction policy in use (S3-FIFO, since this\n")
	w("change) against plain LRU (the policy before it), on the same traces. Reproduce with\n")
	w("`make bench BENCH_PARTS=b4` (`go run ./tools/benchmark -parts b4`).\n\n")
	w("- **Traces.** Objects of log-uniform sizes between a quarter of a chunk and 16 chunks are cut into\n")
	w("  %s chunks (most objects end in a partial chunk, so the byte hit ratio weighs chunks by their\n", kib(cfg.chunkSize))
	w("  length). Reads are Zipf-distributed over the chunks of %s of objects (popularity ranks shuffled\n", mib(cfg.hotBytes))
	w("  over the chunks), at least 4x the largest disk capacity. The mixed trace adds, every %d Zipf\n", cfg.scanEvery)
	w("  reads, a sequential scan of %s of objects never read before (a full scan of cold data). The first\n", mib(cfg.scanBytes))
	w("  %.0f%% of each trace warms the cache and is not counted.\n", 100*cfg.warmup)
	w("- **Real store.** `internal/store` with a badger directory of DiskBytes = the capacity and a RAM\n")
	w("  tier of 1/%d of it, read through like a cache node does: GetChunk, and on a miss PutChunk of the\n", cfg.ramDiv)
	w("  bytes S3 would return; every hit is compared byte for byte. Run once with `Eviction: s3fifo` (in\n")
	w("  use) and once with `Eviction: lru` (the previous store).\n")
	w("- **Simulators.** Byte-capacity caches with the store's accounting (payload bytes; a miss inserts).\n")
	w("  Their capacity is the store's **live target** (LiveFraction %.1f x DiskBytes): the bytes of chunks\n", store.DefaultLiveFraction)
	w("  the store keeps, the rest of the disk being headroom for value-log garbage and the LSM tree. The\n")
	w("  store's mean live bytes over the counted reads are shown beside it, so the comparison is fair\n")
	w("  when they match.\n\n")

	tt := benchkit.Table{Header: []string{"trace", "Zipf s", "reads (counted)", "distinct chunks read", "bytes read at least once", "reads that are scans"}}
	for i, sp := range specs {
		t := traces[i]
		distinct, scans := 0, 0
		seen := make([]bool, len(t.chunks))
		for _, k := range t.reqs {
			if !seen[k] {
				seen[k] = true
				distinct++
			}
		}
		if sp.scanEvery > 0 {
			scans = len(t.reqs) - sp.requests
		}
		tt.Rows = append(tt.Rows, []string{sp.name, fmt.Sprintf("%.1f", sp.s), fmt.Sprintf("%d (%d)", len(t.reqs), len(t.reqs)-t.warmup),
			fmt.Sprint(distinct), mibf(float64(t.workBytes)), benchkit.Percent(float64(scans), float64(len(t.reqs)))})
	}
	w("%s\n", tt.Markdown())

	// Per trace: table and plot.
	type gain struct {
		trace string
		disk  int64
		s3, l float64
	}
	var gains []gain
	var maxStoreSimDiff float64
	for i, sp := range specs {
		w("### %s\n\n", traceTitle(sp))
		t := benchkit.Table{Header: []string{"disk capacity", "live target (simulator capacity)", "store mean live bytes (S3-FIFO / LRU)",
			"store, S3-FIFO: byte / chunk hit ratio", "store, LRU (previous): byte / chunk", "simulated LRU: byte / chunk", "S3-FIFO ÷ LRU (store, bytes)"}}
		var xs []float64
		series := map[string][]float64{}
		for _, c := range cells[i] {
			a, l := c.store[s3], c.store[lru]
			t.Rows = append(t.Rows, []string{mib(c.disk), mibf(float64(c.live)),
				mibf(a.meanLive) + " / " + mibf(l.meanLive),
				pct(a.byteRatio()) + " / " + pct(a.chunkRatio()),
				pct(l.byteRatio()) + " / " + pct(l.chunkRatio()),
				pct(c.sim["LRU"].byteRatio()) + " / " + pct(c.sim["LRU"].chunkRatio()),
				benchkit.Ratio(a.byteRatio(), l.byteRatio())})
			xs = append(xs, float64(c.disk>>20))
			series["store, S3-FIFO (in use)"] = append(series["store, S3-FIFO (in use)"], 100*a.byteRatio())
			series["store, LRU (previous)"] = append(series["store, LRU (previous)"], 100*l.byteRatio())
			for _, p := range []string{"LRU", "SLRU", "ristretto"} {
				series["simulated "+p] = append(series["simulated "+p], 100*c.sim[p].byteRatio())
			}
			gains = append(gains, gain{sp.name, c.disk, a.byteRatio(), l.byteRatio()})
			maxStoreSimDiff = max(maxStoreSimDiff, abs(a.byteRatio()-c.sim["S3-FIFO"].byteRatio()), abs(l.byteRatio()-c.sim["LRU"].byteRatio()))
		}
		w("%s\n", t.Markdown())
		var ss []benchkit.Series
		for _, name := range []string{"store, S3-FIFO (in use)", "store, LRU (previous)", "simulated LRU", "simulated SLRU", "simulated ristretto"} {
			ss = append(ss, benchkit.Series{Name: name, X: xs, Y: series[name]})
		}
		img := "b4-" + sp.name + ".png"
		if err := benchkit.LinePlot(filepath.Join(env.ImgDir, img), "Byte hit ratio, "+traceTitle(sp), "disk capacity (MiB)", "byte hit ratio (%)", ss); err != nil {
			return benchkit.Section{}, err
		}
		w("![%s](img/%s)\n\n", traceTitle(sp), img)
	}

	// Candidates.
	w("### Candidates (simulated, byte hit ratio at the live target)\n\n")
	w("How the policy was chosen: the same traces through simulated policies. CLOCK is FIFO with\n")
	w("reinsertion (2-bit counts); SLRU has a 20 %% probation and 80 %% protected segment; S3-FIFO has a\n")
	w("10 %% small queue, a main queue with reinsertion and a ghost as large as main; ristretto is the\n")
	w("library of the RAM tier (TinyLFU admission, sampled LFU eviction) configured as the store configures it.\n\n")
	ct := benchkit.Table{Header: append([]string{"trace", "disk capacity"}, simPolicies...)}
	for i, sp := range specs {
		for _, c := range cells[i] {
			row := []string{sp.name, mib(c.disk)}
			for _, p := range simPolicies {
				row = append(row, pct(c.sim[p].byteRatio()))
			}
			ct.Rows = append(ct.Rows, row)
		}
	}
	w("%s\n", ct.Markdown())

	// RAM tier.
	w("### RAM tier\n\n")
	w("The RAM tier (ristretto, 1/%d of the disk capacity) against LRU and S3-FIFO of the same capacity, all\n", cfg.ramDiv)
	w("simulated standalone on the whole trace; and the share of bytes the real store served from RAM (its\n")
	w("RAM tier only holds chunks that are also on disk, and is fed by puts and disk hits).\n\n")
	rt := benchkit.Table{Header: []string{"trace", "RAM capacity", "ristretto", "LRU", "S3-FIFO", "ristretto ÷ LRU", "store: bytes served from RAM (S3-FIFO / LRU disk tier)"}}
	var ramRatios, ramS3 []float64 // ristretto ÷ LRU, S3-FIFO ÷ ristretto
	for i, sp := range specs {
		for _, c := range cells[i] {
			r, l, f := c.ramSim["ristretto"].byteRatio(), c.ramSim["LRU"].byteRatio(), c.ramSim["S3-FIFO"].byteRatio()
			if l > 0 && r > 0 {
				ramRatios = append(ramRatios, r/l)
				ramS3 = append(ramS3, f/r)
			}
			rt.Rows = append(rt.Rows, []string{sp.name, mib(c.ram), pct(r), pct(l), pct(f), benchkit.Ratio(r, l),
				pct(c.store[s3].ramByteRatio()) + " / " + pct(c.store[lru].ramByteRatio())})
		}
	}
	w("%s\n", rt.Markdown())

	// Reading it.
	w("### Reading it\n\n")
	lo, hi := gains[0], gains[0]
	var wins int
	for _, g := range gains {
		if g.s3/g.l < lo.s3/lo.l {
			lo = g
		}
		if g.s3/g.l > hi.s3/hi.l {
			hi = g
		}
		if g.s3 > g.l {
			wins++
		}
	}
	w("- In the real store, S3-FIFO's byte hit ratio beat LRU's in %d of %d trace/capacity pairs, by %s to %s:\n", wins, len(gains), benchkit.Ratio(lo.s3, lo.l), benchkit.Ratio(hi.s3, hi.l))
	w("  least on %s at %s (%s vs %s), most on %s at %s (%s vs %s).\n", lo.trace, mib(lo.disk), pct(lo.s3), pct(lo.l), hi.trace, mib(hi.disk), pct(hi.s3), pct(hi.l))
	// Mean gain per capacity.
	var perCap []string
	var means []float64
	for j, disk := range cfg.disks {
		var sum float64
		for i := range specs {
			sum += cells[i][j].store[s3].byteRatio() / cells[i][j].store[lru].byteRatio()
		}
		means = append(means, sum/float64(len(specs)))
		perCap = append(perCap, fmt.Sprintf("%.2fx at %s", means[j], mib(disk)))
	}
	shrinking := true
	for j := 1; j < len(means); j++ {
		shrinking = shrinking && means[j] < means[j-1]
	}
	w("- Mean gain over the traces: %s", strings.Join(perCap, ", "))
	if shrinking {
		w("; it shrinks as the cache grows against the\n  working set (the fewer chunks fit, the more it matters which ones are kept).\n")
	} else {
		w(".\n")
	}
	switch {
	case maxStoreSimDiff < 0.0005:
		w("- The real store's byte hit ratios equal those of the simulator of the same policy (to 0.05 points),\n")
		w("  whose capacity is the live target: the store kept its live bytes at the target and the usage gate\n")
		w("  did not evict beyond it in this run.\n")
	default:
		w("- The real store's byte hit ratios differ by up to %.1f points from those of the simulator of the\n", 100*maxStoreSimDiff)
		w("  same policy at the live target (compare the mean live bytes with the target: the usage gate evicts\n")
		w("  beyond the live target when value-log garbage is not reclaimed fast enough).\n")
	}
	if len(ramRatios) > 0 {
		rlo, rhi := ramRatios[0], ramRatios[0]
		for _, r := range ramRatios {
			rlo, rhi = min(rlo, r), max(rhi, r)
		}
		flo, fhi := ramS3[0], ramS3[0]
		for _, r := range ramS3 {
			flo, fhi = min(flo, r), max(fhi, r)
		}
		w("- RAM tier: ristretto's byte hit ratio was %.2fx to %.2fx LRU's at the same capacity; simulated\n", rlo, rhi)
		w("  S3-FIFO of that capacity would have served %.2fx to %.2fx ristretto's bytes (the RAM tier is\n", flo, fhi)
		w("  unchanged by this measurement).\n")
	}
	w("- The %d real-store replays took %s of wall time and %s of CPU (two at a time).\n", 2*len(gains), m.wall.Round(time.Second), m.cpu.Round(time.Second))
	return benchkit.Section{Title: "B4 — hit ratio of the disk tier's eviction policy", Markdown: b.String()}, nil
}

func traceTitle(sp traceSpec) string {
	if sp.scanEvery > 0 {
		return fmt.Sprintf("Zipf s = %.1f mixed with scans", sp.s)
	}
	return fmt.Sprintf("Zipf s = %.1f", sp.s)
}

func kib(b int64) string { return fmt.Sprintf("%d KiB", b>>10) }

func abs(x float64) float64 {
	if x < 0 {
		return -x
	}
	return x
}
