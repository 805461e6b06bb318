// Package isolation_test attacks tenant isolation through every door of a
// real cache: two tenants, team-a (the attacker) and team-b (the victim),
// each with its own client certificate, buckets, S3 credentials and
// gateway, on three cache nodes over real mTLS in front of a real MinIO
// (internal/testutil/nodecluster, which assembles nodes and gateways as
// the binaries do: internal/embed). team-b's secret objects are written
// and read through the cache first, so a leak could come from the cache,
// not only from S3. Then team-a tries to read them every way we could
// think of: the node API, the peer protocol, the S3 gateway, certificates,
// presigned URLs, path and key tricks. Every attack must end in an error
// AND leave no byte of team-b's data in the body (team-b's objects are a
// marker repeated, so any 12 bytes of them are recognised) AND put nothing
// into team-a's cache entries.
//
// team-a's S3 credentials are deliberately strong: an STS session of
// MinIO's root user that may do anything except read shared/b/*. So S3
// itself would hand team-a every byte of bucket-b: only distcache's
// bucket list stands in the way, and an attack that gets past it shows.
// The one thing S3 refuses team-a is shared/b/*, a bucket both tenants may
// use: team-b caches it, and team-a must never get those cached chunks.
//
// Run: go test ./e2e/isolation/ (needs bin/minio: make bin/minio).
package isolation_test

import (
	"bufio"
	"bytes"
	"context"
	"crypto/rand"
	"crypto/sha256"
	"crypto/tls"
	"encoding/hex"
	"encoding/xml"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	v4 "github.com/aws/aws-sdk-go-v2/aws/signer/v4"

	"github.com/distcache/distcache/internal/chunk"
	"github.com/distcache/distcache/internal/embed"
	"github.com/distcache/distcache/internal/nodeapi"
	"github.com/distcache/distcache/internal/pki"
	"github.com/distcache/distcache/internal/testutil"
	"github.com/distcache/distcache/internal/testutil/nodecluster"
)

const (
	chunkSize = 64 << 10
	region    = "us-east-1"
	tenantA   = "team-a"
	tenantB   = "team-b"
)

// Buckets: team-a may use bucket-a and shared; team-b bucket-b, bucket-ab
// (team-a's bucket name is a prefix of it) and shared.
var buckets = []string{"bucket-a", "bucket-b", "bucket-ab", "shared"}

// S3 session policies of the two tenants' backend credentials.
const (
	policyA = `{"Version":"2012-10-17","Statement":[` +
		`{"Effect":"Allow","Action":["s3:*"],"Resource":["arn:aws:s3:::*"]},` +
		`{"Effect":"Deny","Action":["s3:*"],"Resource":["arn:aws:s3:::shared/b/*"]}]}`
	policyB = `{"Version":"2012-10-17","Statement":[` +
		`{"Effect":"Allow","Action":["s3:*"],"Resource":["arn:aws:s3:::bucket-b","arn:aws:s3:::bucket-b/*",` +
		`"arn:aws:s3:::bucket-ab","arn:aws:s3:::bucket-ab/*","arn:aws:s3:::shared","arn:aws:s3:::shared/*"]}]}`
)

// Gateway credentials S3 clients sign with (not S3 credentials).
var (
	gatewayCredsA = aws.Credentials{AccessKeyID: "GATEWAYTEAMA", SecretAccessKey: "team-a/gateway/secret"}
	gatewayCredsB = aws.Credentials{AccessKeyID: "GATEWAYTEAMB", SecretAccessKey: "team-b/gateway/secret"}
)

// Unicode twins: the same text in NFC and NFD.
const (
	cafeNFC = "caf\u00e9"
	cafeNFD = "cafe\u0301"
)

// secretKeys are team-b's objects: (bucket, key). Their content is
// secretMarker repeated; sizes span several chunks.
var secretKeys = []struct{ bucket, key string }{
	{"bucket-b", "secret.bin"},
	{"bucket-b", "dir/secret.bin"},
	{"bucket-b", cafeNFD},
	{"bucket-ab", "secret.bin"},
	{"shared", "b/secret.bin"},
	{"shared", "b/" + cafeNFD},
}

// env is the running cache with both tenants' gateways.
type env struct {
	t       *testing.T
	c       *nodecluster.Cluster
	tenants string // path of the tenants file

	markerB, markerA []byte // unique to this run
	etags            map[string]string
	secretSize       int

	gwA     *embed.Gateway // team-a's gateway, team-a's certificate
	gwAPeer *embed.Gateway // team-a's gateway holding a peer certificate, signing keys shared with team-b's
	gwB     *embed.Gateway // team-b's gateway
	credsA  string         // tenants-file credentials block of team-a
	credsB  string
}

func objName(bucket, key string) string { return bucket + "/" + key }

// newEnv starts the cluster, gives both tenants their own S3 credentials,
// writes team-b's secrets and team-a's own objects, and reads team-b's
// through the cache (node API on every node and team-b's gateway) so they
// are cached.
func newEnv(t *testing.T) *env {
	t.Helper()
	c := nodecluster.StartWith(t, 3, nodecluster.Options{ChunkSize: chunkSize, Buckets: buckets,
		Tenants: tenantsFile("", "", true)})
	e := &env{t: t, c: c, tenants: filepath.Join(c.Dir, "tenants.yaml"), etags: map[string]string{}, secretSize: 3*chunkSize + 1234}
	e.markerB = newMarker("Bsecret:")
	e.markerA = newMarker("Aprivate:")
	e.credsA = assumeRole(t, c, policyA)
	e.credsB = assumeRole(t, c, policyB)
	e.writeTenants(tenantsFile(e.credsA, e.credsB, true))

	clientB := c.HTTPClient(pki.Identity{Kind: pki.KindTenant, Name: tenantB})
	for _, s := range secretKeys {
		data := repeatTo(e.markerB, e.secretSize)
		e.etags[objName(s.bucket, s.key)] = e.putVia(clientB, 0, s.bucket, s.key, data)
		for i := range c.Members() { // cached on the owners, metadata on its owner
			if got := e.getVia(clientB, i, s.bucket, s.key); !bytes.Equal(got, data) {
				t.Fatalf("team-b reading %s/%s back through node %d: %d bytes, not what it wrote", s.bucket, s.key, i, len(got))
			}
		}
	}
	clientA := c.HTTPClient(pki.Identity{Kind: pki.KindTenant, Name: tenantA})
	for _, k := range []string{"own.bin", cafeNFC, "secret.bin.a"} {
		e.etags[objName("bucket-a", k)] = e.putVia(clientA, 1, "bucket-a", k, repeatTo(e.markerA, chunkSize+77))
	}

	e.gwA = e.startGateway(pki.Identity{Kind: pki.KindTenant, Name: tenantA}, "", gatewayCredsA)
	e.gwAPeer = e.startGateway(pki.Identity{Kind: pki.KindPeer, Name: "gateway-a"}, tenantA, gatewayCredsB)
	e.gwB = e.startGateway(pki.Identity{Kind: pki.KindTenant, Name: tenantB}, "", gatewayCredsB)
	for _, s := range secretKeys { // into team-b's gateway page cache too
		r := e.s3Do(e.gwB, gatewayCredsB, s3Req{method: "GET", path: "/" + s.bucket + "/" + pathEscape(s.key)})
		if r.status != http.StatusOK || !bytes.Equal(r.body, repeatTo(e.markerB, e.secretSize)) {
			t.Fatalf("team-b reading %s/%s through its gateway: %d %q", s.bucket, s.key, r.status, trunc(r.body))
		}
	}
	if !e.cached(tenantB, "bucket-b", "secret.bin") || !e.cached(tenantB, "shared", "b/secret.bin") {
		t.Fatal("team-b's secrets are not cached: the attacks would prove nothing")
	}
	return e
}

// tenantsFile renders the tenants file; withA=false leaves team-a out.
func tenantsFile(credsA, credsB string, withA bool) string {
	var b strings.Builder
	b.WriteString("tenants:\n")
	if withA {
		b.WriteString("  - name: team-a\n    buckets: [bucket-a, shared]\n" + credsA)
	}
	b.WriteString("  - name: team-b\n    buckets: [bucket-b, bucket-ab, shared]\n" + credsB)
	return b.String()
}

// writeTenants replaces the tenants file (by rename, as Kubernetes does)
// and waits until the nodes loaded it.
func (e *env) writeTenants(content string) {
	e.t.Helper()
	before, _ := e.c.Tenants.Reloads()
	tmp := e.tenants + ".tmp"
	testutil.Must(e.t, os.WriteFile(tmp, []byte(content), 0o600))
	testutil.Must(e.t, os.Rename(tmp, e.tenants))
	testutil.WaitFor(e.t, "the nodes to reload the tenants file", func() bool {
		ok, _ := e.c.Tenants.Reloads()
		return ok > before
	})
}

// assumeRole asks MinIO's STS for temporary credentials of the root user
// limited by policy, and returns them as a tenants-file credentials block.
func assumeRole(t *testing.T, c *nodecluster.Cluster, policy string) string {
	t.Helper()
	form := url.Values{"Action": {"AssumeRole"}, "Version": {"2011-06-15"}, "DurationSeconds": {"3600"}, "Policy": {policy}}
	body := form.Encode()
	req, err := http.NewRequest(http.MethodPost, c.MinIO.Endpoint+"/", strings.NewReader(body))
	testutil.Must(t, err)
	req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	sum := sha256.Sum256([]byte(body))
	testutil.Must(t, v4.NewSigner().SignHTTP(context.Background(), aws.Credentials{AccessKeyID: c.MinIO.AccessKey, SecretAccessKey: c.MinIO.SecretKey},
		req, hex.EncodeToString(sum[:]), "sts", c.MinIO.Region, time.Now()))
	resp, err := http.DefaultClient.Do(req)
	testutil.Must(t, err)
	defer resp.Body.Close()
	raw, err := io.ReadAll(resp.Body)
	testutil.Must(t, err)
	var out struct {
		Creds struct {
			AccessKeyID     string `xml:"AccessKeyId"`
			SecretAccessKey string `xml:"SecretAccessKey"`
			SessionToken    string `xml:"SessionToken"`
		} `xml:"AssumeRoleResult>Credentials"`
	}
	if resp.StatusCode != http.StatusOK || xml.Unmarshal(raw, &out) != nil || out.Creds.AccessKeyID == "" {
		t.Fatalf("MinIO STS AssumeRole: %d %s", resp.StatusCode, raw)
	}
	return fmt.Sprintf("    credentials:\n      accessKeyID: %q\n      secretAccessKey: %q\n      sessionToken: %q\n",
		out.Creds.AccessKeyID, out.Creds.SecretAccessKey, out.Creds.SessionToken)
}

// newMarker is prefix plus 32 random letters outside the hex alphabet, so
// no ETag, request ID or hex dump can contain a piece of it by chance.
func newMarker(prefix string) []byte {
	const alphabet = "GHIJKLMNOPQRSTUVWXYZghijklmnopqrstuvwxyz"
	b := make([]byte, 32)
	_, _ = rand.Read(b)
	for i := range b {
		b[i] = alphabet[int(b[i])%len(alphabet)]
	}
	return append([]byte(prefix), append(b, '|')...)
}

func repeatTo(m []byte, n int) []byte { return bytes.Repeat(m, n/len(m)+1)[:n] }

// window is the length of the pieces of a marker searched for.
const window = 12

// leaked counts the bytes of body that are part of a run of at least
// window bytes of an object made of marker repeated: any slice of such an
// object that long is found, wherever it starts.
func leaked(body, marker []byte) int {
	if len(body) < window {
		return 0
	}
	pieces := map[string]bool{}
	twice := append(append([]byte(nil), marker...), marker...)
	for i := 0; i < len(marker); i++ {
		pieces[string(twice[i:i+window])] = true
	}
	covered := make([]bool, len(body))
	for i := 0; i+window <= len(body); i++ {
		if pieces[string(body[i:i+window])] {
			for j := i; j < i+window; j++ {
				covered[j] = true
			}
		}
	}
	n := 0
	for _, c := range covered {
		if c {
			n++
		}
	}
	return n
}

// putVia writes an object through node i's API with the given client and
// returns its ETag.
func (e *env) putVia(hc *http.Client, i int, bucket, key string, data []byte) string {
	e.t.Helper()
	req, err := http.NewRequest(http.MethodPut, e.c.Member(i).URL()+nodeapi.ObjectPath(bucket, key), bytes.NewReader(data))
	testutil.Must(e.t, err)
	resp, err := hc.Do(req)
	testutil.Must(e.t, err)
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != http.StatusOK && resp.StatusCode != http.StatusNoContent && resp.StatusCode != http.StatusCreated {
		e.t.Fatalf("PUT %s/%s through node %d: %d %s", bucket, key, i, resp.StatusCode, body)
	}
	if etag := resp.Header.Get("ETag"); etag != "" {
		return etag
	}
	return e.headVia(hc, i, bucket, key)
}

func (e *env) headVia(hc *http.Client, i int, bucket, key string) string {
	e.t.Helper()
	resp, err := hc.Head(e.c.Member(i).URL() + nodeapi.ObjectPath(bucket, key))
	testutil.Must(e.t, err)
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		e.t.Fatalf("HEAD %s/%s through node %d: %d", bucket, key, i, resp.StatusCode)
	}
	return resp.Header.Get("ETag")
}

func (e *env) getVia(hc *http.Client, i int, bucket, key string) []byte {
	e.t.Helper()
	resp, err := hc.Get(e.c.Member(i).URL() + nodeapi.ObjectPath(bucket, key))
	testutil.Must(e.t, err)
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	testutil.Must(e.t, err)
	if resp.StatusCode != http.StatusOK {
		e.t.Fatalf("GET %s/%s through node %d: %d %s", bucket, key, i, resp.StatusCode, body)
	}
	return body
}

// chunkIDs are the chunks of an object version as tenant would cache them.
func (e *env) chunkIDs(tenant, bucket, key, etag string, size int) []chunk.ID {
	var ids []chunk.ID
	for idx := int64(0); idx*chunkSize < int64(size); idx++ {
		ids = append(ids, chunk.ID{Object: chunk.Object{Tenant: tenant, Bucket: bucket, Key: key}, ETag: etag, Size: chunkSize, Index: idx})
	}
	return ids
}

// cached reports whether every chunk of team-b's secret is held by some node
// under tenant's name.
func (e *env) cached(tenant, bucket, key string) bool {
	for _, id := range e.chunkIDs(tenant, bucket, key, e.etags[objName(bucket, key)], e.secretSize) {
		held := false
		for _, m := range e.c.Members() {
			held = held || m.Holds(id)
		}
		if !held {
			return false
		}
	}
	return true
}

// heldAs counts the chunks of team-b's secrets (every name variant an
// attack used, under every ETag of team-b's) that some node holds under
// tenant's name.
func (e *env) heldAs(tenant string, names [][2]string) int {
	n := 0
	for _, name := range names {
		for _, etag := range e.etags {
			for _, id := range e.chunkIDs(tenant, name[0], name[1], etag, e.secretSize) {
				for _, m := range e.c.Members() {
					if m.Holds(id) {
						n++
					}
				}
			}
		}
	}
	return n
}

// startGateway runs a gateway holding id's node certificate; actFor is
// sent as X-Distcache-Tenant (for a peer certificate).
func (e *env) startGateway(id pki.Identity, actFor string, creds aws.Credentials) *embed.Gateway {
	e.t.Helper()
	return e.c.StartGateway(id, embed.GatewayConfig{
		Tenant: actFor, AccessKey: creds.AccessKeyID, SecretKey: creds.SecretAccessKey, Region: region,
		Parallelism: 4, PageCacheBytes: 16 << 20, Timeout: 20 * time.Second, PassthroughTimeout: time.Minute,
	})
}

// answer is what came back from one raw request.
type answer struct {
	status int
	header http.Header
	body   []byte
	err    error // no HTTP answer at all (refused handshake, closed connection)
	via    string
}

func (a answer) String() string {
	if a.err != nil {
		return "no answer: " + a.err.Error()
	}
	s := fmt.Sprintf("%d %s", a.status, errorCode(a))
	if a.via != "" {
		s = a.via + " -> " + s
	}
	return s
}

// errorCode is the node's X-Distcache-Error or the S3 <Code> of the body.
func errorCode(a answer) string {
	if c := a.header.Get("X-Distcache-Error"); c != "" {
		return c
	}
	var x struct {
		Code string `xml:"Code"`
	}
	if xml.Unmarshal(a.body, &x) == nil {
		return x.Code
	}
	return ""
}

// rawRoundTrip writes raw (a whole HTTP/1.1 request) on a new connection
// to addr, over TLS when cfg is set, and reads one answer. The request
// line and headers are sent byte for byte: no client library cleans,
// escapes or refuses anything.
func rawRoundTrip(addr string, cfg *tls.Config, raw []byte) answer {
	d := &net.Dialer{Timeout: 20 * time.Second}
	var conn net.Conn
	var err error
	if cfg != nil {
		conn, err = tls.DialWithDialer(d, "tcp", addr, cfg)
	} else {
		conn, err = d.Dial("tcp", addr)
	}
	if err != nil {
		return answer{err: err}
	}
	defer conn.Close()
	_ = conn.SetDeadline(time.Now().Add(60 * time.Second))
	if _, err := conn.Write(raw); err != nil {
		return answer{err: err}
	}
	method, _, _ := strings.Cut(string(raw), " ")
	resp, err := http.ReadResponse(bufio.NewReader(conn), &http.Request{Method: method})
	if err != nil {
		return answer{err: err}
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(io.LimitReader(resp.Body, 64<<20))
	if err != nil && len(body) == 0 {
		return answer{status: resp.StatusCode, header: resp.Header, err: err}
	}
	return answer{status: resp.StatusCode, header: resp.Header, body: body}
}

// rawRequest renders a request with the target exactly as given.
func rawRequest(method, target, host string, header http.Header, body []byte) []byte {
	var b bytes.Buffer
	fmt.Fprintf(&b, "%s %s HTTP/1.1\r\nHost: %s\r\n", method, target, host)
	for k, vs := range header {
		for _, v := range vs {
			fmt.Fprintf(&b, "%s: %s\r\n", k, v)
		}
	}
	if body != nil || method == http.MethodPut || method == http.MethodPost {
		fmt.Fprintf(&b, "Content-Length: %d\r\n", len(body))
	}
	b.WriteString("Connection: close\r\n\r\n")
	b.Write(body)
	return b.Bytes()
}

// nodeDo sends a raw request to node i with cfg's certificate. A redirect
// (Go's ServeMux answers paths with ., .. or empty segments with a
// redirect to the cleaned path) is followed once, as an HTTP client would, and both hops
// are reported.
func (e *env) nodeDo(i int, cfg *tls.Config, method, target string, header http.Header, body []byte) answer {
	m := e.c.Member(i)
	a := rawRoundTrip(m.Addr, cfg, rawRequest(method, target, m.Addr, header, body))
	if a.err == nil && a.status >= 300 && a.status < 400 {
		loc, err := url.Parse(a.header.Get("Location"))
		if err == nil {
			first := a
			a = rawRoundTrip(m.Addr, cfg, rawRequest(method, loc.RequestURI(), m.Addr, header, body))
			a.via = fmt.Sprintf("%d to %s", first.status, loc.RequestURI())
			a.body = append(first.body, a.body...)
		}
	}
	return a
}

// s3Req is one S3 request to a gateway.
type s3Req struct {
	method string
	path   string // as on the wire (escaped)
	query  string // raw
	host   string // Host header; default the gateway's address
	header http.Header
	body   []byte
}

// s3Do signs r with creds (SigV4 as the SDKs do, path as sent) and sends
// it raw to the gateway.
func (e *env) s3Do(gw *embed.Gateway, creds aws.Credentials, r s3Req) answer {
	return rawRoundTrip(gw.Addr(), nil, e.signS3(gw, creds, r))
}

func (e *env) signS3(gw *embed.Gateway, creds aws.Credentials, r s3Req) []byte {
	e.t.Helper()
	host := r.host
	if host == "" {
		host = gw.Addr()
	}
	req := &http.Request{Method: r.method, Host: host, Header: http.Header{},
		URL: &url.URL{Scheme: "http", Host: host, Opaque: "//" + host + r.path, RawQuery: r.query}}
	for k, vs := range r.header {
		req.Header[k] = vs
	}
	sum := sha256.Sum256(r.body)
	payload := hex.EncodeToString(sum[:])
	req.Header.Set("X-Amz-Content-Sha256", payload)
	signer := v4.NewSigner(func(o *v4.SignerOptions) { o.DisableURIPathEscaping = true })
	testutil.Must(e.t, signer.SignHTTP(context.Background(), creds, req, payload, "s3", region, time.Now()))
	h := req.Header.Clone()
	h.Del("Host")
	return rawRequest(r.method, r.path+queryPart(r.query), host, h, r.body)
}

// presign returns a presigned GET target (path?query) for the gateway.
func (e *env) presign(gw *embed.Gateway, creds aws.Credentials, path string) string {
	e.t.Helper()
	host := gw.Addr()
	req := &http.Request{Method: http.MethodGet, Host: host, Header: http.Header{},
		URL: &url.URL{Scheme: "http", Host: host, Opaque: "//" + host + path, RawQuery: "X-Amz-Expires=600"}}
	signer := v4.NewSigner(func(o *v4.SignerOptions) { o.DisableURIPathEscaping = true })
	signed, _, err := signer.PresignHTTP(context.Background(), creds, req, "UNSIGNED-PAYLOAD", "s3", region, time.Now())
	testutil.Must(e.t, err)
	_, query, _ := strings.Cut(signed, "?")
	return path + "?" + query
}

func queryPart(q string) string {
	if q == "" {
		return ""
	}
	return "?" + q
}

// pathEscape escapes each segment of a key for a URL path.
func pathEscape(key string) string {
	segs := strings.Split(key, "/")
	for i, s := range segs {
		segs[i] = url.PathEscape(s)
	}
	return strings.Join(segs, "/")
}

func trunc(b []byte) string {
	if len(b) > 300 {
		return string(b[:300]) + "..."
	}
	return string(b)
}
