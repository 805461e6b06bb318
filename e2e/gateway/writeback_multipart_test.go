package gateway_test

//lint:file-ignore SA1019 feature/s3/manager's Uploader and Downloader are what aws-sdk-go-v2 users run; its successor, transfermanager, is v0.x

import (
	"bytes"
	"context"
	"crypto/md5"
	"encoding/hex"
	"fmt"
	"slices"
	"strings"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/feature/s3/manager"
	"github.com/aws/aws-sdk-go-v2/service/s3"
	"github.com/aws/aws-sdk-go-v2/service/s3/types"

	"github.com/distcache/distcache/internal/testutil"
	"github.com/distcache/distcache/internal/testutil/s3proxy"
)

// multipartETag is the ETag S3 gives an upload of body in parts of
// partSize.
func multipartETag(body []byte, partSize int) string {
	var sums []byte
	n := 0
	for off := 0; off < len(body); off += partSize {
		s := md5.Sum(body[off:min(off+partSize, len(body))])
		sums = append(sums, s[:]...)
		n++
	}
	all := md5.Sum(sums)
	return fmt.Sprintf(`"%s-%d"`, hex.EncodeToString(all[:]), n)
}

// A multipart upload into a WriteBack prefix is acknowledged while S3
// refuses every write, read byte for byte through another gateway with the
// multipart ETag S3 will give it, listed; S3 then gets it in the same parts
// (the same ETag) and byte-exact. S3's rules for parts hold: a part under
// 5 MiB but the last is refused at completion, a part named with another
// ETag is refused, an aborted upload is gone.
func TestWriteBackMultipartUpload(t *testing.T) {
	writer := newEnv(t, envOptions{tenants: heldTenants})
	reader := gatewayOn(t, writer.cluster, envOptions{})
	r := testutil.NewRand(74)
	ctx := context.Background()
	writer.cluster.Proxy.Inject(s3proxy.Rule{Method: "PUT", Fault: s3proxy.InternalError},
		s3proxy.Rule{Method: "POST", Fault: s3proxy.InternalError}, s3proxy.Rule{Method: "DELETE", Fault: s3proxy.InternalError})

	const partSize = 5 << 20
	body := testutil.RandomBytes(r, 2*partSize+12345)
	up := manager.NewUploader(writer.s3, func(u *manager.Uploader) { u.PartSize = partSize; u.Concurrency = 2 })
	out, err := up.Upload(ctx, &s3.PutObjectInput{Bucket: aws.String("bucket-a"), Key: aws.String("wb/big"), Body: bytes.NewReader(body),
		ContentType: aws.String("application/x-test")})
	testutil.Must(t, err)
	etag := multipartETag(body, partSize)
	if aws.ToString(out.ETag) != etag {
		t.Fatalf("upload ETag %s, want %s as S3 gives it", aws.ToString(out.ETag), etag)
	}
	if inMinIO(t, writer, "wb/big") != nil {
		t.Fatal("the upload reached MinIO while it refused writes")
	}
	got, resp, err := reader.get("bucket-a", "wb/big", "")
	testutil.Must(t, err)
	if !bytes.Equal(got, body) || aws.ToString(resp.ETag) != etag || aws.ToString(resp.ContentType) != "application/x-test" {
		t.Fatalf("read through another gateway: %d bytes (equal %v), ETag %s, type %s", len(got), bytes.Equal(got, body),
			aws.ToString(resp.ETag), aws.ToString(resp.ContentType))
	}
	if got := reader.mustGet("bucket-a", "wb/big", fmt.Sprintf("bytes=%d-%d", partSize-10, partSize+10)); !bytes.Equal(got, body[partSize-10:partSize+11]) {
		t.Fatal("a range across parts gave other bytes")
	}
	if l := listAll(t, reader.s3, "bucket-a", listing{prefix: "wb/", pageSize: 1000}); len(l) != 1 || l[0] != fmt.Sprintf("wb/big %d %s", len(body), etag) {
		t.Fatalf("listed as %v", l)
	}

	// S3's rules for parts.
	start := func(key string) *string {
		created, err := writer.s3.CreateMultipartUpload(ctx, &s3.CreateMultipartUploadInput{Bucket: aws.String("bucket-a"), Key: aws.String(key)})
		testutil.Must(t, err)
		return created.UploadId
	}
	part := func(key string, id *string, n int32, b []byte) types.CompletedPart {
		out, err := writer.s3.UploadPart(ctx, &s3.UploadPartInput{Bucket: aws.String("bucket-a"), Key: aws.String(key), UploadId: id,
			PartNumber: aws.Int32(n), Body: bytes.NewReader(b)})
		testutil.Must(t, err)
		return types.CompletedPart{PartNumber: aws.Int32(n), ETag: out.ETag}
	}
	complete := func(key string, id *string, parts ...types.CompletedPart) error {
		_, err := writer.s3.CompleteMultipartUpload(ctx, &s3.CompleteMultipartUploadInput{Bucket: aws.String("bucket-a"), Key: aws.String(key),
			UploadId: id, MultipartUpload: &types.CompletedMultipartUpload{Parts: parts}})
		return err
	}
	id := start("wb/small-parts")
	p1, p2 := part("wb/small-parts", id, 1, []byte("too small")), part("wb/small-parts", id, 2, []byte("last"))
	if err := complete("wb/small-parts", id, p1, p2); apiCode(err) != "EntityTooSmall" {
		t.Fatalf("a small first part: %v, want EntityTooSmall", err)
	}
	p2.ETag = aws.String(`"00000000000000000000000000000000"`)
	if err := complete("wb/small-parts", id, types.CompletedPart{PartNumber: aws.Int32(2), ETag: p2.ETag}); apiCode(err) != "InvalidPart" {
		t.Fatalf("a part of another ETag: %v, want InvalidPart", err)
	}
	// The last part alone may be small; a part uploaded again replaces the
	// first upload of it.
	part("wb/small-parts", id, 2, []byte("first"))
	last := part("wb/small-parts", id, 2, []byte("second"))
	listed, err := reader.s3.ListParts(ctx, &s3.ListPartsInput{Bucket: aws.String("bucket-a"), Key: aws.String("wb/small-parts"), UploadId: id})
	testutil.Must(t, err)
	if len(listed.Parts) != 2 || aws.ToString(listed.Parts[1].ETag) != aws.ToString(last.ETag) || aws.ToInt64(listed.Parts[0].Size) != 9 {
		t.Fatalf("ListParts through another gateway: %+v", listed.Parts)
	}
	testutil.Must(t, complete("wb/small-parts", id, last))
	if got := reader.mustGet("bucket-a", "wb/small-parts", ""); string(got) != "second" {
		t.Fatalf("completed from the part uploaded last: %q", got)
	}
	aborted := start("wb/aborted")
	part("wb/aborted", aborted, 1, []byte("gone"))
	_, err = writer.s3.AbortMultipartUpload(ctx, &s3.AbortMultipartUploadInput{Bucket: aws.String("bucket-a"), Key: aws.String("wb/aborted"), UploadId: aborted})
	testutil.Must(t, err)
	if err := complete("wb/aborted", aborted, types.CompletedPart{PartNumber: aws.Int32(1), ETag: aws.String(s3ETag([]byte("gone")))}); apiCode(err) != "NoSuchUpload" {
		t.Fatalf("completing an aborted upload: %v, want NoSuchUpload", err)
	}
	if _, _, err := reader.get("bucket-a", "wb/aborted", ""); !isNoSuchKey(err) {
		t.Fatalf("an aborted upload is readable: %v", err)
	}

	writer.cluster.Proxy.ClearFaults()
	testutil.WaitFor(t, "MinIO holds the upload", func() bool { return bytes.Equal(inMinIO(t, writer, "wb/big"), body) })
	head, err := writer.cluster.Direct.HeadObject(ctx, &s3.HeadObjectInput{Bucket: aws.String("bucket-a"), Key: aws.String("wb/big")})
	testutil.Must(t, err)
	if aws.ToString(head.ETag) != etag || !strings.HasPrefix(aws.ToString(head.ContentType), "application/x-test") {
		t.Fatalf("MinIO's ETag %s (want %s, the one acknowledged), type %s", aws.ToString(head.ETag), etag, aws.ToString(head.ContentType))
	}
	testutil.WaitFor(t, "MinIO holds the small-parts upload", func() bool { return string(inMinIO(t, writer, "wb/small-parts")) == "second" })
	if got, resp, err := reader.get("bucket-a", "wb/big", ""); err != nil || !bytes.Equal(got, body) || aws.ToString(resp.ETag) != etag {
		t.Fatalf("after persistence: %d bytes, ETag %s, %v", len(got), aws.ToString(resp.ETag), err)
	}
}

// ListMultipartUploads through the cache shows the uploads into held keys
// (the cache's own, S3 never has them) beside S3's, in key order, page by
// page, each once (MinIO itself ignores max-uploads and the markers: the
// node pages its answer too); an aborted held upload is gone from it.
func TestListMultipartUploadsShowsHeldUploads(t *testing.T) {
	e := newEnv(t, envOptions{tenants: heldTenants})
	other := gatewayOn(t, e.cluster, envOptions{})
	ctx := context.Background()
	create := func(key string) string {
		t.Helper()
		out, err := e.s3.CreateMultipartUpload(ctx, &s3.CreateMultipartUploadInput{Bucket: aws.String("bucket-a"), Key: aws.String(key)})
		testutil.Must(t, err)
		return aws.ToString(out.UploadId)
	}
	ids := map[string]string{} // key -> upload id
	for _, key := range []string{"plain/u1", "wb/u2", "wb/u3", "plain/u4", "wb/dir/u5"} {
		ids[key] = create(key)
	}
	// list pages through with max-uploads per page, through the other gateway.
	list := func(prefix, delimiter string, max int32) (keys, prefixes []string) {
		t.Helper()
		in := &s3.ListMultipartUploadsInput{Bucket: aws.String("bucket-a"), MaxUploads: aws.Int32(max)}
		if prefix != "" {
			in.Prefix = aws.String(prefix)
		}
		if delimiter != "" {
			in.Delimiter = aws.String(delimiter)
		}
		for range 20 {
			out, err := other.s3.ListMultipartUploads(ctx, in)
			testutil.Must(t, err)
			for _, u := range out.Uploads {
				if ids[aws.ToString(u.Key)] != aws.ToString(u.UploadId) {
					t.Errorf("listed %s with upload %s, created as %s", aws.ToString(u.Key), aws.ToString(u.UploadId), ids[aws.ToString(u.Key)])
				}
				keys = append(keys, aws.ToString(u.Key))
			}
			for _, cp := range out.CommonPrefixes {
				prefixes = append(prefixes, aws.ToString(cp.Prefix))
			}
			if !aws.ToBool(out.IsTruncated) {
				return keys, prefixes
			}
			in.KeyMarker, in.UploadIdMarker = out.NextKeyMarker, out.NextUploadIdMarker
		}
		t.Fatal("the listing did not end after 20 pages")
		return nil, nil
	}
	want := []string{"plain/u1", "plain/u4", "wb/dir/u5", "wb/u2", "wb/u3"}
	for _, max := range []int32{1000, 2, 1} {
		if keys, _ := list("", "", max); !slices.Equal(keys, want) {
			t.Errorf("max-uploads %d: listed %v, want %v", max, keys, want)
		}
	}
	if keys, prefixes := list("wb/", "/", 1000); !slices.Equal(keys, []string{"wb/u2", "wb/u3"}) || !slices.Equal(prefixes, []string{"wb/dir/"}) {
		t.Errorf("wb/ with delimiter /: uploads %v, prefixes %v", keys, prefixes)
	}

	_, err := e.s3.AbortMultipartUpload(ctx, &s3.AbortMultipartUploadInput{Bucket: aws.String("bucket-a"), Key: aws.String("wb/u2"), UploadId: aws.String(ids["wb/u2"])})
	testutil.Must(t, err)
	if keys, _ := list("wb/", "", 1000); !slices.Equal(keys, []string{"wb/dir/u5", "wb/u3"}) {
		t.Errorf("after aborting wb/u2: %v", keys)
	}
}
