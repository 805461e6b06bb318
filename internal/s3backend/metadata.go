package s3backend

import (
	"context"

	"github.com/aws/aws-sdk-go-v2/service/s3"
)

type metadataKey struct{}

// WithMetadata returns a context whose Put and PutParts store md as the
// object's user metadata (x-amz-meta-*): the cache marks what it persists
// with the version it held, to recognise it later (internal/writeback).
func WithMetadata(ctx context.Context, md map[string]string) context.Context {
	return context.WithValue(ctx, metadataKey{}, md)
}

func metadataOf(ctx context.Context) map[string]string {
	md, _ := ctx.Value(metadataKey{}).(map[string]string)
	return md
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
