package main

import (
	"bytes"
	"context"
	"crypto/rand"
	"crypto/tls"
	"encoding/binary"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	mrand "math/rand/v2"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"runtime"
	"runtime/pprof"
	"slices"
	"sync"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/s3"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/distcache/distcache/internal/metrics"
	"github.com/distcache/distcache/internal/minioproc"
	"github.com/distcache/distcache/internal/node"
	"github.com/distcache/distcache/internal/pki"
	"github.com/distcache/distcache/internal/s3backend"
	"github.com/distcache/distcache/internal/store"
	"github.com/distcache/distcache/internal/tenancy"
)

// runBench measures, in one run and on one machine, cache hits over mTLS
// against the same reads from MinIO directly and against a raw TLS transfer
// of the same bytes (the ceiling for any TLS server in Go on this machine).
func runBench(args []string) error {
	fs := flag.NewFlagSet("bench", flag.ContinueOnError)
	minioBin := fs.String("minio-bin", "bin/minio", "MinIO server binary to start as the S3 backend")
	chunkSize := byteSize(4 << 20)
	objectSize := byteSize(64 << 20)
	fs.Var(&chunkSize, "chunk-size", "cache chunk size")
	fs.Var(&objectSize, "object-size", "size of the object read (its chunks are the working set)")
	duration := fs.Duration("duration", 3*time.Second, "measuring time per cell")
	cpuProfile := fs.String("cpuprofile", "", "write a CPU profile of the whole run to this file")
	var clients listFlag
	fs.Var(&clients, "clients", "concurrent clients per cell (default 1,8,32)")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if len(clients) == 0 {
		clients = listFlag{"1", "8", "32"}
	}
	var conc []int
	for _, c := range clients {
		var n int
		if _, err := fmt.Sscan(c, &n); err != nil || n < 1 {
			return fmt.Errorf("--clients %q is not a positive number", c)
		}
		conc = append(conc, n)
	}
	if *cpuProfile != "" {
		f, err := os.Create(*cpuProfile)
		if err != nil {
			return err
		}
		defer f.Close()
		if err := pprof.StartCPUProfile(f); err != nil {
			return err
		}
		defer pprof.StopCPUProfile()
	}
	ctx := context.Background()
	env, err := startBenchEnv(ctx, *minioBin, int64(chunkSize), int64(objectSize))
	if err != nil {
		return err
	}
	defer env.close()

	workloads := []struct {
		name string
		size int64
	}{{"64 KiB range", 64 << 10}, {"whole chunk (" + chunkSize.String() + ")", int64(chunkSize)}}
	fmt.Printf("distcache bench: object %s, chunk %s, %s per cell, GOMAXPROCS=%d\n\n", objectSize, chunkSize, *duration, runtimeProcs())
	fmt.Println("| workload | clients | cache hit GB/s | p50 | p99 | MinIO direct GB/s | p50 | p99 | raw TLS GB/s | p50 | p99 | hit / raw TLS | hit / MinIO |")
	fmt.Println("|---|---|---|---|---|---|---|---|---|---|---|---|---|")
	for _, w := range workloads {
		for _, n := range conc {
			hit := measure(n, *duration, w.size, env.cacheRead)
			direct := measure(n, *duration, w.size, env.minioRead)
			ceiling := measure(n, *duration, w.size, env.rawRead)
			if hit.err != nil || direct.err != nil || ceiling.err != nil {
				return errors.Join(hit.err, direct.err, ceiling.err)
			}
			fmt.Printf("| %s | %d | %.2f | %s | %s | %.2f | %s | %s | %.2f | %s | %s | %.0f%% | %.1fx |\n",
				w.name, n, hit.gbps(), ms(hit.p50), ms(hit.p99), direct.gbps(), ms(direct.p50), ms(direct.p99),
				ceiling.gbps(), ms(ceiling.p50), ms(ceiling.p99), 100*hit.gbps()/ceiling.gbps(), hit.gbps()/direct.gbps())
		}
	}
	return nil
}

func runtimeProcs() int { return runtime.GOMAXPROCS(0) }

func ms(d time.Duration) string { return fmt.Sprintf("%.3f ms", float64(d.Microseconds())/1000) }

// reader performs one read of size bytes into buf (worker-owned).
type reader func(worker int, size int64, buf []byte) error

type result struct {
	bytes    int64
	elapsed  time.Duration
	p50, p99 time.Duration
	err      error
}

func (r result) gbps() float64 { return float64(r.bytes) / r.elapsed.Seconds() / 1e9 }

// measure runs n workers reading for d and reports throughput and latency.
func measure(n int, d time.Duration, size int64, read reader) result {
	var mu sync.Mutex
	var lat []time.Duration
	var total int64
	var firstErr error
	var wg sync.WaitGroup
	start := time.Now()
	deadline := start.Add(d)
	for w := 0; w < n; w++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			buf := make([]byte, size)
			var mine []time.Duration
			var bytes int64
			for time.Now().Before(deadline) {
				t0 := time.Now()
				if err := read(w, size, buf); err != nil {
					mu.Lock()
					firstErr = cmpErr(firstErr, err)
					mu.Unlock()
					return
				}
				mine = append(mine, time.Since(t0))
				bytes += size
			}
			mu.Lock()
			lat = append(lat, mine...)
			total += bytes
			mu.Unlock()
		}()
	}
	wg.Wait()
	elapsed := time.Since(start)
	if len(lat) == 0 {
		return result{err: cmpErr(firstErr, errors.New("no reads completed"))}
	}
	slices.Sort(lat)
	return result{bytes: total, elapsed: elapsed, p50: lat[len(lat)/2], p99: lat[len(lat)*99/100], err: firstErr}
}

func cmpErr(a, b error) error {
	if a != nil {
		return a
	}
	return b
}

// benchEnv is MinIO, one cache node over mTLS, and a raw TLS echo of bytes.
type benchEnv struct {
	minio      *minioproc.Server
	direct     *s3.Client
	store      *store.Store
	nodeSrv    *http.Server
	nodeURL    string
	nodeClient *http.Client
	rawAddr    string
	rawTLS     *tls.Config
	rawConns   []*tls.Conn
	rawLn      net.Listener
	dir        string
	chunk      int64
	object     int64
	mu         sync.Mutex
}

const benchBucket, benchKey = "bench", "object.bin"

func startBenchEnv(ctx context.Context, minioBin string, chunkSize, objectSize int64) (*benchEnv, error) {
	dir, err := os.MkdirTemp("", "distcache-bench-")
	if err != nil {
		return nil, err
	}
	e := &benchEnv{dir: dir, chunk: chunkSize, object: objectSize}
	fail := func(err error) (*benchEnv, error) { e.close(); return nil, err }

	if e.minio, err = minioproc.Start(ctx, minioBin, filepath.Join(dir, "minio")); err != nil {
		return fail(err)
	}
	e.direct = e.minio.Client()
	if err := e.minio.CreateBucket(ctx, benchBucket); err != nil {
		return fail(err)
	}
	payload := make([]byte, objectSize)
	_, _ = rand.Read(payload)
	if _, err := e.direct.PutObject(ctx, &s3.PutObjectInput{Bucket: aws.String(benchBucket), Key: aws.String(benchKey), Body: bytes.NewReader(payload)}); err != nil {
		return fail(err)
	}

	// Certificates: one CA, a server certificate, a tenant certificate.
	ca, err := pki.NewCA("distcache bench CA", 24*time.Hour)
	if err != nil {
		return fail(err)
	}
	server, err := ca.IssueServer("localhost", []string{"localhost"}, []net.IP{net.IPv4(127, 0, 0, 1)}, 24*time.Hour)
	if err != nil {
		return fail(err)
	}
	client, err := ca.IssueClient(pki.Identity{Kind: pki.KindTenant, Name: "bench"}, 24*time.Hour)
	if err != nil {
		return fail(err)
	}
	for name, leaf := range map[string]*pki.Leaf{"server": server, "client": client} {
		if err := pki.WriteFiles(dir, name, leaf); err != nil {
			return fail(err)
		}
	}
	caFile := filepath.Join(dir, "ca.crt")
	if err := os.WriteFile(caFile, ca.CertPEM, 0o600); err != nil {
		return fail(err)
	}
	tenantsFile := filepath.Join(dir, "tenants.yaml")
	if err := os.WriteFile(tenantsFile, []byte("tenants:\n  - name: bench\n    buckets: ["+benchBucket+"]\n"), 0o600); err != nil {
		return fail(err)
	}

	log := slog.New(slog.DiscardHandler)
	tenants, err := tenancy.Watch(ctx, tenantsFile, log)
	if err != nil {
		return fail(err)
	}
	reg := prometheus.NewRegistry()
	m := metrics.NewNode(reg)
	if e.store, err = store.Open(store.Options{Dir: filepath.Join(dir, "store"), DiskBytes: 4 * objectSize, RAMBytes: 2 * objectSize, Logger: log}); err != nil {
		return fail(err)
	}
	be, err := s3backend.New(s3backend.Config{Endpoint: e.minio.Endpoint, Region: e.minio.Region, UsePathStyle: true,
		Default: s3backend.Credentials{AccessKeyID: e.minio.AccessKey, SecretAccessKey: e.minio.SecretKey}, Observer: m})
	if err != nil {
		return fail(err)
	}
	srv, err := node.New(node.Config{ChunkSize: chunkSize, Immutable: true}, e.store, be, tenants, m, log)
	if err != nil {
		return fail(err)
	}
	serverTLS, err := pki.ServerTLSConfig(filepath.Join(dir, "server.crt"), filepath.Join(dir, "server.key"), caFile)
	if err != nil {
		return fail(err)
	}
	ln, err := tls.Listen("tcp", "127.0.0.1:0", serverTLS)
	if err != nil {
		return fail(err)
	}
	e.nodeURL = "https://" + ln.Addr().String()
	e.nodeSrv = &http.Server{Handler: srv.Handler(), TLSNextProto: map[string]func(*http.Server, *tls.Conn, http.Handler){}}
	go func() { _ = e.nodeSrv.Serve(ln) }()
	clientTLS, err := pki.ClientTLSConfig(filepath.Join(dir, "client.crt"), filepath.Join(dir, "client.key"), caFile)
	if err != nil {
		return fail(err)
	}
	e.nodeClient = &http.Client{Transport: &http.Transport{TLSClientConfig: clientTLS, MaxIdleConnsPerHost: 256, DisableCompression: true}}

	// Warm every chunk so the cache cells measure hits.
	buf := make([]byte, chunkSize)
	for i := int64(0); i*chunkSize < objectSize; i++ {
		if err := e.readChunk(i, 0, min(chunkSize, objectSize-i*chunkSize), buf); err != nil {
			return fail(fmt.Errorf("warming chunk %d: %w", i, err))
		}
	}

	// The ceiling: a raw TLS 1.3 stream that writes N bytes per request.
	if e.rawLn, err = tls.Listen("tcp", "127.0.0.1:0", serverTLS); err != nil {
		return fail(err)
	}
	e.rawAddr = e.rawLn.Addr().String()
	e.rawTLS = clientTLS
	go serveRaw(e.rawLn, payload[:chunkSize])
	return e, nil
}

func serveRaw(ln net.Listener, src []byte) {
	for {
		c, err := ln.Accept()
		if err != nil {
			return
		}
		go func() {
			defer c.Close()
			var hdr [8]byte
			for {
				if _, err := io.ReadFull(c, hdr[:]); err != nil {
					return
				}
				if _, err := c.Write(src[:binary.BigEndian.Uint64(hdr[:])]); err != nil {
					return
				}
			}
		}()
	}
}

func (e *benchEnv) readChunk(idx, off, n int64, buf []byte) error {
	req, _ := http.NewRequest(http.MethodGet, fmt.Sprintf("%s/v1/objects/%s/%s?chunk=%d", e.nodeURL, benchBucket, benchKey, idx), nil)
	if n < e.chunk {
		req.Header.Set("Range", fmt.Sprintf("bytes=%d-%d", off, off+n-1))
	}
	resp, err := e.nodeClient.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	if resp.StatusCode/100 != 2 {
		return fmt.Errorf("cache node answered %s", resp.Status)
	}
	_, err = io.ReadFull(resp.Body, buf[:n])
	return err
}

// target picks a random chunk and, for sub-chunk reads, an aligned offset.
func (e *benchEnv) target(size int64) (idx, off int64) {
	chunks := e.object / e.chunk
	idx = mrand.Int64N(chunks)
	if size < e.chunk {
		off = mrand.Int64N(e.chunk/size) * size
	}
	return idx, off
}

func (e *benchEnv) cacheRead(_ int, size int64, buf []byte) error {
	idx, off := e.target(size)
	return e.readChunk(idx, off, size, buf)
}

func (e *benchEnv) minioRead(_ int, size int64, buf []byte) error {
	idx, off := e.target(size)
	start := idx*e.chunk + off
	out, err := e.direct.GetObject(context.Background(), &s3.GetObjectInput{
		Bucket: aws.String(benchBucket), Key: aws.String(benchKey),
		Range: aws.String(fmt.Sprintf("bytes=%d-%d", start, start+size-1)),
	})
	if err != nil {
		return err
	}
	defer out.Body.Close()
	_, err = io.ReadFull(out.Body, buf[:size])
	return err
}

func (e *benchEnv) rawRead(worker int, size int64, buf []byte) error {
	e.mu.Lock()
	for len(e.rawConns) <= worker {
		e.rawConns = append(e.rawConns, nil)
	}
	c := e.rawConns[worker]
	e.mu.Unlock()
	if c == nil {
		var err error
		if c, err = tls.Dial("tcp", e.rawAddr, e.rawTLS); err != nil {
			return err
		}
		e.mu.Lock()
		e.rawConns[worker] = c
		e.mu.Unlock()
	}
	var hdr [8]byte
	binary.BigEndian.PutUint64(hdr[:], uint64(size))
	if _, err := c.Write(hdr[:]); err != nil {
		return err
	}
	_, err := io.ReadFull(c, buf[:size])
	return err
}

func (e *benchEnv) close() {
	if e.nodeSrv != nil {
		_ = e.nodeSrv.Close()
	}
	if e.rawLn != nil {
		_ = e.rawLn.Close()
	}
	for _, c := range e.rawConns {
		if c != nil {
			_ = c.Close()
		}
	}
	if e.store != nil {
		_ = e.store.Close()
	}
	if e.minio != nil {
		e.minio.Stop()
	}
	_ = os.RemoveAll(e.dir)
}
