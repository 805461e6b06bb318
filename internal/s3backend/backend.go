// Package s3backend is a cache node's connection to S3 (or any S3-compatible
// store), built on aws-sdk-go-v2.
//
// One Backend serves a whole node. Tenants may bring their own credentials;
// the Backend keeps one SDK client per set of credentials, and all of them
// share one HTTP transport, one cap on in-flight requests (MaxConcurrent) and
// one retryer, so the node as a whole backs off when S3 is struggling.
//
// Every request attempt is bounded by RequestTimeout and retried by the SDK's
// standard retryer (5xx, SlowDown and other throttling codes, connection
// errors, timeouts) with exponential backoff and jitter, at most MaxAttempts
// attempts. Failures are classified into the sentinel errors below.
//
// ETags are passed around exactly as S3 returns them, quotes included.
package s3backend

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strings"
	"sync"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/config"
	"github.com/aws/aws-sdk-go-v2/credentials"
	"github.com/aws/aws-sdk-go-v2/feature/s3/manager"
	"github.com/aws/aws-sdk-go-v2/service/s3"
	"github.com/aws/aws-sdk-go-v2/service/s3/types"

	"github.com/distcache/distcache/internal/chunk"
	"github.com/distcache/distcache/internal/ctxtime"
)

// Defaults for zero Config fields.
const (
	DefaultRegion         = "us-east-1"
	DefaultMaxConcurrent  = 64
	DefaultMaxAttempts    = 4
	DefaultMaxBackoff     = 2 * time.Second
	DefaultRequestTimeout = 30 * time.Second
	DefaultPartSize       = 16 << 20
	DefaultStreamAbove    = 4 << 20
)

// Operation names reported to the Observer.
const (
	OpHead   = "head"
	OpGet    = "get"
	OpPut    = "put"
	OpDelete = "delete"
)

// Credentials are S3 credentials. The zero value means the Backend's
// default credentials.
type Credentials struct {
	AccessKeyID     string
	SecretAccessKey string
	SessionToken    string
}

// Config configures a Backend. Zero fields take the defaults above.
type Config struct {
	// Endpoint is the S3 endpoint URL, e.g. http://minio:9000; empty means
	// AWS S3 for Region.
	Endpoint     string
	Region       string
	UsePathStyle bool

	// Default credentials, used for tenants that have none. When these are
	// empty too, the SDK's default chain is used (environment, web
	// identity/IRSA, instance metadata).
	Default Credentials

	// MaxConcurrent caps the S3 requests in flight from this node (all
	// tenants, all operations, multipart parts included).
	MaxConcurrent int
	// MaxAttempts is the number of attempts per S3 request, first included.
	MaxAttempts int
	// MaxBackoff caps the delay between attempts.
	MaxBackoff time.Duration
	// RequestTimeout bounds each attempt: the time until the response
	// headers arrive, and then each pause while reading the body.
	RequestTimeout time.Duration
	// PartSize is the multipart part size for Put; objects larger than it
	// are uploaded in parts. At least 5 MiB (S3's minimum).
	PartSize int64
	// StreamAbove: Put sends a body of known size above this (and up to
	// PartSize) to S3 in one PUT as it arrives, when it can sign that PUT
	// without reading the body first (see Put); the node cannot retry such
	// a PUT, its body is gone. Smaller bodies are read whole first, and
	// their PUT is retried. Negative: always read first.
	StreamAbove int64

	// Observer receives one observation per operation; it may be nil. If it
	// also implements RetryObserver it is told about every retry.
	Observer Observer
	// HTTPClient replaces the default HTTP client (tests).
	HTTPClient *http.Client
}

// Observer receives one observation per Backend operation (OpHead, OpGet,
// OpPut, OpDelete), whatever the number of HTTP requests behind it: status is
// StatusOK or the error's class (see Class), d the operation's duration
// including retries and waiting for a free slot.
type Observer interface {
	ObserveS3(op string, status string, d time.Duration)
}

// RetryObserver is implemented by Observers that want to count retries:
// ObserveRetry is called once before each retried HTTP attempt, with the
// operation name (for requests made through Client directly, the SDK
// operation name in lower case).
type RetryObserver interface {
	ObserveRetry(op string)
}

// Backend talks to S3 for one cache node. It is safe for concurrent use.
type Backend struct {
	cfg  Config
	base s3.Options // shared by every client; Credentials set per client

	mu      sync.Mutex
	clients map[Credentials]*s3.Client
	dflt    *s3.Client
}

// New creates a Backend. It makes no network requests.
func New(cfg Config) (*Backend, error) {
	cfg, err := cfg.withDefaults()
	if err != nil {
		return nil, err
	}
	hc := cfg.HTTPClient
	if hc == nil {
		tr := http.DefaultTransport.(*http.Transport).Clone()
		tr.MaxIdleConns = cfg.MaxConcurrent
		tr.MaxIdleConnsPerHost = cfg.MaxConcurrent
		hc = &http.Client{Transport: tr}
	}
	var retryObs RetryObserver
	if ro, ok := cfg.Observer.(RetryObserver); ok {
		retryObs = ro
	}
	b := &Backend{
		cfg: cfg,
		base: s3.Options{
			Region:       cfg.Region,
			UsePathStyle: cfg.UsePathStyle,
			HTTPClient: &limitedClient{
				http:    hc,
				slots:   make(chan struct{}, cfg.MaxConcurrent),
				timeout: cfg.RequestTimeout,
			},
			Retryer: newRetryer(cfg, retryObs),
			// Range reads carry no checksum; don't log that on every read.
			DisableLogOutputChecksumValidationSkipped: true,
			// No "Expect: 100-continue" on large PUTs and parts: waiting
			// for S3's go-ahead costs every upload a round trip to S3, for
			// the rare request S3 refuses before its body.
			ContinueHeaderThresholdBytes: -1,
		},
		clients: make(map[Credentials]*s3.Client),
	}
	if cfg.Endpoint != "" {
		b.base.BaseEndpoint = aws.String(cfg.Endpoint)
	}

	var provider aws.CredentialsProvider
	if cfg.Default != (Credentials{}) {
		provider = staticProvider(cfg.Default)
	} else {
		awsCfg, err := config.LoadDefaultConfig(context.Background(), config.WithRegion(cfg.Region))
		if err != nil {
			return nil, fmt.Errorf("s3backend: default credentials: %w", err)
		}
		provider = awsCfg.Credentials
	}
	b.dflt = b.newClient(provider)
	return b, nil
}

func (c Config) withDefaults() (Config, error) {
	c.Region = cmp.Or(c.Region, DefaultRegion)
	c.MaxConcurrent = cmp.Or(c.MaxConcurrent, DefaultMaxConcurrent)
	c.MaxAttempts = cmp.Or(c.MaxAttempts, DefaultMaxAttempts)
	c.MaxBackoff = cmp.Or(c.MaxBackoff, DefaultMaxBackoff)
	c.RequestTimeout = cmp.Or(c.RequestTimeout, DefaultRequestTimeout)
	c.PartSize = cmp.Or(c.PartSize, DefaultPartSize)
	c.StreamAbove = cmp.Or(c.StreamAbove, DefaultStreamAbove)
	switch {
	case c.MaxConcurrent < 0, c.MaxAttempts < 0, c.MaxBackoff < 0, c.RequestTimeout < 0:
		return c, errors.New("s3backend: negative MaxConcurrent, MaxAttempts, MaxBackoff or RequestTimeout")
	case c.PartSize < manager.MinUploadPartSize:
		return c, fmt.Errorf("s3backend: PartSize %d is below S3's minimum of %d", c.PartSize, manager.MinUploadPartSize)
	}
	return c, nil
}

func staticProvider(cr Credentials) aws.CredentialsProvider {
	return credentials.NewStaticCredentialsProvider(cr.AccessKeyID, cr.SecretAccessKey, cr.SessionToken)
}

func (b *Backend) newClient(provider aws.CredentialsProvider) *s3.Client {
	o := b.base.Copy()
	o.Credentials = provider
	return s3.New(o)
}

// Client returns the S3 client for cr (the default client when cr is zero),
// for operations the Backend does not wrap. It shares the Backend's
// in-flight cap, timeouts and retryer; a response body it returns holds an
// in-flight slot until it is closed. Clients are cached per credentials.
func (b *Backend) Client(cr Credentials) *s3.Client {
	if cr == (Credentials{}) {
		return b.dflt
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	c, ok := b.clients[cr]
	if !ok {
		c = b.newClient(staticProvider(cr))
		b.clients[cr] = c
	}
	return c
}

// Head returns the object's metadata, FetchedAt set to now.
func (b *Backend) Head(ctx context.Context, cr Credentials, bucket, key string) (chunk.Meta, error) {
	var meta chunk.Meta
	err := b.do(ctx, OpHead, bucket, key, func(ctx context.Context) error {
		out, err := b.Client(cr).HeadObject(ctx, &s3.HeadObjectInput{Bucket: &bucket, Key: &key,
			ChecksumMode: types.ChecksumModeEnabled})
		if err != nil {
			return err
		}
		meta = chunk.Meta{
			Size:         aws.ToInt64(out.ContentLength),
			ETag:         aws.ToString(out.ETag),
			ContentType:  aws.ToString(out.ContentType),
			LastModified: aws.ToTime(out.LastModified),
			Headers:      headOutputHeaders(out),
			FetchedAt:    time.Now(),
		}
		return nil
	})
	return meta, err
}

// GetRange returns exactly length bytes of the object starting at off, in
// one buffer of that size. When etag is not empty the read is conditional
// (If-Match) and fails with ErrPreconditionFailed if the object has changed.
//
// A range that is not entirely inside the object fails with ErrInvalidRange
// (S3 answers 416 when off is at or past the end, and a short body when the
// range runs past the end; both are reported the same way), as do a
// negative off or length. A length of 0 returns an empty slice without
// asking S3, so it neither checks etag nor that the object exists.
//
// The SDK retries the request itself; if the body then breaks off midway
// (which the SDK does not retry), the range is requested again, up to
// MaxAttempts requests in all, each reported to the RetryObserver.
func (b *Backend) GetRange(ctx context.Context, cr Credentials, bucket, key, etag string, off, length int64) ([]byte, error) {
	if off < 0 || length < 0 {
		return nil, &Error{Op: OpGet, Bucket: bucket, Key: key, Kind: ErrInvalidRange,
			Err: fmt.Errorf("offset %d, length %d", off, length)}
	}
	buf := make([]byte, length)
	if err := b.GetRangeInto(ctx, cr, bucket, key, etag, off, buf); err != nil {
		return nil, err
	}
	return buf, nil
}

// GetRangeInto is GetRange into dst: it reads exactly len(dst) bytes
// (what dst holds after an error is undefined).
func (b *Backend) GetRangeInto(ctx context.Context, cr Credentials, bucket, key, etag string, off int64, dst []byte) error {
	length := int64(len(dst))
	if off < 0 {
		return &Error{Op: OpGet, Bucket: bucket, Key: key, Kind: ErrInvalidRange,
			Err: fmt.Errorf("offset %d, length %d", off, length)}
	}
	if length == 0 {
		return nil
	}
	in := &s3.GetObjectInput{
		Bucket: &bucket,
		Key:    &key,
		Range:  aws.String(fmt.Sprintf("bytes=%d-%d", off, off+length-1)),
	}
	if etag != "" {
		in.IfMatch = &etag
	}
	return b.do(ctx, OpGet, bucket, key, func(ctx context.Context) error {
		for attempt := 1; ; attempt++ {
			out, err := b.Client(cr).GetObject(ctx, in)
			if err != nil {
				return err // the SDK has retried what it could
			}
			err = readBody(out, etag, dst)
			if err == nil || errors.Is(err, ErrInvalidRange) || errors.Is(err, ErrPreconditionFailed) ||
				ctx.Err() != nil || attempt >= b.cfg.MaxAttempts {
				return err
			}
			if ro, ok := b.cfg.Observer.(RetryObserver); ok {
				ro.ObserveRetry(OpGet)
			}
			if err := ctxtime.Sleep(ctx, backoff(b.cfg.MaxBackoff, attempt)); err != nil {
				return err
			}
		}
	})
}

// readBody reads and closes a ranged GET's body, which must hold exactly
// length bytes of version etag (when not empty). The ETag is checked even
// though the request carried If-Match: a store (or a proxy) that ignores
// If-Match would otherwise hand over bytes of a newer version, which would
// be cached under the old version's ETag and mixed into its reads.
func readBody(out *s3.GetObjectOutput, etag string, dst []byte) error {
	defer out.Body.Close()
	if got := aws.ToString(out.ETag); etag != "" && out.ETag != nil && strings.Trim(got, `"`) != strings.Trim(etag, `"`) {
		return fmt.Errorf("%w: asked for version %s, S3 sent %s (If-Match ignored)", ErrPreconditionFailed, etag, got)
	}
	if n := aws.ToInt64(out.ContentLength); out.ContentLength != nil && n != int64(len(dst)) {
		return fmt.Errorf("%w: asked for %d bytes, S3 sent %d (Content-Range %q)",
			ErrInvalidRange, len(dst), n, aws.ToString(out.ContentRange))
	}
	if _, err := io.ReadFull(out.Body, dst); err != nil {
		return fmt.Errorf("reading body: %w", err)
	}
	return nil
}

// Delete removes the object. Deleting an object that does not exist
// succeeds, as in S3. With WriteIf and an ETag it deletes only the object
// of that ETag (If-Match; a conditional delete); WriteIf("") adds nothing.
func (b *Backend) Delete(ctx context.Context, cr Credentials, bucket, key string) error {
	return b.do(ctx, OpDelete, bucket, key, func(ctx context.Context) error {
		in := &s3.DeleteObjectInput{Bucket: &bucket, Key: &key}
		in.IfMatch, _ = writeCondition(ctx)
		_, err := b.Client(cr).DeleteObject(ctx, in)
		return err
	})
}

// do runs one operation: it tags the context with op (for retry
// observations), classifies the error and reports to the Observer.
func (b *Backend) do(ctx context.Context, op, bucket, key string, fn func(context.Context) error) error {
	start := time.Now()
	err := wrapError(ctx, op, bucket, key, fn(withOp(ctx, op)))
	if b.cfg.Observer != nil {
		b.cfg.Observer.ObserveS3(op, Class(err), time.Since(start))
	}
	return err
}
