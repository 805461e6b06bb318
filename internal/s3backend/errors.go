package s3backend

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"

	"github.com/aws/aws-sdk-go-v2/aws/ratelimit"
	"github.com/aws/aws-sdk-go-v2/aws/retry"
	"github.com/aws/smithy-go"
	smithyhttp "github.com/aws/smithy-go/transport/http"
)

// Errors returned by Backend methods wrap one of these sentinels when the
// failure falls into a class callers act on; test with errors.Is. An error
// that matches none of them (a bad argument, an error reading the caller's
// body, an unexpected S3 error code) is still an *Error.
var (
	// ErrNotFound: the object or bucket does not exist (NoSuchKey,
	// NoSuchBucket, 404).
	ErrNotFound = errors.New("s3: not found")
	// ErrPreconditionFailed: If-Match did not match (412), i.e. the object
	// was overwritten and its ETag changed.
	ErrPreconditionFailed = errors.New("s3: precondition failed")
	// ErrAccessDenied: the credentials were refused (403: AccessDenied,
	// InvalidAccessKeyId, SignatureDoesNotMatch, expired tokens).
	ErrAccessDenied = errors.New("s3: access denied")
	// ErrInvalidRange: the range lies (partly) outside the object (416, or
	// S3 returned fewer bytes than asked for), or is negative.
	ErrInvalidRange = errors.New("s3: invalid range")
	// ErrUnavailable: S3 could not be reached or kept failing: network
	// errors, timeouts, 5xx and throttling once retries were used up.
	ErrUnavailable = errors.New("s3: unavailable")
)

// Status classes passed to Observer.ObserveS3.
const (
	StatusOK                 = "ok"
	StatusNotFound           = "not_found"
	StatusPreconditionFailed = "precondition_failed"
	StatusAccessDenied       = "access_denied"
	StatusInvalidRange       = "invalid_range"
	StatusUnavailable        = "unavailable"
	StatusCanceled           = "canceled" // the caller's context ended
	StatusError              = "error"    // anything else
)

// Error describes a failed Backend operation. It matches its Kind (one of
// the sentinels, or nil) with errors.Is and unwraps to the underlying error
// (from the SDK, the network or the caller's context).
type Error struct {
	Op     string // head, get, put or delete
	Bucket string
	Key    string
	Kind   error
	Err    error
}

func (e *Error) Error() string {
	if e.Kind == nil {
		return fmt.Sprintf("s3 %s %s/%s: %v", e.Op, e.Bucket, e.Key, e.Err)
	}
	return fmt.Sprintf("s3 %s %s/%s: %v: %v", e.Op, e.Bucket, e.Key, e.Kind, e.Err)
}

func (e *Error) Unwrap() []error {
	if e.Kind == nil {
		return []error{e.Err}
	}
	return []error{e.Kind, e.Err}
}

// Class is the status class of an error returned by a Backend method, as
// reported to the Observer: StatusOK for nil.
func Class(err error) string {
	switch {
	case err == nil:
		return StatusOK
	case errors.Is(err, ErrNotFound):
		return StatusNotFound
	case errors.Is(err, ErrPreconditionFailed):
		return StatusPreconditionFailed
	case errors.Is(err, ErrAccessDenied):
		return StatusAccessDenied
	case errors.Is(err, ErrInvalidRange):
		return StatusInvalidRange
	case errors.Is(err, ErrUnavailable):
		return StatusUnavailable
	case errors.Is(err, context.Canceled), errors.Is(err, context.DeadlineExceeded):
		return StatusCanceled
	}
	return StatusError
}

// wrapError turns an error from an operation into an *Error with its Kind.
// ctx is the caller's context: when it has ended, the error is the caller's
// doing and gets no Kind, but it wraps ctx's error.
func wrapError(ctx context.Context, op, bucket, key string, err error) error {
	if err == nil {
		return nil
	}
	if ctxErr := ctx.Err(); ctxErr != nil {
		if !errors.Is(err, ctxErr) {
			err = fmt.Errorf("%w: %w", ctxErr, err)
		}
		return &Error{Op: op, Bucket: bucket, Key: key, Err: err}
	}
	return &Error{Op: op, Bucket: bucket, Key: key, Kind: errorKind(err), Err: err}
}

var errorCodeKinds = map[string]error{
	"NoSuchKey":             ErrNotFound,
	"NoSuchBucket":          ErrNotFound,
	"NotFound":              ErrNotFound,
	"NoSuchVersion":         ErrNotFound,
	"PreconditionFailed":    ErrPreconditionFailed,
	"AccessDenied":          ErrAccessDenied,
	"Forbidden":             ErrAccessDenied,
	"AllAccessDisabled":     ErrAccessDenied,
	"InvalidAccessKeyId":    ErrAccessDenied,
	"SignatureDoesNotMatch": ErrAccessDenied,
	"InvalidToken":          ErrAccessDenied,
	"ExpiredToken":          ErrAccessDenied,
	"InvalidRange":          ErrInvalidRange,
	"SlowDown":              ErrUnavailable,
	"ServiceUnavailable":    ErrUnavailable,
	"InternalError":         ErrUnavailable,
	"RequestTimeout":        ErrUnavailable,
}

var statusKinds = map[int]error{
	404: ErrNotFound,
	412: ErrPreconditionFailed,
	403: ErrAccessDenied,
	416: ErrInvalidRange,
	408: ErrUnavailable,
	429: ErrUnavailable,
}

// Throttled reports whether err (an ErrUnavailable) is S3 asking for fewer
// requests: a SlowDown or other throttling code, or a 503 or 429 status.
// Asking again from another node would only add to the load S3 refuses.
func Throttled(err error) bool {
	var apiErr smithy.APIError
	if errors.As(err, &apiErr) {
		if _, ok := retry.DefaultThrottleErrorCodes[apiErr.ErrorCode()]; ok {
			return true
		}
	}
	var respErr *smithyhttp.ResponseError
	return errors.As(err, &respErr) &&
		(respErr.HTTPStatusCode() == http.StatusServiceUnavailable || respErr.HTTPStatusCode() == http.StatusTooManyRequests)
}

// errorKind classifies an error that was not caused by the caller's context.
func errorKind(err error) error {
	if be := (*BodyError)(nil); errors.As(err, &be) {
		return nil
	}
	for _, s := range []error{ErrNotFound, ErrPreconditionFailed, ErrAccessDenied, ErrInvalidRange, ErrUnavailable} {
		if errors.Is(err, s) {
			return s
		}
	}
	var apiErr smithy.APIError
	if errors.As(err, &apiErr) {
		if k, ok := errorCodeKinds[apiErr.ErrorCode()]; ok {
			return k
		}
	}
	// The SDK wraps errors without a response in a ResponseError too, with
	// status 0.
	var respErr *smithyhttp.ResponseError
	if errors.As(err, &respErr) && respErr.HTTPStatusCode() != 0 {
		code := respErr.HTTPStatusCode()
		if k, ok := statusKinds[code]; ok {
			return k
		}
		if code >= 500 {
			return ErrUnavailable
		}
		return nil // some other answer from S3: not an availability problem
	}
	// No response from S3 at all.
	var (
		sendErr  *smithyhttp.RequestSendError
		netErr   net.Error
		quotaErr ratelimit.QuotaExceededError
		timeout  attemptTimeoutError
	)
	switch {
	case errors.As(err, &sendErr), errors.As(err, &netErr), errors.As(err, &quotaErr),
		errors.As(err, &timeout), errors.Is(err, io.ErrUnexpectedEOF):
		return ErrUnavailable
	}
	return nil
}
