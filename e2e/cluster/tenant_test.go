package cluster_test

import (
	"context"
	"errors"
	"sync"
	"time"

	"github.com/aws/aws-sdk-go-v2/service/s3"
	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
)

// probeRead is one read of the probe: when, and how it ended (status 200
// and no error when it returned the object's bytes).
type probeRead struct {
	start, end time.Time
	status     int
	err        error
}

// probe reads one object through the gateway in a loop, a read every 50 ms
// or so, recording each outcome: it times when a tenant's access ends.
type probe struct {
	cancel context.CancelFunc
	done   chan struct{}

	mu  sync.Mutex
	all []probeRead
}

func startProbe(c *s3.Client, o object) *probe {
	ctx, cancel := context.WithCancel(context.Background())
	p := &probe{cancel: cancel, done: make(chan struct{})}
	go func() {
		defer GinkgoRecover()
		defer close(p.done)
		for ctx.Err() == nil {
			r := probeRead{start: time.Now()}
			r.err = verifyObject(ctx, c, o)
			r.end = time.Now()
			if ctx.Err() != nil {
				return
			}
			r.status = 200
			var re interface{ HTTPStatusCode() int }
			if errors.As(r.err, &re) {
				r.status = re.HTTPStatusCode()
			} else if r.err != nil {
				r.status = 0
			}
			p.mu.Lock()
			p.all = append(p.all, r)
			p.mu.Unlock()
			select {
			case <-ctx.Done():
			case <-time.After(50 * time.Millisecond):
			}
		}
	}()
	return p
}

// reads returns every read so far.
func (p *probe) reads() []probeRead {
	p.mu.Lock()
	defer p.mu.Unlock()
	return append([]probeRead(nil), p.all...)
}

// count is how many reads so far match.
func (p *probe) count(match func(probeRead) bool) int {
	n := 0
	for _, r := range p.reads() {
		if match(r) {
			n++
		}
	}
	return n
}

// await waits up to within for a read that matches and returns the first
// one, failing the spec if none comes.
func (p *probe) await(ctx context.Context, match func(probeRead) bool, within time.Duration) probeRead {
	GinkgoHelper()
	var found probeRead
	Eventually(ctx, func() bool {
		for _, r := range p.reads() {
			if match(r) {
				found = r
				return true
			}
		}
		return false
	}).WithTimeout(within).WithPolling(20*time.Millisecond).Should(BeTrue(), "a matching read within %s", within)
	return found
}

// halt stops the probe and waits for its loop to end.
func (p *probe) halt() {
	p.cancel()
	<-p.done
}
