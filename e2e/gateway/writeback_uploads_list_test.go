package gateway_test

import (
	"context"
	"slices"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/s3"

	"github.com/distcache/distcache/internal/testutil"
)

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
