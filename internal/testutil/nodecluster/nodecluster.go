// Package nodecluster runs a loopback cluster of real cache nodes for tests:
// every node is assembled by internal/embed's StartNode, as `cachenode
// serve` assembles one, over real mTLS (certificates from a test CA) with
// its own store and ring holder, all reading one real MinIO through a
// counting, fault-injecting proxy (s3proxy) and sharing one tenants file.
// Gateways in front of the cluster are embed's too (StartGateway).
//
//	c := nodecluster.Start(t, 3)
//	tlsA := c.TenantTLS("team-a")               // a tenant's client certificate
//	c.PutDirect("bucket-a", "k", data)          // behind the cache's back
//	c.Kill(1)                                   // a member dies
//	c.Add(); c.Publish(true)                    // grow, with warm handoff
//	n := c.Sum("distcache_peer_requests_total", map[string]string{"kind": "forward"})
//
// With Options.Zones the nodes form one ring per zone, as a cache spread
// over availability zones does (StartWith(t, 2, Options{Zones: []string{"a",
// "b"}}) runs cache-a-0, cache-a-1, cache-b-0, cache-b-1); every node also
// holds the other zones' rings, for Options.CrossZone.
//
// With Options.Alone every node runs alone, without a ring, as `cachenode
// serve` without --ring-file (StartWith(t, 1, Options{Alone: true}) is one
// node; StopMember and RestartMember stop it and start it again on its data
// directory).
//
// Tests never assert on time: nodes use Clock (Advance moves it past the
// metadata TTL).
//
// It is a test harness: programs never import it (the benchmarks run
// their caches with tools/benchmark/benchcache, on internal/embed too).
package nodecluster

import (
	"context"
	"crypto/tls"
	"fmt"
	"log/slog"
	"net"
	"os"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/service/s3"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/distcache/distcache/internal/chunk"
	"github.com/distcache/distcache/internal/closers"
	"github.com/distcache/distcache/internal/embed"
	"github.com/distcache/distcache/internal/metrics"
	"github.com/distcache/distcache/internal/node"
	"github.com/distcache/distcache/internal/pki"
	"github.com/distcache/distcache/internal/ring"
	"github.com/distcache/distcache/internal/s3backend"
	"github.com/distcache/distcache/internal/store"
	"github.com/distcache/distcache/internal/tenancy"
	"github.com/distcache/distcache/internal/testutil"
	"github.com/distcache/distcache/internal/testutil/miniotest"
	"github.com/distcache/distcache/internal/testutil/s3proxy"
)

// DefaultChunkSize is the nodes' chunk size unless Options say otherwise.
const DefaultChunkSize = 256 << 10

// DefaultTenants is the tenants file unless Options say otherwise: two
// tenants with a bucket each and one bucket they share.
const DefaultTenants = `tenants:
  - name: team-a
    buckets: [bucket-a, shared]
  - name: team-b
    buckets: [bucket-b, shared]
`

// DefaultBuckets are created in MinIO unless Options say otherwise.
var DefaultBuckets = []string{"bucket-a", "bucket-b", "shared"}

// Options tune the cluster; the zero value is usable.
type Options struct {
	ChunkSize int64         // default DefaultChunkSize
	MetaTTL   time.Duration // default 1 minute (of Clock time)
	Immutable bool          // never revalidate metadata
	// MetaLease is the nodes' metadata lease (default 500ms, shorter than
	// a node's, so that writes right after start wait less).
	MetaLease time.Duration
	Tenants   string   // tenants file YAML; default DefaultTenants
	Buckets   []string // created in MinIO; default DefaultBuckets
	RAMBytes  int64    // per node RAM tier; default 64 MiB, negative: none
	DiskBytes int64    // per node disk bound; default 256 MiB
	// MaintenanceInterval is the stores' (default: the store's).
	MaintenanceInterval time.Duration
	// PeerTimeout bounds a node-to-node request (default 5s).
	PeerTimeout time.Duration
	// The nodes' shared S3 backend: in-flight cap (default 32), attempts
	// per request (default 3), backoff cap (default 100ms) and timeout of
	// one request (default 10s).
	S3MaxConcurrent int
	S3MaxAttempts   int
	S3MaxBackoff    time.Duration
	S3Timeout       time.Duration
	// Zones, when set, are the cache's zones: Start's n nodes run in each
	// (named cache-<zone>-<i>), every zone has its own ring (naming the
	// zone), and every node holds the other zones' rings. Default: one
	// zone, "test", of nodes named cache-<i>.
	Zones []string
	// CrossZone is every node's node.Config.CrossZone (default Never).
	CrossZone node.CrossZone
	// Alone runs every node alone: no ring, no peers (as `cachenode serve`
	// without --ring-file); nothing is published.
	Alone bool
	// WrapListener, when set, wraps each node's TCP listener (under its
	// TLS and batching listeners), e.g. to count socket writes.
	WrapListener func(net.Listener) net.Listener
}

// Clock is the nodes' clock; tests move it instead of sleeping.
type Clock struct {
	mu  sync.Mutex
	now time.Time
}

// Now is the current fake time.
func (c *Clock) Now() time.Time { c.mu.Lock(); defer c.mu.Unlock(); return c.now }

// Advance moves the clock forward.
func (c *Clock) Advance(d time.Duration) { c.mu.Lock(); c.now = c.now.Add(d); c.mu.Unlock() }

// Member is one cache node. RestartMember replaces its Node, and with it
// Addr, Store, Registry and Metrics.
type Member struct {
	Name     string
	Addr     string // host:port of the mTLS API
	Node     *embed.Node
	Store    *store.Store
	Registry *prometheus.Registry // this node's metrics
	Metrics  *metrics.Node
	Ring     *ring.Holder // nil with Options.Alone
	// Zone is the member's zone; Zones holds the other zones' rings.
	Zone  string
	Zones *node.ZoneRings

	mu   sync.Mutex
	n    *embed.Node // Node, for Close while a restart may replace it
	dead bool
}

func (m *Member) node() *embed.Node { m.mu.Lock(); defer m.mu.Unlock(); return m.n }

// URL is https://Addr.
func (m *Member) URL() string { return "https://" + m.Addr }

// Dead reports whether Kill stopped this member.
func (m *Member) Dead() bool { m.mu.Lock(); defer m.mu.Unlock(); return m.dead }

// Holds reports whether the member has the chunk in its store (RAM or disk).
func (m *Member) Holds(id chunk.ID) bool {
	_, _, err := m.Store.GetChunk(id)
	return err == nil
}

// Cluster is a running set of cache nodes.
type Cluster struct {
	// T is the test the cluster belongs to.
	T     testing.TB
	Opts  Options
	MinIO *miniotest.Server
	// Direct talks to MinIO itself (root credentials), bypassing the cache.
	Direct *s3.Client
	// Proxy sits between the nodes and MinIO: it counts S3 requests and
	// injects faults.
	Proxy  *s3proxy.Proxy
	CA     *pki.CA
	CAFile string // PEM of the CA that signed the nodes' and the clients' certificates
	Dir    string
	Clock  *Clock
	// Backend is the S3 backend every node shares; S3Registry holds its
	// metrics.
	Backend    *s3backend.Backend
	S3Registry *prometheus.Registry
	Tenants    *tenancy.Watcher

	mu      sync.Mutex
	members []*Member
	epoch   int64
	tls     map[string]*tls.Config

	cleanups closers.List // run in reverse by Close
}

// S3 is the S3 endpoint the nodes of a cluster read and write.
type S3 struct {
	Endpoint  string // http://host:port, path-style
	Region    string
	AccessKey string
	SecretKey string
}

// Start runs n nodes with default options and publishes a ring of all of
// them (epoch 1).
func Start(t testing.TB, n int) *Cluster { return StartWith(t, n, Options{}) }

// StartWith runs n nodes with opts and publishes a ring of all of them.
// Everything stops when the test ends.
func StartWith(t testing.TB, n int, opts Options) *Cluster {
	t.Helper()
	opts = opts.withDefaults()
	minio := miniotest.Start(t)
	for _, b := range opts.Buckets {
		minio.CreateBucket(t, b)
	}
	proxy := s3proxy.New(t, minio.Endpoint)
	c := newCluster(opts, t.TempDir())
	c.T, c.MinIO, c.Direct, c.Proxy = t, minio, minio.Client(t), proxy
	t.Cleanup(c.Close)
	testutil.Must(t, c.start(n, S3{Endpoint: proxy.URL(), Region: minio.Region, AccessKey: minio.AccessKey, SecretKey: minio.SecretKey}))
	return c
}

func (o Options) withDefaults() Options {
	if o.ChunkSize == 0 {
		o.ChunkSize = DefaultChunkSize
	}
	if o.MetaTTL == 0 {
		o.MetaTTL = time.Minute
	}
	if o.MetaLease == 0 {
		o.MetaLease = 500 * time.Millisecond
	}
	if o.Tenants == "" {
		o.Tenants = DefaultTenants
	}
	if o.Buckets == nil {
		o.Buckets = DefaultBuckets
	}
	if o.RAMBytes == 0 {
		o.RAMBytes = 64 << 20
	}
	if o.DiskBytes == 0 {
		o.DiskBytes = 256 << 20
	}
	if o.PeerTimeout == 0 {
		o.PeerTimeout = 5 * time.Second
	}
	if o.S3MaxConcurrent == 0 {
		o.S3MaxConcurrent = 32
	}
	if o.S3MaxAttempts == 0 {
		o.S3MaxAttempts = 3
	}
	if o.S3MaxBackoff == 0 {
		o.S3MaxBackoff = 100 * time.Millisecond
	}
	if o.S3Timeout == 0 {
		o.S3Timeout = 10 * time.Second
	}
	if o.CrossZone == "" {
		o.CrossZone = node.CrossZoneNever
	}
	return o
}

// defaultZone is the zone of a cluster started without Options.Zones.
const defaultZone = "test"

// zones are the cluster's zones, in Options order.
func (o Options) zones() []string {
	if len(o.Zones) == 0 {
		return []string{defaultZone}
	}
	return o.Zones
}

func newCluster(opts Options, dir string) *Cluster {
	return &Cluster{Opts: opts, Dir: dir, Clock: &Clock{now: time.Now()}, tls: map[string]*tls.Config{}}
}

// start writes the PKI and the tenants file, builds the S3 backend, then runs
// n nodes and publishes a ring of them.
func (c *Cluster) start(n int, s3 S3) error {
	var err error
	if c.CA, err = pki.NewCA("distcache test CA", time.Hour); err != nil {
		return err
	}
	c.CAFile = filepath.Join(c.Dir, "ca.crt")
	if err := os.WriteFile(c.CAFile, c.CA.CertPEM, 0o600); err != nil {
		return err
	}
	leaf, err := c.CA.IssueServer("cache", []string{"localhost"}, []net.IP{net.ParseIP("127.0.0.1")}, time.Hour)
	if err != nil {
		return err
	}
	if err := pki.WriteFiles(c.Dir, "server", leaf); err != nil {
		return err
	}

	tenantsPath := filepath.Join(c.Dir, "tenants.yaml")
	if err := os.WriteFile(tenantsPath, []byte(c.Opts.Tenants), 0o600); err != nil {
		return err
	}
	ctx, cancel := context.WithCancel(context.Background())
	c.cleanups.Add(cancel)
	if c.Tenants, err = tenancy.Watch(ctx, tenantsPath, slog.New(slog.DiscardHandler)); err != nil {
		return err
	}
	c.cleanups.Add(func() { _ = c.Tenants.Close() })

	c.S3Registry = prometheus.NewRegistry()
	c.Backend, err = s3backend.New(s3backend.Config{
		Endpoint: s3.Endpoint, Region: s3.Region, UsePathStyle: true,
		Default:       s3backend.Credentials{AccessKeyID: s3.AccessKey, SecretAccessKey: s3.SecretKey},
		MaxConcurrent: c.Opts.S3MaxConcurrent, MaxAttempts: c.Opts.S3MaxAttempts, MaxBackoff: c.Opts.S3MaxBackoff,
		RequestTimeout: c.Opts.S3Timeout, PartSize: 5 << 20, Observer: metrics.NewNode(c.S3Registry),
	})
	if err != nil {
		return err
	}
	for _, zone := range c.Opts.zones() {
		for i := 0; i < n; i++ {
			if _, err := c.AddMemberIn(zone); err != nil {
				return err
			}
		}
	}
	if n > 0 && !c.Opts.Alone {
		if _, err := c.PublishRing(false); err != nil {
			return err
		}
	}
	return nil
}

// Close stops every node and what the cluster started, newest first. It is
// idempotent; the cluster is closed when its test ends.
func (c *Cluster) Close() { c.cleanups.Close() }

// Members returns the members started so far, dead ones included, in the
// order they were added.
func (c *Cluster) Members() []*Member {
	c.mu.Lock()
	defer c.mu.Unlock()
	return append([]*Member(nil), c.members...)
}

// Member returns member i.
func (c *Cluster) Member(i int) *Member { return c.Members()[i] }

// Seeds returns https://addr of every member, for client configurations.
func (c *Cluster) Seeds() []string {
	var s []string
	for _, m := range c.Members() {
		s = append(s, m.URL())
	}
	return s
}

// ZoneMembers returns the members of zone, dead ones included, in the
// order they were added.
func (c *Cluster) ZoneMembers(zone string) []*Member {
	var out []*Member
	for _, m := range c.Members() {
		if m.Zone == zone {
			out = append(out, m)
		}
	}
	return out
}

// ZoneSeeds returns https://addr of every member of zone.
func (c *Cluster) ZoneSeeds(zone string) []string {
	var s []string
	for _, m := range c.ZoneMembers(zone) {
		s = append(s, m.URL())
	}
	return s
}

// ZoneRing is the ring the cluster published last for zone (nil before).
func (c *Cluster) ZoneRing(zone string) *ring.Ring {
	ms := c.ZoneMembers(zone)
	if len(ms) == 0 || ms[0].Ring == nil {
		return nil
	}
	return ms[0].Ring.Load()
}

// Add starts one more node in the first zone. It is not in the ring until
// Publish.
func (c *Cluster) Add() *Member {
	c.T.Helper()
	m, err := c.AddMember()
	testutil.Must(c.T, err)
	return m
}

// AddMember is Add returning its error.
func (c *Cluster) AddMember() (*Member, error) { return c.AddMemberIn(c.Opts.zones()[0]) }

// AddMemberIn starts one more node in zone, which need not be one of
// Options.Zones. It is not in the zone's ring until Publish.
func (c *Cluster) AddMemberIn(zone string) (*Member, error) {
	c.mu.Lock()
	name := fmt.Sprintf("cache-%d", len(c.members))
	if len(c.Opts.Zones) > 0 {
		n := 0
		for _, m := range c.members {
			if m.Zone == zone {
				n++
			}
		}
		name = fmt.Sprintf("cache-%s-%d", zone, n)
	}
	c.mu.Unlock()
	m := &Member{Name: name, Zone: zone, Zones: &node.ZoneRings{}}
	if !c.Opts.Alone {
		m.Ring = &ring.Holder{}
	}
	if err := c.startMember(m); err != nil {
		return nil, err
	}
	c.cleanups.Add(func() { m.node().Close() })
	c.mu.Lock()
	c.members = append(c.members, m)
	c.mu.Unlock()
	return m, nil
}

// startMember starts m's node (embed.StartNode) on its data directory and
// a new port, with a new registry.
func (c *Cluster) startMember(m *Member) error {
	peerCert, peerKey, err := c.CertFiles(pki.Identity{Kind: pki.KindPeer, Name: m.Name})
	if err != nil {
		return err
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return err
	}
	if c.Opts.WrapListener != nil {
		ln = c.Opts.WrapListener(ln)
	}
	cfg := embed.NodeConfig{
		Listener: ln, TLSCert: filepath.Join(c.Dir, "server.crt"), TLSKey: filepath.Join(c.Dir, "server.key"), ClientCA: c.CAFile,
		DataDir: filepath.Join(c.Dir, m.Name), DiskBytes: c.Opts.DiskBytes, RAMBytes: max(c.Opts.RAMBytes, 0),
		MaintenanceInterval: c.Opts.MaintenanceInterval,
		ChunkSize:           c.Opts.ChunkSize, MetaTTL: c.Opts.MetaTTL, Immutable: c.Opts.Immutable, MetaLease: c.Opts.MetaLease,
		Tenants: c.Tenants, Backend: c.Backend,
		Ring: m.Ring, Self: m.Name, PeerTimeout: c.Opts.PeerTimeout,
		PeerCert: peerCert, PeerKey: peerKey,
		CrossZone: c.Opts.CrossZone, ZoneRings: m.Zones,
		Now: c.Clock.Now,
	}
	n, err := embed.StartNode(context.Background(), cfg)
	if err != nil {
		return err
	}
	m.mu.Lock()
	m.n, m.dead = n, false
	m.mu.Unlock()
	m.Addr, m.Store, m.Registry, m.Metrics = n.Addr(), n.Store(), n.Registry(), n.Metrics()
	m.Node = n
	return nil
}

// StopMember stops member m's node, store included (a process that
// exits); RestartMember starts it again.
func (c *Cluster) StopMember(m *Member) {
	m.mu.Lock()
	m.dead = true
	m.mu.Unlock()
	m.node().Close()
}

// RestartMember is a process restart: m's node stops, then starts again on
// its data directory and a new port (Publish to put the new address in
// the ring).
func (c *Cluster) RestartMember(m *Member) error {
	c.StopMember(m)
	return c.startMember(m)
}

// Kill stops member i at once: its listener and every open connection are
// closed, so requests in flight fail mid-stream. It stays in the ring until
// the next Publish that leaves it out (PublishWithout).
func (c *Cluster) Kill(i int) { c.KillMember(c.Member(i)) }

// KillMember is Kill by member.
func (c *Cluster) KillMember(m *Member) {
	m.mu.Lock()
	m.dead = true
	m.mu.Unlock()
	_ = m.node().HTTPServer().Close()
}
