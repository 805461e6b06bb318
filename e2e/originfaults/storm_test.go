package originfaults_test

import (
	"bytes"
	"fmt"
	"io"
	"math/rand/v2"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/distcache/distcache/internal/nodeapi"
	"github.com/distcache/distcache/internal/pki"
	"github.com/distcache/distcache/internal/testutil"
	"github.com/distcache/distcache/internal/testutil/s3proxy"
)

// outage makes every S3 request for paths under prefix fail, with a mix of
// every failure kind.
func outage(prefix string) []s3proxy.Rule {
	return []s3proxy.Rule{
		{PathPrefix: prefix, Fault: s3proxy.SlowDown, Probability: 0.25},
		{PathPrefix: prefix, Fault: s3proxy.InternalError, Probability: 0.34},
		{PathPrefix: prefix, Fault: s3proxy.ResetHeaders, Probability: 0.5},
		{PathPrefix: prefix, Method: http.MethodGet, Fault: s3proxy.ResetBody, Probability: 0.5},
		{PathPrefix: prefix, Fault: s3proxy.InternalError},
	}
}

// TestHitsKeepFlowingDuringAnOutage caches objects, then fails every S3
// request (a mix of SlowDown, 500s and resets) while readers keep reading:
// through the gateway (a smart client, straight to the owners) and through
// each node's object endpoint (what simple clients use; chunks a node does
// not own are forwarded to their owners). Every read of a cached object
// succeeds with the exact bytes and makes no S3 request; every read of an
// uncached one is a retryable S3 error, never bytes.
func TestHitsKeepFlowingDuringAnOutage(t *testing.T) {
	e := newEnv(t, envOptions{})
	r := rand.New(rand.NewPCG(7, 8))
	const cached, cold = 6, 6
	for i := 0; i < cached; i++ {
		key := fmt.Sprintf("hot/%d", i)
		e.putDirect(key, testutil.RandomBytes(r, 3*chunkSize+i*1000))
		if res := e.read(key, ""); res.class != outcomeOK {
			t.Fatalf("warming %s: %s %s", key, res.class, res.detail)
		}
	}
	for i := 0; i < cold; i++ {
		key := fmt.Sprintf("cold/%d", i)
		e.putDirect(key, testutil.RandomBytes(r, 3*chunkSize))
		// Metadata cached, chunks not: the outage hits the chunk GETs,
		// and the nodes forward each other the misses.
		if _, err := e.cache.Stat(t.Context(), bucket, key); err != nil {
			t.Fatal(err)
		}
	}
	p := e.cluster.Proxy
	p.Reset()
	p.Seed(7)
	p.Inject(outage("/")...)

	peer := e.cluster.HTTPClient(pki.Identity{Kind: pki.KindTenant, Name: "team-a"})
	members := e.cluster.Members()
	var hits, misses tally
	var wg sync.WaitGroup
	rounds := envInt("DISTCACHE_FAULT_READS", 4)
	for w := 0; w < 4; w++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := 0; i < rounds*cached/2; i++ {
				key := fmt.Sprintf("hot/%d", (w+i)%cached)
				if w%2 == 0 { // through the gateway
					res := e.read(key, "")
					hits.add("gateway " + res.class)
					if res.class != outcomeOK {
						t.Errorf("cached %s through the gateway during the outage: %s: %s", key, res.class, res.detail)
					}
					continue
				}
				// Straight to a node's object endpoint, rotating nodes so
				// most chunks are forwarded.
				m := members[i%len(members)]
				class := e.nodeRead(peer, m.URL(), key)
				hits.add("node " + class)
				if class != outcomeOK {
					t.Errorf("cached %s through %s's object endpoint during the outage: %s", key, m.Name, class)
				}
			}
		}()
	}
	for w := 0; w < 2; w++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := 0; i < rounds; i++ {
				res := e.read(fmt.Sprintf("cold/%d", (w*3+i)%cold), "")
				misses.add(res.class)
				if !retryable[res.class] {
					t.Errorf("uncached object during the outage: %s (%s); want a retryable S3 error", res.class, res.detail)
				}
			}
		}()
	}
	wg.Wait()
	if n := p.Count(http.MethodGet, "/"+bucket+"/hot/"); n != 0 {
		t.Errorf("reads of cached objects made %d S3 GETs", n)
	}
	faults := 0
	for _, rec := range p.Requests() {
		if rec.Fault.Kind != s3proxy.Pass {
			faults++
		}
	}
	t.Logf("during the outage: %d S3 requests, %d faults injected; cached reads: %s; uncached reads: %s",
		len(p.Requests()), faults, hits.String(), misses.String())
	for i, m := range members {
		t.Logf("%s peer requests: forward ok %v, error %v, unreachable %v, skipped_down %v; meta unreachable %v", m.Name,
			e.cluster.Counter(i, "distcache_peer_requests_total", map[string]string{"kind": "forward", "result": "ok"}),
			e.cluster.Counter(i, "distcache_peer_requests_total", map[string]string{"kind": "forward", "result": "error"}),
			e.cluster.Counter(i, "distcache_peer_requests_total", map[string]string{"kind": "forward", "result": "unreachable"}),
			e.cluster.Counter(i, "distcache_peer_requests_total", map[string]string{"kind": "forward", "result": "skipped_down"}),
			e.cluster.Counter(i, "distcache_peer_requests_total", map[string]string{"kind": "meta", "result": "unreachable"}))
	}
	p.ClearFaults()
	chunks, n := e.verifyCache()
	t.Logf("verified afterwards: %d cached chunks, %d bytes", chunks, n)
}

// nodeRead reads a whole object from a node's object endpoint and checks it
// against the versions written.
func (e *env) nodeRead(c *http.Client, base, key string) string {
	resp, err := c.Get(base + nodeapi.ObjectPath(bucket, key))
	if err != nil {
		return "transport error: " + err.Error()
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if resp.StatusCode != http.StatusOK {
		return fmt.Sprintf("%d %s", resp.StatusCode, resp.Header.Get("X-Distcache-Error"))
	}
	if err != nil {
		return outcomeAborted
	}
	e.mu.Lock()
	defer e.mu.Unlock()
	for _, v := range e.versions[key] {
		if bytes.Equal(v, body) {
			return outcomeOK
		}
	}
	detail := fmt.Sprintf("%s: %d bytes, Content-Length %d, headers %v", outcomeWrong, len(body), resp.ContentLength, resp.Header)
	if vs := e.versions[key]; len(vs) > 0 {
		v := vs[len(vs)-1]
		i := 0
		for i < min(len(v), len(body)) && v[i] == body[i] {
			i++
		}
		detail += fmt.Sprintf(", the version has %d bytes, first difference at %d (chunk %d)", len(v), i, i/chunkSize)
	}
	return detail
}

// TestConcurrencyCapHoldsUnderAStorm reads many cold objects at once while
// S3 is slow and throttling: the nodes never have more S3 requests in
// flight than their cap.
func TestConcurrencyCapHoldsUnderAStorm(t *testing.T) {
	const limit = 4
	e := newEnv(t, envOptions{s3MaxConcurrent: limit})
	r := rand.New(rand.NewPCG(9, 10))
	const objects = 12
	for i := 0; i < objects; i++ {
		e.putDirect(fmt.Sprintf("cap/%d", i), testutil.RandomBytes(r, 4*chunkSize))
	}
	p := e.cluster.Proxy
	p.Reset()
	p.Seed(9)
	p.Inject(
		s3proxy.Rule{Method: http.MethodGet, Fault: s3proxy.SlowDown, Probability: 0.3},
		s3proxy.Rule{Fault: s3proxy.Spike(100 * time.Millisecond)},
	)
	var tl tally
	var wg sync.WaitGroup
	for i := 0; i < objects; i++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			res := e.read(fmt.Sprintf("cap/%d", i), "")
			tl.add(res.class)
			if res.class != outcomeOK && !retryable[res.class] {
				t.Errorf("cap/%d: %s: %s", i, res.class, res.detail)
			}
		}()
	}
	wg.Wait()
	got := p.InFlightMax()
	t.Logf("%d concurrent reads of %d-chunk objects, S3 cap %d: %d S3 requests, at most %d in flight; outcomes %s",
		objects, 4, limit, len(p.Requests()), got, tl.String())
	if got > limit {
		t.Errorf("%d S3 requests in flight at once; the cap is %d", got, limit)
	}
	if got < limit {
		t.Errorf("at most %d S3 requests in flight: the load never reached the cap of %d, so the test proves nothing", got, limit)
	}
}

// TestRandomSchedule mixes every fault at random (seeded) while readers
// read random ranges and a writer overwrites objects behind the cache's back
// and moves the metadata clock. Each round prints its seed;
// DISTCACHE_FAULT_SEED replays one, DISTCACHE_FAULT_ROUNDS sets how many.
func TestRandomSchedule(t *testing.T) {
	e := newEnv(t, envOptions{})
	rounds := envInt("DISTCACHE_FAULT_ROUNDS", 2)
	base := uint64(envInt("DISTCACHE_FAULT_SEED", int(time.Now().UnixNano()%1_000_000)))
	var total tally
	for round := 0; round < rounds; round++ {
		seed := base + uint64(round)
		ok := t.Run(fmt.Sprintf("seed=%d", seed), func(t *testing.T) {
			e.t = t
			counts := e.randomRound(t, seed, round)
			for k, v := range counts.n {
				for i := 0; i < v; i++ {
					total.add(k)
				}
			}
		})
		if !ok {
			t.Fatalf("round with seed %d failed; replay it with DISTCACHE_FAULT_SEED=%d DISTCACHE_FAULT_ROUNDS=1", seed, seed)
		}
	}
	t.Logf("%d rounds: %s", rounds, total.String())
}

func (e *env) randomRound(t *testing.T, seed uint64, round int) *tally {
	r := rand.New(rand.NewPCG(seed, 17))
	prefix := fmt.Sprintf("random/%d/", round)
	const keys = 6
	names := make([]string, keys)
	sizes := make([]int, keys)
	for i := range names {
		names[i] = fmt.Sprintf("%s%d", prefix, i)
		sizes[i] = 1 + r.IntN(6*chunkSize)
		e.putDirect(names[i], testutil.RandomBytes(r, sizes[i]))
	}
	p := e.cluster.Proxy
	p.Reset()
	p.Seed(seed)
	pp := "/" + bucket + "/" + prefix
	p.Inject(
		s3proxy.Rule{PathPrefix: pp, Fault: s3proxy.Spike(time.Duration(50+r.IntN(200)) * time.Millisecond), Probability: 0.1},
		s3proxy.Rule{PathPrefix: pp, Fault: s3proxy.SlowDown, Probability: 0.1},
		s3proxy.Rule{PathPrefix: pp, Fault: s3proxy.InternalError, Probability: 0.1},
		s3proxy.Rule{PathPrefix: pp, Fault: s3proxy.ResetHeaders, Probability: 0.05},
		s3proxy.Rule{PathPrefix: pp, Method: http.MethodGet, Fault: s3proxy.ResetBody, Probability: 0.05},
		s3proxy.Rule{PathPrefix: pp, Method: http.MethodGet, Fault: s3proxy.Truncate, Probability: 0.05},
	)
	type job struct{ key, rng string }
	var jobs [4][]job
	for w := range jobs {
		for i := 0; i < 8; i++ {
			k := r.IntN(keys)
			key, rng := names[k], ""
			if r.IntN(2) == 0 {
				lo := r.IntN(sizes[k])
				rng = fmt.Sprintf("bytes=%d-%d", lo, lo+r.IntN(2*chunkSize))
			}
			jobs[w] = append(jobs[w], job{key, rng})
		}
	}
	writes := make([][]byte, 3)
	for i := range writes {
		writes[i] = testutil.RandomBytes(r, 1+r.IntN(6*chunkSize))
	}
	var tl tally
	var wg sync.WaitGroup
	for w := range jobs {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for _, j := range jobs[w] {
				res := e.read(j.key, j.rng)
				if strings.HasPrefix(res.detail, "416 InvalidRange") {
					tl.add("416 InvalidRange (range past the end)")
					continue
				}
				tl.add(res.class)
				if res.class == outcomeWrong || res.class == outcomeBadCode {
					t.Errorf("seed %d: read %s %q: %s: %s", seed, j.key, j.rng, res.class, res.detail)
				}
			}
		}()
	}
	for i, data := range writes {
		e.putDirect(names[i], data)
		e.cluster.Clock.Advance(e.cluster.Opts.MetaTTL / 2)
	}
	wg.Wait()
	faults := 0
	for _, rec := range p.Requests() {
		if rec.Fault.Kind != s3proxy.Pass {
			faults++
		}
	}
	t.Logf("seed %d: %d S3 requests, %d faults injected, reads: %s", seed, len(p.Requests()), faults, tl.String())
	chunks, n := e.verifyCache()
	t.Logf("seed %d: verified %d cached chunks, %d bytes", seed, chunks, n)
	return &tl
}
