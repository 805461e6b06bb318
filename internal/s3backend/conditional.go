package s3backend

import (
	"context"
	"errors"
	"net/http"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/smithy-go"
	smithyhttp "github.com/aws/smithy-go/transport/http"
)

// Conditional writes (S3's If-Match and If-None-Match on PutObject and
// CompleteMultipartUpload, If-Match on DeleteObject): the write-back
// persister sends a version only if S3 still holds what it saw when it
// looked, so that two nodes persisting versions of one key at once (around
// a ring change) cannot leave S3 with the older one.

type writeIfKey struct{}

// WriteIf returns a context whose Put and PutParts write only if S3 still
// holds what the caller saw of the key: the object whose ETag is etag (as
// S3 gave it: If-Match), or, for etag "", no object (If-None-Match: *).
// When S3 holds something else by then, they write nothing and fail with
// ErrPreconditionFailed; a multipart upload is aborted. Delete honours
// an etag (If-Match) and ignores "". An S3 that does
// not implement conditional writes answers NotImplemented (see
// NotImplemented), or ignores the condition.
func WriteIf(ctx context.Context, etag string) context.Context {
	return context.WithValue(ctx, writeIfKey{}, etag)
}

// writeCondition is WriteIf's condition as the two fields of a PutObject or
// CompleteMultipartUpload (both nil without WriteIf).
func writeCondition(ctx context.Context) (ifMatch, ifNoneMatch *string) {
	etag, ok := ctx.Value(writeIfKey{}).(string)
	switch {
	case !ok:
		return nil, nil
	case etag == "":
		return nil, aws.String("*")
	}
	return aws.String(etag), nil
}

// NotImplemented reports whether S3 answered err's request with
// NotImplemented (501): a header asked for what it does not do, such as a
// conditional write on an S3 without them.
func NotImplemented(err error) bool {
	var apiErr smithy.APIError
	if errors.As(err, &apiErr) && apiErr.ErrorCode() == "NotImplemented" {
		return true
	}
	var respErr *smithyhttp.ResponseError
	return errors.As(err, &respErr) && respErr.HTTPStatusCode() == http.StatusNotImplemented
}
