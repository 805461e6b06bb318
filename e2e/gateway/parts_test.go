package gateway_test

//lint:file-ignore SA1019 feature/s3/manager's Uploader and Downloader are what aws-sdk-go-v2 users run; its successor, transfermanager, is v0.x

import (
	"bytes"
	"context"
	"io"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/feature/s3/manager"
	"github.com/aws/aws-sdk-go-v2/service/s3"

	"github.com/distcache/distcache/internal/testutil"
)

// Reads of what the cache does not keep go to S3: one part of a multipart
// object (partNumber, as SDKs' transfer managers read them) and a version
// by id ("null", the only one an unversioned bucket has). They answer what
// MinIO answers; a WriteBack key's parts are refused, as S3 may not have
// the key's current version yet.
func TestPartAndVersionReadsGoToS3(t *testing.T) {
	e := newEnv(t, envOptions{tenants: heldTenants, pageCache: 8 << 20})
	ctx := context.Background()
	r := testutil.NewRand(17)
	const part = 5 << 20
	body := testutil.RandomBytes(r, 2*part+12345)
	up := manager.NewUploader(e.s3, func(u *manager.Uploader) { u.PartSize = part })
	_, err := up.Upload(ctx, &s3.PutObjectInput{Bucket: aws.String("bucket-a"), Key: aws.String("parts/object"), Body: bytes.NewReader(body)})
	testutil.Must(t, err)

	for n, want := range [][]byte{body[:part], body[part : 2*part], body[2*part:]} {
		g, err := e.s3.GetObject(ctx, &s3.GetObjectInput{Bucket: aws.String("bucket-a"), Key: aws.String("parts/object"), PartNumber: aws.Int32(int32(n + 1))})
		testutil.Must(t, err)
		got, err := io.ReadAll(g.Body)
		g.Body.Close()
		testutil.Must(t, err)
		direct, err := e.cluster.Direct.GetObject(ctx, &s3.GetObjectInput{Bucket: aws.String("bucket-a"), Key: aws.String("parts/object"), PartNumber: aws.Int32(int32(n + 1))})
		testutil.Must(t, err)
		direct.Body.Close()
		if !bytes.Equal(got, want) || aws.ToInt32(g.PartsCount) != 3 || aws.ToString(g.ContentRange) != aws.ToString(direct.ContentRange) ||
			aws.ToString(g.ETag) != aws.ToString(direct.ETag) {
			t.Errorf("part %d: %d bytes (equal %v), parts count %d, Content-Range %q, ETag %s; MinIO: Content-Range %q, ETag %s",
				n+1, len(got), bytes.Equal(got, want), aws.ToInt32(g.PartsCount), aws.ToString(g.ContentRange), aws.ToString(g.ETag),
				aws.ToString(direct.ContentRange), aws.ToString(direct.ETag))
		}
	}
	h, err := e.s3.HeadObject(ctx, &s3.HeadObjectInput{Bucket: aws.String("bucket-a"), Key: aws.String("parts/object"), PartNumber: aws.Int32(3)})
	testutil.Must(t, err)
	if aws.ToInt64(h.ContentLength) != 12345 || aws.ToInt32(h.PartsCount) != 3 {
		t.Errorf("HEAD of part 3: %d bytes, parts count %d; want 12345, 3", aws.ToInt64(h.ContentLength), aws.ToInt32(h.PartsCount))
	}
	g, err := e.s3.GetObject(ctx, &s3.GetObjectInput{Bucket: aws.String("bucket-a"), Key: aws.String("parts/object"), VersionId: aws.String("null")})
	testutil.Must(t, err)
	got, err := io.ReadAll(g.Body)
	g.Body.Close()
	testutil.Must(t, err)
	if !bytes.Equal(got, body) {
		t.Errorf("versionId=null: %d bytes, want the object's %d", len(got), len(body))
	}

	e.put("bucket-a", "wb/parts", body[:1000])
	_, err = e.s3.GetObject(ctx, &s3.GetObjectInput{Bucket: aws.String("bucket-a"), Key: aws.String("wb/parts"), PartNumber: aws.Int32(1)})
	wantCode(t, "partNumber of a WriteBack key", err, "NotImplemented", 501)
}
