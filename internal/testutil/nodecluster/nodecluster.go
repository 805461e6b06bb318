// Package nodecluster runs a loopback cluster of real cache nodes for tests:
// every node is a node.Server over real mTLS (certificates from a test CA)
// with its own store and ring holder, all reading one real MinIO through a
// counting, fault-injecting proxy (s3proxy) and sharing one tenants file, as
// `cachenode serve` wires them.
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
// Tests never assert on time: nodes use Clock (Advance moves it past the
// metadata TTL).
//
// Programs (the bench) use Open instead of Start: they run the S3 side
// themselves and call the methods that return errors (AddMember,
// PublishRing, ClientTLSConfig, Total).
package nodecluster

import (
	"bytes"
	"context"
	"crypto/tls"
	"fmt"
	"io"
	"log"
	"log/slog"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/s3"
	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"

	"github.com/distcache/distcache/internal/chunk"
	"github.com/distcache/distcache/internal/metrics"
	"github.com/distcache/distcache/internal/node"
	"github.com/distcache/distcache/internal/pki"
	"github.com/distcache/distcache/internal/ring"
	"github.com/distcache/distcache/internal/s3backend"
	"github.com/distcache/distcache/internal/store"
	"github.com/distcache/distcache/internal/tenancy"
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
	RAMBytes  int64    // per node RAM tier; default 64 MiB
	DiskBytes int64    // per node disk bound; default 256 MiB
	// PeerTimeout bounds a node-to-node request (default 5s).
	PeerTimeout time.Duration
	// The nodes' shared S3 backend: in-flight cap (default 32), attempts
	// per request (default 3) and backoff cap (default 100ms).
	S3MaxConcurrent int
	S3MaxAttempts   int
	S3MaxBackoff    time.Duration
	// Zones, when set, are the cache's zones: Start's n nodes run in each
	// (named cache-<zone>-<i>), every zone has its own ring (naming the
	// zone), and every node holds the other zones' rings. Default: one
	// zone, "test", of nodes named cache-<i>.
	Zones []string
	// CrossZone is every node's node.Config.CrossZone (default Never).
	CrossZone node.CrossZone
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

// Member is one cache node.
type Member struct {
	Name     string
	Addr     string // host:port of the mTLS API
	Store    *store.Store
	Server   *http.Server
	Registry *prometheus.Registry // this node's metrics
	Metrics  *metrics.Node
	Ring     *ring.Holder
	// Zone is the member's zone; Zones holds the other zones' rings.
	Zone  string
	Zones *node.ZoneRings

	mu   sync.Mutex
	dead bool
}

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
	// T is the test the cluster belongs to; nil for a cluster made by Open.
	T    testing.TB
	Opts Options
	// MinIO, Direct and Proxy are nil for a cluster made by Open.
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
	closers []func() // run in reverse by Close
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
	must(t, c.start(n, S3{Endpoint: proxy.URL(), Region: minio.Region, AccessKey: minio.AccessKey, SecretKey: minio.SecretKey}))
	return c
}

// Open is StartWith for programs rather than tests (the bench): the nodes
// read s3, which the caller runs (MinIO with opts.Buckets created, any proxy
// in front of it); certificates, the tenants file and the nodes' data live
// under dir (created); errors are returned, and Close stops everything.
func Open(n int, opts Options, s3 S3, dir string) (*Cluster, error) {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, err
	}
	c := newCluster(opts.withDefaults(), dir)
	if err := c.start(n, s3); err != nil {
		c.Close()
		return nil, err
	}
	return c, nil
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
	c.onClose(cancel)
	if c.Tenants, err = tenancy.Watch(ctx, tenantsPath, slog.New(slog.DiscardHandler)); err != nil {
		return err
	}
	c.onClose(func() { _ = c.Tenants.Close() })

	c.S3Registry = prometheus.NewRegistry()
	c.Backend, err = s3backend.New(s3backend.Config{
		Endpoint: s3.Endpoint, Region: s3.Region, UsePathStyle: true,
		Default:       s3backend.Credentials{AccessKeyID: s3.AccessKey, SecretAccessKey: s3.SecretKey},
		MaxConcurrent: c.Opts.S3MaxConcurrent, MaxAttempts: c.Opts.S3MaxAttempts, MaxBackoff: c.Opts.S3MaxBackoff,
		RequestTimeout: 10 * time.Second, PartSize: 5 << 20, Observer: metrics.NewNode(c.S3Registry),
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
	if n > 0 {
		if _, err := c.PublishRing(false); err != nil {
			return err
		}
	}
	return nil
}

func (c *Cluster) onClose(f func()) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.closers = append(c.closers, f)
}

// Close stops every node and what the cluster started, newest first. It is
// idempotent; a cluster made by StartWith is closed when its test ends.
func (c *Cluster) Close() {
	c.mu.Lock()
	closers := c.closers
	c.closers = nil
	c.mu.Unlock()
	for i := len(closers) - 1; i >= 0; i-- {
		closers[i]()
	}
}

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
	if len(ms) == 0 {
		return nil
	}
	return ms[0].Ring.Load()
}

// Add starts one more node in the first zone. It is not in the ring until
// Publish.
func (c *Cluster) Add() *Member {
	c.T.Helper()
	m, err := c.AddMember()
	must(c.T, err)
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
	m := &Member{Name: name, Zone: zone, Zones: &node.ZoneRings{}, Registry: prometheus.NewRegistry(), Ring: &ring.Holder{}}
	m.Metrics = metrics.NewNode(m.Registry)
	peerTLS, err := c.ClientTLSConfig(pki.Identity{Kind: pki.KindPeer, Name: name})
	if err != nil {
		return nil, err
	}
	serverTLS, err := pki.ServerTLSConfig(filepath.Join(c.Dir, "server.crt"), filepath.Join(c.Dir, "server.key"), c.CAFile)
	if err != nil {
		return nil, err
	}
	m.Store, err = store.Open(store.Options{
		Dir: filepath.Join(c.Dir, name), DiskBytes: c.Opts.DiskBytes, RAMBytes: c.Opts.RAMBytes,
		Logger: slog.New(slog.DiscardHandler),
		TenantQuota: func(tenant string) int64 {
			if tn, ok := c.Tenants.Current().Tenant(tenant); ok {
				return tn.QuotaBytes
			}
			return 0
		},
	})
	if err != nil {
		return nil, err
	}
	peers := &node.Peers{Client: &http.Client{Transport: &http.Transport{
		TLSClientConfig: peerTLS, MaxIdleConnsPerHost: 64,
		DialContext: (&net.Dialer{Timeout: time.Second}).DialContext,
	}}, Timeout: c.Opts.PeerTimeout}
	srv, err := node.New(node.Config{
		ChunkSize: c.Opts.ChunkSize, MetaTTL: c.Opts.MetaTTL, Immutable: c.Opts.Immutable, MetaLease: c.Opts.MetaLease, Now: c.Clock.Now,
		Ring: m.Ring, Self: name, Peers: peers, CrossZone: c.Opts.CrossZone, Zones: m.Zones,
	}, m.Store, c.Backend, c.Tenants, m.Metrics, slog.New(slog.DiscardHandler))
	if err != nil {
		_ = m.Store.Close()
		return nil, err
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		_ = m.Store.Close()
		return nil, err
	}
	m.Addr = ln.Addr().String()
	m.Server = &http.Server{
		Handler: srv.Handler(), TLSConfig: serverTLS,
		TLSNextProto: map[string]func(*http.Server, *tls.Conn, http.Handler){},
		ErrorLog:     log.New(io.Discard, "", 0), // refused handshakes and killed connections are expected
	}
	srv.ServeReads(m.Server) // as cachenode serve does
	go func() { _ = m.Server.Serve(tls.NewListener(node.BatchingListener(ln), serverTLS)) }()
	c.onClose(func() {
		_ = m.Server.Close()
		_ = m.Store.Close()
	})
	c.mu.Lock()
	c.members = append(c.members, m)
	c.mu.Unlock()
	return m, nil
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
	_ = m.Server.Close()
}

// Publish gives every live member a new ring epoch holding all members that
// are alive; withPrevious carries the membership of the epoch before, for
// warm handoff.
func (c *Cluster) Publish(withPrevious bool) *ring.Ring {
	c.T.Helper()
	r, err := c.PublishRing(withPrevious)
	must(c.T, err)
	return r
}

// PublishRing is Publish returning its error.
func (c *Cluster) PublishRing(withPrevious bool) (*ring.Ring, error) {
	return c.publish(withPrevious, func(m *Member) bool { return !m.Dead() })
}

// PublishWithout is Publish leaving out the named members as well as dead
// ones.
func (c *Cluster) PublishWithout(withPrevious bool, names ...string) *ring.Ring {
	c.T.Helper()
	r, err := c.publish(withPrevious, func(m *Member) bool {
		for _, n := range names {
			if m.Name == n {
				return false
			}
		}
		return !m.Dead()
	})
	must(c.T, err)
	return r
}

func (c *Cluster) publish(withPrevious bool, include func(*Member) bool) (*ring.Ring, error) {
	members := c.Members()
	c.mu.Lock()
	c.epoch++
	epoch := c.epoch
	c.mu.Unlock()
	// One ring per zone, each naming its zone; a zone left without a
	// member keeps the ring it had.
	rings := map[string]*ring.Ring{}
	var first *ring.Ring
	for _, zone := range c.zones(members) {
		spec := ring.Spec{Epoch: epoch, Zone: zone, Hash: ring.HashParams{Algorithm: ring.AlgorithmRendezvousXXHash64}}
		var prev *ring.Ring
		for i, m := range members {
			if m.Zone != zone {
				continue
			}
			if prev == nil {
				prev = m.Ring.Load()
			}
			if include(m) {
				spec.Members = append(spec.Members, ring.Member{Name: m.Name, Address: m.Addr, Ordinal: i, Weight: 100, State: ring.StateActive})
			}
		}
		if len(spec.Members) == 0 {
			continue
		}
		if withPrevious && prev != nil {
			spec.Previous = &ring.PreviousRing{Epoch: prev.Epoch(), Members: prev.Members()}
		}
		r, err := ring.New(spec)
		if err != nil {
			return nil, err
		}
		rings[zone] = r
		if first == nil {
			first = r
		}
	}
	for _, m := range members {
		for zone, r := range rings {
			if zone == m.Zone {
				m.Ring.Store(r)
			} else {
				m.Zones.Holder(zone).Store(r)
			}
		}
	}
	return first, nil
}

// zones are the zones of members, in the order their first member was
// added.
func (c *Cluster) zones(members []*Member) []string {
	var out []string
	for _, m := range members {
		if !slices.Contains(out, m.Zone) {
			out = append(out, m.Zone)
		}
	}
	return out
}

// Ring is the ring the cluster published last.
func (c *Cluster) Ring() *ring.Ring { return c.Member(0).Ring.Load() }

// TenantTLS returns a client TLS configuration holding a certificate for the
// tenant (cached per name).
func (c *Cluster) TenantTLS(name string) *tls.Config {
	return c.ClientTLS(pki.Identity{Kind: pki.KindTenant, Name: name})
}

// PeerTLS returns a client TLS configuration holding a peer certificate
// (what cache nodes and gateways acting for tenants use).
func (c *Cluster) PeerTLS(name string) *tls.Config {
	return c.ClientTLS(pki.Identity{Kind: pki.KindPeer, Name: name})
}

// ClientTLS returns a client TLS configuration for the identity, issued by
// the cluster's CA and trusting the nodes' certificate.
func (c *Cluster) ClientTLS(id pki.Identity) *tls.Config {
	c.T.Helper()
	cfg, err := c.ClientTLSConfig(id)
	must(c.T, err)
	return cfg
}

// ClientTLSConfig is ClientTLS returning its error.
func (c *Cluster) ClientTLSConfig(id pki.Identity) (*tls.Config, error) {
	key := string(id.Kind) + "-" + id.Name
	c.mu.Lock()
	defer c.mu.Unlock()
	if cfg, ok := c.tls[key]; ok {
		return cfg, nil
	}
	leaf, err := c.CA.IssueClient(id, time.Hour)
	if err != nil {
		return nil, err
	}
	if err := pki.WriteFiles(c.Dir, key, leaf); err != nil {
		return nil, err
	}
	cfg, err := pki.ClientTLSConfig(filepath.Join(c.Dir, key+".crt"), filepath.Join(c.Dir, key+".key"), c.CAFile)
	if err != nil {
		return nil, err
	}
	c.tls[key] = cfg
	return cfg, nil
}

// HTTPClient is an HTTP/1.1 client holding the identity's certificate.
func (c *Cluster) HTTPClient(id pki.Identity) *http.Client {
	return &http.Client{Transport: &http.Transport{TLSClientConfig: c.ClientTLS(id), MaxIdleConnsPerHost: 64}}
}

// PutDirect writes an object straight to MinIO, behind the cache's back,
// and returns its ETag.
func (c *Cluster) PutDirect(bucket, key string, data []byte) string {
	c.T.Helper()
	out, err := c.Direct.PutObject(context.Background(), &s3.PutObjectInput{
		Bucket: aws.String(bucket), Key: aws.String(key), Body: bytes.NewReader(data),
	})
	must(c.T, err)
	return aws.ToString(out.ETag)
}

// GetDirect reads an object, or a range of it ("bytes=a-b"; "" for all),
// from MinIO itself.
func (c *Cluster) GetDirect(bucket, key, rng string) []byte {
	c.T.Helper()
	in := &s3.GetObjectInput{Bucket: aws.String(bucket), Key: aws.String(key)}
	if rng != "" {
		in.Range = aws.String(rng)
	}
	out, err := c.Direct.GetObject(context.Background(), in)
	must(c.T, err)
	defer out.Body.Close()
	b, err := io.ReadAll(out.Body)
	must(c.T, err)
	return b
}

// Counter sums the samples of a counter family on member i whose labels
// include want.
func (c *Cluster) Counter(i int, name string, want map[string]string) float64 {
	c.T.Helper()
	return Gather(c.T, c.Member(i).Registry, name, want)
}

// Sum is Counter summed over every member.
func (c *Cluster) Sum(name string, want map[string]string) float64 {
	c.T.Helper()
	var s float64
	for _, m := range c.Members() {
		s += Gather(c.T, m.Registry, name, want)
	}
	return s
}

// Gather sums the samples of a counter or gauge family in g whose labels
// include want.
func Gather(t testing.TB, g prometheus.Gatherer, name string, want map[string]string) float64 {
	t.Helper()
	sum, err := Total(g, name, want)
	must(t, err)
	return sum
}

// Total is Gather returning its error.
func Total(g prometheus.Gatherer, name string, want map[string]string) (float64, error) {
	families, err := g.Gather()
	if err != nil {
		return 0, err
	}
	var sum float64
	for _, f := range families {
		if f.GetName() != name {
			continue
		}
		for _, m := range f.GetMetric() {
			if !matches(m, want) {
				continue
			}
			switch {
			case m.Counter != nil:
				sum += m.GetCounter().GetValue()
			case m.Gauge != nil:
				sum += m.GetGauge().GetValue()
			}
		}
	}
	return sum, nil
}

func matches(m *dto.Metric, want map[string]string) bool {
	got := map[string]string{}
	for _, l := range m.GetLabel() {
		got[l.GetName()] = l.GetValue()
	}
	for k, v := range want {
		if got[k] != v {
			return false
		}
	}
	return true
}

func must(t testing.TB, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}
