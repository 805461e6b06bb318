package hitpath

import (
	"bytes"
	"context"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"runtime"
	"runtime/pprof"
	"sync"
	"sync/atomic"
	"time"

	"github.com/distcache/distcache/tools/benchmark/benchkit"
)

// column is one system the same reads go to.
type column struct {
	id, name string
	// profiled: the code under test runs in this process, so a CPU
	// profile of the cell shows it.
	profiled bool
	read     func(ctx context.Context, wk *worker, off int64, buf []byte) error
}

// worker is one concurrent client's state.
type worker struct {
	raw        rawConn
	nginxMiss  *atomic.Int64
	rng        *rand.Rand
	sinceCheck int
}

// workload is a read size.
type workload struct {
	id, name string
	size     int64
}

// result is one cell: a column, a workload, a client count.
type result struct {
	col       column
	wl        workload
	clients   int
	bytes     int64
	reads     int64
	elapsed   time.Duration
	lat       *benchkit.Latencies
	cpu       time.Duration // this process + MinIO + nginx + the gateway processes
	serverCPU time.Duration // of that, MinIO's, nginx's and the gateway processes'
	mallocs   uint64        // heap allocations of this process
	nginxMiss int64
	nodeMiss  float64 // node chunk reads that were not RAM hits
	checked   int64   // reads compared byte for byte with the object
}

func (r result) gbps() float64 { return float64(r.bytes) / r.elapsed.Seconds() / 1e9 }

// cpuPerGB is CPU seconds per GB (1e9 bytes) delivered.
func (r result) cpuPerGB() float64 { return r.perGB(r.cpu) }

func (r result) perGB(d time.Duration) float64 {
	if r.bytes == 0 {
		return 0
	}
	return d.Seconds() / (float64(r.bytes) / 1e9)
}

func (r result) allocsPerRead() float64 {
	if r.reads == 0 {
		return 0
	}
	return float64(r.mallocs) / float64(r.reads)
}

// columns are the systems, in the order of the tables.
func (w *world) columns() []column {
	return []column{
		{id: "node", name: "distcache node (internal/client)", profiled: true,
			read: func(ctx context.Context, _ *worker, off int64, buf []byte) error { return w.readNodeGo(ctx, off, buf) }},
		{id: "node-http", name: "distcache node (bare net/http)", profiled: true,
			read: func(ctx context.Context, _ *worker, off int64, buf []byte) error {
				tier, err := w.readNodeHTTP(ctx, off, buf)
				if err == nil && tier != "hit_ram" {
					err = fmt.Errorf("the node answered %q, not a RAM hit", tier)
				}
				return err
			}},
		{id: "gateway", name: w.gatewayName("default: TTL mode, page cache on"), profiled: w.cfg.gatewayInProcess,
			read: func(ctx context.Context, _ *worker, off int64, buf []byte) error {
				return w.readS3(ctx, w.gateways[1].S3, off, buf)
			}},
		{id: "gateway-immutable", name: w.gatewayName("--immutable nodes, page cache on"), profiled: w.cfg.gatewayInProcess,
			read: func(ctx context.Context, _ *worker, off int64, buf []byte) error {
				return w.readS3(ctx, w.gateways[2].S3, off, buf)
			}},
		{id: "gateway-nopc", name: w.gatewayName("TTL mode, page cache off"), profiled: w.cfg.gatewayInProcess,
			read: func(ctx context.Context, _ *worker, off int64, buf []byte) error {
				return w.readS3(ctx, w.gateways[0].S3, off, buf)
			}},
		{id: "nginx-http", name: "nginx proxy_cache, plain HTTP (aws-sdk-go-v2)", read: countingMisses(w.readNginxS3)},
		{id: "minio", name: "MinIO direct (aws-sdk-go-v2)",
			read: func(ctx context.Context, _ *worker, off int64, buf []byte) error {
				return w.readS3(ctx, w.minioS3, off, buf)
			}},
		{id: "nginx", name: "nginx proxy_cache, mTLS (net/http)", read: countingMisses(w.readNginx)},
		{id: "raw", name: "raw TLS 1.3 ceiling", profiled: true,
			read: func(_ context.Context, wk *worker, off int64, buf []byte) error { return w.readRaw(&wk.raw, off, buf) }},
	}
}

// countingMisses is a column's read through nginx: read, counting in the
// worker's nginxMiss each read nginx did not answer from its cache.
func countingMisses(read func(ctx context.Context, off int64, buf []byte) (hit bool, err error)) func(context.Context, *worker, int64, []byte) error {
	return func(ctx context.Context, wk *worker, off int64, buf []byte) error {
		hit, err := read(ctx, off, buf)
		if err == nil && !hit {
			wk.nginxMiss.Add(1)
		}
		return err
	}
}

// gatewayName names a gateway column, saying where the gateway runs.
func (w *world) gatewayName(mode string) string {
	where := "own process"
	if w.cfg.gatewayInProcess {
		where = "in the bench process"
	}
	return "gateway (" + where + "), " + mode + " (aws-sdk-go-v2)"
}

// externalCPU is the CPU time of the servers that run outside this
// process: MinIO, nginx's master and workers, and the gateway processes.
func (w *world) externalCPU() time.Duration {
	var d time.Duration
	for _, g := range w.gateways {
		if g != nil && g.Proc != nil {
			d += procCPU(g.Proc.Pid())
		}
	}
	if pid := childWith(w.minio.Dir); pid != 0 {
		d += procCPU(pid)
	}
	for _, pid := range w.nginx.pids() {
		d += procCPU(pid)
	}
	return d
}

// run drives n clients reading wl through col for d, each client one read
// at a time. record=false is the warm-up: connections are made, nothing is
// kept.
func (w *world) run(ctx context.Context, col column, wl workload, n int, d time.Duration, workers []*worker) (result, error) {
	res := result{col: col, wl: wl, clients: n, lat: &benchkit.Latencies{}}
	var (
		mu       sync.Mutex
		firstErr error
		total    atomic.Int64
		reads    atomic.Int64
		checked  atomic.Int64
		wg       sync.WaitGroup
	)
	cctx, cancel := context.WithCancel(ctx)
	defer cancel()
	start := time.Now()
	deadline := start.Add(d)
	for i := 0; i < n; i++ {
		wk := workers[i]
		wg.Add(1)
		go func() {
			defer wg.Done()
			buf := make([]byte, wl.size)
			var lat benchkit.Latencies
			defer res.lat.Merge(&lat)
			// At least one read each, however short the cell and loaded
			// the machine (quick mode runs cells of a few milliseconds).
			for first := true; first || time.Now().Before(deadline); first = false {
				off := w.target(wk.rng, wl.size)
				// Poison both ends so a read that wrote nothing is caught.
				buf[0], buf[len(buf)-1] = ^w.payload[off], ^w.payload[off+wl.size-1]
				t0 := time.Now()
				err := col.read(cctx, wk, off, buf)
				lat.Add(time.Since(t0))
				if err == nil {
					err = w.check(wk, off, buf, &checked)
				}
				if err != nil {
					mu.Lock()
					if firstErr == nil {
						firstErr = fmt.Errorf("%s, %s, %d clients: %w", col.name, wl.name, n, err)
					}
					mu.Unlock()
					cancel()
					return
				}
				total.Add(wl.size)
				reads.Add(1)
			}
		}()
	}
	wg.Wait()
	res.elapsed = time.Since(start)
	res.bytes, res.reads, res.checked = total.Load(), reads.Load(), checked.Load()
	if firstErr == nil && res.reads == 0 {
		firstErr = fmt.Errorf("%s, %s, %d clients: no read finished in %s", col.name, wl.name, n, d)
	}
	return res, firstErr
}

// target picks a random chunk and, for reads smaller than a chunk, a
// size-aligned offset within it.
func (w *world) target(rng *rand.Rand, size int64) int64 {
	off := rng.Int64N(w.cfg.objectSize/w.cfg.chunkSize) * w.cfg.chunkSize
	if size < w.cfg.chunkSize {
		off += rng.Int64N(w.cfg.chunkSize/size) * size
	}
	return off
}

// check compares the read with the object: both ends of every read (which
// were poisoned before it), and every byte of every verifyEvery-th read.
func (w *world) check(wk *worker, off int64, buf []byte, checked *atomic.Int64) error {
	want := w.payload[off : off+int64(len(buf))]
	if buf[0] != want[0] || buf[len(buf)-1] != want[len(want)-1] {
		return fmt.Errorf("wrong bytes at offset %d", off)
	}
	wk.sinceCheck++
	if wk.sinceCheck < w.cfg.verifyEvery {
		return nil
	}
	wk.sinceCheck = 0
	if !bytes.Equal(buf, want) {
		return fmt.Errorf("wrong bytes in the %d bytes at offset %d", len(buf), off)
	}
	checked.Add(1)
	return nil
}

// cell warms up, then measures one column × workload × client count:
// throughput, latency, CPU of everything involved, allocations, and that
// the caches hit. With a profile directory, columns whose server runs in
// this process get a CPU profile and allocation profiles around the cell.
func (w *world) cell(ctx context.Context, col column, wl workload, n int) (result, error) {
	workers := make([]*worker, n)
	var nginxMiss atomic.Int64
	for i := range workers {
		workers[i] = &worker{nginxMiss: &nginxMiss, rng: rand.New(rand.NewPCG(uint64(i)+1, uint64(n)*7919+uint64(wl.size)))}
	}
	defer func() {
		for _, wk := range workers {
			wk.raw.close()
		}
	}()
	if _, err := w.run(ctx, col, wl, n, w.cfg.warmup, workers); err != nil {
		return result{}, err
	}
	nginxMiss.Store(0)
	runtime.GC()
	stopProfile, err := w.startProfile(col, wl, n)
	if err != nil {
		return result{}, err
	}
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	mallocs0 := ms.Mallocs
	missBefore := w.nodeNonHits()
	ext0 := w.externalCPU()
	cpu0 := benchkit.ProcessCPU() + ext0

	res, err := w.run(ctx, col, wl, n, w.cfg.cell, workers)

	ext := w.externalCPU()
	res.cpu = benchkit.ProcessCPU() + ext - cpu0
	res.serverCPU = ext - ext0
	runtime.ReadMemStats(&ms)
	res.mallocs = ms.Mallocs - mallocs0
	res.nodeMiss = w.nodeNonHits() - missBefore
	res.nginxMiss = nginxMiss.Load()
	if perr := stopProfile(); err == nil {
		err = perr
	}
	return res, err
}

// nodeNonHits counts the node's chunk reads that were not RAM hits.
func (w *world) nodeNonHits() float64 {
	var sum float64
	for _, r := range []string{"hit_disk", "miss", "forwarded", "error"} {
		sum += benchkit.Counter(w.nodeReg, "distcache_chunk_reads_total", "result", r)
	}
	return sum
}

// startProfile starts a CPU profile of the cell when profiles are asked
// for, and writes the allocation profile before and after it (compare them
// with go tool pprof -sample_index=alloc_space -diff_base).
func (w *world) startProfile(col column, wl workload, n int) (stop func() error, err error) {
	if w.cfg.profileDir == "" || !col.profiled {
		return func() error { return nil }, nil
	}
	base := filepath.Join(w.cfg.profileDir, fmt.Sprintf("%s-%s-c%d", col.id, wl.id, n))
	if err := writeAllocs(base + ".allocs-before.pprof"); err != nil {
		return nil, err
	}
	stopCPU, err := benchkit.StartCPUProfile(base + ".cpu.pprof")
	if err != nil {
		return nil, err
	}
	return func() error {
		if err := stopCPU(); err != nil {
			return err
		}
		return writeAllocs(base + ".allocs-after.pprof")
	}, nil
}

func writeAllocs(path string) error {
	runtime.GC() // the profile is as of the last GC: make that now
	f, err := os.Create(path)
	if err != nil {
		return err
	}
	if err := pprof.Lookup("allocs").WriteTo(f, 0); err != nil {
		f.Close()
		return err
	}
	return f.Close()
}
