// Package soak_test drives mixed reads and writes through the gateway at high
// concurrency against a cache far smaller than the data, so chunks are evicted
// all the time, and verifies every byte that comes back. It records errors,
// byte mismatches, RSS, goroutines and disk use of every process over time.
//
// `make test` runs it for DISTCACHE_SOAK_DURATION (default 20s); `make soak`
// for 30 minutes, writing soak.csv, soak-*.png and soak.md to
// DISTCACHE_SOAK_OUT.
package soak_test

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/s3"
	"github.com/aws/smithy-go"

	"github.com/distcache/distcache/internal/testutil"
	"github.com/distcache/distcache/tools/benchmark/benchkit"
)

// Sizes of the short form; make soak changes only the duration.
const (
	chunkSize      = 256 << 10
	diskBytes      = 32 << 20 // per node
	prepopulate    = 48       // objects written before the clock starts
	maxLiveObjects = 240      // ~1 MiB average: several times the cache's 3 x 40 MiB
)

func TestSoak(t *testing.T) {
	if testing.Short() {
		t.Skip("soak: starts MinIO and four cachenode processes")
	}
	duration := envDuration(t, "DISTCACHE_SOAK_DURATION", 20*time.Second)
	workers := testutil.EnvInt(t, "DISTCACHE_SOAK_CONCURRENCY", 64)
	st := startStack(t, stackOptions{chunkSize: "256Ki", ramBytes: "8Mi", diskBytes: strconv.Itoa(diskBytes), pageCacheBytes: "16Mi"})
	ctx := context.Background()

	w := &workload{s3: st.s3, deleted: map[string]bool{}}
	seedRand := rand.New(rand.NewPCG(1, 2))
	for i := 0; i < prepopulate; i++ {
		if err := w.put(ctx, seedRand); err != nil {
			t.Fatalf("prepopulating: %v", err)
		}
	}
	t.Logf("soak: %d workers for %s; %d objects written before the start", workers, duration, prepopulate)

	procs := append(append([]*proc{}, st.nodes...), st.gateway)
	rec := &recorder{procs: procs, nodes: st.nodes, start: time.Now()}
	interval := min(30*time.Second, max(time.Second, duration/120))
	stopSampling := rec.run(interval, w)

	deadline := time.Now().Add(duration)
	var wg sync.WaitGroup
	for i := 0; i < workers; i++ {
		wg.Add(1)
		go func(i int) {
			defer wg.Done()
			r := rand.New(rand.NewPCG(uint64(i)+100, 7))
			for time.Now().Before(deadline) {
				w.step(ctx, r)
			}
		}(i)
	}
	wg.Wait()
	time.Sleep(2 * time.Second) // let the processes settle before the last sample
	stopSampling()

	sum := rec.summary(w)
	t.Log("\n" + sum)
	if dir := os.Getenv("DISTCACHE_SOAK_OUT"); dir != "" {
		testutil.Must(t, rec.write(dir, sum))
	}

	if n := w.mismatches.Load(); n > 0 {
		t.Errorf("%d reads returned wrong bytes; first: %s", n, w.firstProblem())
	}
	if n := w.errors.Load(); n > 0 {
		t.Errorf("%d requests failed; first: %s", n, w.firstProblem())
	}
	if w.verifiedBytes.Load() == 0 || w.puts.Load() == 0 {
		t.Fatalf("nothing was verified (%d bytes) or written (%d puts)", w.verifiedBytes.Load(), w.puts.Load())
	}
	var evictions, hits float64
	for _, n := range st.nodes {
		evictions += n.metric("distcache_store_evictions_total")
		hits += n.metric("distcache_chunk_reads_total", `result="hit_ram"`) + n.metric("distcache_chunk_reads_total", `result="hit_disk"`)
	}
	if evictions == 0 {
		t.Errorf("no chunk was evicted: the cache was not smaller than the data, the soak's premise")
	}
	if hits == 0 {
		t.Errorf("no chunk read hit the cache")
	}
	for i, n := range st.nodes {
		// The store's bound is on what du reports; a directory entry or
		// two of slack are not a breach worth failing on.
		var worst int64
		var at time.Duration
		for _, s := range rec.samples {
			if s.disk[i] > worst {
				worst, at = s.disk[i], s.at
			}
		}
		if worst > diskBytes+(1<<20) {
			t.Errorf("%s used up to %d bytes of disk (at %s), over its %d bound; the store reports %.0f; its files now:\n%s",
				n.name, worst, at.Round(time.Second), diskBytes, n.metric("distcache_store_disk_usage_bytes"), n.files())
		}
	}
}

// object is one immutable object of the soak: its bytes follow from seed.
type object struct {
	key  string
	seed uint64
	size int64
	sum  [32]byte
}

func content(seed uint64, size int64) []byte {
	var k [32]byte
	binary.LittleEndian.PutUint64(k[:], seed)
	b := make([]byte, size)
	_, _ = rand.NewChaCha8(k).Read(b)
	return b
}

// workload is the shared state of the workers.
type workload struct {
	s3 *s3.Client

	mu      sync.Mutex
	live    []*object
	deleted map[string]bool // keys being deleted or deleted: NoSuchKey is right for them
	nextID  uint64
	problem string

	reads, puts, heads, deletes, notFound atomic.Int64
	cutByDelete                           atomic.Int64 // streams of objects deleted mid-read that ended early
	verifiedBytes, writtenBytes           atomic.Int64
	errors, mismatches                    atomic.Int64
}

func (w *workload) fail(counter *atomic.Int64, format string, args ...any) {
	counter.Add(1)
	w.mu.Lock()
	if w.problem == "" {
		w.problem = fmt.Sprintf(format, args...)
	}
	w.mu.Unlock()
}

func (w *workload) firstProblem() string {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.problem
}

// pick returns a live object, most often a recent one (Zipf over age).
func (w *workload) pick(r *rand.Rand) *object {
	w.mu.Lock()
	defer w.mu.Unlock()
	if len(w.live) == 0 {
		return nil
	}
	z := rand.NewZipf(r, 1.1, 1, uint64(len(w.live)-1))
	return w.live[len(w.live)-1-int(z.Uint64())]
}

func (w *workload) step(ctx context.Context, r *rand.Rand) {
	switch op := r.IntN(100); {
	case op < 65:
		w.get(ctx, r)
	case op < 85:
		if err := w.put(ctx, r); err != nil {
			w.fail(&w.errors, "%v", err)
		}
	case op < 95:
		w.head(ctx, r)
	default:
		w.deleteOldest(ctx)
	}
}

func objectSize(r *rand.Rand) int64 {
	switch p := r.IntN(10); {
	case p < 4:
		return 1 + r.Int64N(64<<10) // within one chunk
	case p < 8:
		return 64<<10 + r.Int64N(1<<20) // a few chunks
	default:
		return 1<<20 + r.Int64N(5<<20) // many chunks
	}
}

func (w *workload) put(ctx context.Context, r *rand.Rand) error {
	w.mu.Lock()
	w.nextID++
	id := w.nextID
	w.mu.Unlock()
	o := &object{seed: r.Uint64(), size: objectSize(r)}
	o.key = fmt.Sprintf("soak/%06d-%016x-%d", id, o.seed, o.size)
	data := content(o.seed, o.size)
	o.sum = sha256.Sum256(data)
	_, err := w.s3.PutObject(ctx, &s3.PutObjectInput{Bucket: aws.String(bucket), Key: aws.String(o.key), Body: bytes.NewReader(data), ContentLength: aws.Int64(o.size)})
	if err != nil {
		return fmt.Errorf("PUT %s: %w", o.key, err)
	}
	w.puts.Add(1)
	w.writtenBytes.Add(o.size)
	w.mu.Lock()
	w.live = append(w.live, o)
	w.mu.Unlock()
	return nil
}

func (w *workload) get(ctx context.Context, r *rand.Rand) {
	o := w.pick(r)
	if o == nil {
		return
	}
	in := &s3.GetObjectInput{Bucket: aws.String(bucket), Key: aws.String(o.key)}
	whole := r.IntN(2) == 0 || o.size < 2
	var first, last int64
	if !whole {
		first = r.Int64N(o.size)
		last = min(o.size-1, first+r.Int64N(min(o.size-first, 3*chunkSize)))
		in.Range = aws.String(fmt.Sprintf("bytes=%d-%d", first, last))
	}
	out, err := w.s3.GetObject(ctx, in)
	if err != nil {
		w.expectGone(o, "GET", err)
		return
	}
	body, err := io.ReadAll(out.Body)
	out.Body.Close()
	if err != nil {
		// An object deleted while it is read may end the stream early
		// (the cache fetches later chunks by ETag, and S3 no longer has
		// them): a cut body, never wrong bytes.
		w.mu.Lock()
		gone := w.deleted[o.key]
		w.mu.Unlock()
		if gone {
			w.cutByDelete.Add(1)
			return
		}
		w.fail(&w.errors, "GET %s: body: %v", o.key, err)
		return
	}
	w.reads.Add(1)
	switch {
	case whole && sha256.Sum256(body) != o.sum:
		w.fail(&w.mismatches, "GET %s: %d bytes whose SHA-256 differs from the %d written", o.key, len(body), o.size)
	case !whole && !bytes.Equal(body, content(o.seed, last+1)[first:]):
		w.fail(&w.mismatches, "GET %s bytes=%d-%d: %d bytes that differ from what was written", o.key, first, last, len(body))
	default:
		w.verifiedBytes.Add(int64(len(body)))
	}
}

func (w *workload) head(ctx context.Context, r *rand.Rand) {
	o := w.pick(r)
	if o == nil {
		return
	}
	out, err := w.s3.HeadObject(ctx, &s3.HeadObjectInput{Bucket: aws.String(bucket), Key: aws.String(o.key)})
	if err != nil {
		w.expectGone(o, "HEAD", err)
		return
	}
	w.heads.Add(1)
	if aws.ToInt64(out.ContentLength) != o.size {
		w.fail(&w.mismatches, "HEAD %s: length %d, want %d", o.key, aws.ToInt64(out.ContentLength), o.size)
	}
}

// deleteOldest keeps the data set at maxLiveObjects by deleting the oldest.
func (w *workload) deleteOldest(ctx context.Context) {
	w.mu.Lock()
	if len(w.live) <= maxLiveObjects {
		w.mu.Unlock()
		return
	}
	o := w.live[0]
	w.live = w.live[1:]
	w.deleted[o.key] = true
	w.mu.Unlock()
	if _, err := w.s3.DeleteObject(ctx, &s3.DeleteObjectInput{Bucket: aws.String(bucket), Key: aws.String(o.key)}); err != nil {
		w.fail(&w.errors, "DELETE %s: %v", o.key, err)
		return
	}
	w.deletes.Add(1)
}

// expectGone accepts NoSuchKey (404) for an object being deleted; any other
// error is a failure.
func (w *workload) expectGone(o *object, op string, err error) {
	var api smithy.APIError
	notFound := errors.As(err, &api) && (api.ErrorCode() == "NoSuchKey" || api.ErrorCode() == "NotFound")
	w.mu.Lock()
	gone := w.deleted[o.key]
	w.mu.Unlock()
	if notFound && gone {
		w.notFound.Add(1)
		return
	}
	w.fail(&w.errors, "%s %s: %v", op, o.key, err)
}

// sample is the state of every process at one moment.
type sample struct {
	at                      time.Duration
	rss, goroutines         []float64 // per process: nodes, then the gateway
	disk                    []int64   // per node
	reads, puts, verifiedMB float64
	errors, mismatches      int64
}

type recorder struct {
	procs, nodes []*proc
	start        time.Time
	mu           sync.Mutex
	samples      []sample
}

func (rec *recorder) take(w *workload) {
	s := sample{at: time.Since(rec.start), reads: float64(w.reads.Load()), puts: float64(w.puts.Load()),
		verifiedMB: float64(w.verifiedBytes.Load()) / (1 << 20), errors: w.errors.Load(), mismatches: w.mismatches.Load()}
	for _, p := range rec.procs {
		s.rss = append(s.rss, float64(p.rssBytes()))
		s.goroutines = append(s.goroutines, p.metric("go_goroutines"))
	}
	for _, n := range rec.nodes {
		s.disk = append(s.disk, n.diskBytes())
	}
	rec.mu.Lock()
	rec.samples = append(rec.samples, s)
	rec.mu.Unlock()
}

// run samples every interval until the returned function is called (which
// takes a last sample).
func (rec *recorder) run(interval time.Duration, w *workload) (stop func()) {
	done := make(chan struct{})
	finished := make(chan struct{})
	rec.take(w)
	go func() {
		defer close(finished)
		tick := time.NewTicker(interval)
		defer tick.Stop()
		for {
			select {
			case <-done:
				return
			case <-tick.C:
				rec.take(w)
			}
		}
	}()
	return func() { close(done); <-finished; rec.take(w) }
}

func (rec *recorder) summary(w *workload) string {
	rec.mu.Lock()
	defer rec.mu.Unlock()
	first, last := rec.samples[0], rec.samples[len(rec.samples)-1]
	secs := last.at.Seconds()
	t := benchkit.Table{Header: []string{"process", "RSS start", "RSS max", "RSS end", "goroutines start", "goroutines max", "goroutines end", "disk max (bound 32 MiB)"}}
	for i, p := range rec.procs {
		var rssMax, gMax float64
		var diskMax int64
		for _, s := range rec.samples {
			rssMax, gMax = max(rssMax, s.rss[i]), max(gMax, s.goroutines[i])
			if i < len(rec.nodes) {
				diskMax = max(diskMax, s.disk[i])
			}
		}
		disk := "-"
		if i < len(rec.nodes) {
			disk = mib(float64(diskMax))
		}
		t.Rows = append(t.Rows, []string{p.name, mib(first.rss[i]), mib(rssMax), mib(last.rss[i]),
			fmt.Sprint(first.goroutines[i]), fmt.Sprint(gMax), fmt.Sprint(last.goroutines[i]), disk})
	}
	var b strings.Builder
	fmt.Fprintf(&b, "%s of load: %d verified reads (%.0f MiB, %.1f MiB/s), %d writes (%.0f MiB), %d HEADs, %d deletes, %d reads of deleted objects answered NoSuchKey and %d cut short by the delete; errors: %d, byte mismatches: %d.\n\n",
		last.at.Round(time.Second), w.reads.Load(), float64(w.verifiedBytes.Load())/(1<<20), float64(w.verifiedBytes.Load())/(1<<20)/secs,
		w.puts.Load(), float64(w.writtenBytes.Load())/(1<<20), w.heads.Load(), w.deletes.Load(), w.notFound.Load(), w.cutByDelete.Load(), w.errors.Load(), w.mismatches.Load())
	b.WriteString(t.Markdown())
	return b.String()
}

func mib(v float64) string { return fmt.Sprintf("%.1f MiB", v/(1<<20)) }

// write puts soak.csv, soak.md and the plots into dir.
func (rec *recorder) write(dir, summary string) error {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	rec.mu.Lock()
	defer rec.mu.Unlock()
	var csv strings.Builder
	csv.WriteString("seconds,reads,puts,verified_mib,errors,mismatches")
	for _, p := range rec.procs {
		fmt.Fprintf(&csv, ",%s_rss_bytes,%s_goroutines", p.name, p.name)
	}
	for _, n := range rec.nodes {
		fmt.Fprintf(&csv, ",%s_disk_bytes", n.name)
	}
	csv.WriteString("\n")
	perProc := func(pick func(sample) []float64, scale float64) []benchkit.Series {
		series := make([]benchkit.Series, len(rec.procs))
		for i, p := range rec.procs {
			series[i].Name = p.name
			for _, s := range rec.samples {
				series[i].X = append(series[i].X, s.at.Seconds())
				series[i].Y = append(series[i].Y, pick(s)[i]/scale)
			}
		}
		return series
	}
	var disk []benchkit.Series
	for i, n := range rec.nodes {
		ser := benchkit.Series{Name: n.name}
		for _, s := range rec.samples {
			ser.X, ser.Y = append(ser.X, s.at.Seconds()), append(ser.Y, float64(s.disk[i])/(1<<20))
		}
		disk = append(disk, ser)
	}
	var rate, failures benchkit.Series
	rate.Name, failures.Name = "verified MiB/s", "errors + mismatches (cumulative)"
	for j, s := range rec.samples {
		fmt.Fprintf(&csv, "%.1f,%.0f,%.0f,%.1f,%d,%d", s.at.Seconds(), s.reads, s.puts, s.verifiedMB, s.errors, s.mismatches)
		for i := range rec.procs {
			fmt.Fprintf(&csv, ",%.0f,%.0f", s.rss[i], s.goroutines[i])
		}
		for _, d := range s.disk {
			fmt.Fprintf(&csv, ",%d", d)
		}
		csv.WriteString("\n")
		if j > 0 {
			prev := rec.samples[j-1]
			rate.X = append(rate.X, s.at.Seconds())
			rate.Y = append(rate.Y, (s.verifiedMB-prev.verifiedMB)/(s.at-prev.at).Seconds())
		}
		failures.X = append(failures.X, s.at.Seconds())
		failures.Y = append(failures.Y, float64(s.errors+s.mismatches))
	}
	plots := []struct {
		file, title, y string
		series         []benchkit.Series
	}{
		{"soak-rss.png", "Resident memory per process", "MiB", perProc(func(s sample) []float64 { return s.rss }, 1<<20)},
		{"soak-goroutines.png", "Goroutines per process", "goroutines", perProc(func(s sample) []float64 { return s.goroutines }, 1)},
		{"soak-disk.png", "Disk use per node (bound 32 MiB)", "MiB", disk},
		{"soak-throughput.png", "Verified reads and failures", "MiB/s, count", []benchkit.Series{rate, failures}},
	}
	for _, p := range plots {
		if err := benchkit.LinePlot(filepath.Join(dir, p.file), p.title, "seconds", p.y, p.series); err != nil {
			return err
		}
	}
	if err := os.WriteFile(filepath.Join(dir, "soak.csv"), []byte(csv.String()), 0o644); err != nil {
		return err
	}
	return os.WriteFile(filepath.Join(dir, "soak.md"), []byte(summary), 0o644)
}

func envDuration(t *testing.T, name string, def time.Duration) time.Duration {
	v := os.Getenv(name)
	if v == "" {
		return def
	}
	d, err := time.ParseDuration(v)
	if err != nil {
		t.Fatalf("%s=%q: %v", name, v, err)
	}
	return d
}
