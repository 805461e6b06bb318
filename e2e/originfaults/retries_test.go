package originfaults_test

import (
	"fmt"
	"math/rand/v2"
	"net/http"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/distcache/distcache/internal/testutil"
	"github.com/distcache/distcache/internal/testutil/s3proxy"
)

// invocations groups the proxy's records by SDK invocation (every attempt
// of one S3 operation carries the same amz-sdk-invocation-id), in order of
// first arrival.
func invocations(recs []s3proxy.Record) [][]s3proxy.Record {
	idx := map[string]int{}
	var out [][]s3proxy.Record
	for _, r := range recs {
		i, ok := idx[r.Invocation]
		if !ok {
			i = len(out)
			idx[r.Invocation] = i
			out = append(out, nil)
		}
		out[i] = append(out[i], r)
	}
	return out
}

// TestRetriesBackOff storms S3 with SlowDown while one object is read
// through the gateway. Each S3 operation is retried with growing, jittered
// delays that never exceed the cap, and the whole read makes a bounded
// number of S3 requests: the cache does not multiply S3's load just when S3
// asks for less.
func TestRetriesBackOff(t *testing.T) {
	const attempts, maxBackoff = 4, time.Second
	e := newEnv(t, envOptions{s3MaxAttempts: attempts, s3MaxBackoff: maxBackoff})
	r := rand.New(rand.NewPCG(5, 6))
	const chunks = 2
	e.putDirect("storm/obj", testutil.RandomBytes(r, chunks*chunkSize))
	// The metadata is cached before the storm: the read's S3 requests are
	// the chunk GETs.
	if _, err := e.cache.Stat(t.Context(), bucket, "storm/obj"); err != nil {
		t.Fatal(err)
	}
	p := e.cluster.Proxy
	p.Reset()
	p.Inject(s3proxy.Rule{Method: http.MethodGet, Fault: s3proxy.SlowDown})
	res := e.read("storm/obj", "")
	if res.class != "503 SlowDown" {
		t.Fatalf("read during a SlowDown storm: %s (%s); want 503 SlowDown", res.class, res.detail)
	}
	t.Logf("client saw %s: %s", res.class, res.detail)

	invs := invocations(p.Requests())
	perRange := map[string]int{}
	var lines []string
	gapsByRetry := map[int][]time.Duration{}
	for _, inv := range invs {
		perRange[inv[0].Range] += len(inv)
		var gaps []string
		for i, rec := range inv {
			if rec.Invocation == "" {
				t.Fatalf("a request without an SDK invocation id: %+v", rec)
			}
			if rec.Attempt != i+1 {
				t.Errorf("invocation %s: request %d is attempt %d", rec.Invocation, i+1, rec.Attempt)
			}
			if i == 0 {
				continue
			}
			gap := rec.At - inv[i-1].At
			gaps = append(gaps, gap.Round(time.Millisecond).String())
			gapsByRetry[i] = append(gapsByRetry[i], gap)
			// Retry i waits at least half of min(cap, 100ms*2^(i-1)): load
			// can only lengthen the wait, never shorten it.
			lower := min(maxBackoff, 100*time.Millisecond<<(i-1)) / 2
			if gap < lower {
				t.Errorf("invocation %s: retry %d came %v after the attempt before; the backoff is at least %v", rec.Invocation, i, gap, lower)
			}
			if gap > maxBackoff+30*time.Second {
				t.Errorf("invocation %s: retry %d came %v after the attempt before; the cap is %v", rec.Invocation, i, gap, maxBackoff)
			}
		}
		if len(inv) > attempts {
			t.Errorf("invocation %s made %d attempts, more than %d", inv[0].Invocation, len(inv), attempts)
		}
		lines = append(lines, fmt.Sprintf("%s %s: %d attempts, gaps %s", inv[0].Method, inv[0].Range, len(inv), strings.Join(gaps, " ")))
	}
	t.Logf("%d S3 invocations for %d chunks:\n%s", len(invs), chunks, strings.Join(lines, "\n"))
	for retry := 1; retry < attempts; retry++ {
		g := gapsByRetry[retry]
		sort.Slice(g, func(i, j int) bool { return g[i] < g[j] })
		if len(g) > 0 {
			t.Logf("retry %d: %d gaps, min %v, median %v, max %v", retry, len(g), g[0], g[len(g)/2], g[len(g)-1])
		}
	}
	// A chunk read is one S3 operation (its attempts), not one per node
	// the read fails over to: S3 asked for fewer requests.
	if len(perRange) != chunks {
		t.Errorf("S3 GETs for %d ranges, want %d", len(perRange), chunks)
	}
	for rng, n := range perRange {
		if n > attempts {
			t.Errorf("range %s: %d S3 requests for one chunk read; want at most %d (one operation)", rng, n, attempts)
		}
	}
}
