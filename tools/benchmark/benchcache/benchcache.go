// Package benchcache runs a cache in the benchmark's process: cache nodes
// assembled by internal/embed's StartNode and gateways by its StartGateway,
// as `cachenode serve` and `cachenode gateway` assemble them, so a
// benchmark measures the wiring production runs. The parts that run the
// cache in-process (B1 hitpath, B3 scaleout, B5 writepath) start it with
// Start and Cache.StartGateway; none of it is a test harness.
//
// The nodes share one ring holder (Publish stores a new epoch in it), one
// tenants watcher and one PKI; each has its own store, S3 backend and
// metrics registry, as a process of its own would.
package benchcache

import (
	"context"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/distcache/distcache/internal/embed"
	"github.com/distcache/distcache/internal/ring"
	"github.com/distcache/distcache/internal/s3backend"
	"github.com/distcache/distcache/internal/store"
	"github.com/distcache/distcache/internal/tenancy"
	"github.com/distcache/distcache/tools/benchmark/benchkit"
)

// Config is an in-process cache: Nodes cache nodes sharing one ring over
// mTLS, serving one tenant, reading and writing S3 through S3.
type Config struct {
	Dir       string // certificates, the tenants file and the nodes' stores
	Nodes     int    // members of the ring (at least 1)
	Tenant    string
	Buckets   []string // the tenant's
	ChunkSize int64
	RAMBytes  int64 // per node
	DiskBytes int64 // per node
	// Immutable is `cachenode serve --immutable`; false is its default,
	// metadata trusted for MetaTTL (zero: DefaultMetaTTL).
	Immutable bool
	MetaTTL   time.Duration
	// S3 is each node's backend: endpoint, region, path style and
	// credentials (the Observer is each node's metrics); what it leaves
	// zero is s3backend's default, as `cachenode serve`'s flags.
	S3 s3backend.Config
	// Wrap, when set, wraps every node's API handler (to time requests).
	Wrap func(node string, h http.Handler) http.Handler
	// Policies are the tenant's write policies (WriteBack prefixes).
	Policies []tenancy.Policy
	// WriteBackPutIfAbsent is `cachenode serve --writeback-put-if-absent`
	// (on by default for AWS S3's endpoints; MinIO honours If-None-Match:
	// * too).
	WriteBackPutIfAbsent bool
}

// DefaultMetaTTL is `cachenode serve`'s default --meta-ttl.
const DefaultMetaTTL = 30 * time.Second

// Zone is the zone of the bench caches' ring.
const Zone = "bench"

// Cache is a running in-process cache.
type Cache struct {
	cfg     Config
	PKI     *PKI
	ctx     context.Context // the tenants watch
	tenants *tenancy.Watcher
	ring    *ring.Holder

	closers benchkit.Closers

	mu    sync.Mutex
	nodes []*Node
}

// Node is one in-process cache node.
type Node struct {
	Name, Addr string
	Node       *embed.Node
	Store      *store.Store
	Reg        *prometheus.Registry // its metrics
}

// Start starts the nodes of cfg, each listening on 127.0.0.1, and
// publishes the ring of them (epoch 1).
func Start(ctx context.Context, cfg Config) (_ *Cache, err error) {
	if cfg.Nodes < 1 {
		cfg.Nodes = 1
	}
	if cfg.MetaTTL <= 0 {
		cfg.MetaTTL = DefaultMetaTTL
	}
	c := &Cache{cfg: cfg, ring: &ring.Holder{}}
	if err := os.MkdirAll(cfg.Dir, 0o755); err != nil {
		return nil, err
	}
	defer func() {
		if err != nil {
			c.Close()
		}
	}()
	var cancel context.CancelFunc
	c.ctx, cancel = context.WithCancel(context.WithoutCancel(ctx))
	c.onClose(cancel)
	if c.PKI, err = NewPKI(cfg.Dir, cfg.Tenant); err != nil {
		return nil, err
	}
	tenantsFile := filepath.Join(cfg.Dir, "tenants.yaml")
	doc := fmt.Appendf(nil, "tenants:\n  - name: %s\n    buckets: [%s]\n", cfg.Tenant, strings.Join(cfg.Buckets, ", "))
	if len(cfg.Policies) > 0 {
		doc = append(doc, "    policies:\n"...)
		for _, p := range cfg.Policies {
			doc = fmt.Appendf(doc, "      - {bucket: %s, prefix: %q, mode: %s, replicas: %d}\n", p.Bucket, p.Prefix, p.Mode, p.ReplicaCount())
		}
	}
	if err := os.WriteFile(tenantsFile, doc, 0o600); err != nil {
		return nil, err
	}
	if c.tenants, err = tenancy.Watch(c.ctx, tenantsFile, slog.New(slog.DiscardHandler)); err != nil {
		return nil, err
	}
	c.onClose(func() { _ = c.tenants.Close() })
	for range cfg.Nodes {
		if _, err := c.AddNode(); err != nil {
			return nil, err
		}
	}
	if _, err := c.Publish(false); err != nil {
		return nil, err
	}
	return c, nil
}

func (c *Cache) onClose(f func()) { c.closers.Add(f) }

// Close stops the gateways and the nodes, last started first.
func (c *Cache) Close() { c.closers.Close() }

// Nodes are the nodes started so far, in the order they were added.
func (c *Cache) Nodes() []*Node {
	c.mu.Lock()
	defer c.mu.Unlock()
	return append([]*Node(nil), c.nodes...)
}

// Seeds are https://ADDR of every node, in the order they were added.
func (c *Cache) Seeds() []string {
	var s []string
	for _, n := range c.Nodes() {
		s = append(s, "https://"+n.Addr)
	}
	return s
}

// Ring is the ring published last.
func (c *Cache) Ring() *ring.Ring { return c.ring.Load() }

// AddNode starts one more node (embed.StartNode, on the shared ring
// holder) with a peer certificate of its own. It is not in the ring until
// Publish.
func (c *Cache) AddNode() (*Node, error) {
	name := fmt.Sprintf("cache-%d", len(c.Nodes()))
	if err := c.PKI.IssuePeer(name); err != nil {
		return nil, err
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, err
	}
	var wrap func(http.Handler) http.Handler
	if c.cfg.Wrap != nil {
		wrap = func(h http.Handler) http.Handler { return c.cfg.Wrap(name, h) }
	}
	en, err := embed.StartNode(c.ctx, embed.NodeConfig{
		Listener: ln, TLSCert: c.PKI.file("server.crt"), TLSKey: c.PKI.file("server.key"), ClientCA: c.PKI.CAFile,
		PeerCert: c.PKI.file("peer-" + name + ".crt"), PeerKey: c.PKI.file("peer-" + name + ".key"),
		DataDir: filepath.Join(c.cfg.Dir, "store-"+name), DiskBytes: c.cfg.DiskBytes, RAMBytes: c.cfg.RAMBytes,
		ChunkSize: c.cfg.ChunkSize, Immutable: c.cfg.Immutable, MetaTTL: c.cfg.MetaTTL,
		Tenants: c.tenants, S3: c.cfg.S3, Ring: c.ring, Self: name,
		WrapHandler: wrap, WriteBackPutIfAbsent: c.cfg.WriteBackPutIfAbsent,
	})
	if err != nil {
		return nil, fmt.Errorf("node %s: %w", name, err)
	}
	c.onClose(en.Close)
	n := &Node{Name: name, Addr: en.Addr(), Node: en, Store: en.Store(), Reg: en.Registry()}
	c.mu.Lock()
	c.nodes = append(c.nodes, n)
	c.mu.Unlock()
	return n, nil
}

// Publish gives the nodes a new ring epoch holding all of them;
// withPrevious carries the membership of the epoch before, for warm
// handoff.
func (c *Cache) Publish(withPrevious bool) (*ring.Ring, error) {
	spec := ring.Spec{Epoch: 1, Zone: Zone, Hash: ring.HashParams{Algorithm: ring.AlgorithmRendezvousXXHash64}}
	prev := c.ring.Load()
	if prev != nil {
		spec.Epoch = prev.Epoch() + 1
		if withPrevious {
			spec.Previous = &ring.PreviousRing{Epoch: prev.Epoch(), Members: prev.Members()}
		}
	}
	for i, n := range c.Nodes() {
		spec.Members = append(spec.Members, ring.Member{Name: n.Name, Address: n.Addr, Ordinal: i, Weight: 100, State: ring.StateActive})
	}
	r, err := ring.New(spec)
	if err != nil {
		return nil, err
	}
	c.ring.Store(r)
	return r, nil
}
