// Package gateway_test runs the S3 gateway against real servers: MinIO,
// three cache nodes over real mTLS and a gateway in front of them
// (internal/testutil/nodecluster, which assembles both as `cachenode serve`
// and `cachenode gateway` do: internal/embed) on loopback, and talks to it
// with real S3 clients: aws-sdk-go-v2 (path-style), curl --aws-sigv4 and
// the `cachenode gateway` binary.
//
// Run: go test ./e2e/gateway/ (needs bin/minio: make bin/minio).
package gateway_test

import (
	"bytes"
	"context"
	"errors"
	"io"
	"log/slog"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/s3"
	"github.com/aws/aws-sdk-go-v2/service/s3/types"
	"github.com/aws/smithy-go"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/distcache/distcache/internal/client"
	"github.com/distcache/distcache/internal/embed"
	"github.com/distcache/distcache/internal/node"
	"github.com/distcache/distcache/internal/pki"
	"github.com/distcache/distcache/internal/testutil"
	"github.com/distcache/distcache/internal/testutil/nodecluster"
)

// The gateway's credentials, which S3 clients sign with (not MinIO's).
const (
	accessKey = testutil.GatewayAccessKey
	secretKey = testutil.GatewaySecretKey
	region    = testutil.GatewayRegion
)

const chunkSize = 256 << 10

// tenants: team-a may use bucket-a, shared, clickhouse and ghost-bucket
// (which does not exist in S3); bucket-b is team-b's only.
const tenants = "tenants:\n" + teamA + teamB

const (
	teamA = "  - name: team-a\n    buckets: [bucket-a, shared, ghost-bucket, clickhouse]\n"
	teamB = "  - name: team-b\n    buckets: [bucket-b, shared]\n"
)

// teamAPolicies is tenants with these policies (YAML flow mappings) for
// team-a.
func teamAPolicies(policies ...string) string {
	var b strings.Builder
	b.WriteString("tenants:\n" + teamA + "    policies:\n")
	for _, p := range policies {
		b.WriteString("      - " + p + "\n")
	}
	return b.String() + teamB
}

// buckets are created in MinIO.
var buckets = []string{"bucket-a", "bucket-b", "shared", "clickhouse"}

// env is a running gateway for tenant team-a in front of a cache cluster.
type env struct {
	t        testing.TB
	cluster  *nodecluster.Cluster
	srv      *embed.Gateway
	cache    *client.Client // the gateway's
	s3       *s3.Client     // through the gateway
	registry *prometheus.Registry
}

type envOptions struct {
	nodes     int
	peer      bool // a peer certificate acting for team-a, instead of team-a's own
	pageCache int64
	immutable bool // nodes started with --immutable
	logger    *slog.Logger
	configure func(*embed.GatewayConfig) // changes to the gateway's configuration
	// zones, when set, spread the cache over these zones (nodes in each);
	// the gateway reads in zone, the others being its fallback zones, and
	// the nodes do crossZone.
	zones     []string
	zone      string
	crossZone node.CrossZone
	tenants   string // the tenants file; default tenants
}

func newEnv(t testing.TB, opts envOptions) *env {
	t.Helper()
	if opts.nodes == 0 {
		opts.nodes = 3
	}
	if opts.tenants == "" {
		opts.tenants = tenants
	}
	c := nodecluster.StartWith(t, opts.nodes, nodecluster.Options{ChunkSize: chunkSize, Tenants: opts.tenants, Buckets: buckets, Immutable: opts.immutable,
		Zones: opts.zones, CrossZone: opts.crossZone})
	return gatewayOn(t, c, opts)
}

// gatewayOn starts a gateway (with its own client) for team-a in front of
// cluster c: newEnv's, or another env's for a second gateway.
func gatewayOn(t testing.TB, c *nodecluster.Cluster, opts envOptions) *env {
	t.Helper()
	e := &env{t: t, cluster: c, registry: prometheus.NewRegistry()}
	logger := opts.logger
	if logger == nil {
		logger = testLogger(t)
	}
	cfg := embed.GatewayConfig{
		Nodes: c.Seeds(), AccessKey: accessKey, SecretKey: secretKey, Region: region,
		Parallelism: 4, PageCacheBytes: opts.pageCache, Timeout: 10 * time.Second, PassthroughTimeout: time.Minute,
		Registry: e.registry, Logger: logger,
		Now: c.Clock.Now, // kept metadata ages with the nodes' clock
	}
	if opts.zones != nil {
		cfg.Nodes, cfg.Zone = c.ZoneSeeds(opts.zone), opts.zone
		for _, z := range opts.zones {
			if z != opts.zone {
				cfg.Fallback = append(cfg.Fallback, client.ZoneSeeds{Zone: z, Seeds: c.ZoneSeeds(z)})
			}
		}
	}
	id := pki.Identity{Kind: pki.KindTenant, Name: "team-a"}
	if opts.peer {
		id, cfg.Tenant = pki.Identity{Kind: pki.KindPeer, Name: "gateway-1"}, "team-a"
	}
	if opts.configure != nil {
		opts.configure(&cfg)
	}
	e.srv = c.StartGateway(id, cfg)
	e.cache = e.srv.Client()
	e.s3 = testutil.S3Client(e.srv.URL(), accessKey, secretKey)
	return e
}

// testLogger logs warnings and errors to the test log.
func testLogger(t testing.TB) *slog.Logger {
	return slog.New(slog.NewTextHandler(testutil.LogWriter{T: t}, &slog.HandlerOptions{Level: slog.LevelWarn}))
}

// get reads an object (or a range) through the gateway.
func (e *env) get(bucket, key, rng string) ([]byte, *s3.GetObjectOutput, error) {
	in := &s3.GetObjectInput{Bucket: aws.String(bucket), Key: aws.String(key)}
	if rng != "" {
		in.Range = aws.String(rng)
	}
	out, err := e.s3.GetObject(context.Background(), in)
	if err != nil {
		return nil, nil, err
	}
	defer out.Body.Close()
	b, err := io.ReadAll(out.Body)
	return b, out, err
}

func (e *env) mustGet(bucket, key, rng string) []byte {
	e.t.Helper()
	b, _, err := e.get(bucket, key, rng)
	testutil.Must(e.t, err)
	return b
}

// mustList lists bucket under prefix (one page) through the gateway.
func (e *env) mustList(bucket, prefix string) []types.Object {
	e.t.Helper()
	out, err := e.s3.ListObjectsV2(context.Background(), &s3.ListObjectsV2Input{Bucket: aws.String(bucket), Prefix: aws.String(prefix)})
	testutil.Must(e.t, err)
	return out.Contents
}

func (e *env) put(bucket, key string, data []byte) *s3.PutObjectOutput {
	e.t.Helper()
	out, err := e.s3.PutObject(context.Background(), &s3.PutObjectInput{
		Bucket: aws.String(bucket), Key: aws.String(key), Body: bytes.NewReader(data),
	})
	testutil.Must(e.t, err)
	return out
}

// existsInS3 asks MinIO itself.
func (e *env) existsInS3(bucket, key string) bool {
	e.t.Helper()
	_, err := e.cluster.Direct.HeadObject(context.Background(), &s3.HeadObjectInput{Bucket: aws.String(bucket), Key: aws.String(key)})
	if err == nil {
		return true
	}
	var re interface{ HTTPStatusCode() int }
	if errors.As(err, &re) && re.HTTPStatusCode() == http.StatusNotFound {
		return false
	}
	e.t.Fatalf("HEAD %s/%s on MinIO: %v", bucket, key, err)
	return false
}

// apiCode is the S3 error code of an SDK error ("" if none).
func apiCode(err error) string {
	var ae smithy.APIError
	if errors.As(err, &ae) {
		return ae.ErrorCode()
	}
	return ""
}

func httpStatus(err error) int {
	var re interface{ HTTPStatusCode() int }
	if errors.As(err, &re) {
		return re.HTTPStatusCode()
	}
	return 0
}

func wantCode(t *testing.T, what string, err error, code string, status int) {
	t.Helper()
	if err == nil {
		t.Errorf("%s: no error, want %s", what, code)
		return
	}
	if got := apiCode(err); got != code || httpStatus(err) != status {
		t.Errorf("%s: got %q (HTTP %d), want %q (HTTP %d): %v", what, got, httpStatus(err), code, status, err)
	}
}

// counter sums a gateway-side counter.
func (e *env) counter(name string, labels map[string]string) float64 {
	return nodecluster.Gather(e.t, e.registry, name, labels)
}
