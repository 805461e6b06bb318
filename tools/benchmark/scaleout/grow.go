package scaleout

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"path/filepath"
	"sync"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/s3"
	"golang.org/x/sync/errgroup"

	"github.com/distcache/distcache/internal/chunk"
	"github.com/distcache/distcache/internal/client"
	"github.com/distcache/distcache/internal/ctxtime"
	"github.com/distcache/distcache/internal/minioproc"
	"github.com/distcache/distcache/internal/ring"
	"github.com/distcache/distcache/internal/s3backend"
	"github.com/distcache/distcache/tools/benchmark/benchcache"
	"github.com/distcache/distcache/tools/benchmark/benchkit"
)

// Generous bounds on waits, so a loaded machine slows the part down rather
// than failing it; they only stop a run that hangs.
const (
	lapTimeout     = 5 * time.Minute
	refreshTimeout = time.Minute
)

// caseResult is one growth, with or without warm handoff.
type caseResult struct {
	Handoff bool
	// S3 requests at the proxy: the warming lap, the steady reading of the
	// warm cache before the change, from the change to the end of the
	// re-read, and from there to the end of the window.
	Warm, Steady, Reread, Rest benchkit.S3Counts
	// Node counters over the whole run.
	HandedOff, HandoffMisses float64 // previous owners' answers to handoff probes
	Hits, Misses             float64 // chunk reads on the nodes
	NoSpace                  float64 // chunk puts refused for lack of space
	// Placement of the dataset's chunks in the rings before and after.
	Chunks, Moved, MovedToNew int
	// Reads through the client over the whole run.
	Reads, Failed, Wrong int64
	FirstError           string
	// Time from publishing the new ring until the client routed by it, and
	// until the re-read was complete.
	RefreshTook, RereadTook time.Duration
	// Read throughput: before the change, during the re-read, and the lowest
	// sampling bucket after the change.
	BeforeMBps, RereadMBps, MinAfterMBps float64
	Series                               []point
}

// point is one throughput bucket: At is the end of the bucket in seconds
// relative to the change; Gets counts S3 GETs since the steady phase began.
type point struct{ At, MBps, Gets float64 }

func runCase(ctx context.Context, env benchkit.Env, cfg config, data [][]byte, handoff bool) (caseResult, error) {
	res := caseResult{Handoff: handoff}
	dir := filepath.Join(env.WorkDir, map[bool]string{true: "handoff", false: "cold"}[handoff])
	defer os.RemoveAll(dir) // room on disk for the next run

	minio, err := minioproc.Start(ctx, filepath.Join(env.Bin, "minio"), filepath.Join(dir, "minio"))
	if err != nil {
		return res, err
	}
	defer minio.Stop()
	if err := upload(ctx, minio, data); err != nil {
		return res, err
	}
	counter, err := benchkit.StartS3Counter(minio.Endpoint, cfg.s3Latency)
	if err != nil {
		return res, err
	}
	defer counter.Close()
	cache, err := benchcache.Start(ctx, benchcache.Config{
		Dir: filepath.Join(dir, "nodes"), Nodes: 3, Tenant: tenant, Buckets: []string{bucket},
		ChunkSize: cfg.chunkSize, Immutable: true, RAMBytes: cfg.ramBytes, DiskBytes: cfg.diskBytes,
		S3: s3backend.Config{Endpoint: counter.URL, Region: minio.Region, UsePathStyle: true,
			Default: s3backend.Credentials{AccessKeyID: minio.AccessKey, SecretAccessKey: minio.SecretKey}},
	})
	if err != nil {
		return res, err
	}
	defer cache.Close()
	c, err := client.New(ctx, client.Config{Seeds: cache.Seeds(), TLS: cache.PKI.TenantTLS, ChunkSize: cfg.chunkSize})
	if err != nil {
		return res, err
	}
	defer c.Close()
	rd := newReaders(c, data)

	env.Logf("warming 3 nodes")
	if err := rd.lap(ctx, cfg.readers, lapTimeout); err != nil {
		return res, fmt.Errorf("warming: %w", err)
	}
	res.Warm = counter.Counts()

	if err := grow(ctx, env, cfg, cache, c, rd, counter, handoff, &res); err != nil {
		return res, err
	}
	res.Reads, res.Failed, res.Wrong = rd.reads.Load(), rd.failed.Load(), rd.wrong.Load()
	if rd.firstErr != nil {
		res.FirstError = rd.firstErr.Error()
	}
	if err := nodeCounters(cache, &res); err != nil {
		return res, err
	}
	return res, nil
}

// grow reads the warm cache steadily, adds a member and publishes the new
// ring while the readers run, waits for the client to route by it and for a
// whole re-read, and reads on to the end of the window.
func grow(ctx context.Context, env benchkit.Env, cfg config, cache *benchcache.Cache, c *client.Client,
	rd *readers, counter *benchkit.S3Counter, handoff bool, res *caseResult) error {
	stop := rd.start(ctx, cfg.readers)
	defer stop()
	smp := startSampler(cfg.bucket, rd, counter)
	defer smp.stop()
	t0, c0, b0 := time.Now(), counter.Counts(), rd.bytes.Load()
	if err := ctxtime.Sleep(ctx, cfg.before); err != nil {
		return err
	}

	env.Logf("adding a 4th node (handoff %v)", handoff)
	before := cache.Ring()
	m, err := cache.AddNode()
	if err != nil {
		return err
	}
	after, err := cache.Publish(handoff)
	if err != nil {
		return err
	}
	tChange, cChange, bChange := time.Now(), counter.Counts(), rd.bytes.Load()
	res.Steady = cChange.Sub(c0)
	res.BeforeMBps = mbps(bChange-b0, tChange.Sub(t0))

	for c.Ring().Epoch() < after.Epoch() {
		if time.Since(tChange) > refreshTimeout {
			return fmt.Errorf("the client did not learn ring epoch %d within %s", after.Epoch(), refreshTimeout)
		}
		if err := ctxtime.Sleep(ctx, 5*time.Millisecond); err != nil {
			return err
		}
	}
	res.RefreshTook = time.Since(tChange)
	var (
		tLap time.Time
		cLap benchkit.S3Counts
		bLap int64
	)
	lapDone := rd.startLap(func() { tLap, cLap, bLap = time.Now(), counter.Counts(), rd.bytes.Load() })
	if err := wait(ctx, lapDone, lapTimeout, "whole re-read after the change"); err != nil {
		return err
	}
	res.RereadTook = tLap.Sub(tChange)
	res.Reread = cLap.Sub(cChange)
	res.RereadMBps = mbps(bLap-bChange, tLap.Sub(tChange))
	if err := ctxtime.Sleep(ctx, max(cfg.after-time.Since(tChange), cfg.tail)); err != nil {
		return err
	}
	stop()
	samples := smp.stop()
	res.Rest = counter.Counts().Sub(cLap)

	res.MinAfterMBps = -1
	for i := 1; i < len(samples); i++ {
		p := point{
			At:   samples[i].at.Sub(tChange).Seconds(),
			MBps: mbps(samples[i].bytes-samples[i-1].bytes, samples[i].at.Sub(samples[i-1].at)),
			Gets: float64(samples[i].gets - c0.GETs),
		}
		res.Series = append(res.Series, p)
		if p.At > 0 && (res.MinAfterMBps < 0 || p.MBps < res.MinAfterMBps) {
			res.MinAfterMBps = p.MBps
		}
	}
	placement(rd, cfg, before, after, m.Name, res)
	return nil
}

// placement counts the dataset's chunks whose owner changed between the
// rings, and how many of those the new member got.
func placement(rd *readers, cfg config, before, after *ring.Ring, newMember string, res *caseResult) {
	rd.mu.Lock()
	defer rd.mu.Unlock()
	for i, etag := range rd.etags {
		for idx := range cfg.chunksPerObject() {
			id := chunk.ID{Object: chunk.Object{Tenant: tenant, Bucket: bucket, Key: objectKey(i)}, ETag: etag, Size: cfg.chunkSize, Index: idx}
			res.Chunks++
			if o := after.Owner(id).Name; o != before.Owner(id).Name {
				res.Moved++
				if o == newMember {
					res.MovedToNew++
				}
			}
		}
	}
}

func nodeCounters(cache *benchcache.Cache, res *caseResult) error {
	for _, q := range []struct {
		dst    *float64
		name   string
		labels [][]string // label, value pairs; their sums add up
	}{
		{&res.HandedOff, "distcache_peer_requests_total", [][]string{{"kind", "handoff", "result", "ok"}}},
		{&res.HandoffMisses, "distcache_peer_requests_total", [][]string{{"kind", "handoff", "result", "miss"}}},
		{&res.Hits, "distcache_chunk_reads_total", [][]string{{"result", "hit_ram"}, {"result", "hit_disk"}}},
		{&res.Misses, "distcache_chunk_reads_total", [][]string{{"result", "miss"}}},
		{&res.NoSpace, "distcache_store_failures_total", [][]string{{"reason", "no_space"}}},
	} {
		for _, n := range cache.Nodes() {
			for _, l := range q.labels {
				v := benchkit.Counter(n.Reg, q.name, l...)
				if v < 0 {
					return fmt.Errorf("node %s: cannot gather its metrics", n.Name)
				}
				*q.dst += v
			}
		}
	}
	return nil
}

func upload(ctx context.Context, minio *minioproc.Server, data [][]byte) error {
	if err := minio.CreateBucket(ctx, bucket); err != nil {
		return err
	}
	s3c := minio.Client()
	g, gctx := errgroup.WithContext(ctx)
	g.SetLimit(4)
	for i, d := range data {
		g.Go(func() error {
			_, err := s3c.PutObject(gctx, &s3.PutObjectInput{Bucket: aws.String(bucket), Key: aws.String(objectKey(i)), Body: bytes.NewReader(d)})
			return err
		})
	}
	return g.Wait()
}

// sampler records the bytes read and the S3 GETs made at every tick.
type sampler struct {
	done    chan struct{}
	wg      sync.WaitGroup
	samples []sample
	once    sync.Once
}

type sample struct {
	at          time.Time
	bytes, gets int64
}

func startSampler(every time.Duration, rd *readers, counter *benchkit.S3Counter) *sampler {
	s := &sampler{done: make(chan struct{})}
	take := func() { s.samples = append(s.samples, sample{time.Now(), rd.bytes.Load(), counter.Counts().GETs}) }
	take()
	s.wg.Add(1)
	go func() {
		defer s.wg.Done()
		t := time.NewTicker(every)
		defer t.Stop()
		for {
			select {
			case <-t.C:
				take()
			case <-s.done:
				return
			}
		}
	}()
	return s
}

// stop ends the sampling and returns the samples; later calls return the
// same.
func (s *sampler) stop() []sample {
	s.once.Do(func() {
		close(s.done)
		s.wg.Wait()
	})
	return s.samples
}

func mbps(n int64, d time.Duration) float64 {
	if d <= 0 {
		return 0
	}
	return float64(n) / 1e6 / d.Seconds()
}
