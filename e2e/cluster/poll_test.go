package cluster_test

import (
	"context"
	"time"

	. "github.com/onsi/ginkgo/v2"
)

// poller calls a function at an interval, from a goroutine of its own,
// until stopped: what the specs' samplers and followers run on.
type poller struct {
	cancel context.CancelFunc
	done   chan struct{}
}

// poll calls f every interval until stop, the first time at once when now
// is set (else one interval from now); the context f is given ends at stop.
func poll(interval time.Duration, now bool, f func(ctx context.Context)) *poller {
	ctx, cancel := context.WithCancel(context.Background())
	p := &poller{cancel: cancel, done: make(chan struct{})}
	go func() {
		defer GinkgoRecover()
		defer close(p.done)
		tick := time.NewTicker(interval)
		defer tick.Stop()
		if now {
			f(ctx)
		}
		for {
			select {
			case <-ctx.Done():
				return
			case <-tick.C:
				f(ctx)
			}
		}
	}()
	return p
}

// stop ends the polling and returns once f has returned for the last time.
func (p *poller) stop() {
	p.cancel()
	<-p.done
}
