// Package originfaults_test puts faults between the cache nodes and S3 and
// checks what clients see. The whole read path is real: an aws-sdk-go-v2
// client (as ClickHouse's S3 disk would be) -> the distcache gateway -> the
// Go client -> three cache nodes over mTLS (internal/testutil/nodecluster,
// which assembles nodes and gateway as the binaries do: internal/embed)
// -> a fault-injecting proxy (internal/testutil/s3proxy) -> MinIO.
//
// The faults: latency spikes, 503 SlowDown storms, 500 InternalError,
// connections reset before the headers and in the middle of a body, bodies
// cut short of their Content-Length, objects overwritten between the HEAD
// and the GETs of one read (and a store that ignores If-Match), and seeded
// random mixes of them all. The properties:
//
//   - every answer is either byte-exact for one version of the object or an
//     S3 error with a retryable code; never a 200 with short or wrong bytes;
//   - after the faults stop, every chunk any node holds equals MinIO's bytes
//     of that version, and reading everything again makes S3 requests only
//     for chunks the owners do not hold;
//   - retries back off (gaps between the attempts of one SDK invocation
//     grow) and the S3 concurrency cap holds under storms;
//   - cached chunks keep being served while S3 fails.
//
// DISTCACHE_FAULT_ROUNDS sets the rounds of the random schedule (default 2;
// make soak sets more). A failing round prints its seed; DISTCACHE_FAULT_SEED
// replays one.
//
// Run: go test ./e2e/originfaults/ (needs bin/minio: make bin/minio).
package originfaults_test

import (
	"bytes"
	"context"
	"crypto/md5"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"sort"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/s3"
	"github.com/aws/smithy-go"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/distcache/distcache/internal/chunk"
	"github.com/distcache/distcache/internal/client"
	"github.com/distcache/distcache/internal/embed"
	"github.com/distcache/distcache/internal/pki"
	"github.com/distcache/distcache/internal/testutil"
	"github.com/distcache/distcache/internal/testutil/nodecluster"
)

const (
	chunkSize = 256 << 10
	bucket    = "bucket-a"
)

type envOptions struct {
	s3MaxConcurrent int
	s3MaxAttempts   int
	s3MaxBackoff    time.Duration
	pageCache       int64 // the gateway's RAM page cache; 0: every read reaches the nodes
}

// env is a gateway for tenant team-a in front of three cache nodes.
type env struct {
	t        *testing.T
	cluster  *nodecluster.Cluster
	srv      *embed.Gateway
	cache    *client.Client // the gateway's
	s3       *s3.Client     // through the gateway; one attempt per call, so every error is seen
	registry *prometheus.Registry

	mu       sync.Mutex
	versions map[string][][]byte // key -> every version written, in order
	etags    map[string][]string // key -> their ETags
}

func newEnv(t *testing.T, opts envOptions) *env {
	t.Helper()
	c := nodecluster.StartWith(t, 3, nodecluster.Options{
		ChunkSize: chunkSize, S3MaxConcurrent: opts.s3MaxConcurrent, S3MaxAttempts: opts.s3MaxAttempts,
		S3MaxBackoff: opts.s3MaxBackoff,
	})
	e := &env{t: t, cluster: c, registry: prometheus.NewRegistry(), versions: map[string][][]byte{}, etags: map[string][]string{}}
	e.srv = c.StartGateway(pki.Identity{Kind: pki.KindTenant, Name: "team-a"}, embed.GatewayConfig{
		AccessKey: testutil.GatewayAccessKey, SecretKey: testutil.GatewaySecretKey, Region: testutil.GatewayRegion,
		Parallelism: 4, PageCacheBytes: opts.pageCache, Timeout: 20 * time.Second, PassthroughTimeout: time.Minute,
		Registry: e.registry,
		Now:      c.Clock.Now, // kept metadata ages with the nodes' clock
	})
	e.cache = e.srv.Client()
	e.s3 = testutil.S3Client(e.srv.URL(), testutil.GatewayAccessKey, testutil.GatewaySecretKey)
	return e
}

// putDirect writes a new version to MinIO behind the cache's back and
// remembers it.
// The version is registered before it is written, with the ETag MinIO gives
// a single-part upload (the MD5), so a concurrent read that already sees it
// finds it.
func (e *env) putDirect(key string, data []byte) string {
	e.t.Helper()
	sum := md5.Sum(data)
	want := `"` + hex.EncodeToString(sum[:]) + `"`
	e.mu.Lock()
	e.versions[key] = append(e.versions[key], data)
	e.etags[key] = append(e.etags[key], want)
	e.mu.Unlock()
	if etag := e.cluster.PutDirect(bucket, key, data); etag != want {
		e.t.Errorf("MinIO gave %s the ETag %s, want the MD5 %s", key, etag, want)
	}
	return want
}

func (e *env) keys() []string {
	e.mu.Lock()
	defer e.mu.Unlock()
	var ks []string
	for k := range e.versions {
		ks = append(ks, k)
	}
	sort.Strings(ks)
	return ks
}

// Outcome classes of one read.
const (
	outcomeOK      = "ok"         // 200/206, byte-exact for one version
	outcomeAborted = "aborted"    // headers sent, body cut off (a prefix of one version, then an error)
	outcomeWrong   = "WRONG"      // bytes of no version, or short without an error: must never happen
	outcomeBadCode = "BAD-STATUS" // an error that is not a retryable S3 error: must never happen
)

// result is one read through the gateway.
type result struct {
	class   string // outcomeOK, outcomeAborted, outcomeWrong, outcomeBadCode, or "<status> <code>"
	version int    // index of the version served, for outcomeOK
	detail  string
}

// retryable are the answers an S3 client may get while S3 misbehaves:
// all are retried by S3 SDKs (and ClickHouse).
var retryable = map[string]bool{
	"503 SlowDown":           true,
	"503 ServiceUnavailable": true,
	"500 InternalError":      true,
	"502 BadGateway":         true,
}

// read GETs key (a Range header value, or "" for all) through the gateway
// and classifies the answer against every version ever written.
func (e *env) read(key, rng string) result {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	in := &s3.GetObjectInput{Bucket: aws.String(bucket), Key: aws.String(key)}
	if rng != "" {
		in.Range = aws.String(rng)
	}
	out, err := e.s3.GetObject(ctx, in)
	if err != nil {
		var re interface{ HTTPStatusCode() int }
		var ae smithy.APIError
		if !errors.As(err, &re) || !errors.As(err, &ae) {
			return result{class: outcomeBadCode, detail: err.Error()}
		}
		class := fmt.Sprintf("%d %s", re.HTTPStatusCode(), ae.ErrorCode())
		if !retryable[class] {
			return result{class: outcomeBadCode, detail: class + ": " + err.Error()}
		}
		return result{class: class, detail: ae.ErrorMessage()}
	}
	defer out.Body.Close()
	body, readErr := io.ReadAll(out.Body)
	e.mu.Lock()
	versions := e.versions[key]
	e.mu.Unlock()
	want := func(v []byte) []byte {
		if rng == "" {
			return v
		}
		lo, hi := parseRange(rng, int64(len(v)))
		return v[lo:hi]
	}
	if readErr != nil {
		for _, v := range versions {
			if bytes.HasPrefix(want(v), body) {
				return result{class: outcomeAborted, detail: readErr.Error()}
			}
		}
		return result{class: outcomeWrong, detail: fmt.Sprintf("a cut-off body of %d bytes that is a prefix of no version: %v", len(body), readErr)}
	}
	if out.ContentLength != nil && *out.ContentLength != int64(len(body)) {
		return result{class: outcomeWrong, detail: fmt.Sprintf("Content-Length %d, body %d bytes", *out.ContentLength, len(body))}
	}
	for i, v := range versions {
		if bytes.Equal(want(v), body) {
			if etag := aws.ToString(out.ETag); etag != e.etag(key, i) {
				return result{class: outcomeWrong, detail: fmt.Sprintf("bytes of version %d with ETag %s", i, etag)}
			}
			return result{class: outcomeOK, version: i}
		}
	}
	return result{class: outcomeWrong, detail: fmt.Sprintf("%d bytes (ETag %s) equal to no version of %d", len(body), aws.ToString(out.ETag), len(versions))}
}

func (e *env) etag(key string, i int) string {
	e.mu.Lock()
	defer e.mu.Unlock()
	return e.etags[key][i]
}

// parseRange handles the forms the tests send: bytes=a-b and bytes=a-.
func parseRange(rng string, size int64) (lo, hi int64) {
	spec := strings.TrimPrefix(rng, "bytes=")
	a, b, _ := strings.Cut(spec, "-")
	lo, _ = strconv.ParseInt(a, 10, 64)
	lo = min(lo, size)
	hi = size
	if b != "" {
		end, _ := strconv.ParseInt(b, 10, 64)
		hi = min(end+1, size)
	}
	return lo, hi
}

// tally counts outcome classes.
type tally struct {
	mu sync.Mutex
	n  map[string]int
}

func (t *tally) add(class string) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.n == nil {
		t.n = map[string]int{}
	}
	t.n[class]++
}

func (t *tally) String() string {
	t.mu.Lock()
	defer t.mu.Unlock()
	var parts []string
	for k, v := range t.n {
		parts = append(parts, fmt.Sprintf("%s=%d", k, v))
	}
	sort.Strings(parts)
	return strings.Join(parts, " ")
}

// verifyCache checks every chunk any node holds, for every version of every
// key written, against that version's bytes; then reads every key's current
// version through the gateway, and checks that S3 was asked only for the
// chunks their owners did not hold, and that a second pass asks S3 nothing.
// It returns the chunks and bytes verified.
func (e *env) verifyCache() (chunks, verifiedBytes int) {
	t := e.t
	t.Helper()
	e.cluster.Proxy.ClearFaults()
	e.cluster.Proxy.OnRequest(nil)
	e.cluster.Proxy.IgnoreIfMatch(nil)
	members := e.cluster.Members()
	rg := e.cluster.Ring()
	// missing: chunks of the latest versions their owners lack; nowhere:
	// those no member holds. A read asks S3 for the latter, and for the
	// former unless the client reaches another candidate that holds it.
	missing, nowhere := 0, 0
	for _, key := range e.keys() {
		e.mu.Lock()
		versions, etags := e.versions[key], e.etags[key]
		e.mu.Unlock()
		for vi, data := range versions {
			n := (int64(len(data)) + chunkSize - 1) / chunkSize
			for idx := int64(0); idx < n; idx++ {
				id := chunk.ID{Object: chunk.Object{Tenant: "team-a", Bucket: bucket, Key: key}, ETag: etags[vi], Size: chunkSize, Index: idx}
				want := data[idx*chunkSize : min(int64(len(data)), (idx+1)*chunkSize)]
				for _, m := range members {
					got, _, err := m.Store.GetChunk(id)
					if err != nil {
						continue
					}
					if !bytes.Equal(got, want) {
						t.Errorf("%s holds chunk %d of %s version %d (%s) with wrong bytes (%d bytes, want %d)",
							m.Name, idx, key, vi, etags[vi], len(got), len(want))
					}
					chunks++
					verifiedBytes += len(got)
				}
				if vi == len(versions)-1 && !members[indexOf(members, rg.Owner(id).Name)].Holds(id) {
					missing++
					held := false
					for _, m := range members {
						held = held || m.Holds(id)
					}
					if !held {
						nowhere++
					}
				}
			}
		}
	}
	// MinIO itself agrees with what the test wrote.
	for _, key := range e.keys() {
		e.mu.Lock()
		latest := e.versions[key][len(e.versions[key])-1]
		e.mu.Unlock()
		if !bytes.Equal(e.cluster.GetDirect(bucket, key, ""), latest) {
			t.Fatalf("MinIO's %s is not the last version written", key)
		}
	}
	// The nodes' metadata may predate the last overwrite: expire it.
	e.cluster.Clock.Advance(2 * e.cluster.Opts.MetaTTL)
	for pass := 0; pass < 2; pass++ {
		e.cluster.Proxy.Reset()
		for _, key := range e.keys() {
			r := e.read(key, "")
			if r.class != outcomeOK || r.version != len(e.versions[key])-1 {
				t.Errorf("after the faults, %s read as %s (version %d): %s", key, r.class, r.version, r.detail)
			}
		}
		gets := e.cluster.Proxy.Count(http.MethodGet, "/"+bucket+"/")
		// At most the chunks their owners lack. Fewer than those no member
		// held is fine: a fetch still in flight when the snapshot above was
		// taken (a page fill in the background) may have stored one since.
		lo, hi := 0, missing
		if pass == 1 {
			hi = 0
		}
		t.Logf("re-read pass %d: %d S3 GETs (%d chunks their owners lacked, %d held by no member)", pass+1, gets, missing, nowhere)
		if gets < lo || gets > hi {
			t.Errorf("re-read pass %d made %d S3 GETs; want %d to %d (chunks held by no member, by no owner)", pass+1, gets, lo, hi)
		}
	}
	return chunks, verifiedBytes
}

func indexOf(members []*nodecluster.Member, name string) int {
	for i, m := range members {
		if m.Name == name {
			return i
		}
	}
	panic("no member " + name)
}

// envInt reads a positive integer from the environment.
func envInt(name string, def int) int {
	if v, err := strconv.Atoi(os.Getenv(name)); err == nil && v > 0 {
		return v
	}
	return def
}
