package writeback

import (
	"context"
	"errors"
	"fmt"
	"io"
	"strconv"

	"github.com/distcache/distcache/internal/chunk"
	"github.com/distcache/distcache/internal/s3backend"
)

// ObjectStore is the S3 a Backend sends through: s3backend.Backend, or a
// node's view of it.
type ObjectStore interface {
	Put(ctx context.Context, cr s3backend.Credentials, bucket, key string, body io.Reader, size int64, contentType string) (chunk.Meta, error)
	PutParts(ctx context.Context, cr s3backend.Credentials, bucket, key string, body io.ReaderAt, parts []int64, contentType string) (string, error)
	Delete(ctx context.Context, cr s3backend.Credentials, bucket, key string) error
	Metadata(ctx context.Context, cr s3backend.Credentials, bucket, key string) (map[string]string, error)
}

// Backend is the persister's S3: an ObjectStore, with each tenant's
// credentials.
type Backend struct {
	S3 ObjectStore
	// Credentials are the tenant's for its bucket (false: none, the
	// tenant is gone: the version cannot be persisted).
	Credentials func(tenant, bucket string) (s3backend.Credentials, bool)
}

// Put uploads the version: a held multipart upload in the same parts (so S3
// gives the same ETag), any other multipart when above the backend's part
// size.
func (b Backend) Put(ctx context.Context, e Entry, body io.Reader) (string, error) {
	cr, ok := b.Credentials(e.Tenant, e.Bucket)
	if !ok {
		return "", fmt.Errorf("no credentials for tenant %s, bucket %s", e.Tenant, e.Bucket)
	}
	ctx = s3backend.WithMetadata(ctx, map[string]string{VersionMetadata: strconv.FormatUint(e.Version, 10)})
	ctx = s3backend.WithHeaders(ctx, e.Headers)
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
func (b Backend) Delete(ctx context.Context, e Entry) error {
	cr, ok := b.Credentials(e.Tenant, e.Bucket)
	if !ok {
		return fmt.Errorf("no credentials for tenant %s, bucket %s", e.Tenant, e.Bucket)
	}
	return b.S3.Delete(ctx, cr, e.Bucket, e.Key)
}

// Version is the version S3 holds of e's key.
func (b Backend) Version(ctx context.Context, e Entry) (uint64, bool, error) {
	cr, ok := b.Credentials(e.Tenant, e.Bucket)
	if !ok {
		return 0, false, fmt.Errorf("no credentials for tenant %s, bucket %s", e.Tenant, e.Bucket)
	}
	md, err := b.S3.Metadata(ctx, cr, e.Bucket, e.Key)
	if errors.Is(err, s3backend.ErrNotFound) {
		return 0, false, nil
	}
	if err != nil {
		return 0, false, err
	}
	return ParseVersion(md), true, nil
}
