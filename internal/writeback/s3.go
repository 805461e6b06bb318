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
// credentials. Its uploads and deletes are conditional (s3backend.WriteIf)
// until S3 answers one of them NotImplemented; from then on those are
// plain, as before conditional writes, and only the version check orders
// them. Uploads and deletes learn this apart: S3 gained conditional
// deletes years after conditional writes.
type Backend struct {
	S3 ObjectStore
	// Credentials are the tenant's for its bucket (false: none, the
	// tenant is gone: the version cannot be persisted).
	Credentials func(tenant, bucket string) (s3backend.Credentials, bool)
	Log         *slog.Logger // told once when S3 turns out to have no conditional writes (nil: not told)
	// PutIfAbsent says S3 honours If-None-Match: * on PUT (AWS S3 does,
	// MinIO since 2024): a version of at most PutIfAbsentMax bytes goes up
	// without a look first, on the condition that S3 holds nothing of its
	// key (one request instead of two for a new key, the common case);
	// one S3 holds fails with 412 and is looked at as any other. An S3 that
	// ignored the condition would let a stale copy replace a newer
	// version: leave it off for those.
	PutIfAbsent bool

	plainPuts, plainDeletes atomic.Bool // S3 answered a conditional one NotImplemented
}

// PutIfAbsentMax is the largest version PutIfAbsent sends without a look:
// a larger one that S3 holds would cost its whole body for the 412.
const PutIfAbsentMax = 1 << 20

// putsUnlooked reports whether e may go up without a look first.
func (b *Backend) putsUnlooked(e Entry) bool {
	return b.PutIfAbsent && !b.plainPuts.Load() && e.Op == OpPut && len(e.Parts) == 0 && e.Size <= PutIfAbsentMax
}

// conditional sends what do sends on the condition of seen (nil: none,
// always sent) unless plain says S3 does not take such conditions, and
// learns that from a NotImplemented answer.
func (b *Backend) conditional(ctx context.Context, e Entry, op Op, plain *atomic.Bool, condition *string,
	do func(ctx context.Context) error) error {
	on := condition != nil && !plain.Load()
	if on {
		ctx = s3backend.WriteIf(ctx, *condition)
	}
	err := do(ctx)
	switch {
	case on && (errors.Is(err, s3backend.ErrPreconditionFailed) || errors.Is(err, s3backend.ErrNotFound)):
		// S3 answers If-Match on an object gone since with 404 NoSuchKey.
		return fmt.Errorf("%w: %w", ErrChanged, err)
	case on && s3backend.NotImplemented(err):
		if !plain.Swap(true) && b.Log != nil {
			b.Log.Warn("write-back: S3 answered a conditional request NotImplemented; sending these plain from now on, ordered by the version check alone",
				"op", op, "object", e.String(), "err", err)
		}
	}
	return err
}

// Put uploads the version, only if S3 still holds seen (ErrChanged
// otherwise): a held multipart upload in the same parts (so S3 gives the
// same ETag), any other multipart when above the backend's part size.
func (b *Backend) Put(ctx context.Context, e Entry, body io.Reader, seen Seen) (etag string, err error) {
	cr, ok := b.Credentials(e.Tenant, e.Bucket)
	if !ok {
		return "", fmt.Errorf("no credentials for tenant %s, bucket %s", e.Tenant, e.Bucket)
	}
	if !seen.Looked && b.plainPuts.Load() {
		return "", ErrChanged // never a plain PUT without a look: look first
	}
	ctx = s3backend.WithMetadata(ctx, map[string]string{VersionMetadata: strconv.FormatUint(e.Version, 10)})
	ctx = s3backend.WithHeaders(ctx, e.Headers)
	// seen.ETag is "" when S3 had nothing (or nothing was looked at):
	// If-None-Match: *.
	err = b.conditional(ctx, e, OpPut, &b.plainPuts, &seen.ETag, func(ctx context.Context) (err error) {
		etag, err = b.put(ctx, cr, e, body)
		return err
	})
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

// Delete deletes the key: only the object seen (ErrChanged otherwise) when
// S3 held one (the persister sends no delete when it held none),
// unconditionally when seen is the zero Seen.
func (b *Backend) Delete(ctx context.Context, e Entry, seen Seen) error {
	cr, ok := b.Credentials(e.Tenant, e.Bucket)
	if !ok {
		return fmt.Errorf("no credentials for tenant %s, bucket %s", e.Tenant, e.Bucket)
	}
	var condition *string
	if seen.Exists {
		condition = &seen.ETag
	}
	return b.conditional(ctx, e, OpDelete, &b.plainDeletes, condition, func(ctx context.Context) error {
		return b.S3.Delete(ctx, cr, e.Bucket, e.Key)
	})
}

// Version is what S3 holds of e's key.
func (b *Backend) Version(ctx context.Context, e Entry) (Seen, error) {
	cr, ok := b.Credentials(e.Tenant, e.Bucket)
	if !ok {
		return Seen{}, fmt.Errorf("no credentials for tenant %s, bucket %s", e.Tenant, e.Bucket)
	}
	md, etag, err := b.S3.Metadata(ctx, cr, e.Bucket, e.Key)
	if errors.Is(err, s3backend.ErrNotFound) {
		return Seen{Looked: true}, nil
	}
	if err != nil {
		return Seen{}, err
	}
	return Seen{Looked: true, Exists: true, Version: ParseVersion(md), ETag: etag}, nil
}
