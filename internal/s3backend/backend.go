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
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strings"
	"sync"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	v4 "github.com/aws/aws-sdk-go-v2/aws/signer/v4"
	"github.com/aws/aws-sdk-go-v2/config"
	"github.com/aws/aws-sdk-go-v2/credentials"
	"github.com/aws/aws-sdk-go-v2/feature/s3/manager"
	"github.com/aws/aws-sdk-go-v2/service/s3"
	"github.com/aws/smithy-go/middleware"
	smithyhttp "github.com/aws/smithy-go/transport/http"

	"github.com/distcache/distcache/internal/chunk"
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
	if c.Region == "" {
		c.Region = DefaultRegion
	}
	if c.MaxConcurrent == 0 {
		c.MaxConcurrent = DefaultMaxConcurrent
	}
	if c.MaxAttempts == 0 {
		c.MaxAttempts = DefaultMaxAttempts
	}
	if c.MaxBackoff == 0 {
		c.MaxBackoff = DefaultMaxBackoff
	}
	if c.RequestTimeout == 0 {
		c.RequestTimeout = DefaultRequestTimeout
	}
	if c.PartSize == 0 {
		c.PartSize = DefaultPartSize
	}
	if c.StreamAbove == 0 {
		c.StreamAbove = DefaultStreamAbove
	}
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
		out, err := b.Client(cr).HeadObject(ctx, &s3.HeadObjectInput{Bucket: &bucket, Key: &key})
		if err != nil {
			return err
		}
		meta = chunk.Meta{
			Size:         aws.ToInt64(out.ContentLength),
			ETag:         aws.ToString(out.ETag),
			ContentType:  aws.ToString(out.ContentType),
			LastModified: aws.ToTime(out.LastModified),
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
			if err := sleep(ctx, backoff(b.cfg.MaxBackoff, attempt)); err != nil {
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

// Put uploads the object and returns, once S3 has it, its metadata as the
// upload tells it, without asking S3 again: the size sent, the ETag S3
// answered, the content type sent (empty if none: S3 then stores its
// default), and S3's Date of its last answer for LastModified (S3 does not
// send the object's Last-Modified with a PUT; the Date is within the same
// second or two, and the zero time if no answer carried one). A caller that
// needs S3's own Last-Modified and content type asks Head. size is the
// body's length, or -1 when unknown; a body that turns out shorter or
// longer than a known size fails the upload rather than storing a
// truncated object (its last byte is held back until its end is seen).
//
// How the body goes up:
//
//   - known size up to StreamAbove: read whole, then one PUT, retried
//     like any request;
//   - known size up to PartSize, when the PUT can be signed before the
//     body is read (a SHA-256 declared with WithPayloadSHA256, or an
//     https endpoint, where the SDK signs UNSIGNED-PAYLOAD anyway): one
//     PUT streamed as the body arrives, not retried here;
//   - otherwise read whole first up to PartSize (a plain http endpoint
//     needs the SHA-256 in the signature, before the body), and above it
//     or of unknown size a multipart upload whose parts are read in turn
//     and go up in parallel (aborted on failure).
func (b *Backend) Put(ctx context.Context, cr Credentials, bucket, key string, body io.Reader, size int64, contentType string) (chunk.Meta, error) {
	if size < 0 {
		size = -1
	}
	sum := payloadSHA256(ctx)
	var etag string
	var sent int64
	dates := &lastDate{}
	err := b.do(ctx, OpPut, bucket, key, func(ctx context.Context) error {
		counted := &callerBody{r: body, left: size}
		in := &s3.PutObjectInput{Bucket: &bucket, Key: &key}
		if contentType != "" {
			in.ContentType = &contentType
		}
		var err error
		switch single := size >= 0 && size <= b.cfg.PartSize; {
		case single && size > b.cfg.StreamAbove && b.cfg.StreamAbove >= 0 && (sum != "" || b.https()):
			etag, err = b.putStreamed(ctx, cr, in, counted, size, sum, dates)
		case single:
			etag, err = b.putRead(ctx, cr, in, counted, size, sum, dates)
		default:
			etag, err = b.putMultipart(ctx, cr, in, counted, dates)
		}
		if err == nil && etag == "" {
			err = errors.New("S3 returned no ETag")
		}
		sent = counted.read
		return err
	})
	if err != nil {
		return chunk.Meta{}, err
	}
	return chunk.Meta{Size: sent, ETag: etag, ContentType: contentType, LastModified: dates.latest(), FetchedAt: time.Now()}, nil
}

// putRead reads the body whole, then PUTs it; the SDK may retry the PUT.
func (b *Backend) putRead(ctx context.Context, cr Credentials, in *s3.PutObjectInput, body *callerBody, size int64,
	sum string, dates *lastDate) (string, error) {
	buf := make([]byte, size)
	if _, err := io.ReadFull(body, buf); err != nil {
		return "", err
	}
	if _, err := body.Read(make([]byte, 1)); err != io.EOF {
		return "", err
	}
	in.Body, in.ContentLength = bytes.NewReader(buf), aws.Int64(size)
	out, err := b.Client(cr).PutObject(ctx, in, dates.record, signPayload(sum))
	if err != nil {
		return "", err
	}
	return aws.ToString(out.ETag), nil
}

// putStreamed PUTs the body as it arrives, signed with sum (UNSIGNED-PAYLOAD
// when empty: https only). The body cannot be sent twice: one attempt.
func (b *Backend) putStreamed(ctx context.Context, cr Credentials, in *s3.PutObjectInput, body *callerBody, size int64,
	sum string, dates *lastDate) (string, error) {
	in.Body, in.ContentLength = body, aws.Int64(size)
	if sum == "" {
		sum = unsignedPayload
	}
	out, err := b.Client(cr).PutObject(ctx, in, dates.record, signPayload(sum), func(o *s3.Options) {
		o.RetryMaxAttempts = 1
		// A checksum computed by the SDK would need the body twice (in
		// a header) or aws-chunked encoding (a trailer).
		o.RequestChecksumCalculation = aws.RequestChecksumCalculationWhenRequired
	})
	if err != nil {
		if be := body.err; be != nil {
			return "", be // the caller's body failed, not S3
		}
		return "", err
	}
	return aws.ToString(out.ETag), nil
}

// putMultipart uploads in parts of PartSize, read one after the other from
// the body and sent in parallel (the upload manager's concurrency).
func (b *Backend) putMultipart(ctx context.Context, cr Credentials, in *s3.PutObjectInput, body *callerBody, dates *lastDate) (string, error) {
	in.Body = body
	up := manager.NewUploader(b.Client(cr), func(u *manager.Uploader) {
		u.PartSize = b.cfg.PartSize
		u.ClientOptions = append(u.ClientOptions, dates.record)
	})
	out, err := up.Upload(ctx, in)
	if err != nil {
		return "", err
	}
	return aws.ToString(out.ETag), nil
}

// https reports whether the backend's S3 is reached over TLS (AWS itself
// when no endpoint is set).
func (b *Backend) https() bool {
	return b.cfg.Endpoint == "" || strings.HasPrefix(strings.ToLower(b.cfg.Endpoint), "https://")
}

type payloadKey struct{}

// WithPayloadSHA256 declares the SHA-256 (64 hex digits) of the body that a
// Put made with the returned context uploads, as the body's writer signed
// it: Put signs its request with it instead of hashing the body, so it can
// stream the body over plain http too, and S3 checks the body against it
// and refuses one that does not match. Any other value declares nothing.
func WithPayloadSHA256(ctx context.Context, sum string) context.Context {
	if !isSHA256Hex(sum) {
		return ctx
	}
	return context.WithValue(ctx, payloadKey{}, strings.ToLower(sum))
}

func payloadSHA256(ctx context.Context) string {
	s, _ := ctx.Value(payloadKey{}).(string)
	return s
}

func isSHA256Hex(s string) bool {
	if len(s) != 64 {
		return false
	}
	for i := 0; i < len(s); i++ {
		if c := s[i] | 0x20; (c < '0' || c > '9') && (c < 'a' || c > 'f') {
			return false
		}
	}
	return true
}

// signPayload is an S3 API option that signs the request with payload hash
// sum (hex SHA-256, or UNSIGNED-PAYLOAD) instead of hashing the body; no
// option when sum is empty.
func signPayload(sum string) func(*s3.Options) {
	return func(o *s3.Options) {
		if sum == "" {
			return
		}
		o.APIOptions = append(o.APIOptions, func(stack *middleware.Stack) error {
			// The SDK's payload hashing leaves a hash already in the
			// context alone.
			return stack.Finalize.Insert(middleware.FinalizeMiddlewareFunc("distcachePayloadHash",
				func(ctx context.Context, in middleware.FinalizeInput, next middleware.FinalizeHandler) (middleware.FinalizeOutput, middleware.Metadata, error) {
					return next.HandleFinalize(v4.SetPayloadHash(ctx, sum), in)
				}), "ComputePayloadHash", middleware.Before)
		})
	}
}

// lastDate keeps the latest Date header of the answers to one upload (its
// parts and its completion, or its one PUT).
type lastDate struct {
	mu sync.Mutex
	t  time.Time
}

// record is an S3 API option that notes each answer's Date.
func (d *lastDate) record(o *s3.Options) {
	o.APIOptions = append(o.APIOptions, d.recordDates)
}

func (d *lastDate) recordDates(stack *middleware.Stack) error {
	return stack.Deserialize.Add(middleware.DeserializeMiddlewareFunc("distcacheResponseDate",
		func(ctx context.Context, in middleware.DeserializeInput, next middleware.DeserializeHandler) (middleware.DeserializeOutput, middleware.Metadata, error) {
			out, md, err := next.HandleDeserialize(ctx, in)
			if resp, ok := out.RawResponse.(*smithyhttp.Response); ok && err == nil {
				if t, perr := http.ParseTime(resp.Header.Get("Date")); perr == nil {
					d.mu.Lock()
					if t.After(d.t) {
						d.t = t
					}
					d.mu.Unlock()
				}
			}
			return out, md, err
		}), middleware.After)
}

func (d *lastDate) latest() time.Time {
	d.mu.Lock()
	defer d.mu.Unlock()
	return d.t
}

// BodyError wraps an error reading the body given to Put (including a body
// whose length differs from the size given). It is the caller's failure, not
// S3's, so it is never classified as ErrUnavailable.
type BodyError struct{ Err error }

func (e *BodyError) Error() string { return "reading the body to upload: " + e.Err.Error() }
func (e *BodyError) Unwrap() error { return e.Err }

// callerBody passes the caller's body through, marking its errors as
// BodyErrors and, when the size is known (left >= 0), failing on a body of
// any other length. The last byte of a body of known size is passed only
// once the body's end is seen, so a longer body fails before S3 has had all
// the bytes it was told to expect (and could keep them as the object). read
// counts the bytes passed; err is the first BodyError.
type callerBody struct {
	r    io.Reader
	left int64
	read int64
	eof  bool
	err  error
}

func (c *callerBody) Read(p []byte) (int, error) {
	if c.err != nil {
		return 0, c.err
	}
	n, err := c.read1(p)
	c.read += int64(n)
	if err != nil && err != io.EOF {
		c.err = err
	}
	return n, err
}

func (c *callerBody) read1(p []byte) (int, error) {
	switch {
	case c.eof:
		return 0, io.EOF
	case len(p) == 0:
		return 0, nil
	case c.left < 0:
		n, err := c.r.Read(p)
		if err != nil && err != io.EOF {
			return n, &BodyError{Err: err}
		}
		c.eof = err == io.EOF
		return n, err
	case c.left == 0:
		var one [1]byte
		n, err := io.ReadFull(c.r, one[:])
		switch {
		case n > 0:
			return 0, &BodyError{Err: errors.New("body is longer than the given size")}
		case err == io.EOF:
			c.eof = true
			return 0, io.EOF
		}
		return 0, &BodyError{Err: err}
	case c.left == 1:
		// The last byte, once the end after it is seen.
		var two [2]byte
		n, err := io.ReadFull(c.r, two[:])
		switch {
		case n == 2:
			return 0, &BodyError{Err: errors.New("body is longer than the given size")}
		case n == 1 && err == io.ErrUnexpectedEOF:
			p[0] = two[0]
			c.left, c.eof = 0, true
			return 1, nil
		case err == io.EOF:
			return 0, &BodyError{Err: errors.New("body ended 1 byte short of the given size")}
		}
		return 0, &BodyError{Err: err}
	}
	if int64(len(p)) > c.left-1 {
		p = p[:c.left-1]
	}
	n, err := c.r.Read(p)
	c.left -= int64(n)
	switch {
	case err == io.EOF:
		return n, &BodyError{Err: fmt.Errorf("body ended %d bytes short of the given size", c.left)}
	case err != nil:
		return n, &BodyError{Err: err}
	}
	return n, nil
}

// Delete removes the object. Deleting an object that does not exist
// succeeds, as in S3.
func (b *Backend) Delete(ctx context.Context, cr Credentials, bucket, key string) error {
	return b.do(ctx, OpDelete, bucket, key, func(ctx context.Context) error {
		_, err := b.Client(cr).DeleteObject(ctx, &s3.DeleteObjectInput{Bucket: &bucket, Key: &key})
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
