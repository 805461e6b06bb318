// Package node is the cache node's HTTP data plane: chunk reads, metadata,
// write-through puts and deletes for tenants identified by their client
// certificate. A read goes parse -> check -> store -> (miss) singleflight ->
// S3 -> store, as in etcd's request handlers.
package node

import (
	"context"
	"errors"
	"io"
	"log/slog"
	"net/http"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"golang.org/x/sync/singleflight"
	"golang.org/x/time/rate"

	"github.com/distcache/distcache/internal/chunk"
	"github.com/distcache/distcache/internal/failover"
	"github.com/distcache/distcache/internal/metalease"
	"github.com/distcache/distcache/internal/metrics"
	"github.com/distcache/distcache/internal/nodeapi"
	"github.com/distcache/distcache/internal/pki"
	"github.com/distcache/distcache/internal/ring"
	"github.com/distcache/distcache/internal/s3backend"
	"github.com/distcache/distcache/internal/store"
	"github.com/distcache/distcache/internal/tenancy"
	"github.com/distcache/distcache/internal/writeback"
)

// Store is the local cache the node reads and fills (store.Store).
type Store interface {
	GetChunk(id chunk.ID) ([]byte, store.Tier, error)
	PutChunk(id chunk.ID, data []byte) error
	PutValue(id chunk.ID, v store.Value) error // PutChunk without a copy
	// PutValueOnDisk is PutValue to the disk tier only, keeping nothing of v.
	PutValueOnDisk(id chunk.ID, v store.Value) error
	GetMeta(o chunk.Object) (chunk.Meta, error)
	PutMeta(o chunk.Object, m chunk.Meta) error
	// ReplaceMeta replaces (or, with nil, deletes) the metadata only while
	// it is of version etag.
	ReplaceMeta(o chunk.Object, etag string, m *chunk.Meta) (bool, error)
	DeleteObject(o chunk.Object) error
}

// Backend is the S3 the node fills misses from and writes through to
// (s3backend.Backend).
type Backend interface {
	Head(ctx context.Context, cr s3backend.Credentials, bucket, key string) (chunk.Meta, error)
	GetRangeInto(ctx context.Context, cr s3backend.Credentials, bucket, key, etag string, off int64, dst []byte) error
	Put(ctx context.Context, cr s3backend.Credentials, bucket, key string, body io.Reader, size int64, contentType string) (chunk.Meta, error)
	PutParts(ctx context.Context, cr s3backend.Credentials, bucket, key string, body io.ReaderAt, parts []int64, contentType string) (string, error)
	Delete(ctx context.Context, cr s3backend.Credentials, bucket, key string) error
	Metadata(ctx context.Context, cr s3backend.Credentials, bucket, key string) (md map[string]string, etag string, err error)
	Passthrough(ctx context.Context, cr s3backend.Credentials, method, bucket, key, rawQuery string,
		header http.Header, body io.Reader, contentLength int64) (*http.Response, error)
}

// Tenants yields the current, hot-reloaded tenant configuration.
type Tenants interface {
	Current() *tenancy.Config
}

// Config holds the node's data-plane settings.
type Config struct {
	// ChunkSize is the layout objects are cut into; every node of a cache
	// must use the same value.
	ChunkSize int64
	// MetaTTL is how long object metadata is trusted before it is
	// revalidated with a HEAD; an object overwritten behind the cache's back
	// is served stale for at most this long.
	MetaTTL time.Duration
	// Immutable never revalidates metadata (ClickHouse never overwrites keys).
	Immutable bool
	// RingSettle is how long after this node notices a new ring other
	// members may still route by the previous one (default 5s): a write
	// racing the change may tell the object's old metadata owner only, so
	// metadata this node confirmed in that time is confirmed again once it
	// has passed (the worst staleness of such a write). The ring travels
	// through the API server in about a second; ring files mounted from a
	// ConfigMap take up to the kubelet's sync period.
	RingSettle time.Duration
	// MetaLease is how long a gateway may use the metadata it keeps
	// between two polls for changes (internal/metalease; default 2s): the
	// longest a dead gateway delays the acknowledgement of a write.
	MetaLease time.Duration
	// WriteCacheBytes bounds how much of one write-through upload is kept in
	// memory to be cached once S3 acknowledges it; the rest fills on read.
	WriteCacheBytes int64
	// Now is the clock (tests move it past the TTL); defaults to time.Now.
	Now func() time.Time

	// Ring, when set, makes this node one member of a cache: chunks it does
	// not own are read from their owner, and after a ring change the new
	// owner asks the previous one before S3. Nil runs the node alone.
	Ring *ring.Holder
	// Self is this node's member name in the ring.
	Self string
	// Peers reaches the other members (required with Ring).
	Peers *Peers
	// Candidates is how many members are tried, owner first, before a
	// node reads S3 itself (default 3).
	Candidates int
	// CrossZone is what a miss does across zones: CrossZoneNever (the
	// default) reads S3; CrossZoneOnMiss first asks the chunk's owner in
	// each zone of Zones (the zone of Ring skipped) for it from that
	// node's store only, after the warm handoff. Needs Ring.
	CrossZone CrossZone
	// Zones are the rings of the cache's other zones (CrossZoneOnMiss).
	Zones *ZoneRings

	// Journal keeps the objects of WriteBack and Transient policies
	// (held.go); nil: such writes are refused. HeldMetrics are its series.
	Journal     *writeback.Journal
	HeldMetrics *metrics.Held
	// PersistUploads is how many held versions go to S3 at once
	// (writeback.Persister.Workers; 0: its default).
	PersistUploads int
	// PersistYield and PersistMaxYield are writeback.Persister's Yield and
	// MaxYield (0: their defaults).
	PersistYield, PersistMaxYield time.Duration
	// PersistPutIfAbsent is writeback.Backend's PutIfAbsent: S3 honours
	// If-None-Match: *, so small versions of new keys go up without a HEAD.
	PersistPutIfAbsent bool
	// Uploads keep the multipart uploads into held keys until they are
	// completed into the Journal (nil with no Journal).
	Uploads *writeback.Uploads
}

// Server serves the node API. Create it with New and mount Handler behind a
// TLS listener that requires client certificates.
type Server struct {
	cfg     Config
	store   Store
	s3      Backend
	tenants Tenants
	metrics *metrics.Node
	series  requestSeries
	// chunkSizeValue is the X-Distcache-Chunk-Size header value.
	chunkSizeValue []string
	// epochValue caches the X-Distcache-Ring-Epoch value of the ring in force.
	epochValue atomic.Pointer[epochHeader]
	// readConnHandler serves the chunk reads of read connections
	// (ServeReads): Handler's read route, without the identity
	// middleware (a read connection reads the identity once).
	readConnHandler http.Handler
	log             *slog.Logger
	// storeWarn and storeWarnings rate-limit the warning of a failing
	// store (storeFailed).
	storeWarn     rate.Sometimes
	storeWarnings atomic.Int64

	chunks singleflight.Group
	metas  singleflight.Group
	peers  *Peers
	// leases numbers metadata changes for the gateways that keep metadata.
	leases *metalease.Log

	// adopted are held versions this node persists although another
	// holder comes first, which lacks them (checkHeldCopies).
	adopted sync.Map
	// heldS3 is the persister's S3 (held_run.go), one for the node: it
	// learns once whether S3 has conditional writes.
	heldS3 *writeback.Backend
	// chunkBufs recycles write-throughs' chunk buffers (collector.go).
	chunkBufs *chunkBufs
	// ringNoticed: since when this node has known the ring in force
	// (fresh, numberedHere).
	ringNoticed ringNoticed
	// confirmed: held versions confirmed newest under the ring in force
	// (heldSettled).
	confirmed confirmedVersions
}

// withRingEpoch stamps every answer with the ring epoch, so clients notice a
// ring change on their next request instead of their next poll.
func (s *Server) withRingEpoch(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if rg := s.currentRing(); rg != nil {
			w.Header()[hkRingEpoch] = s.ringEpochValue(rg)
		}
		next.ServeHTTP(w, r)
	})
}

// storeWarnEvery spaces the warnings of a failing store.
const storeWarnEvery = 10 * time.Second

// epochHeader is the X-Distcache-Ring-Epoch value of one ring.
type epochHeader struct {
	ring  *ring.Ring
	value []string
}

// ringEpochValue is rg's epoch as a header value, formatted once per ring.
func (s *Server) ringEpochValue(rg *ring.Ring) []string {
	if e := s.epochValue.Load(); e != nil && e.ring == rg {
		return e.value
	}
	e := &epochHeader{ring: rg, value: []string{strconv.FormatInt(rg.Epoch(), 10)}}
	s.epochValue.Store(e)
	return e.value
}

// currentRing is the ring in force, or nil when the node runs alone.
func (s *Server) currentRing() *ring.Ring {
	if s.cfg.Ring == nil {
		return nil
	}
	return s.cfg.Ring.Load()
}

// New wires a Server. All dependencies are required. With a ring, m reports
// the ring's members (distcache_ring_members) from then on.
func New(cfg Config, st Store, be Backend, tenants Tenants, m *metrics.Node, log *slog.Logger) (*Server, error) {
	if cfg.ChunkSize <= 0 {
		return nil, errors.New("node: chunk size must be positive")
	}
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	if cfg.RingSettle == 0 {
		cfg.RingSettle = DefaultRingSettle
	}
	if cfg.WriteCacheBytes == 0 {
		cfg.WriteCacheBytes = 64 << 20
	}
	if cfg.Ring != nil {
		if cfg.Self == "" || cfg.Peers == nil || cfg.Peers.Client == nil {
			return nil, errors.New("node: a ring needs Self and Peers")
		}
		if cfg.Candidates <= 0 {
			cfg.Candidates = 3
		}
		if cfg.CrossZone == CrossZoneOnMiss && cfg.Zones == nil {
			return nil, errors.New("node: CrossZoneOnMiss needs Zones")
		}
		if cfg.Peers.Timeout <= 0 {
			cfg.Peers.Timeout = 10 * time.Second
		}
		if cfg.Peers.DownFor <= 0 {
			cfg.Peers.DownFor = failover.DefaultDownFor
		}
		cfg.Peers.down.For = cfg.Peers.DownFor
		// A redirect from a peer would mean a path it cleaned: a different key.
		client := *cfg.Peers.Client
		client.CheckRedirect = func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }
		cfg.Peers.Client = &client
		m.ReportRing(cfg.Ring)
	}
	s := &Server{cfg: cfg, store: st, s3: be, tenants: tenants, metrics: m, log: log, peers: cfg.Peers,
		leases:         metalease.New(metalease.Config{Lease: cfg.MetaLease}),
		storeWarn:      rate.Sometimes{First: 1, Interval: storeWarnEvery},
		series:         newRequestSeries(m.Requests, m.ResponseBytes, m.ChunkReads, m.RequestDuration),
		chunkSizeValue: []string{strconv.FormatInt(cfg.ChunkSize, 10)},
		chunkBufs:      newChunkBufs(cfg.ChunkSize, int(min(cfg.WriteCacheBytes/cfg.ChunkSize, keptChunkBufs)))}
	s.heldS3 = s.newHeldS3()
	var started uint64
	if cfg.Journal != nil {
		started = cfg.Journal.NextVersion()
	}
	s.ringNoticed.start(s.currentRing(), cfg.Now(), started)
	if h, ok := tenants.(reloadHook); ok {
		h.OnReload(s.revokeChanged)
	}
	return s, nil
}

// Handler is the node API; every route needs a verified client identity.
//
//	GET    /v1/objects/{bucket}/{key...}?chunk=N[&etag=E]  one chunk, Range relative to the chunk
//	GET    /v1/objects/{bucket}/{key...}                   the whole object (Range over the object)
//	HEAD   /v1/objects/{bucket}/{key...}                   metadata as headers
//	GET    /v1/meta/{bucket}/{key...}                      metadata as JSON
//	PUT    /v1/objects/{bucket}/{key...}                   write-through
//	DELETE /v1/objects/{bucket}/{key...}                   delete in S3, then invalidate
//	POST   /v1/objects/{bucket}/{key...}?chunk=N&etag=E    store a written chunk (peers only)
//	POST   /v1/objects/{bucket}/{key...}?invalidate=1      forget an object that changed (peers only)
//	GET    /v1/ring                                        the ring this node routes by
//	GET    /v1/invalidations?watcher=W&since=N&incarnation=I  metadata changes (long poll, nodeapi.Invalidations)
//	*      /v1/s3/{bucket}[/{key...}]                      any other S3 operation, passed through to S3
func (s *Server) Handler() http.Handler {
	return pki.Middleware(s.withRingEpoch(s.routeReads(s.mux())))
}

// mux routes every endpoint of the node API.
func (s *Server) mux() *http.ServeMux {
	mux := http.NewServeMux()
	mux.HandleFunc(patternGetObject, s.handleGet)
	mux.HandleFunc("HEAD /v1/objects/{bucket}/{key...}", s.handleHead)
	mux.HandleFunc("GET /v1/meta/{bucket}/{key...}", s.handleMeta)
	mux.HandleFunc("PUT /v1/objects/{bucket}/{key...}", s.handlePut)
	mux.HandleFunc("POST /v1/objects/{bucket}/{key...}", s.handlePeerPost)
	mux.HandleFunc("DELETE /v1/objects/{bucket}/{key...}", s.handleDelete)
	mux.HandleFunc("GET /v1/ring", s.handleRing)
	mux.HandleFunc("GET "+nodeapi.PathInvalidations, s.handleInvalidations)
	mux.HandleFunc("GET "+nodeapi.PathHeld+"/{bucket}", s.handleHeldList)
	mux.HandleFunc("PUT "+nodeapi.PathHeld+"/{bucket}/{key...}", s.handleHeldPut)
	mux.HandleFunc("GET "+nodeapi.PathHeld+"/{bucket}/{key...}", s.handleHeldGet)
	mux.HandleFunc("DELETE "+nodeapi.PathHeld+"/{bucket}/{key...}", s.handleHeldDrop)
	mux.HandleFunc("/v1/s3/{bucket}", s.handlePassthrough)
	mux.HandleFunc("/v1/s3/{bucket}/{key...}", s.handlePassthrough)
	return mux
}

// patternGetObject is the route of object and chunk reads.
const patternGetObject = "GET /v1/objects/{bucket}/{key...}"

// routeReads sends object reads whose path the mux would take as it is
// (see objectReadPath) straight to the read handler, and everything else
// through mux: routing a path costs the mux several allocations, and this
// is every chunk read. It is the read route of Handler and of read
// connections (ServeReads) alike: get, which both it and the mux's
// handleGet call, is the one HTTP entry of reads.
func (s *Server) routeReads(mux *http.ServeMux) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if bucket, key, ok := objectReadPath(r); ok {
			s.get(w, r, bucket, key)
			return
		}
		mux.ServeHTTP(w, r)
	})
}
