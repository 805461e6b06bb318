package s3backend

import (
	"context"
	"math/rand/v2"
	"strings"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	awsmiddleware "github.com/aws/aws-sdk-go-v2/aws/middleware"
	"github.com/aws/aws-sdk-go-v2/aws/retry"
)

// baseBackoff is the backoff ceiling before the first retry; it doubles
// per retry up to Config.MaxBackoff.
const baseBackoff = 100 * time.Millisecond

// newRetryer is the SDK's standard retryer (it retries 5xx, throttling codes
// such as SlowDown, connection errors and timeouts, and stops retrying when
// its node-wide retry-token bucket runs dry) with our backoff, and with every
// retry reported to obs.
func newRetryer(cfg Config, obs RetryObserver) aws.RetryerV2 {
	std := retry.NewStandard(func(o *retry.StandardOptions) {
		o.MaxAttempts = cfg.MaxAttempts
		o.MaxBackoff = cfg.MaxBackoff
		o.Backoff = jitterBackoff{max: cfg.MaxBackoff}
	})
	if obs == nil {
		return std
	}
	return &observedRetryer{RetryerV2: std, obs: obs}
}

// jitterBackoff is exponential backoff with "equal jitter": before retry
// number n the delay is drawn uniformly from [c/2, c) with
// c = min(max, baseBackoff*2^(n-1)).
type jitterBackoff struct{ max time.Duration }

func (j jitterBackoff) BackoffDelay(attempt int, _ error) (time.Duration, error) {
	return backoff(j.max, attempt), nil
}

func backoff(maxBackoff time.Duration, attempt int) time.Duration {
	c := min(baseBackoff, maxBackoff)
	for i := 1; i < attempt && c < maxBackoff; i++ {
		c *= 2
	}
	c = min(c, maxBackoff)
	if c <= 0 {
		return 0
	}
	return c/2 + rand.N(c/2+1)
}

// observedRetryer counts retries. The SDK asks for a retry token exactly
// once before each retry it makes (and not when it gives up), so that is
// where a retry is counted.
type observedRetryer struct {
	aws.RetryerV2
	obs RetryObserver
}

func (r *observedRetryer) GetRetryToken(ctx context.Context, opErr error) (func(error) error, error) {
	release, err := r.RetryerV2.GetRetryToken(ctx, opErr)
	if err == nil {
		r.obs.ObserveRetry(opFromContext(ctx))
	}
	return release, err
}

type opKey struct{}

func withOp(ctx context.Context, op string) context.Context {
	return context.WithValue(ctx, opKey{}, op)
}

// opFromContext is the Backend operation (head, get, put, delete) a request
// belongs to; for requests made through Client directly it is the SDK
// operation name in lower case (e.g. "listobjectsv2").
func opFromContext(ctx context.Context) string {
	if op, ok := ctx.Value(opKey{}).(string); ok {
		return op
	}
	return strings.ToLower(awsmiddleware.GetOperationName(ctx))
}
