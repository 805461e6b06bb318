package originfaults_test

import (
	"context"
	"fmt"
	"math/rand/v2"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/s3"

	"github.com/distcache/distcache/internal/testutil"
	"github.com/distcache/distcache/internal/testutil/s3proxy"
)

// faultCase is one row of the fault matrix: rules applied to every S3
// request for the case's keys, or a hook that overwrites the object in the
// middle of a read.
type faultCase struct {
	name  string
	rules []s3proxy.Rule
	// overwriteAt, when > 0, overwrites the object in MinIO (a new version)
	// when the overwriteAt-th GET of one read reaches the proxy, before it
	// is forwarded.
	overwriteAt   func(read int) int
	ignoreIfMatch bool
	chunks        int    // chunks per object (the gateway primes 4 before answering)
	allOK         bool   // every read must succeed
	allFail       bool   // every read must fail (a storm on every request)
	wantError     string // with allFail: the answer every read must get
}

var storm = time.Now().Add(24 * time.Hour)

var matrix = []faultCase{
	{name: "latency spikes (30%, +300ms)", rules: []s3proxy.Rule{{Fault: s3proxy.Spike(300 * time.Millisecond), Probability: 0.3}}, chunks: 4, allOK: true},
	{name: "503 SlowDown storm, every request", rules: []s3proxy.Rule{{Fault: s3proxy.SlowDown, Until: storm}}, chunks: 4, allFail: true, wantError: "503 SlowDown"},
	{name: "503 SlowDown storm, GETs", rules: []s3proxy.Rule{{Method: http.MethodGet, Fault: s3proxy.SlowDown, Until: storm}}, chunks: 4, allFail: true, wantError: "503 SlowDown"},
	{name: "503 SlowDown (30%)", rules: []s3proxy.Rule{{Fault: s3proxy.SlowDown, Probability: 0.3}}, chunks: 4},
	{name: "500 InternalError storm, GETs", rules: []s3proxy.Rule{{Method: http.MethodGet, Fault: s3proxy.InternalError, Until: storm}}, chunks: 4, allFail: true, wantError: "503 ServiceUnavailable"},
	{name: "500 InternalError (30%)", rules: []s3proxy.Rule{{Fault: s3proxy.InternalError, Probability: 0.3}}, chunks: 4},
	{name: "reset before headers (30%)", rules: []s3proxy.Rule{{Fault: s3proxy.ResetHeaders, Probability: 0.3}}, chunks: 4},
	{name: "reset mid-body (30%)", rules: []s3proxy.Rule{{Method: http.MethodGet, Fault: s3proxy.ResetBody, Probability: 0.3}}, chunks: 4},
	{name: "body cut short of Content-Length (30%)", rules: []s3proxy.Rule{{Method: http.MethodGet, Fault: s3proxy.Truncate, Probability: 0.3}}, chunks: 4},
	{name: "ETag changes mid-read", overwriteAt: func(i int) int { return 1 + i%6 }, chunks: 6},
	{name: "ETag changes mid-read, If-Match ignored", overwriteAt: func(i int) int { return 1 + i%6 }, ignoreIfMatch: true, chunks: 6},
}

// TestFaultMatrix reads cold objects through the gateway under each fault
// kind and counts the outcome classes; nothing partial or wrong may reach
// the client, and afterwards every chunk the nodes hold is exact.
func TestFaultMatrix(t *testing.T) {
	e := newEnv(t, envOptions{})
	reads := envInt("DISTCACHE_FAULT_READS", 4)
	seed := uint64(envInt("DISTCACHE_FAULT_SEED", 1))
	r := rand.New(rand.NewPCG(seed, 99))
	p := e.cluster.Proxy
	t.Logf("seed %d, %d reads per fault kind", seed, reads)
	var rows []string
	for ci, fc := range matrix {
		prefix := fmt.Sprintf("matrix/%d/", ci)
		keys := make([]string, reads)
		for i := range keys {
			keys[i] = fmt.Sprintf("%s%d", prefix, i)
			e.putDirect(keys[i], testutil.RandomBytes(r, fc.chunks*chunkSize-1000))
		}
		p.Reset()
		p.Seed(seed + uint64(ci))
		for _, ru := range fc.rules {
			ru.PathPrefix = "/" + bucket + "/" + prefix
			p.Inject(ru)
		}
		if fc.ignoreIfMatch {
			p.IgnoreIfMatch(e.presign)
		}
		var tl tally
		start := time.Now()
		for i, key := range keys {
			if fc.overwriteAt != nil {
				e.overwriteOnGet(key, fc.overwriteAt(i), testutil.RandomBytes(r, fc.chunks*chunkSize-1000))
			}
			res := e.read(key, "")
			tl.add(res.class)
			switch {
			case res.class == outcomeWrong || res.class == outcomeBadCode:
				t.Errorf("%s: read of %s: %s: %s", fc.name, key, res.class, res.detail)
			case fc.allOK && res.class != outcomeOK:
				t.Errorf("%s: read of %s: %s (%s); want success", fc.name, key, res.class, res.detail)
			case fc.allFail && res.class != fc.wantError:
				t.Errorf("%s: read of %s: %s (%s); want %s", fc.name, key, res.class, res.detail, fc.wantError)
			}
		}
		p.OnRequest(nil)
		p.IgnoreIfMatch(nil)
		recs := p.Requests()
		faults, gets := 0, 0
		for _, rec := range recs {
			if rec.Fault.Kind != s3proxy.Pass {
				faults++
			}
			if rec.Method == http.MethodGet {
				gets++
			}
		}
		row := fmt.Sprintf("| %s | %d | %d | %d | %d | %s |", fc.name, reads, len(recs), gets, faults, tl.String())
		t.Logf("%s in %v", row, time.Since(start).Round(time.Millisecond))
		rows = append(rows, row)
		p.ClearFaults()
	}
	chunks, n := e.verifyCache()
	t.Logf("fault matrix (seed %d):\n| fault | reads | S3 requests | S3 GETs | faults injected | outcomes |\n|---|---|---|---|---|---|\n%s\nverified afterwards: %d cached chunks, %d bytes, byte-exact against MinIO",
		seed, strings.Join(rows, "\n"), chunks, n)
}

// overwriteOnGet arms the proxy to write a new version of key when the
// at-th GET for it arrives (before that GET is forwarded).
func (e *env) overwriteOnGet(key string, at int, next []byte) {
	var mu sync.Mutex
	seen, done := 0, false
	path := "/" + bucket + "/" + key
	e.cluster.Proxy.OnRequest(func(rec s3proxy.Record) {
		if rec.Method != http.MethodGet || rec.Path != path {
			return
		}
		mu.Lock()
		defer mu.Unlock()
		seen++
		if seen == at && !done {
			done = true
			e.putDirect(key, next)
		}
	})
}

// presign is a presigned GET URL of MinIO for a path-style /bucket/key.
func (e *env) presign(path string) (string, error) {
	b, k, _ := strings.Cut(strings.TrimPrefix(path, "/"), "/")
	req, err := s3.NewPresignClient(e.cluster.Direct).PresignGetObject(context.Background(),
		&s3.GetObjectInput{Bucket: aws.String(b), Key: aws.String(k)})
	if err != nil {
		return "", err
	}
	return req.URL, nil
}
