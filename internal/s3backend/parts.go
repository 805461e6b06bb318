package s3backend

import (
	"context"
	"io"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/s3"
	"github.com/aws/aws-sdk-go-v2/service/s3/types"
)

// PutParts uploads body (an io.ReaderAt of the parts' total size) as a
// multipart upload in exactly the parts given (their sizes, in order), so
// S3 gives the multipart ETag of those parts; it returns that ETag. The
// upload is aborted when a part fails. Each part is sent from its section
// of body, so a retried part is sent again without being held in memory.
func (b *Backend) PutParts(ctx context.Context, cr Credentials, bucket, key string, body io.ReaderAt, parts []int64, contentType string) (string, error) {
	var etag string
	err := b.do(ctx, OpPut, bucket, key, func(ctx context.Context) error {
		c := b.Client(cr)
		in := &s3.CreateMultipartUploadInput{Bucket: &bucket, Key: &key, Metadata: metadataOf(ctx)}
		objectHeadersOf(ctx).createMultipartUpload(in)
		if contentType != "" {
			in.ContentType = &contentType
		}
		created, err := c.CreateMultipartUpload(ctx, in)
		if err != nil {
			return err
		}
		completed := make([]types.CompletedPart, len(parts))
		var off int64
		for i, n := range parts {
			num := int32(i + 1)
			out, err := c.UploadPart(ctx, &s3.UploadPartInput{Bucket: &bucket, Key: &key, UploadId: created.UploadId,
				PartNumber: &num, ContentLength: &n, Body: io.NewSectionReader(body, off, n)})
			if err != nil {
				b.abort(c, bucket, key, created.UploadId)
				return err
			}
			completed[i] = types.CompletedPart{PartNumber: &num, ETag: out.ETag}
			off += n
		}
		complete := &s3.CompleteMultipartUploadInput{Bucket: &bucket, Key: &key,
			UploadId: created.UploadId, MultipartUpload: &types.CompletedMultipartUpload{Parts: completed}}
		complete.IfMatch, complete.IfNoneMatch = writeCondition(ctx)
		done, err := c.CompleteMultipartUpload(ctx, complete)
		if err != nil {
			b.abort(c, bucket, key, created.UploadId)
			return err
		}
		etag = aws.ToString(done.ETag)
		return nil
	})
	return etag, err
}

// abort ends a failed upload so its parts do not stay in S3 (best effort:
// a bucket lifecycle rule cleans up what a dead node leaves).
func (b *Backend) abort(c *s3.Client, bucket, key string, id *string) {
	ctx, cancel := context.WithTimeout(context.Background(), b.cfg.RequestTimeout)
	defer cancel()
	_, _ = c.AbortMultipartUpload(ctx, &s3.AbortMultipartUploadInput{Bucket: &bucket, Key: &key, UploadId: id})
}
