package processfaults_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"net/http"
	"os"
	"sort"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/s3"

	"github.com/distcache/distcache/internal/chunk"
	"github.com/distcache/distcache/internal/nodeapi"
	"github.com/distcache/distcache/internal/testutil/s3proxy"
	"github.com/distcache/distcache/internal/writeback"
)

// The write-back crash tests with two copies (issue 27): two `cachenode
// serve` processes share a ring and a WriteBack policy with replicas 2, so
// each node holds a copy of every acknowledged write. While the writers
// run, S3 (an s3proxy in front of MinIO) refuses the nodes' writes under
// the prefix, so that at the kill nothing acknowledged is in MinIO yet
// (checked), or in every other round takes wbSlowS3 for each, so that at
// the kill uploads are under way and most writes are not in MinIO yet
// (checked: not all); then S3 takes writes again. Every operation sent is
// recorded (wbHistory), and MinIO's final state of every key is checked
// against it.

const (
	wbPrefix   = "wb/"
	wbKeys     = 40 // keys of the workload, wb/k00..
	wbWriters  = 4  // key i is written by writer i % wbWriters only
	wbOpsRound = 48 // operations per round

	// wbPersistTimeout bounds the wait for S3 to catch up (the persister
	// backs off up to 30 s while S3 refuses).
	wbPersistTimeout = 3 * time.Minute
	// s3PartSize is s3backend's default: a held object above it is
	// persisted in parts, with an ETag that is not its MD5.
	s3PartSize = 16 << 20
)

// wbTenantsReplicas puts wb/ of the bucket in WriteBack with two copies.
const wbTenantsReplicas = "tenants:\n  - name: " + tenant + "\n    buckets: [" + bucket + "]\n" +
	"    policies:\n      - {bucket: " + bucket + ", prefix: " + wbPrefix + ", mode: WriteBack, replicas: 2}\n"

// wbOp is one operation of the history: a PUT of size bytes (the body is
// content of the key and gen, unique to the operation) or a DELETE.
type wbOp struct {
	key   string
	gen   int
	del   bool
	size  int
	round int
	acked bool
	etag  string // of an acknowledged PUT
}

func (o *wbOp) body() []byte { return content(fmt.Sprintf("%s#%d", o.key, o.gen), o.size) }

func (o *wbOp) String() string {
	if o == nil {
		return "nothing (never written)"
	}
	what := fmt.Sprintf("PUT #%d (%d bytes, ETag %s)", o.gen, o.size, o.etag)
	if o.del {
		what = fmt.Sprintf("DELETE #%d", o.gen)
	}
	if !o.acked {
		what += " unacknowledged"
	}
	return fmt.Sprintf("%s in round %d", what, o.round)
}

// wbHistory is every operation sent, per key in the order sent. Each key
// has one writer, which sends its next operation only after the previous
// one's answer, so that order is the order the operations happened in.
type wbHistory struct {
	mu   sync.Mutex
	gen  int
	keys map[string][]*wbOp
}

func newWBHistory() *wbHistory { return &wbHistory{keys: map[string][]*wbOp{}} }

// begin records an operation about to be sent.
func (h *wbHistory) begin(key string, del bool, size, round int) *wbOp {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.gen++
	o := &wbOp{key: key, gen: h.gen, del: del, size: size, round: round}
	h.keys[key] = append(h.keys[key], o)
	return o
}

// recent is key's last n operations, oldest first.
func (h *wbHistory) recent(key string, n int) []*wbOp {
	h.mu.Lock()
	defer h.mu.Unlock()
	ops := h.keys[key]
	return ops[max(0, len(ops)-n):]
}

// ack records the acknowledgement of o.
func (h *wbHistory) ack(o *wbOp, etag string) {
	h.mu.Lock()
	defer h.mu.Unlock()
	o.acked, o.etag = true, etag
}

// last is the key's last acknowledged operation (nil: none).
func (h *wbHistory) last(key string) *wbOp {
	h.mu.Lock()
	defer h.mu.Unlock()
	return lastAcked(h.keys[key])
}

func lastAcked(ops []*wbOp) *wbOp {
	for i := len(ops) - 1; i >= 0; i-- {
		if ops[i].acked {
			return ops[i]
		}
	}
	return nil
}

// allowed is what S3 may hold for key in the end: the result of its last
// acknowledged operation (nil: nothing ever acknowledged, the key absent),
// or of any operation sent after it and not acknowledged (it may have
// taken effect).
func (h *wbHistory) allowed(key string) []*wbOp {
	h.mu.Lock()
	defer h.mu.Unlock()
	ops := h.keys[key]
	last := lastAcked(ops)
	out := []*wbOp{last}
	for i := len(ops) - 1; i >= 0 && ops[i] != last; i-- {
		out = append(out, ops[i])
	}
	return out
}

func (h *wbHistory) sortedKeys() []string {
	h.mu.Lock()
	defer h.mu.Unlock()
	keys := make([]string, 0, len(h.keys))
	for k := range h.keys {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	return keys
}

// s3State is a key's state in MinIO.
type s3State struct {
	exists bool
	size   int64
	etag   string
	body   []byte // with full checks only
}

// matches reports whether st is the result of o (nil: the key absent).
// Without the body (a quick check) size and ETag must match; the ETag is
// known of acknowledged PUTs only, and S3 gives an object persisted in
// parts another ETag than the node's MD5.
func (st s3State) matches(o *wbOp, full bool) bool {
	if o == nil || o.del {
		return !st.exists
	}
	if !st.exists || st.size != int64(o.size) {
		return false
	}
	if o.acked && o.size <= s3PartSize && st.etag != o.etag {
		return false
	}
	return !full || bytes.Equal(st.body, o.body())
}

// s3State reads key's state from MinIO directly: HEAD, or with full a GET.
func (e *env) s3State(t *testing.T, key string, full bool) s3State {
	t.Helper()
	if full {
		data, etag, ok := e.getS3(t, key)
		return s3State{exists: ok, size: int64(len(data)), etag: etag, body: data}
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	out, err := e.s3.HeadObject(ctx, &s3.HeadObjectInput{Bucket: aws.String(bucket), Key: aws.String(key)})
	if err != nil {
		if strings.Contains(err.Error(), "NotFound") || strings.Contains(err.Error(), "NoSuchKey") {
			return s3State{}
		}
		t.Fatalf("head %s in MinIO: %v", key, err)
	}
	return s3State{exists: true, size: aws.ToInt64(out.ContentLength), etag: aws.ToString(out.ETag)}
}

// mismatches checks MinIO against the history: every key (of those only
// accepts; nil: all) whose state is not one the history allows, described
// with its owner.
func (h *wbHistory) mismatches(t *testing.T, e *env, c *cluster, full bool, only func(key string) bool) []string {
	t.Helper()
	return h.check(t, e, c, full, false, only)
}

// check is mismatches, each key with explain followed by what explains
// it (env.explain).
func (h *wbHistory) check(t *testing.T, e *env, c *cluster, full, explain bool, only func(key string) bool) []string {
	t.Helper()
	var bad []string
	for _, key := range h.sortedKeys() {
		if only != nil && !only(key) {
			continue
		}
		st := e.s3State(t, key, full)
		ok := false
		allowed := h.allowed(key)
		for _, o := range allowed {
			if st.matches(o, full) {
				ok = true
				break
			}
		}
		if !ok {
			got := "absent"
			if st.exists {
				got = fmt.Sprintf("%d bytes, ETag %s", st.size, st.etag)
			}
			bad = append(bad, fmt.Sprintf("%s (owner %s): MinIO has %s, want %v; its last operations: %v", key, c.owner(key).name, got, allowed, h.recent(key, 4)))
			if explain {
				bad = append(bad, e.explain(t, c, h, key, st)...)
			}
		}
	}
	return bad
}

// waitS3Matches waits until MinIO holds what the history says for every
// key that only accepts (nil: all), polling HEADs, then checks their
// bodies byte for byte.
func (h *wbHistory) waitS3Matches(t *testing.T, e *env, c *cluster, what string, only func(key string) bool) {
	t.Helper()
	deadline := time.Now().Add(wbPersistTimeout)
	for {
		bad := h.mismatches(t, e, c, false, only)
		if len(bad) == 0 {
			break
		}
		if time.Now().After(deadline) {
			bad = h.check(t, e, c, false, true, only)
			t.Fatalf("%s: %d keys not as acknowledged in MinIO after %v:\n%s", what, len(bad), wbPersistTimeout, strings.Join(bad, "\n"))
		}
		time.Sleep(250 * time.Millisecond)
	}
	if bad := h.check(t, e, c, true, true, only); len(bad) > 0 {
		t.Fatalf("%s: %d keys not byte-exact as acknowledged in MinIO:\n%s", what, len(bad), strings.Join(bad, "\n"))
	}
}

// checkUnpersisted counts the keys whose last acknowledged operation is a
// PUT of this round that MinIO does not have yet. With refused (S3 refused
// every write of the round) that must be all of them; with S3 only slow,
// some may have been persisted, but not all.
func (h *wbHistory) checkUnpersisted(t *testing.T, e *env, round int, refused bool) int {
	t.Helper()
	n, puts := 0, 0
	for _, key := range h.sortedKeys() {
		o := h.last(key)
		if o == nil || o.round != round || o.del {
			continue
		}
		puts++
		if st := e.s3State(t, key, true); st.matches(o, true) {
			if refused {
				t.Fatalf("round %d: %s is in MinIO already, although S3 refused the nodes' writes", round, key)
			}
			continue
		}
		n++
	}
	if n == 0 {
		t.Fatalf("round %d: none of %d PUTs left unpersisted at the kill", round, puts)
	}
	t.Logf("round %d (S3 refusing: %v): %d of the round's %d last PUTs not in MinIO at the kill", round, refused, n, puts)
	return n
}

// checkReads reads every key through n and checks it answers the last
// acknowledged operation: the body of a PUT, byte-exact, or 404 after a
// DELETE.
func (h *wbHistory) checkReads(t *testing.T, n *node, what string) {
	t.Helper()
	for _, key := range h.sortedKeys() {
		o := h.last(key)
		if o == nil {
			continue
		}
		r, err := n.get(key, "", "")
		switch {
		case err != nil:
			t.Fatalf("%s: read of %s through %s: %v", what, key, n.name, err)
		case o.del && r.status != http.StatusNotFound:
			t.Fatalf("%s: read of %s through %s: %d, want 404 after %v", what, key, n.name, r.status, o)
		case !o.del && (r.status != http.StatusOK || !bytes.Equal(r.body, o.body())):
			t.Fatalf("%s: read of %s through %s: %d, %d bytes, want %v: %.200s", what, key, n.name, r.status, len(r.body), o, r.body)
		}
	}
}

// wbWorkload runs one round of operations: wbWriters writers, each on its
// own keys, overwriting, deleting and writing again, every operation sent
// to the key's metadata owner and retried while it answers 503 SlowDown
// (a holder is marked down for a while after a restart). It returns once
// every operation is acknowledged; an operation that fails otherwise fails
// the test.
func wbWorkload(t *testing.T, c *cluster, h *wbHistory, rng *rand.Rand, round int) (retries int) {
	t.Helper()
	var wg sync.WaitGroup
	var retried atomic.Int64
	errs := make(chan error, wbWriters+1)
	// write sends an operation and records its acknowledgement; false
	// when it was not acknowledged (the error is in errs).
	write := func(key string, del bool, size int) bool {
		o := h.begin(key, del, size, round)
		etag, n, err := c.send(o)
		retried.Add(int64(n))
		if err != nil {
			errs <- fmt.Errorf("round %d: %s not acknowledged: %w", round, o, err)
			return false
		}
		h.ack(o, etag)
		return true
	}
	for w := range wbWriters {
		seed := rng.Uint64()
		wg.Go(func() {
			r := rand.New(rand.NewPCG(seed, uint64(round)))
			for range wbOpsRound / wbWriters {
				key := fmt.Sprintf("%sk%02d", wbPrefix, w+wbWriters*r.IntN(wbKeys/wbWriters))
				prev := h.last(key)
				del := prev != nil && !prev.del && r.IntN(4) == 0
				size := 0
				if !del {
					size = wbSize(r)
				}
				if !write(key, del, size) {
					return
				}
			}
		})
	}
	// One large object per round, persisted in parts: written, then
	// deleted in the next round.
	bigKey := wbPrefix + "big"
	prev := h.last(bigKey)
	bigDel := prev != nil && !prev.del
	bigSize := 0
	if !bigDel {
		bigSize = s3PartSize + 1 + rng.IntN(chunkSz)
	}
	wg.Go(func() { write(bigKey, bigDel, bigSize) })
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
	if t.Failed() {
		t.FailNow()
	}
	return int(retried.Load())
}

// wbSize draws a body size: small, up to a few chunks. Never empty: see
// TestWriteBackEmptyObjectTwoCopies.
func wbSize(r *rand.Rand) int {
	switch p := r.IntN(100); {
	case p < 40:
		return 1 + r.IntN(4<<10)
	case p < 70:
		return r.IntN(256 << 10)
	case p < 80:
		return chunkSz
	default:
		return chunkSz + r.IntN(5*chunkSz/2)
	}
}

// send sends o to its key's metadata owner (the node that takes held
// writes), again while the answer is 503 SlowDown. It returns the
// acknowledged ETag of a PUT and the number of retries.
func (c *cluster) send(o *wbOp) (etag string, retries int, err error) {
	deadline := time.Now().Add(2 * time.Minute)
	for {
		n := c.owner(o.key)
		if o.del {
			err = n.del(o.key)
		} else {
			etag, err = n.put(o.key, o.body())
		}
		var se *statusError
		if err == nil || !errors.As(err, &se) || se.status != http.StatusServiceUnavailable || time.Now().After(deadline) {
			return etag, retries, err
		}
		retries++
		time.Sleep(100 * time.Millisecond)
	}
}

// wbSlowS3 is how long the nodes' writes under the prefix take in a round
// with a slow S3: long enough that most of the round's writes are queued
// or under way at the kill however loaded the machine is.
const wbSlowS3 = 10 * time.Second

// holdBackWriteBack makes S3 refuse the nodes' writes under the prefix
// (PUTs, multipart starts and completions, DELETEs) with 503 SlowDown, or
// with slow take wbSlowS3 to forward each.
func holdBackWriteBack(p *s3proxy.Proxy, slow bool) {
	f := s3proxy.SlowDown
	if slow {
		f = s3proxy.Spike(wbSlowS3)
	}
	for _, m := range []string{http.MethodPut, http.MethodPost, http.MethodDelete} {
		p.Inject(s3proxy.Rule{Method: m, PathPrefix: "/" + bucket + "/" + wbPrefix, Fault: f})
	}
}

// dirty is the node's count of held objects not in S3 yet.
func (n *node) dirty(t *testing.T) float64 {
	t.Helper()
	return n.metrics(t).Sum("distcache_writeback_objects", `kind="dirty"`)
}

// waitClean waits until no running node holds dirty objects: every copy
// was dropped once S3 had its version.
func (c *cluster) waitClean(t *testing.T, what string) {
	t.Helper()
	deadline := time.Now().Add(wbPersistTimeout)
	for {
		var held []string
		for _, n := range c.nodes {
			if !n.running() {
				continue
			}
			if d := n.dirty(t); d != 0 {
				held = append(held, fmt.Sprintf("%s holds %v", n.name, d))
			}
		}
		if len(held) == 0 {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s: dirty objects left %v after everything acknowledged is in MinIO: %s", what, wbPersistTimeout, strings.Join(held, ", "))
		}
		time.Sleep(250 * time.Millisecond)
	}
}

// newWBCluster is the world of these tests: MinIO behind an s3proxy, n
// nodes of one ring with the WriteBack policy of two copies, started.
func newWBCluster(t *testing.T, n int) (*env, *s3proxy.Proxy, *cluster) {
	t.Helper()
	e := newEnv(t)
	if err := os.WriteFile(e.path("tenants.yaml"), []byte(wbTenantsReplicas), 0o600); err != nil {
		t.Fatal(err)
	}
	proxy := s3proxy.New(t, e.minio.Endpoint)
	// As S3: a node killed while the proxy holds its upload back does not
	// take the upload with it.
	proxy.KeepAbandonedWrites()
	e.s3Endpoint, e.proxy = proxy.URL(), proxy
	c := e.newCluster(t, n, "--disk-bytes", "512Mi", "--ram-bytes", "16Mi", "--s3-max-attempts", "2")
	c.start(t)
	return e, proxy, c
}

// TestKillOneOfTwoHolders runs cycles() rounds: writers put, overwrite and
// delete objects under a WriteBack prefix with two copies while S3 refuses
// the nodes' writes (or is slow, every other round); right after the last acknowledgement one node (each
// round the other one) is killed with SIGKILL, MinIO is checked to lack
// the round's writes (some of them, when slow), and the survivor is checked to serve every key as
// last acknowledged. Then S3 takes writes again. With the node still down,
// the survivor brings MinIO to the last acknowledged operation of every key
// it owns (it is their first holder, which persists them), byte-exact. The
// killed node's keys wait for it: it is still an active member of the ring,
// so the survivor does not take them over (docs/write-back.md). Then the
// killed node restarts on its data directory, and MinIO must end with the
// last acknowledged operation of every key, byte-exact. (The copies the
// restarted node keeps although S3 has them:
// TestRestartedHolderDropsPersistedCopies.)
func TestKillOneOfTwoHolders(t *testing.T) {
	e, proxy, c := newWBCluster(t, 2)
	rng := newRand(t)
	h := newWBHistory()
	var unpersisted, retries, waited int
	for round := range cycles(t) {
		slow := round%2 == 1
		holdBackWriteBack(proxy, slow)
		retries += wbWorkload(t, c, h, rng, round)
		victim, survivor := c.nodes[round%2], c.nodes[(round+1)%2]
		victim.kill9(t)
		unpersisted += h.checkUnpersisted(t, e, round, !slow)
		h.checkReads(t, survivor, fmt.Sprintf("round %d, %s killed", round, victim.name))
		proxy.ClearFaults()
		h.waitS3Matches(t, e, c, fmt.Sprintf("round %d, %s killed: the keys %s persists", round, victim.name, survivor.name),
			func(key string) bool { return c.owner(key) == survivor })
		waited += len(h.mismatches(t, e, c, false, func(key string) bool { return c.owner(key) == victim }))

		c.start(t)
		h.waitS3Matches(t, e, c, fmt.Sprintf("round %d, %s restarted", round, victim.name), nil)
	}
	// What the nodes still hold as dirty although S3 has it is the
	// subject of TestRestartedHolderDropsPersistedCopies.
	t.Logf("%d rounds, one of two holders killed after each: %d keys, %d operations acknowledged (%d retries of 503), "+
		"%d PUTs unpersisted at the kills, %d keys persisted only after the killed node's restart; "+
		"MinIO ends with the last acknowledged operation of every key, byte-exact (dirty objects left: %s %v, %s %v)",
		cycles(t), len(h.sortedKeys()), h.gen, retries, unpersisted, waited,
		c.nodes[0].name, c.nodes[0].dirty(t), c.nodes[1].name, c.nodes[1].dirty(t))
}

// TestRestartedHolderDropsPersistedCopies kills one of two holders after
// acknowledged writes; the survivor persists the keys it is the first
// holder of while the other is down, so it cannot tell it to drop its
// copies then. After the restart, the restarted node must not keep them
// as dirty (pinned, counted, never persisted by anyone) forever.
func TestRestartedHolderDropsPersistedCopies(t *testing.T) {
	e, proxy, c := newWBCluster(t, 2)
	h := newWBHistory()
	holdBackWriteBack(proxy, false)
	wbWorkload(t, c, h, newRand(t), 0)
	victim, survivor := c.nodes[1], c.nodes[0]
	victim.kill9(t)
	proxy.ClearFaults()
	h.waitS3Matches(t, e, c, "the survivor's keys", func(key string) bool { return c.owner(key) == survivor })
	c.start(t)
	h.waitS3Matches(t, e, c, victim.name+" restarted", nil)
	c.waitClean(t, victim.name+" restarted")
}

// TestHolderRestartedWithEmptyDisk kills one of two holders after
// acknowledged writes and starts it again on an empty data directory (a
// pod rescheduled with emptyDir, a replaced disk: what replicas >= 2 are
// for, docs/write-back.md): the survivor's copies must reach MinIO,
// byte-exact.
func TestHolderRestartedWithEmptyDisk(t *testing.T) {
	e, proxy, c := newWBCluster(t, 2)
	h := newWBHistory()
	holdBackWriteBack(proxy, false)
	wbWorkload(t, c, h, newRand(t), 0)
	victim := c.nodes[0]
	victim.kill9(t)
	victim.dataDir = t.TempDir()
	proxy.ClearFaults()
	c.start(t)
	h.waitS3Matches(t, e, c, victim.name+" restarted on an empty disk", nil)
}

// TestStaleCopyNotPersistedOverNewerWrite: of three nodes, a key's first
// holder x persists version 1 while the second holder y is down (y keeps
// its copy); version 2 is written (held by x and the next member) and
// persisted; y restarts with its disk, and x leaves the ring (scale-down),
// which makes y the key's first holder. MinIO must end with version 2, the
// last acknowledged write: y's stale copy must never be uploaded over it.
func TestStaleCopyNotPersistedOverNewerWrite(t *testing.T) { staleCopyAfter(t, false) }

// TestStaleCopyNotPersistedAfterDelete is the same with a DELETE as
// version 2: S3 then holds nothing to compare y's copy with, and the key
// must stay absent.
func TestStaleCopyNotPersistedAfterDelete(t *testing.T) { staleCopyAfter(t, true) }

func staleCopyAfter(t *testing.T, del bool) {
	e, proxy, c := newWBCluster(t, 3)
	h := newWBHistory()
	key := wbPrefix + "stale"
	cands := c.ring.Candidates(nodeapi.MetaID(chunk.Object{Tenant: tenant, Bucket: bucket, Key: key}), 0)
	x, y := c.node(cands[0].Name), c.node(cands[1].Name)
	send := func(round int, del bool) {
		t.Helper()
		o := h.begin(key, del, 1000+round, round)
		etag, _, err := c.send(o)
		if err != nil {
			t.Fatal(err)
		}
		h.ack(o, etag)
	}
	holdBackWriteBack(proxy, false)
	send(0, false) // held by x and y
	y.kill9(t)
	proxy.ClearFaults()
	h.waitS3Matches(t, e, c, "version 1, persisted by "+x.name, nil)
	send(1, del) // y is down: held by x and the third node
	h.waitS3Matches(t, e, c, "version 2, persisted by "+x.name, nil)
	c.start(t)
	c.publish(t, c.except(x)...)
	x.stop(t)
	c.waitClean(t, x.name+" left the ring")
	h.waitS3Matches(t, e, c, x.name+" left the ring", nil)
}

// TestKillBothHolders is TestKillOneOfTwoHolders with both nodes killed
// after each round's acknowledgements and restarted on their data
// directories: every acknowledged operation was on two disks; the
// restarted nodes serve every key as last acknowledged before S3 takes
// writes again, then bring MinIO to the last operation of every key,
// byte-exact, and hold nothing dirty.
func TestKillBothHolders(t *testing.T) {
	e, proxy, c := newWBCluster(t, 2)
	rng := newRand(t)
	h := newWBHistory()
	var unpersisted, retries int
	rounds := max(1, cycles(t)-1)
	for round := range rounds {
		slow := round%2 == 1
		holdBackWriteBack(proxy, slow)
		retries += wbWorkload(t, c, h, rng, round)
		for _, n := range c.nodes {
			n.kill9(t)
		}
		unpersisted += h.checkUnpersisted(t, e, round, !slow)
		c.start(t)
		for _, n := range c.nodes {
			h.checkReads(t, n, fmt.Sprintf("round %d, both restarted, S3 held back", round))
		}
		proxy.ClearFaults()
		h.waitS3Matches(t, e, c, fmt.Sprintf("round %d, both restarted", round), nil)
		c.waitClean(t, fmt.Sprintf("round %d, both restarted", round))
		h.waitS3Matches(t, e, c, fmt.Sprintf("round %d, both restarted, nothing dirty", round), nil)
	}
	t.Logf("%d rounds, both holders killed after each: %d keys, %d operations acknowledged (%d retries of 503), "+
		"%d PUTs unpersisted at the kills; MinIO ends with the last acknowledged operation of every key, byte-exact",
		rounds, len(h.sortedKeys()), h.gen, retries, unpersisted)
}

// TestWriteBackEmptyObjectTwoCopies puts an empty object under a WriteBack
// prefix with two copies: it must be acknowledged (retried while the answer
// is 503 SlowDown) and reach MinIO, empty.
func TestWriteBackEmptyObjectTwoCopies(t *testing.T) {
	e, _, c := newWBCluster(t, 2)
	h := newWBHistory()
	o := h.begin(wbPrefix+"empty", false, 0, 0)
	etag, retries, err := c.send(o)
	if err != nil {
		t.Fatalf("empty held write not acknowledged after %d retries: %v", retries, err)
	}
	h.ack(o, etag)
	h.waitS3Matches(t, e, c, "an empty object", nil)
}

// explain says what MinIO holds of key (its distcache version, when it was
// written, which operation of the history it is), the nodes' log lines
// naming the key and the writes the nodes sent S3 for it.
func (e *env) explain(t *testing.T, c *cluster, h *wbHistory, key string, st s3State) []string {
	t.Helper()
	var out []string
	if st.exists {
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		if head, err := e.s3.HeadObject(ctx, &s3.HeadObjectInput{Bucket: aws.String(bucket), Key: aws.String(key)}); err == nil {
			which := "no operation of the history"
			h.mu.Lock()
			for _, o := range h.keys[key] {
				if !o.del && int64(o.size) == st.size && (o.etag == "" || o.etag == st.etag) {
					which = o.String()
				}
			}
			h.mu.Unlock()
			out = append(out, fmt.Sprintf("  MinIO's object: %s, version %s, last modified %v",
				which, head.Metadata[writeback.VersionMetadata], aws.ToTime(head.LastModified).Format(time.RFC3339Nano)))
		}
	}
	for _, n := range c.nodes {
		for _, l := range n.logs.lines(key) {
			out = append(out, "  "+n.name+": "+l)
		}
	}
	if e.proxy != nil {
		for _, r := range e.proxy.Requests() {
			if r.Method != http.MethodGet && strings.HasSuffix(r.Path, "/"+key) {
				out = append(out, fmt.Sprintf("  S3 request at %v: %s %s If-Match %q If-None-Match %q, answered %d", r.At, r.Method, r.Path, r.IfMatch, r.IfNoneMatch, r.Status))
			}
		}
	}
	return out
}
