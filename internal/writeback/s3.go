package writeback

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"strconv"
	"sync/atomic"

	"github.com/distcache/distcache/internal/chunk"
	"github.com/distcache/distcache/internal/s3backend"
)

// ObjectStore is the S3 a Backend sends through: s3backend.Backend, or a
// node's view of it. Put and PutParts honour s3backend.WriteIf.
type ObjectStore interface {
	Put(ctx context.Context, cr s3backend.Credentials, bucket, key string, body io.Reader, size int64, contentType string) (chunk.Meta, error)
	PutParts(ctx context.Context, cr s3backend.Credentials, bucket, key string, body io.ReaderAt, parts []int64, contentType string) (string, error)
	Delete(ctx context.Context, cr s3backend.Credentials, bucket, key string) error
	Metadata(ctx context.Context, cr s3backend.Credentials, bucket, key string) (md map[string]string, etag string, err error)
}

// Backend is the persister's S3: an ObjectStore, with each tenant's
// credentials. Its uploads are conditional writes (s3backend.WriteIf) until
// S3 answers one with NotImplemented; from then on they are plain PUTs, as
// before conditional writes, and only the version check orders them.
type Backend struct {
	S3 ObjectStore
	// Credentials are the tenant's for its bucket (false: none, the
	// tenant is gone: the version cannot be persisted).
	Credentials func(tenant, bucket string) (s3backend.Credentials, bool)
	Log         *slog.Logger // told once when S3 turns out to have no conditional writes (nil: not told)

	unconditional atomic.Bool // S3 answered a conditional write NotImplemented
}

// Put uploads the version, only if S3 still holds seen (ErrChanged
// otherwise): a held multipart upload in the same parts (so S3 gives the
// same ETag), any other multipart when above the backend's part size.
func (b *Backend) Put(ctx context.Context, e Entry, body io.Reader, seen Seen) (string, error) {
	cr, ok := b.Credentials(e.Tenant, e.Bucket)
	if !ok {
		return "", fmt.Errorf("no credentials for tenant %s, bucket %s", e.Tenant, e.Bucket)
	}
	ctx = s3backend.WithMetadata(ctx, map[string]string{VersionMetadata: strconv.FormatUint(e.Version, 10)})
	ctx = s3backend.WithHeaders(ctx, e.Headers)
	conditional := !b.unconditional.Load()
	if conditional {
		ctx = s3backend.WriteIf(ctx, seen.ETag) // "" when S3 had nothing: If-None-Match: *
	}
	etag, err := b.put(ctx, cr, e, body)
	switch {
	case conditional && errors.Is(err, s3backend.ErrPreconditionFailed):
		return "", fmt.Errorf("%w: %w", ErrChanged, err)
	case conditional && s3backend.NotImplemented(err):
		if !b.unconditional.Swap(true) && b.Log != nil {
			b.Log.Warn("write-back: S3 does not implement conditional writes (If-Match, If-None-Match); persisting with plain PUTs, ordered by the version check alone",
				"object", e.String(), "err", err)
		}
	}
	return etag, err
}

func (b *Backend) put(ctx context.Context, cr s3backend.Credentials, e Entry, body io.Reader) (string, error) {
	if len(e.Parts) > 0 {
		at, ok := body.(io.ReaderAt)
		if !ok {
			return "", fmt.Errorf("the body of %s is not a file", e)
		}
		return b.S3.PutParts(ctx, cr, e.Bucket, e.Key, at, e.Parts, e.ContentType)
	}
	m, err := b.S3.Put(ctx, cr, e.Bucket, e.Key, body, e.Size, e.ContentType)
	return m.ETag, err
}

// Delete deletes the key.
func (b *Backend) Delete(ctx context.Context, e Entry) error {
	cr, ok := b.Credentials(e.Tenant, e.Bucket)
	if !ok {
		return fmt.Errorf("no credentials for tenant %s, bucket %s", e.Tenant, e.Bucket)
	}
	return b.S3.Delete(ctx, cr, e.Bucket, e.Key)
}

// Version is what S3 holds of e's key.
func (b *Backend) Version(ctx context.Context, e Entry) (Seen, error) {
	cr, ok := b.Credentials(e.Tenant, e.Bucket)
	if !ok {
		return Seen{}, fmt.Errorf("no credentials for tenant %s, bucket %s", e.Tenant, e.Bucket)
	}
	md, etag, err := b.S3.Metadata(ctx, cr, e.Bucket, e.Key)
	if errors.Is(err, s3backend.ErrNotFound) {
		return Seen{}, nil
	}
	if err != nil {
		return Seen{}, err
	}
	return Seen{Exists: true, Version: ParseVersion(md), ETag: etag}, nil
}
