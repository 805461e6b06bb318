package gateway_test

import (
	"bytes"
	"context"
	"fmt"
	"net/http"
	"slices"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/s3"
	"github.com/aws/aws-sdk-go-v2/service/s3/types"

	"github.com/distcache/distcache/internal/testutil"
	"github.com/distcache/distcache/internal/testutil/nodecluster"
)

// Object tags are S3's: PutObjectTagging, GetObjectTagging and
// DeleteObjectTagging go through to S3, and change nothing the cache keeps
// (reading the object stays a hit). A WriteBack key's tags are refused
// (S3 may not have the key yet), and refusing a DeleteObjectTagging
// deletes nothing.
func TestObjectTaggingGoesToS3(t *testing.T) {
	e := newEnv(t, envOptions{tenants: drainTenants})
	ctx := context.Background()
	data := testutil.SeededBytes(5, 2*chunkSize+3)
	const key = "plain/tagged"
	e.put("bucket-a", key, data)
	b, k := aws.String("bucket-a"), aws.String(key)
	tagsOf := func(c *s3.Client) string {
		t.Helper()
		out, err := c.GetObjectTagging(ctx, &s3.GetObjectTaggingInput{Bucket: b, Key: k})
		testutil.Must(t, err)
		var kv []string
		for _, tag := range out.TagSet {
			kv = append(kv, aws.ToString(tag.Key)+"="+aws.ToString(tag.Value))
		}
		slices.Sort(kv)
		return fmt.Sprint(kv)
	}

	_, err := e.s3.PutObjectTagging(ctx, &s3.PutObjectTaggingInput{Bucket: b, Key: k, Tagging: &types.Tagging{TagSet: []types.Tag{
		{Key: aws.String("team"), Value: aws.String("a")}, {Key: aws.String("tier"), Value: aws.String("hot")}}}})
	testutil.Must(t, err)
	if direct, through := tagsOf(e.cluster.Direct), tagsOf(e.s3); direct != "[team=a tier=hot]" || through != direct {
		t.Errorf("tags in MinIO %s, through the gateway %s; want [team=a tier=hot]", direct, through)
	}
	getsBefore := nodecluster.Gather(t, e.cluster.S3Registry, "distcache_s3_requests_total", map[string]string{"op": "get"})
	if got := e.mustGet("bucket-a", key, ""); !bytes.Equal(got, data) {
		t.Fatal("the tagged object reads back other bytes")
	}
	if gets := nodecluster.Gather(t, e.cluster.S3Registry, "distcache_s3_requests_total", map[string]string{"op": "get"}) - getsBefore; gets != 0 {
		t.Errorf("reading the object after tagging it made %v S3 GETs, want 0 (its chunks stay cached)", gets)
	}
	_, err = e.s3.DeleteObjectTagging(ctx, &s3.DeleteObjectTaggingInput{Bucket: b, Key: k})
	testutil.Must(t, err)
	if direct, through := tagsOf(e.cluster.Direct), tagsOf(e.s3); direct != "[]" || through != "[]" {
		t.Errorf("after DeleteObjectTagging: tags in MinIO %s, through the gateway %s; want none", direct, through)
	}
	if got := e.mustGet("bucket-a", key, ""); !bytes.Equal(got, data) {
		t.Fatal("the object reads back other bytes after its tags were deleted")
	}

	// A WriteBack key (drainTenants: wb/).
	held := testutil.SeededBytes(6, 1000)
	e.put("bucket-a", "wb/tagged", held)
	hk := aws.String("wb/tagged")
	_, err = e.s3.PutObjectTagging(ctx, &s3.PutObjectTaggingInput{Bucket: b, Key: hk, Tagging: &types.Tagging{TagSet: []types.Tag{
		{Key: aws.String("team"), Value: aws.String("a")}}}})
	wantCode(t, "PutObjectTagging of a WriteBack key", err, "NotImplemented", http.StatusNotImplemented)
	_, err = e.s3.GetObjectTagging(ctx, &s3.GetObjectTaggingInput{Bucket: b, Key: hk})
	wantCode(t, "GetObjectTagging of a WriteBack key", err, "NotImplemented", http.StatusNotImplemented)
	_, err = e.s3.DeleteObjectTagging(ctx, &s3.DeleteObjectTaggingInput{Bucket: b, Key: hk})
	wantCode(t, "DeleteObjectTagging of a WriteBack key", err, "NotImplemented", http.StatusNotImplemented)
	if got := e.mustGet("bucket-a", "wb/tagged", ""); !bytes.Equal(got, held) {
		t.Fatal("the WriteBack key reads back other bytes after its tagging was refused")
	}
}
