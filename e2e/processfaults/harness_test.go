// Package processfaults_test kills, starves and damages the real `cachenode
// serve` process and checks that it never serves wrong bytes, never loses an
// acknowledged write and never falls over:
//
//   - kill -9 during write-throughs and during reads, then a restart on the
//     same data directory, for several cycles (TestKillDuringWriteThroughs,
//     TestKillDuringReads);
//   - a data directory on a filesystem smaller than --disk-bytes, so the
//     store meets the real ENOSPC (TestDiskFull, needs root to mount);
//   - store files damaged while the node is stopped (TestCorruptStoreFiles);
//   - kill -9 of one or both of two nodes of one ring holding write-back
//     copies (replicas 2) of unpersisted writes, MinIO checked against a
//     history of the acknowledged operations (TestKillOneOfTwoHolders,
//     TestKillBothHolders; a cluster runs several nodes sharing a ring
//     file).
//
// The node runs as a process built from this tree, against a real MinIO,
// with real certificates. Objects are checked against MinIO directly; the
// node's S3 requests are counted from its own metrics
// (distcache_s3_requests_total), which start at zero with each process.
//
// Environment:
//
//	DISTCACHE_PROCESS_FAULT_CYCLES  kill/restart cycles per kill test (default 3; make soak raises it)
//	DISTCACHE_PROCESS_FAULT_SEED    seed of the kill moments and workloads (default: time-based, logged)
package processfaults_test

import (
	"bytes"
	"context"
	"crypto/tls"
	"encoding/json"
	"fmt"
	"hash/fnv"
	"io"
	"math/rand/v2"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/s3"

	"github.com/distcache/distcache/internal/chunk"
	"github.com/distcache/distcache/internal/nodeapi"
	"github.com/distcache/distcache/internal/pki"
	"github.com/distcache/distcache/internal/ring"
	"github.com/distcache/distcache/internal/testutil"
	"github.com/distcache/distcache/internal/testutil/certfiles"
	"github.com/distcache/distcache/internal/testutil/freeport"
	"github.com/distcache/distcache/internal/testutil/gobin"
	"github.com/distcache/distcache/internal/testutil/logbuf"
	"github.com/distcache/distcache/internal/testutil/miniotest"
	"github.com/distcache/distcache/internal/testutil/s3proxy"
	"github.com/distcache/distcache/tools/benchmark/benchkit"
)

const (
	bucket  = "data"
	tenant  = "analytics"
	chunkSz = 1 << 20 // --chunk-size of every node here

	readyTimeout = 90 * time.Second // a loaded 2-core machine, a store to replay
	exitTimeout  = 60 * time.Second
)

// cycles is the number of kill/restart cycles of each kill test.
func cycles(t *testing.T) int { return testutil.EnvInt(t, "DISTCACHE_PROCESS_FAULT_CYCLES", 3) }

// newRand returns the test's seeded generator and logs the seed, so a
// failure can be replayed with DISTCACHE_PROCESS_FAULT_SEED.
func newRand(t *testing.T) *rand.Rand {
	seed := uint64(time.Now().UnixNano())
	if v := os.Getenv("DISTCACHE_PROCESS_FAULT_SEED"); v != "" {
		var err error
		if seed, err = strconv.ParseUint(v, 10, 64); err != nil {
			t.Fatalf("DISTCACHE_PROCESS_FAULT_SEED=%q: %v", v, err)
		}
	}
	t.Logf("seed %d (replay with DISTCACHE_PROCESS_FAULT_SEED=%d)", seed, seed)
	return testutil.NewRand(seed)
}

// content is the deterministic payload of a key: the test never has to keep
// what it wrote, only its key and size.
func content(key string, size int) []byte {
	h := fnv.New64a()
	h.Write([]byte(key))
	s := h.Sum64()
	r := rand.NewChaCha8([32]byte{byte(s), byte(s >> 8), byte(s >> 16), byte(s >> 24), byte(s >> 32), byte(s >> 40), byte(s >> 48), byte(s >> 56)})
	b := make([]byte, size)
	_, _ = r.Read(b)
	return b
}

// env is one test's world: MinIO, certificates and a tenants file.
type env struct {
	t     *testing.T
	dir   string
	ca    *pki.CA // issues the peer certificates of a cluster's nodes
	minio *miniotest.Server
	// s3Endpoint is where the nodes send their S3 requests: MinIO, or an
	// s3proxy in front of it (set before the nodes start).
	s3Endpoint string
	// proxy is that s3proxy, if any: its record of requests explains a
	// key MinIO ends with wrongly.
	proxy *s3proxy.Proxy
	s3    *s3.Client // MinIO directly, for the ground truth
	http  *http.Client
}

func newEnv(t *testing.T) *env {
	t.Helper()
	e := &env{t: t, dir: t.TempDir()}
	e.minio = miniotest.Start(t)
	e.minio.CreateBucket(t, bucket)
	e.s3 = e.minio.Client(t)
	e.s3Endpoint = e.minio.Endpoint

	e.ca, _ = certfiles.Write(t, e.dir, "processfaults CA", map[string]pki.Identity{"client": {Kind: pki.KindTenant, Name: tenant}})
	if err := os.WriteFile(e.path("tenants.yaml"), []byte("tenants:\n  - name: "+tenant+"\n    buckets: ["+bucket+"]\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	tlsConfig, err := pki.ClientTLSConfig(e.path("client.crt"), e.path("client.key"), e.path("ca.crt"))
	if err != nil {
		t.Fatal(err)
	}
	tr := &http.Transport{TLSClientConfig: tlsConfig, MaxIdleConnsPerHost: 16,
		TLSNextProto: map[string]func(string, *tls.Conn) http.RoundTripper{}}
	e.http = &http.Client{Transport: tr, Timeout: 2 * time.Minute}
	t.Cleanup(tr.CloseIdleConnections)
	return e
}

func (e *env) path(name string) string { return filepath.Join(e.dir, name) }

// putS3 writes an object to MinIO directly.
func (e *env) putS3(t *testing.T, key string, data []byte) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	if _, err := e.s3.PutObject(ctx, &s3.PutObjectInput{Bucket: aws.String(bucket), Key: aws.String(key), Body: bytes.NewReader(data)}); err != nil {
		t.Fatalf("put %s to MinIO: %v", key, err)
	}
}

// getS3 reads an object from MinIO directly; ok is false if it does not exist.
func (e *env) getS3(t *testing.T, key string) (data []byte, etag string, ok bool) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	out, err := e.s3.GetObject(ctx, &s3.GetObjectInput{Bucket: aws.String(bucket), Key: aws.String(key)})
	if err != nil {
		if strings.Contains(err.Error(), "NoSuchKey") {
			return nil, "", false
		}
		t.Fatalf("get %s from MinIO: %v", key, err)
	}
	defer out.Body.Close()
	data, err = io.ReadAll(out.Body)
	if err != nil {
		t.Fatalf("get %s from MinIO: %v", key, err)
	}
	return data, aws.ToString(out.ETag), true
}

// pendingUploads counts multipart uploads MinIO still holds (started, never
// completed or aborted).
func (e *env) pendingUploads(t *testing.T) int {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	out, err := e.s3.ListMultipartUploads(ctx, &s3.ListMultipartUploadsInput{Bucket: aws.String(bucket)})
	if err != nil {
		t.Fatalf("list multipart uploads: %v", err)
	}
	return len(out.Uploads)
}

// node is one `cachenode serve` process, restartable on the same data
// directory.
type node struct {
	e       *env
	name    string
	dataDir string
	args    []string // extra flags

	api, ops string
	// fixedAddrs keeps api and ops across restarts (a ring names the
	// node's address); otherwise every launch takes new ports.
	fixedAddrs bool
	cmd        *exec.Cmd
	exited     chan struct{} // closed when the process of the last launch has exited
	exitErr    error         // its Wait error, set before exited is closed
	logs       *logBuffer
	starts     int
}

func (e *env) newNode(name, dataDir string, args ...string) *node {
	n := &node{e: e, name: name, dataDir: dataDir, args: args, logs: &logBuffer{}}
	e.t.Cleanup(func() {
		if n.running() {
			_ = n.cmd.Process.Kill()
			<-n.exited
		}
		if e.t.Failed() {
			e.t.Logf("%s output (%d starts):\n%s", n.name, n.starts, n.logs.tail(64<<10))
		}
	})
	return n
}

func (n *node) running() bool {
	if n.cmd == nil {
		return false
	}
	select {
	case <-n.exited:
		return false
	default:
		return true
	}
}

// start starts the process and waits until it is ready.
func (n *node) start(t *testing.T) {
	t.Helper()
	if err := n.launch(t); err != nil {
		t.Fatal(err)
	}
	if err := n.waitReady(); err != nil {
		t.Fatalf("%s: %v\n%s", n.name, err, n.logs.tail(16<<10))
	}
}

func (n *node) launch(t *testing.T) error {
	t.Helper()
	if n.running() {
		return fmt.Errorf("%s is already running", n.name)
	}
	n.starts++
	if !n.fixedAddrs || n.api == "" {
		n.api, n.ops = freeport.Addr(t), freeport.Addr(t)
	}
	args := append([]string{"serve",
		"--listen", n.api, "--metrics-listen", n.ops,
		"--tls-cert", n.e.path("server.crt"), "--tls-key", n.e.path("server.key"),
		"--client-ca", n.e.path("ca.crt"), "--tenants-file", n.e.path("tenants.yaml"),
		"--s3-endpoint", n.e.s3Endpoint, "--s3-path-style",
		"--data-dir", n.dataDir, "--chunk-size", "1Mi", "--log-level", logLevel(),
	}, n.args...)
	n.cmd = exec.Command(gobin.Cachenode(t), args...)
	n.cmd.Env = append(os.Environ(), "AWS_ACCESS_KEY_ID="+n.e.minio.AccessKey, "AWS_SECRET_ACCESS_KEY="+n.e.minio.SecretKey)
	fmt.Fprintf(n.logs, "=== start %d: %s\n", n.starts, strings.Join(n.cmd.Args, " "))
	n.cmd.Stdout, n.cmd.Stderr = n.logs, n.logs
	if err := n.cmd.Start(); err != nil {
		return err
	}
	// One channel closed (never sent on) at exit: every reader sees it,
	// so running() cannot mistake an exit someone already waited for for
	// a live process.
	exited := make(chan struct{})
	n.exited = exited
	cmd := n.cmd
	go func() {
		err := cmd.Wait()
		fmt.Fprintf(n.logs, "=== exited: %v\n", cmd.ProcessState)
		n.exitErr = err
		close(exited)
	}()
	return nil
}

// waitReady polls /readyz; it fails at once if the process exits.
func (n *node) waitReady() error {
	deadline := time.Now().Add(readyTimeout)
	for time.Now().Before(deadline) {
		select {
		case <-n.exited:
			return fmt.Errorf("exited before it was ready: %v", n.exitErr)
		default:
		}
		resp, err := http.Get("http://" + n.ops + "/readyz")
		if err == nil {
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				return nil
			}
		}
		time.Sleep(50 * time.Millisecond)
	}
	return fmt.Errorf("not ready after %v", readyTimeout)
}

// kill9 sends SIGKILL and waits for the process to be gone.
func (n *node) kill9(t *testing.T) {
	t.Helper()
	if err := n.cmd.Process.Signal(syscall.SIGKILL); err != nil {
		t.Fatalf("kill -9 %s: %v", n.name, err)
	}
	n.waitExit(t)
}

// stop sends SIGTERM and expects a clean exit.
func (n *node) stop(t *testing.T) {
	t.Helper()
	if err := n.cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatalf("SIGTERM %s: %v", n.name, err)
	}
	if err := n.waitExit(t); err != nil {
		t.Fatalf("%s exited with %v after SIGTERM", n.name, err)
	}
}

func (n *node) waitExit(t *testing.T) error {
	t.Helper()
	select {
	case <-n.exited:
		return n.exitErr
	case <-time.After(exitTimeout):
		t.Fatalf("%s did not exit", n.name)
		return nil
	}
}

func (n *node) url(key string) string {
	return "https://" + n.api + "/v1/objects/" + bucket + "/" + key
}

// put writes an object through the node; it returns the ETag of an
// acknowledged write.
func (n *node) put(key string, data []byte) (string, error) {
	req, err := http.NewRequest(http.MethodPut, n.url(key), bytes.NewReader(data))
	if err != nil {
		return "", err
	}
	resp, err := n.e.http.Do(req)
	if err != nil {
		return "", err
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		return "", err
	}
	if resp.StatusCode != http.StatusOK {
		return "", &statusError{op: "PUT " + key, status: resp.StatusCode, body: string(body)}
	}
	var m struct {
		ETag string `json:"etag"`
		Size int64  `json:"size"`
	}
	if err := json.Unmarshal(body, &m); err != nil {
		return "", fmt.Errorf("PUT %s: answer %q: %v", key, body, err)
	}
	if m.Size != int64(len(data)) {
		return "", fmt.Errorf("PUT %s: acknowledged %d bytes, sent %d", key, m.Size, len(data))
	}
	return m.ETag, nil
}

// reply is a finished read: a status and a complete body (a body cut short
// is an error from get, never a reply).
type reply struct {
	status int
	body   []byte
	header http.Header
}

// get reads through the node; query and rangeHeader are optional.
func (n *node) get(key, query, rangeHeader string) (reply, error) {
	u := n.url(key)
	if query != "" {
		u += "?" + query
	}
	req, err := http.NewRequest(http.MethodGet, u, nil)
	if err != nil {
		return reply{}, err
	}
	if rangeHeader != "" {
		req.Header.Set("Range", rangeHeader)
	}
	resp, err := n.e.http.Do(req)
	if err != nil {
		return reply{}, err
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		return reply{}, err
	}
	if resp.ContentLength >= 0 && int64(len(body)) != resp.ContentLength {
		return reply{}, fmt.Errorf("GET %s: %d bytes of %d", key, len(body), resp.ContentLength)
	}
	return reply{resp.StatusCode, body, resp.Header}, nil
}

// metrics scrapes the node's /metrics.
func (n *node) metrics(t *testing.T) metricSet {
	t.Helper()
	m, err := benchkit.Scrape(context.Background(), "http://"+n.ops+"/metrics")
	if err != nil {
		t.Fatalf("scrape %s: %v", n.name, err)
	}
	return metricSet{m}
}

// metricSet is a scrape of one node (Sum adds the series of a name whose
// labels hold every `k="v"` given).
type metricSet struct{ benchkit.Metrics }

// s3Gets is the number of ranged GETs the process made to S3.
func (m metricSet) s3Gets() float64 {
	return m.Sum("distcache_s3_requests_total", `op="get"`)
}

// chunkReads is distcache_chunk_reads_total for one result.
func (m metricSet) chunkReads(result string) float64 {
	return m.Sum("distcache_chunk_reads_total", `result="`+result+`"`)
}

// logLevel is the nodes' --log-level: DISTCACHE_PROCESS_FAULT_LOG_LEVEL, or
// info (debug logs every request the persisters send to S3).
func logLevel() string {
	if l := os.Getenv("DISTCACHE_PROCESS_FAULT_LOG_LEVEL"); l != "" {
		return l
	}
	return "info"
}

// lines are the lines of the output that contain s.
func (b *logBuffer) lines(s string) []string {
	var out []string
	for l := range strings.Lines(b.String()) {
		if strings.Contains(l, s) {
			out = append(out, strings.TrimSuffix(l, "\n"))
		}
	}
	return out
}

// logBuffer collects a process's output across restarts.
type logBuffer struct{ logbuf.Buffer }

func (b *logBuffer) tail(n int) string {
	s := b.String()
	if len(s) > n {
		s = "...\n" + s[len(s)-n:]
	}
	return s
}

// since returns the output written after mark (a length of String()).
func (b *logBuffer) since(mark int) string { return b.String()[mark:] }

func (b *logBuffer) len() int { return len(b.String()) }

// cluster is several `cachenode serve` processes sharing one ring, as nodes
// run by hand: every node reads the same ring file (--ring-file, members
// cache-0, cache-1, ... at fixed addresses), calls the others with its own
// peer certificate and keeps its data directory across restarts.
type cluster struct {
	e     *env
	ring  *ring.Ring // the ring last published
	nodes []*node
}

// newCluster creates (without starting them) n nodes of one ring; args are
// extra flags of every node.
func (e *env) newCluster(t *testing.T, n int, args ...string) *cluster {
	t.Helper()
	c := &cluster{e: e}
	for i := range n {
		name := fmt.Sprintf("cache-%d", i)
		peer, err := e.ca.IssueClient(pki.Identity{Kind: pki.KindPeer, Name: name}, time.Hour)
		if err != nil {
			t.Fatal(err)
		}
		if err := pki.WriteFiles(e.dir, "peer-"+name, peer); err != nil {
			t.Fatal(err)
		}
		nd := e.newNode(name, t.TempDir(), append([]string{"--node-name", name, "--ring-file", e.path("ring.json"),
			"--peer-cert", e.path("peer-" + name + ".crt"), "--peer-key", e.path("peer-" + name + ".key")}, args...)...)
		nd.fixedAddrs = true
		nd.api, nd.ops = freeport.Addr(t), freeport.Addr(t)
		c.nodes = append(c.nodes, nd)
	}
	c.writeRing(t, 1, c.nodes, nil)
	return c
}

// writeRing writes the ring file: epoch, of members, draining one of them
// (or none).
func (c *cluster) writeRing(t *testing.T, epoch int64, members []*node, draining *node) {
	t.Helper()
	var ms []ring.Member
	for _, n := range members {
		state := ring.StateActive
		if n == draining {
			state = ring.StateDraining
		}
		ms = append(ms, ring.Member{Name: n.name, Address: n.api, Weight: 100, State: state})
	}
	r, err := ring.New(ring.Spec{Epoch: epoch, Zone: "test", Hash: ring.HashParams{Algorithm: ring.AlgorithmRendezvousXXHash64}, Members: ms})
	if err != nil {
		t.Fatal(err)
	}
	doc, err := json.Marshal(r)
	if err != nil {
		t.Fatal(err)
	}
	// Renamed into place: a watcher never reads half a document.
	if err := os.WriteFile(c.e.path("ring.json.tmp"), doc, 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.Rename(c.e.path("ring.json.tmp"), c.e.path("ring.json")); err != nil {
		t.Fatal(err)
	}
	c.ring = r
}

// publish makes members the ring (the next epoch) and waits until every
// running node routes by it.
func (c *cluster) publish(t *testing.T, members ...*node) {
	t.Helper()
	c.publishRing(t, members, nil)
}

// publishDraining makes every node the ring, n marked draining as the
// operator marks the pods a scale-down removes, and waits until every
// running node routes by it.
func (c *cluster) publishDraining(t *testing.T, n *node) {
	t.Helper()
	c.publishRing(t, c.nodes, n)
}

func (c *cluster) publishRing(t *testing.T, members []*node, draining *node) {
	t.Helper()
	epoch := c.ring.Epoch() + 1
	c.writeRing(t, epoch, members, draining)
	deadline := time.Now().Add(readyTimeout)
	for _, n := range c.nodes {
		for n.running() {
			var got struct {
				Epoch int64 `json:"epoch"`
			}
			resp, err := n.e.http.Get("https://" + n.api + "/v1/ring")
			if err == nil {
				err = json.NewDecoder(resp.Body).Decode(&got)
				resp.Body.Close()
			}
			if err == nil && got.Epoch == epoch {
				break
			}
			if time.Now().After(deadline) {
				t.Fatalf("%s does not route by ring epoch %d after %v (serves epoch %d, %v)", n.name, epoch, readyTimeout, got.Epoch, err)
			}
			time.Sleep(100 * time.Millisecond)
		}
	}
}

// start starts every node that is not running and waits until all are
// ready.
func (c *cluster) start(t *testing.T) {
	t.Helper()
	var started []*node
	for _, n := range c.nodes {
		if n.running() {
			continue
		}
		if err := n.launch(t); err != nil {
			t.Fatal(err)
		}
		started = append(started, n)
	}
	for _, n := range started {
		if err := n.waitReady(); err != nil {
			t.Fatalf("%s: %v\n%s", n.name, err, n.logs.tail(16<<10))
		}
	}
}

// node returns the member of that name.
func (c *cluster) node(name string) *node {
	for _, n := range c.nodes {
		if n.name == name {
			return n
		}
	}
	panic("no node " + name)
}

// except is every node but n.
func (c *cluster) except(n *node) []*node {
	var rest []*node
	for _, m := range c.nodes {
		if m != n {
			rest = append(rest, m)
		}
	}
	return rest
}

// owner is key's metadata owner: the node that takes its held writes.
func (c *cluster) owner(key string) *node {
	return c.node(c.ring.Candidates(nodeapi.MetaID(chunk.Object{Tenant: tenant, Bucket: bucket, Key: key}), 1)[0].Name)
}

// del deletes an object through the node.
func (n *node) del(key string) error {
	req, err := http.NewRequest(http.MethodDelete, n.url(key), nil)
	if err != nil {
		return err
	}
	resp, err := n.e.http.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != http.StatusNoContent {
		return &statusError{op: "DELETE " + key, status: resp.StatusCode, body: string(body)}
	}
	return nil
}

// statusError is a node's answer other than success.
type statusError struct {
	op     string
	status int
	body   string
}

func (e *statusError) Error() string { return fmt.Sprintf("%s: %d %s", e.op, e.status, e.body) }
