package writepath

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"runtime"
	"runtime/pprof"
	"slices"
	"sync"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/s3"
	"github.com/aws/aws-sdk-go-v2/service/s3/types"

	"github.com/distcache/distcache/internal/gateway"
	"github.com/distcache/distcache/tools/benchmark/benchkit"
)

// column is where the PUTs go.
type column struct {
	id, name string
	s3       *s3.Client
	gateway  bool
	// prefix of the column's keys: a WriteBack prefix for the write-back
	// columns, whose objects reach S3 after the answer.
	prefix   string
	replicas int // of a write-back column
	// local: the ClickHouse row's floor, its table on ClickHouse's own
	// local disk (no S3, no cache).
	local bool
}

// chLocal is the ClickHouse row's floor column.
var chLocal = column{id: "local", name: "ClickHouse's local disk, no S3", local: true}

func (w *world) columns() []column {
	return []column{
		{id: "s3", name: "S3 directly", s3: w.direct},
		{id: "gateway", name: "through the gateway", s3: w.gateway.S3, gateway: true},
		{id: "writeback1", name: "write-back, 1 replica", s3: w.gateway.S3, gateway: true, prefix: writeBackPrefix(1), replicas: 1},
		{id: "writeback2", name: "write-back, 2 replicas", s3: w.gateway.S3, gateway: true, prefix: writeBackPrefix(2), replicas: 2},
	}
}

// writeBackPrefix is the key prefix of the WriteBack policy with n replicas.
func writeBackPrefix(n int) string { return fmt.Sprintf("wb%d/", n) }

// sample is what the rounds of one cell measured, pooled.
type sample struct {
	ops     int64 // PUTs; GETs on getAfter rows
	bytes   int64 // body bytes of those
	elapsed time.Duration
	lat     *benchkit.Latencies // of those operations, each until its answer was read whole
	sum     time.Duration       // of lat
	s3      benchkit.S3Counts   // what reached S3 (MinIO) through the link
	cpu     time.Duration       // this process (clients, gateway, nodes) and MinIO
	hops    hops
	misses  float64 // the nodes' chunk reads that were not hits (getAfter rows)
	// catchUp is, for a write-back column, how long after the cell ended
	// S3 held every object written (the longest of the rounds).
	catchUp time.Duration
}

func (s *sample) add(o sample) {
	s.catchUp = max(s.catchUp, o.catchUp)
	s.ops += o.ops
	s.bytes += o.bytes
	s.elapsed += o.elapsed
	s.lat.Merge(o.lat)
	s.sum += o.sum
	s.s3 = benchkit.S3Counts{GETs: s.s3.GETs + o.s3.GETs, HEADs: s.s3.HEADs + o.s3.HEADs, Others: s.s3.Others + o.s3.Others,
		GETBytes: s.s3.GETBytes + o.s3.GETBytes}
	s.cpu += o.cpu
	s.hops = s.hops.plus(o.hops)
	s.misses += o.misses
}

// mean is the mean latency.
func (s sample) mean() time.Duration {
	if s.ops == 0 {
		return 0
	}
	return s.sum / time.Duration(s.ops)
}

func (s sample) perSecond() float64 { return float64(s.ops) / s.elapsed.Seconds() }
func (s sample) mbps() float64      { return float64(s.bytes) / s.elapsed.Seconds() / 1e6 }

// perOp is x per operation of the sample.
func (s sample) perOp(x float64) float64 {
	if s.ops == 0 {
		return 0
	}
	return x / float64(s.ops)
}

// hops are the time PUTs spent in each hop of the gateway column: the
// gateway's PutObject (arrival to answer, its duration histogram), the
// node's write-through (its PUT handler, timed around it) and, inside it,
// the upload to S3 (s3backend.Put, parts and retries included, the node's
// S3 duration histogram).
type hops struct {
	gateway, node, upload hop
}

// hop is the sum and count of one duration histogram.
type hop struct {
	sum float64 // seconds
	n   uint64
}

func (h hop) mean() time.Duration {
	if h.n == 0 {
		return 0
	}
	return secs(h.sum / float64(h.n))
}

func (h hops) plus(o hops) hops {
	add := func(a, b hop) hop { return hop{a.sum + b.sum, a.n + b.n} }
	return hops{gateway: add(h.gateway, o.gateway), node: add(h.node, o.node), upload: add(h.upload, o.upload)}
}

func (h hops) minus(o hops) hops {
	sub := func(a, b hop) hop { return hop{a.sum - b.sum, a.n - b.n} }
	return hops{gateway: sub(h.gateway, o.gateway), node: sub(h.node, o.node), upload: sub(h.upload, o.upload)}
}

// snapshot is the counters a cell is measured by, before and after.
type snapshot struct {
	at     time.Time
	cpu    time.Duration
	s3     benchkit.S3Counts
	hops   hops
	misses float64
}

func (w *world) snapshot() snapshot {
	s := snapshot{at: time.Now(), cpu: benchkit.ProcessCPU() + benchkit.PidCPU(w.minio.Pid()), s3: w.link.Counts()}
	s.hops.gateway.sum, s.hops.gateway.n = benchkit.Histogram(w.gateway.Reg, "distcache_gateway_request_duration_seconds", "operation", gateway.OpPutObject)
	s.hops.node = w.nodePuts.get()
	for _, nd := range w.cache.Nodes() {
		var upload hop
		upload.sum, upload.n = benchkit.Histogram(nd.Reg, "distcache_s3_request_duration_seconds", "op", "put")
		s.hops = s.hops.plus(hops{upload: upload})
		s.misses += benchkit.Counter(nd.Reg, "distcache_chunk_reads_total", "result", "miss")
	}
	return s
}

// cell runs one round of row r against col: r.clients clients, each PUTting
// a fresh key at a time (and GETting it back on getAfter rows) for the
// configured time. The first PUT of each client warms its connections and
// is not counted. Afterwards what S3 holds is checked against what was PUT;
// the keys written are returned, to be removed once the row is done.
func (w *world) cell(ctx context.Context, col column, r row, round int) (sample, []string, error) {
	stopProfile, err := w.startProfile(col, r, round)
	if err != nil {
		return sample{}, nil, err
	}
	type client struct {
		body []byte
		keys []string
		lat  benchkit.Latencies
		sum  time.Duration
		ops  int64
		err  error
	}
	clients := make([]*client, r.clients)
	for i := range clients {
		clients[i] = &client{body: make([]byte, r.size)}
		_, _ = rand.Read(clients[i].body)
	}
	var (
		wg, warm sync.WaitGroup
		started  = make(chan struct{})
		deadline time.Time // set before started is closed
	)
	warm.Add(r.clients)
	for ci, c := range clients {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := 0; ; i++ {
				if i == 1 {
					warm.Done()
					<-started
				}
				// Every client measures one PUT at least: on a loaded
				// machine a short cell (the quick run's) can be over
				// before the clients are let go.
				if i > 1 && !time.Now().Before(deadline) {
					return
				}
				key := col.prefix + fmt.Sprintf("b5/r%d/%s/%s/c%02d/%07d", round, r.id, col.id, ci, i)
				stamp(c.body, i)
				t0 := time.Now()
				out, err := col.s3.PutObject(ctx, &s3.PutObjectInput{Bucket: aws.String(benchBucket), Key: aws.String(key),
					Body: bytes.NewReader(c.body), ContentLength: aws.Int64(r.size)})
				putTook := time.Since(t0)
				if err == nil && aws.ToString(out.ETag) == "" {
					err = errors.New("no ETag in the answer")
				}
				if err != nil {
					c.err = fmt.Errorf("PUT %s: %w", key, err)
					if i == 0 {
						warm.Done()
					}
					return
				}
				c.keys = append(c.keys, key)
				took := putTook
				if r.getAfter {
					t1 := time.Now()
					if err := getExpect(ctx, col.s3, key, c.body); err != nil {
						c.err = err
						if i == 0 {
							warm.Done()
						}
						return
					}
					took = time.Since(t1)
				}
				if i > 0 {
					c.lat.Add(took)
					c.sum += took
					c.ops++
				}
			}
		}()
	}
	warm.Wait()
	before := w.snapshot()
	deadline = before.at.Add(w.cfg.cell)
	close(started)
	wg.Wait()
	end := time.Now()
	// The servers count a request once its answer is out: let the last
	// ones do so.
	time.Sleep(100 * time.Millisecond)
	after := w.snapshot()
	stopProfile()

	s := sample{lat: &benchkit.Latencies{}, elapsed: end.Sub(before.at), s3: after.s3.Sub(before.s3), cpu: after.cpu - before.cpu,
		hops: after.hops.minus(before.hops), misses: after.misses - before.misses}
	var firstErr error
	var keys []string
	for ci, c := range clients {
		if c.err != nil && firstErr == nil {
			firstErr = fmt.Errorf("client %d: %w", ci, c.err)
		}
		s.ops += c.ops
		s.sum += c.sum
		s.lat.Merge(&c.lat)
		keys = append(keys, c.keys...)
	}
	s.bytes = s.ops * r.size
	if col.replicas > 0 && firstErr == nil {
		// Held writes reach S3 after the answer: wait for all of them.
		var err error
		if s.catchUp, err = w.persisted(ctx, keys, end); err != nil {
			firstErr = err
		}
	}
	for _, c := range clients {
		if firstErr != nil {
			break
		}
		for i, key := range c.keys {
			if w.cfg.verifyAll || i == len(c.keys)-1 {
				if firstErr = w.verify(ctx, key, c.body, i); firstErr != nil {
					break
				}
			}
		}
	}
	return s, keys, firstErr
}

// persisted waits until MinIO holds every key (HEAD, without the link),
// and returns how long after since that was.
func (w *world) persisted(ctx context.Context, keys []string, since time.Time) (time.Duration, error) {
	deadline := time.Now().Add(5 * time.Minute)
	for _, key := range keys {
		for {
			_, err := w.plain.HeadObject(ctx, &s3.HeadObjectInput{Bucket: aws.String(benchBucket), Key: aws.String(key)})
			if err == nil {
				break
			}
			if time.Now().After(deadline) {
				return 0, fmt.Errorf("write-back: %s not in S3 5 minutes after the cell: %w", key, err)
			}
			select {
			case <-ctx.Done():
				return 0, ctx.Err()
			case <-time.After(20 * time.Millisecond):
			}
		}
	}
	return time.Since(since), nil
}

// stamp makes body the i-th PUT of its client: every PUT a new version
// (ETag), without writing the whole body again.
func stamp(body []byte, i int) {
	var b [8]byte
	binary.BigEndian.PutUint64(b[:], uint64(i))
	copy(body, b[:])
}

// getExpect GETs key through c and compares it with want.
func getExpect(ctx context.Context, c *s3.Client, key string, want []byte) error {
	out, err := c.GetObject(ctx, &s3.GetObjectInput{Bucket: aws.String(benchBucket), Key: aws.String(key)})
	if err != nil {
		return fmt.Errorf("GET %s: %w", key, err)
	}
	got, err := io.ReadAll(out.Body)
	out.Body.Close()
	if err != nil {
		return fmt.Errorf("GET %s: %w", key, err)
	}
	if !bytes.Equal(got, want) {
		return fmt.Errorf("GET %s: %d bytes that are not the %d just PUT", key, len(got), len(want))
	}
	return nil
}

// verify reads key from MinIO (behind the link): S3 must hold what was
// PUT, its client's body stamped with the key's number i.
func (w *world) verify(ctx context.Context, key string, body []byte, i int) error {
	want := bytes.Clone(body)
	stamp(want, i)
	if err := getExpect(ctx, w.plain, key, want); err != nil {
		return fmt.Errorf("S3 does not hold what was PUT: %w", err)
	}
	return nil
}

// remove deletes keys from MinIO directly (neither through the link nor
// the cache: the keys are never used again), then gives MinIO
// cfg.settle to finish its own work on them (it moves deleted objects
// aside and purges them in the background), so that it does not slow the
// next cell.
func (w *world) remove(ctx context.Context, keys []string) error {
	defer func() {
		select {
		case <-time.After(w.cfg.settle):
		case <-ctx.Done():
		}
	}()
	for len(keys) > 0 {
		n := min(len(keys), 1000)
		objs := make([]types.ObjectIdentifier, n)
		for i, k := range keys[:n] {
			objs[i] = types.ObjectIdentifier{Key: aws.String(k)}
		}
		if _, err := w.plain.DeleteObjects(ctx, &s3.DeleteObjectsInput{Bucket: aws.String(benchBucket),
			Delete: &types.Delete{Objects: objs, Quiet: aws.Bool(true)}}); err != nil {
			return fmt.Errorf("removing the cell's objects: %w", err)
		}
		keys = keys[n:]
	}
	return nil
}

// startProfile starts a CPU profile and block profiling of a gateway cell
// when BENCH_PROFILE_DIR is set; the returned func writes them.
func (w *world) startProfile(col column, r row, round int) (func(), error) {
	if w.cfg.profileDir == "" || !col.gateway {
		return func() {}, nil
	}
	base := filepath.Join(w.cfg.profileDir, fmt.Sprintf("b5-%s-%s-r%d", r.id, col.id, round))
	stopCPU, err := benchkit.StartCPUProfile(base + ".cpu.pprof")
	if err != nil {
		return nil, err
	}
	runtime.SetBlockProfileRate(int(10 * time.Microsecond))
	return func() {
		_ = stopCPU()
		runtime.SetBlockProfileRate(0)
		if bf, err := os.Create(base + ".block.pprof"); err == nil {
			_ = pprof.Lookup("block").WriteTo(bf, 0)
			bf.Close()
		}
	}, nil
}

// measureAll runs every row's columns back to back, round after round.
func (w *world) measureAll(ctx context.Context, env benchkit.Env) (*report, error) {
	rep := &report{cfg: w.cfg, columns: w.columns(), nodes: len(w.cache.Nodes()), ch: map[string]*chSample{}}
	rep.cells = make(map[string]*sample)
	for round := 1; round <= w.cfg.rounds; round++ {
		for _, r := range w.cfg.rows {
			// The columns of a row run back to back, first one, then the
			// other first: what the first leaves behind (connections,
			// MinIO's background work) weighs on both alike.
			cols := slices.Clone(rep.columns)
			if round%2 == 0 {
				slices.Reverse(cols)
			}
			var written []string
			for _, col := range cols {
				if err := ctx.Err(); err != nil {
					return nil, err
				}
				s, keys, err := w.cell(ctx, col, r, round)
				written = append(written, keys...)
				if err != nil {
					return nil, fmt.Errorf("%s, %s, round %d: %w", r.name(), col.name, round, err)
				}
				env.Logf("round %d: %-32s %-20s %5d ops  p50 %s  p99 %s  %.1f/s  %.1f MB/s  S3 %+v",
					round, r.name(), col.name, s.ops, benchkit.Millis(s.lat.Quantile(0.5)), benchkit.Millis(s.lat.Quantile(0.99)),
					s.perSecond(), s.mbps(), s.s3)
				if col.gateway && !r.getAfter {
					env.Logf("round %d: %-32s hops (mean): client %s, gateway %s, node %s, S3 upload %s", round, r.name(),
						benchkit.Millis(s.mean()), benchkit.Millis(s.hops.gateway.mean()), benchkit.Millis(s.hops.node.mean()),
						benchkit.Millis(s.hops.upload.mean()))
				}
				key := r.id + "/" + col.id
				if rep.cells[key] == nil {
					rep.cells[key] = &sample{lat: &benchkit.Latencies{}}
				}
				rep.cells[key].add(s)
			}
			if err := w.remove(ctx, written); err != nil {
				return nil, err
			}
		}
		if w.cfg.ch != nil {
			cols := slices.Clone(rep.columns)
			if round%2 == 0 {
				slices.Reverse(cols)
			}
			if err := w.measureCH(ctx, env, cols, round, rep); err != nil {
				return nil, err
			}
			rep.chAnswer, rep.chVersion = w.chAnswer, w.chVersion
		}
	}
	return rep, nil
}

func secs(f float64) time.Duration { return time.Duration(f * float64(time.Second)) }
