// Package testutil holds the small helpers every test suite wants (Must,
// RandomBytes, WaitFor, WaitStatus, ...), defined once; the harnesses are its
// subpackages (miniotest, nodecluster, s3proxy, gobin, ...). Only tests
// import it.
package testutil

import (
	"fmt"
	"io"
	"math/rand/v2"
	"net/http"
	"os"
	"strings"
	"testing"
	"time"
)

// Must fails the test at once when err is not nil.
func Must(t testing.TB, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}

// RandomBytes returns n bytes drawn from r: seed r for data a failure can
// be replayed with.
func RandomBytes(r *rand.Rand, n int) []byte {
	b := make([]byte, n)
	for i := range b {
		b[i] = byte(r.Uint32())
	}
	return b
}

// NewRand returns a generator seeded with seed: the same seed, the same
// draws (log the seed to replay a failure).
func NewRand(seed uint64) *rand.Rand {
	return rand.New(rand.NewPCG(seed, seed^0x9e3779b97f4a7c15))
}

// SeededBytes is RandomBytes of NewRand(seed).
func SeededBytes(seed uint64, n int) []byte { return RandomBytes(NewRand(seed), n) }

// FlipBytes damages files as a bad disk would: it XORs n bytes of each,
// at offsets drawn from rng past its first skip bytes (a file no longer
// than skip is left alone). No files at all fails the test.
func FlipBytes(t testing.TB, files []string, skip, n int, rng *rand.Rand) {
	t.Helper()
	if len(files) == 0 {
		t.Fatal("no file to damage")
	}
	for _, f := range files {
		b, err := os.ReadFile(f)
		Must(t, err)
		if len(b) <= skip {
			continue
		}
		for range n {
			b[skip+rng.IntN(len(b)-skip)] ^= byte(1 + rng.IntN(255))
		}
		Must(t, os.WriteFile(f, b, 0o600))
	}
}

// WaitTimeout bounds WaitFor: generous, so a loaded 2-core machine slows
// a test down rather than failing it (tests never assert on time).
const WaitTimeout = 60 * time.Second

// WaitFor polls cond until it holds, failing the test with what when it
// still does not after WaitTimeout.
func WaitFor(t testing.TB, what string, cond func() bool) {
	t.Helper()
	for deadline := time.Now().Add(WaitTimeout); !cond(); time.Sleep(10 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
	}
}

// WaitStatus waits, as WaitFor, until a GET of url answers with status
// want. exited is closed when the process serving url exits (Process.Done):
// the test fails at once then; nil when there is none to watch.
func WaitStatus(t testing.TB, url string, want int, exited <-chan struct{}) {
	t.Helper()
	WaitFor(t, fmt.Sprintf("%s to answer %d", url, want), func() bool {
		select {
		case <-exited:
			t.Fatalf("the process serving %s exited", url)
		default:
		}
		resp, err := http.Get(url)
		if err != nil {
			return false
		}
		resp.Body.Close()
		return resp.StatusCode == want
	})
}

// ReadBody reads and closes the body of an HTTP answer, for a call as
// ReadBody(http.Get(url)); the request's error comes back as it is.
func ReadBody(resp *http.Response, err error) (*http.Response, []byte, error) {
	if err != nil {
		return nil, nil, err
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	return resp, body, err
}

// WantMetrics reads the /metrics page of the process whose metrics port is
// addr (host:port) and fails the test, going on, for each of want that the
// page does not contain (a series, or a series and its value).
func WantMetrics(t testing.TB, addr string, want ...string) {
	t.Helper()
	_, page, err := ReadBody(http.Get("http://" + addr + "/metrics"))
	Must(t, err)
	for _, w := range want {
		if !strings.Contains(string(page), w) {
			t.Errorf("/metrics lacks %s", w)
		}
	}
}

// LogWriter is an io.Writer whose lines go to t.Log (a log.Logger's
// output during a test).
type LogWriter struct{ T testing.TB }

func (w LogWriter) Write(p []byte) (int, error) {
	w.T.Log(strings.TrimRight(string(p), "\n"))
	return len(p), nil
}
