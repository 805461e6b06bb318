// Package scaleout is part b3 of `make bench`: a warm 3-node cache grows to
// 4 nodes while readers keep reading, once with warm handoff (the ring
// document carries the previous epoch's members, as the operator publishes
// it) and once without (no previous ring: a new owner that misses reads S3).
//
// Each run starts its own MinIO, a counting proxy in front of it (S3 GETs
// and bytes are counted at the S3 side), three real cache nodes over mTLS
// (benchcache: internal/embed's StartNode, as `cachenode serve`) and one
// ring-aware Go client
// (internal/client, page cache off) shared by a fixed number of readers that
// read the whole dataset in a loop and check every byte. The dataset is
// read once to warm the cache; then, while the readers run, a fourth node
// starts and a new ring epoch is published to every node. The client learns
// the new epoch from its next answer; once it routes by it, the whole
// dataset is read again (the re-read), and reading goes on to the end of the
// window. Reported: S3 GETs, bytes and HEADs from the change to the end of
// the re-read, chunks handed over by their previous owners, the share of
// chunks whose owner changed (against the theoretical 1/4), read throughput
// in 250 ms buckets across the change, failed reads and byte-exactness.
package scaleout

import (
	"context"
	"fmt"
	"math/rand/v2"
	"time"

	"github.com/distcache/distcache/tools/benchmark/benchkit"
)

// config sizes one run of the part.
type config struct {
	objects    int
	objectSize int64
	chunkSize  int64
	readers    int           // goroutines reading through one client
	before     time.Duration // steady reading of the warm cache before the change
	after      time.Duration // reading goes on at least this long after the change
	tail       time.Duration // and at least this long after the re-read
	bucket     time.Duration // throughput sampling period
	ramBytes   int64         // per node
	diskBytes  int64         // per node
	s3Latency  time.Duration // added before every S3 GET and HEAD: S3's first-byte latency
}

func configFor(quick bool) config {
	if quick {
		return config{objects: 16, objectSize: 1 << 20, chunkSize: 256 << 10, readers: 4,
			before: 750 * time.Millisecond, after: 1500 * time.Millisecond, tail: 500 * time.Millisecond, bucket: 250 * time.Millisecond,
			ramBytes: 64 << 20, diskBytes: 256 << 20, s3Latency: 5 * time.Millisecond}
	}
	return config{objects: 64, objectSize: 16 << 20, chunkSize: 4 << 20, readers: 4,
		before: 3 * time.Second, after: 8 * time.Second, tail: 2 * time.Second, bucket: 250 * time.Millisecond,
		ramBytes: 128 << 20, diskBytes: 2 << 30, s3Latency: 30 * time.Millisecond}
}

func (c config) chunksPerObject() int64 { return (c.objectSize + c.chunkSize - 1) / c.chunkSize }

// Names the nodes and the client use.
const (
	tenant = "bench"
	bucket = "dataset"
)

func objectKey(i int) string { return fmt.Sprintf("part-%03d.bin", i) }

// dataset is the objects' bytes, the same in both runs (so are their ETags
// and therefore the placement of every chunk).
func dataset(cfg config) [][]byte {
	r := rand.NewChaCha8([32]byte{'b', '3'})
	data := make([][]byte, cfg.objects)
	for i := range data {
		data[i] = make([]byte, cfg.objectSize)
		_, _ = r.Read(data[i]) // never fails
	}
	return data
}

// results are both runs of one part.
type results struct {
	cfg      config
	handoff  caseResult // with the previous ring
	cold     caseResult // without
	duration time.Duration
}

// Run is part b3.
func Run(ctx context.Context, env benchkit.Env) (benchkit.Section, error) {
	res, err := measure(ctx, env)
	if err != nil {
		return benchkit.Section{}, err
	}
	return render(res, env)
}

func measure(ctx context.Context, env benchkit.Env) (results, error) {
	start := time.Now()
	res := results{cfg: configFor(env.Quick)}
	data := dataset(res.cfg)
	var err error
	env.Logf("with warm handoff: %d objects of %d MiB, chunks of %d KiB", res.cfg.objects, res.cfg.objectSize>>20, res.cfg.chunkSize>>10)
	if res.handoff, err = runCase(ctx, env, res.cfg, data, true); err != nil {
		return res, fmt.Errorf("with warm handoff: %w", err)
	}
	env.Logf("without warm handoff")
	if res.cold, err = runCase(ctx, env, res.cfg, data, false); err != nil {
		return res, fmt.Errorf("without warm handoff: %w", err)
	}
	res.duration = time.Since(start)
	return res, nil
}
