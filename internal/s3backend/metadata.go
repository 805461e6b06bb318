package s3backend

import (
	"context"
	"maps"
	"net/http"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
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
// Expires that is not an HTTP date is not sent: the caller checks it), the
// storage class, and a full-object checksum (X-Amz-Checksum-*: sent with a
// single PUT, which S3 checks against the body and keeps; a multipart
// upload sends none).
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
	// The full-object checksum, for a single PUT only.
	crc32, crc32c, crc64nvme, sha1, sha256 *string
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
		storageClass: types.StorageClass(h[chunk.StorageClassHeader]),
		crc32:        str("X-Amz-Checksum-Crc32"), crc32c: str("X-Amz-Checksum-Crc32c"),
		crc64nvme: str("X-Amz-Checksum-Crc64nvme"), sha1: str("X-Amz-Checksum-Sha1"), sha256: str("X-Amz-Checksum-Sha256")}
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
	// Asked with checksum mode ENABLED (Head).
	set("X-Amz-Checksum-Crc32", out.ChecksumCRC32)
	set("X-Amz-Checksum-Crc32c", out.ChecksumCRC32C)
	set("X-Amz-Checksum-Crc64nvme", out.ChecksumCRC64NVME)
	set("X-Amz-Checksum-Sha1", out.ChecksumSHA1)
	set("X-Amz-Checksum-Sha256", out.ChecksumSHA256)
	if h.HasChecksum() {
		ct := string(out.ChecksumType)
		set(chunk.ChecksumTypeHeader, &ct)
	}
	return h.WithUserMetadata(out.Metadata)
}

// putObject sets the headers on a PutObject, its checksum too when
// withChecksum.
func (o objectHeaders) putObject(in *s3.PutObjectInput, withChecksum bool) {
	in.CacheControl, in.ContentDisposition, in.ContentEncoding, in.ContentLanguage, in.Expires, in.StorageClass =
		o.cacheControl, o.contentDisposition, o.contentEncoding, o.contentLanguage, o.expires, o.storageClass
	if withChecksum {
		in.ChecksumCRC32, in.ChecksumCRC32C, in.ChecksumCRC64NVME, in.ChecksumSHA1, in.ChecksumSHA256 =
			o.crc32, o.crc32c, o.crc64nvme, o.sha1, o.sha256
	}
}

// storedHeadersSent are the stored headers of an object uploaded with
// WithHeaders' h: with the full-object checksum S3 checked and keeps when
// it was sent (withChecksum), else without any.
func storedHeadersSent(h chunk.Headers, withChecksum bool) chunk.Headers {
	out := h.WithoutChecksum()
	if !withChecksum {
		return out
	}
	for _, k := range chunk.ChecksumHeaders {
		if v, ok := h[k]; ok {
			if out == nil {
				out = chunk.Headers{}
			}
			out[k] = v
			out[chunk.ChecksumTypeHeader] = chunk.FullObjectChecksum
		}
	}
	return out
}

// createMultipartUpload sets the headers on a CreateMultipartUpload.
func (o objectHeaders) createMultipartUpload(in *s3.CreateMultipartUploadInput) {
	in.CacheControl, in.ContentDisposition, in.ContentEncoding, in.ContentLanguage, in.Expires, in.StorageClass =
		o.cacheControl, o.contentDisposition, o.contentEncoding, o.contentLanguage, o.expires, o.storageClass
}

// Metadata returns the object's user metadata, keys in lower case, and its
// ETag as S3 gave it (ErrNotFound when there is no object).
func (b *Backend) Metadata(ctx context.Context, cr Credentials, bucket, key string) (md map[string]string, etag string, err error) {
	err = b.do(ctx, OpHead, bucket, key, func(ctx context.Context) error {
		out, err := b.Client(cr).HeadObject(ctx, &s3.HeadObjectInput{Bucket: &bucket, Key: &key})
		if err != nil {
			return err
		}
		md, etag = out.Metadata, aws.ToString(out.ETag)
		if md == nil {
			md = map[string]string{}
		}
		return nil
	})
	return md, etag, err
}
