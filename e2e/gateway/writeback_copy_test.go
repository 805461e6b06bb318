package gateway_test

import (
	"bytes"
	"context"
	"crypto/md5"
	"fmt"
	"strings"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/s3"
	"github.com/aws/aws-sdk-go-v2/service/s3/types"

	"github.com/distcache/distcache/internal/testutil"
	"github.com/distcache/distcache/internal/testutil/s3proxy"
)

// Copies involving a WriteBack key, while S3 refuses every write under
// wb/: CopyObject from S3 into a held key, from a held key into another
// (its Content-Type kept or replaced), and UploadPartCopy of ranges of both
// into a held upload are acknowledged without S3 and read back through
// another gateway; a copy from a held key into an ordinary key reaches
// MinIO at once with the held bytes S3 does not have yet (S3 would copy
// nothing, or an older version). S3's copy rules hold: source conditions,
// a copy onto itself that changes nothing, a missing source; what a held
// version cannot keep (user metadata) is refused, not dropped. Once S3
// takes writes again, MinIO holds every copy byte-exact.
func TestWriteBackCopyObject(t *testing.T) {
	writer := newEnv(t, envOptions{tenants: heldTenants})
	reader := gatewayOn(t, writer.cluster, envOptions{})
	r := testutil.NewRand(77)
	ctx := context.Background()
	const mib = 1 << 20

	inS3 := testutil.RandomBytes(r, 6*mib+321) // several chunks, one 5 MiB part
	inS3ETag := writer.cluster.PutDirect("bucket-a", "plain/src", inS3)
	writer.cluster.Proxy.Inject(s3proxy.Rule{Method: "PUT", PathPrefix: "/bucket-a/wb/", Fault: s3proxy.InternalError},
		s3proxy.Rule{Method: "POST", PathPrefix: "/bucket-a/wb/", Fault: s3proxy.InternalError},
		s3proxy.Rule{Method: "DELETE", PathPrefix: "/bucket-a/wb/", Fault: s3proxy.InternalError})
	held := testutil.RandomBytes(r, 700<<10+17)
	_, err := writer.s3.PutObject(ctx, &s3.PutObjectInput{Bucket: aws.String("bucket-a"), Key: aws.String("wb/src"),
		Body: bytes.NewReader(held), ContentType: aws.String("application/x-held")})
	testutil.Must(t, err)

	copyObject := func(src, dst string, edit func(*s3.CopyObjectInput)) (*s3.CopyObjectOutput, error) {
		in := &s3.CopyObjectInput{Bucket: aws.String("bucket-a"), Key: aws.String(dst), CopySource: aws.String("bucket-a/" + src)}
		if edit != nil {
			edit(in)
		}
		return writer.s3.CopyObject(ctx, in)
	}
	checkRead := func(key string, want []byte, contentType string) {
		t.Helper()
		got, resp, err := reader.get("bucket-a", key, "")
		testutil.Must(t, err)
		if !bytes.Equal(got, want) || aws.ToString(resp.ContentType) != contentType {
			t.Fatalf("%s through another gateway: %d bytes (equal %v), type %q; want %d bytes, type %q",
				key, len(got), bytes.Equal(got, want), aws.ToString(resp.ContentType), len(want), contentType)
		}
	}

	// From S3 into a held key, and from a held key into another.
	out, err := copyObject("plain/src", "wb/from-s3", nil)
	testutil.Must(t, err)
	if etag := aws.ToString(out.CopyObjectResult.ETag); etag != inS3ETag {
		t.Fatalf("copy's ETag %s, want the source's %s", etag, inS3ETag)
	}
	checkRead("wb/from-s3", inS3, "application/octet-stream") // MinIO's type for the source
	out, err = copyObject("wb/src", "wb/from-held", nil)
	testutil.Must(t, err)
	if etag := aws.ToString(out.CopyObjectResult.ETag); etag != s3ETag(held) {
		t.Fatalf("copy's ETag %s, want %s", etag, s3ETag(held))
	}
	checkRead("wb/from-held", held, "application/x-held")
	_, err = copyObject("wb/src", "wb/replaced", func(in *s3.CopyObjectInput) {
		in.MetadataDirective, in.ContentType = types.MetadataDirectiveReplace, aws.String("text/x-replaced")
	})
	testutil.Must(t, err)
	checkRead("wb/replaced", held, "text/x-replaced")
	for _, key := range []string{"wb/from-s3", "wb/from-held", "wb/replaced"} {
		if inMinIO(t, writer, key) != nil {
			t.Fatalf("%s reached MinIO while it refused writes under wb/", key)
		}
	}

	// User metadata: the request's with REPLACE, the source's with COPY
	// (without the cache's version mark of the source), into a held key and
	// from one into S3.
	_, err = copyObject("wb/src", "wb/with-meta", func(in *s3.CopyObjectInput) {
		in.MetadataDirective, in.Metadata, in.CacheControl = types.MetadataDirectiveReplace, map[string]string{"owner": "me"}, aws.String("no-cache")
	})
	testutil.Must(t, err)
	_, err = copyObject("wb/with-meta", "wb/meta-copied", nil)
	testutil.Must(t, err)
	for _, key := range []string{"wb/with-meta", "wb/meta-copied"} {
		h, err := reader.s3.HeadObject(ctx, &s3.HeadObjectInput{Bucket: aws.String("bucket-a"), Key: aws.String(key)})
		testutil.Must(t, err)
		if h.Metadata["owner"] != "me" || h.Metadata["distcache-version"] == "" || aws.ToString(h.CacheControl) != "no-cache" {
			t.Errorf("%s: metadata %v, Cache-Control %q; want owner=me, the cache's version, no-cache", key, h.Metadata, aws.ToString(h.CacheControl))
		}
	}
	_, err = copyObject("wb/with-meta", "plain/meta-from-held", nil)
	testutil.Must(t, err)
	h, err := writer.cluster.Direct.HeadObject(ctx, &s3.HeadObjectInput{Bucket: aws.String("bucket-a"), Key: aws.String("plain/meta-from-held")})
	testutil.Must(t, err)
	if fmt.Sprint(h.Metadata) != "map[owner:me]" || aws.ToString(h.CacheControl) != "no-cache" {
		t.Errorf("S3 holds plain/meta-from-held with metadata %v, Cache-Control %q; want owner=me, no-cache", h.Metadata, aws.ToString(h.CacheControl))
	}

	// From a held key into an ordinary one: S3 gets the held bytes.
	_, err = copyObject("wb/src", "plain/from-held", nil)
	testutil.Must(t, err)
	if got := inMinIO(t, writer, "plain/from-held"); !bytes.Equal(got, held) {
		t.Fatalf("MinIO holds %d bytes at plain/from-held right after the copy, want the held %d", len(got), len(held))
	}
	if inMinIO(t, writer, "wb/src") != nil {
		t.Fatal("the held source reached MinIO")
	}
	checkRead("plain/from-held", held, "application/x-held")
	// With a storage class: the copy's own, as S3 takes it.
	_, err = copyObject("wb/src", "plain/from-held-rrs", func(in *s3.CopyObjectInput) { in.StorageClass = types.StorageClassReducedRedundancy })
	testutil.Must(t, err)
	for _, c := range []*s3.Client{writer.cluster.Direct, reader.s3} {
		h, err := c.HeadObject(ctx, &s3.HeadObjectInput{Bucket: aws.String("bucket-a"), Key: aws.String("plain/from-held-rrs")})
		testutil.Must(t, err)
		if h.StorageClass != types.StorageClassReducedRedundancy {
			t.Errorf("plain/from-held-rrs: storage class %q (MinIO, then the gateway), want REDUCED_REDUNDANCY", h.StorageClass)
		}
	}

	// S3's rules.
	refusals := []struct {
		name, src, dst, code string
		edit                 func(*s3.CopyObjectInput)
	}{
		{"if-match of another ETag", "wb/src", "wb/x", "PreconditionFailed", func(in *s3.CopyObjectInput) { in.CopySourceIfMatch = aws.String(`"0"`) }},
		{"if-none-match of its ETag", "wb/src", "wb/x", "PreconditionFailed", func(in *s3.CopyObjectInput) { in.CopySourceIfNoneMatch = aws.String(s3ETag(held)) }},
		{"onto itself, nothing changed", "wb/src", "wb/src", "InvalidRequest", nil},
		{"missing source", "wb/none", "wb/x", "NoSuchKey", nil},
		{"storage class", "plain/src", "wb/x", "NotImplemented", func(in *s3.CopyObjectInput) { in.StorageClass = types.StorageClassReducedRedundancy }},
		{"tagging", "plain/src", "wb/x", "NotImplemented", func(in *s3.CopyObjectInput) {
			in.MetadataDirective, in.Tagging = types.MetadataDirectiveReplace, aws.String("team=a")
		}},
	}
	for _, tt := range refusals {
		if _, err := copyObject(tt.src, tt.dst, tt.edit); apiCode(err) != tt.code {
			t.Errorf("%s: %v, want %s", tt.name, err, tt.code)
		}
	}
	if _, _, err := reader.get("bucket-a", "wb/x", ""); !isNoSuchKey(err) {
		t.Fatalf("a refused copy left wb/x: %v", err)
	}
	if _, err := copyObject("wb/src", "wb/x", func(in *s3.CopyObjectInput) { in.CopySourceIfMatch = aws.String(s3ETag(held)) }); err != nil {
		t.Fatalf("if-match of its ETag: %v", err)
	}

	// UploadPartCopy into a held upload: a 5 MiB range of the S3 object,
	// then the whole held one.
	created, err := writer.s3.CreateMultipartUpload(ctx, &s3.CreateMultipartUploadInput{Bucket: aws.String("bucket-a"), Key: aws.String("wb/parts")})
	testutil.Must(t, err)
	partCopy := func(key string, id *string, n int32, src, rng string) types.CompletedPart {
		t.Helper()
		in := &s3.UploadPartCopyInput{Bucket: aws.String("bucket-a"), Key: aws.String(key), UploadId: id, PartNumber: aws.Int32(n),
			CopySource: aws.String("bucket-a/" + src)}
		if rng != "" {
			in.CopySourceRange = aws.String(rng)
		}
		out, err := writer.s3.UploadPartCopy(ctx, in)
		testutil.Must(t, err)
		return types.CompletedPart{PartNumber: aws.Int32(n), ETag: out.CopyPartResult.ETag}
	}
	p1 := partCopy("wb/parts", created.UploadId, 1, "plain/src", fmt.Sprintf("bytes=%d-%d", mib, 6*mib-1))
	p2 := partCopy("wb/parts", created.UploadId, 2, "wb/src", "")
	if _, err := writer.s3.UploadPartCopy(ctx, &s3.UploadPartCopyInput{Bucket: aws.String("bucket-a"), Key: aws.String("wb/parts"),
		UploadId: created.UploadId, PartNumber: aws.Int32(3), CopySource: aws.String("bucket-a/wb/src"),
		CopySourceRange: aws.String(fmt.Sprintf("bytes=0-%d", len(held)))}); apiCode(err) != "InvalidArgument" {
		t.Fatalf("a range past the source's end: %v, want InvalidArgument", err)
	}
	completed, err := writer.s3.CompleteMultipartUpload(ctx, &s3.CompleteMultipartUploadInput{Bucket: aws.String("bucket-a"), Key: aws.String("wb/parts"),
		UploadId: created.UploadId, MultipartUpload: &types.CompletedMultipartUpload{Parts: []types.CompletedPart{p1, p2}}})
	testutil.Must(t, err)
	parts := append(append([]byte{}, inS3[mib:6*mib]...), held...)
	if etag := aws.ToString(completed.ETag); etag != multipartETag(parts, 5*mib) {
		t.Fatalf("completed upload's ETag %s, want %s", etag, multipartETag(parts, 5*mib))
	}
	checkRead("wb/parts", parts, "binary/octet-stream")

	// UploadPartCopy of a held key into an upload S3 keeps.
	created, err = writer.s3.CreateMultipartUpload(ctx, &s3.CreateMultipartUploadInput{Bucket: aws.String("bucket-a"), Key: aws.String("plain/parts")})
	testutil.Must(t, err)
	only := partCopy("plain/parts", created.UploadId, 1, "wb/src", "bytes=100-999")
	if want := fmt.Sprintf(`"%x"`, md5.Sum(held[100:1000])); aws.ToString(only.ETag) != want {
		t.Fatalf("part ETag %s, want %s", aws.ToString(only.ETag), want)
	}
	_, err = writer.s3.CompleteMultipartUpload(ctx, &s3.CompleteMultipartUploadInput{Bucket: aws.String("bucket-a"), Key: aws.String("plain/parts"),
		UploadId: created.UploadId, MultipartUpload: &types.CompletedMultipartUpload{Parts: []types.CompletedPart{only}}})
	testutil.Must(t, err)
	if got := inMinIO(t, writer, "plain/parts"); !bytes.Equal(got, held[100:1000]) {
		t.Fatalf("MinIO holds %d bytes at plain/parts, want %d held ones", len(got), 900)
	}

	writer.cluster.Proxy.ClearFaults()
	want := map[string][]byte{"wb/from-s3": inS3, "wb/from-held": held, "wb/replaced": held, "wb/x": held, "wb/parts": parts, "wb/src": held}
	waitInMinIO(t, writer, want)
	head, err := writer.cluster.Direct.HeadObject(ctx, &s3.HeadObjectInput{Bucket: aws.String("bucket-a"), Key: aws.String("wb/replaced")})
	testutil.Must(t, err)
	if !strings.HasPrefix(aws.ToString(head.ContentType), "text/x-replaced") {
		t.Fatalf("MinIO's type of wb/replaced: %q", aws.ToString(head.ContentType))
	}
}
