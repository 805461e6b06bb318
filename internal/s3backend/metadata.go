package s3backend

import (
	"context"
	"maps"
	"net/http"
	"time"

	"github.com/aws/aws-sdk-go-v2/service/s3"
	"github.com/aws/aws-sdk-go-v2/service/s3/types"

	"github.com/distcache/distcache/internal/chunk"
)

type metadataKey struct{}

// WithMetadata returns a context whose Put and PutParts store md as the
// object's user metadata (x-amz-meta-*): the cache marks what it persists
// with the version it held, to recognise it later (internal/writeback).
func WithMetadata(ctx context.Context, md map[string]string) context.Context {
	return context.WithValue(ctx, metadataKey{}, md)
}

type headersKey struct{}

// WithHeaders returns a context whose Put and PutParts store h with the
// object: its user metadata (beside WithMetadata's), Cache-Control,
// Content-Disposition, Content-Encoding, Content-Language, Expires (an
// Expires that is not an HTTP date is not sent: the caller checks it) and
// the storage class.
func WithHeaders(ctx context.Context, h chunk.Headers) context.Context {
	if len(h) == 0 {
		return ctx
	}
	return context.WithValue(ctx, headersKey{}, h)
}

// metadataOf is the user metadata to store: the object's, then the
// cache's own (WithMetadata), which wins.
func metadataOf(ctx context.Context) map[string]string {
	md, _ := ctx.Value(metadataKey{}).(map[string]string)
	user := headersOf(ctx).UserMetadata()
	if user == nil {
		return md
	}
	maps.Copy(user, md)
	return user
}

// objectHeaders are the stored headers (WithHeaders) other than user
// metadata, as the S3 API's fields.
type objectHeaders struct {
	cacheControl, contentDisposition, contentEncoding, contentLanguage *string
	expires                                                            *time.Time
	storageClass                                                       types.StorageClass
}

func headersOf(ctx context.Context) chunk.Headers {
	h, _ := ctx.Value(headersKey{}).(chunk.Headers)
	return h
}

func objectHeadersOf(ctx context.Context) objectHeaders {
	h := headersOf(ctx)
	str := func(k string) *string {
		if v, ok := h[k]; ok {
			return &v
		}
		return nil
	}
	o := objectHeaders{cacheControl: str("Cache-Control"), contentDisposition: str("Content-Disposition"),
		contentEncoding: str("Content-Encoding"), contentLanguage: str("Content-Language"),
		storageClass: types.StorageClass(h[chunk.StorageClassHeader])}
	if v, ok := h["Expires"]; ok {
		if t, err := http.ParseTime(v); err == nil {
			o.expires = &t
		}
	}
	return o
}

// headOutputHeaders are the stored headers of a HeadObject answer.
func headOutputHeaders(out *s3.HeadObjectOutput) chunk.Headers {
	var h chunk.Headers
	set := func(k string, v *string) {
		if v != nil && *v != "" {
			if h == nil {
				h = chunk.Headers{}
			}
			h[k] = *v
		}
	}
	set("Cache-Control", out.CacheControl)
	set("Content-Disposition", out.ContentDisposition)
	set("Content-Encoding", out.ContentEncoding)
	set("Content-Language", out.ContentLanguage)
	set("Expires", out.ExpiresString)
	if sc := string(out.StorageClass); sc != chunk.StandardStorageClass {
		set(chunk.StorageClassHeader, &sc)
	}
	return h.WithUserMetadata(out.Metadata)
}

// putObject sets the headers on a PutObject.
func (o objectHeaders) putObject(in *s3.PutObjectInput) {
	in.CacheControl, in.ContentDisposition, in.ContentEncoding, in.ContentLanguage, in.Expires, in.StorageClass =
		o.cacheControl, o.contentDisposition, o.contentEncoding, o.contentLanguage, o.expires, o.storageClass
}

// createMultipartUpload sets the headers on a CreateMultipartUpload.
func (o objectHeaders) createMultipartUpload(in *s3.CreateMultipartUploadInput) {
	in.CacheControl, in.ContentDisposition, in.ContentEncoding, in.ContentLanguage, in.Expires, in.StorageClass =
		o.cacheControl, o.contentDisposition, o.contentEncoding, o.contentLanguage, o.expires, o.storageClass
}

// Metadata returns the object's user metadata, keys in lower case
// (ErrNotFound when there is no object).
func (b *Backend) Metadata(ctx context.Context, cr Credentials, bucket, key string) (map[string]string, error) {
	var md map[string]string
	err := b.do(ctx, OpHead, bucket, key, func(ctx context.Context) error {
		out, err := b.Client(cr).HeadObject(ctx, &s3.HeadObjectInput{Bucket: &bucket, Key: &key})
		if err != nil {
			return err
		}
		md = out.Metadata
		if md == nil {
			md = map[string]string{}
		}
		return nil
	})
	return md, err
}
