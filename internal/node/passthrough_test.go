package node_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"net/http"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/credentials"
	"github.com/aws/aws-sdk-go-v2/service/s3"
	"github.com/aws/aws-sdk-go-v2/service/s3/types"
	"github.com/distcache/distcache/internal/testutil"
)

// viaNode is a real S3 SDK client whose requests reach S3 through the node's
// pass-through (/v1/s3/...) with a tenant certificate. Its own signature is
// dropped by the node, which signs again with the tenant's credentials.
func (h *harness) viaNode(id string) *s3.Client {
	return s3.New(s3.Options{
		Region: h.minio.Region, BaseEndpoint: aws.String("https://" + h.addr + "/v1/s3"), UsePathStyle: true,
		Credentials: credentials.NewStaticCredentialsProvider("unused", "unused", ""),
		HTTPClient:  h.client(tenant(id)),
	})
}

func TestPassthroughOperationsAndInvalidation(t *testing.T) {
	h := newHarness(t, options{immutable: true})
	ctx := context.Background()
	a := h.client(tenant("team-a"))
	s3a := h.viaNode("team-a")
	r := rand.New(rand.NewPCG(41, 42))

	// Listing with prefix, delimiter and continuation.
	for i := 0; i < 7; i++ {
		h.putDirect("bucket-a", fmt.Sprintf("logs/2026/%02d.bin", i), []byte{byte(i)})
	}
	h.putDirect("bucket-a", "logs/readme", []byte("x"))
	var keys []string
	p := s3.NewListObjectsV2Paginator(s3a, &s3.ListObjectsV2Input{Bucket: aws.String("bucket-a"), Prefix: aws.String("logs/2026/"), MaxKeys: aws.Int32(3)})
	for p.HasMorePages() {
		page, err := p.NextPage(ctx)
		testutil.Must(t, err)
		for _, o := range page.Contents {
			keys = append(keys, aws.ToString(o.Key))
		}
	}
	if len(keys) != 7 {
		t.Fatalf("listed %d keys through the node, want 7: %v", len(keys), keys)
	}
	dl, err := s3a.ListObjectsV2(ctx, &s3.ListObjectsV2Input{Bucket: aws.String("bucket-a"), Prefix: aws.String("logs/"), Delimiter: aws.String("/")})
	testutil.Must(t, err)
	if len(dl.CommonPrefixes) != 1 || len(dl.Contents) != 1 {
		t.Fatalf("delimiter listing: %d prefixes, %d objects; want 1 and 1", len(dl.CommonPrefixes), len(dl.Contents))
	}

	// CopyObject over a cached object invalidates it.
	v1, v2 := testutil.RandomBytes(r, 2*testChunk), testutil.RandomBytes(r, testChunk+3)
	h.putDirect("bucket-a", "dst", v1)
	h.putDirect("bucket-a", "src", v2)
	if got := h.get(a, "bucket-a", "dst", "", nil); !bytes.Equal(got.body, v1) {
		t.Fatal("first read of dst differs")
	}
	_, err = s3a.CopyObject(ctx, &s3.CopyObjectInput{Bucket: aws.String("bucket-a"), Key: aws.String("dst"), CopySource: aws.String("bucket-a/src")})
	testutil.Must(t, err)
	if got := h.get(a, "bucket-a", "dst", "", nil); !bytes.Equal(got.body, v2) {
		t.Fatal("read after CopyObject through the node returned the old version")
	}

	// A multipart upload with an uploaded part and a copied part, completed
	// over a cached key.
	part1 := testutil.RandomBytes(r, 5<<20)
	mp, err := s3a.CreateMultipartUpload(ctx, &s3.CreateMultipartUploadInput{Bucket: aws.String("bucket-a"), Key: aws.String("dst")})
	testutil.Must(t, err)
	up1, err := s3a.UploadPart(ctx, &s3.UploadPartInput{Bucket: aws.String("bucket-a"), Key: aws.String("dst"), UploadId: mp.UploadId,
		PartNumber: aws.Int32(1), Body: bytes.NewReader(part1)})
	testutil.Must(t, err)
	up2, err := s3a.UploadPartCopy(ctx, &s3.UploadPartCopyInput{Bucket: aws.String("bucket-a"), Key: aws.String("dst"), UploadId: mp.UploadId,
		PartNumber: aws.Int32(2), CopySource: aws.String("bucket-a/src")})
	testutil.Must(t, err)
	_, err = s3a.CompleteMultipartUpload(ctx, &s3.CompleteMultipartUploadInput{Bucket: aws.String("bucket-a"), Key: aws.String("dst"), UploadId: mp.UploadId,
		MultipartUpload: &types.CompletedMultipartUpload{Parts: []types.CompletedPart{
			{PartNumber: aws.Int32(1), ETag: up1.ETag}, {PartNumber: aws.Int32(2), ETag: up2.CopyPartResult.ETag}}}})
	testutil.Must(t, err)
	want := append(append([]byte{}, part1...), v2...)
	if got := h.get(a, "bucket-a", "dst", "", nil); !bytes.Equal(got.body, want) {
		t.Fatalf("read after CompleteMultipartUpload: %d bytes, want the %d-byte new object", len(got.body), len(want))
	}
	aborted, err := s3a.CreateMultipartUpload(ctx, &s3.CreateMultipartUploadInput{Bucket: aws.String("bucket-a"), Key: aws.String("gone")})
	testutil.Must(t, err)
	_, err = s3a.AbortMultipartUpload(ctx, &s3.AbortMultipartUploadInput{Bucket: aws.String("bucket-a"), Key: aws.String("gone"), UploadId: aborted.UploadId})
	testutil.Must(t, err)

	// DeleteObjects of cached keys invalidates them.
	h.get(a, "bucket-a", "src", "", nil)
	_, err = s3a.DeleteObjects(ctx, &s3.DeleteObjectsInput{Bucket: aws.String("bucket-a"), Delete: &types.Delete{
		Objects: []types.ObjectIdentifier{{Key: aws.String("src")}, {Key: aws.String("dst")}}}})
	testutil.Must(t, err)
	for _, k := range []string{"src", "dst"} {
		if got := h.get(a, "bucket-a", k, "", nil); got.status != http.StatusNotFound {
			t.Fatalf("%s after DeleteObjects: %d, want 404", k, got.status)
		}
	}

	// Tenant checks: another tenant's bucket, and another tenant's bucket as
	// a copy source, are refused before S3 is asked.
	h.proxy.Reset()
	_, err = s3a.ListObjectsV2(ctx, &s3.ListObjectsV2Input{Bucket: aws.String("bucket-b")})
	if !isHTTPStatus(err, http.StatusForbidden) {
		t.Fatalf("listing team-b's bucket: %v, want 403", err)
	}
	_, err = s3a.CopyObject(ctx, &s3.CopyObjectInput{Bucket: aws.String("bucket-a"), Key: aws.String("stolen"), CopySource: aws.String("bucket-b/secret")})
	if !isHTTPStatus(err, http.StatusForbidden) {
		t.Fatalf("copying from team-b's bucket: %v, want 403", err)
	}
	if n := h.proxy.Count("", "/"); n != 0 {
		t.Fatalf("refused pass-through requests reached S3 %d times", n)
	}
}

func isHTTPStatus(err error, status int) bool {
	var re interface{ HTTPStatusCode() int }
	return errors.As(err, &re) && re.HTTPStatusCode() == status
}
