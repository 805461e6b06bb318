package s3backend

//lint:file-ignore SA1019 feature/s3/manager's Uploader stays until its successor, transfermanager (v0.x), is stable

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
	"github.com/aws/aws-sdk-go-v2/feature/s3/manager"
	"github.com/aws/aws-sdk-go-v2/service/s3"
	"github.com/aws/smithy-go/middleware"
	smithyhttp "github.com/aws/smithy-go/transport/http"

	"github.com/distcache/distcache/internal/chunk"
)

// Writes: how a body goes up to S3 (one PUT, streamed or read whole, or a
// multipart upload), and what the upload tells of the object.

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
//
// A SHA-256 declared with WithPayloadSHA256 is always checked before S3
// keeps the object: by S3 for a single PUT, which is signed with it, and by
// Put for a multipart upload (CheckPayloadSHA256: the upload fails and is
// aborted, with a BodyError wrapping ErrPayloadSHA256Mismatch).
func (b *Backend) Put(ctx context.Context, cr Credentials, bucket, key string, body io.Reader, size int64, contentType string) (chunk.Meta, error) {
	if size < 0 {
		size = -1
	}
	sum := payloadSHA256(ctx)
	var etag string
	var sent int64
	dates := &lastDate{}
	// A checksum goes with a single PUT only: S3 keeps a multipart
	// upload's per part.
	single := size >= 0 && size <= b.cfg.PartSize
	err := b.do(ctx, OpPut, bucket, key, func(ctx context.Context) error {
		counted := &callerBody{r: body, left: size}
		in := &s3.PutObjectInput{Bucket: &bucket, Key: &key, Metadata: metadataOf(ctx)}
		objectHeadersOf(ctx).putObject(in, single)
		in.IfMatch, in.IfNoneMatch = writeCondition(ctx) // the uploader's CompleteMultipartUpload gets them too
		if contentType != "" {
			in.ContentType = &contentType
		}
		var err error
		switch {
		case single && size > b.cfg.StreamAbove && b.cfg.StreamAbove >= 0 && (sum != "" || b.https()):
			etag, err = b.putStreamed(ctx, cr, in, counted, size, sum, dates)
		case single:
			etag, err = b.putRead(ctx, cr, in, counted, size, sum, dates)
		default:
			// S3 checks each part against its own hash only: the declared
			// SHA-256 of the whole body is checked here.
			etag, err = b.putMultipart(ctx, cr, in, CheckPayloadSHA256(counted, sum), dates)
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
	return chunk.Meta{Size: sent, ETag: etag, ContentType: contentType, Headers: storedHeadersSent(headersOf(ctx), single),
		LastModified: dates.latest(), FetchedAt: time.Now()}, nil
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
func (b *Backend) putMultipart(ctx context.Context, cr Credentials, in *s3.PutObjectInput, body io.Reader, dates *lastDate) (string, error) {
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
