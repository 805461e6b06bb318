package gateway_test

import (
	"bytes"
	"context"
	"net/http"
	"net/url"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/s3"
	"github.com/aws/aws-sdk-go-v2/service/s3/types"

	"github.com/distcache/distcache/internal/testutil"
)

// TestKeysNeedingEscapes writes, reads, lists, copies and deletes keys
// with characters that must be escaped on the way to the nodes and S3.
func TestKeysNeedingEscapes(t *testing.T) {
	e := newEnv(t, envOptions{})
	ctx := context.Background()
	b := aws.String("bucket-a")
	for _, key := range []string{"sp ace", "plus+sign", "q?x=1&y=2#frag", "percent%2Fnot-a-slash", "ü/日本/ключ", "dir/marker/",
		"semi;colon,comma:colon@at$dollar!bang'quote(paren)*star", "tilde~under_score.dot-dash"} {
		t.Run(key, func(t *testing.T) {
			data := []byte("data of " + key)
			e.put("bucket-a", key, data)
			if !e.existsInS3("bucket-a", key) {
				t.Fatal("not in S3 under that key")
			}
			if got := e.mustGet("bucket-a", key, "bytes=5-"); !bytes.Equal(got, data[5:]) {
				t.Errorf("read %q", got)
			}
			list, err := e.s3.ListObjectsV2(ctx, &s3.ListObjectsV2Input{Bucket: b, Prefix: aws.String(key)})
			testutil.Must(t, err)
			if len(list.Contents) == 0 || aws.ToString(list.Contents[0].Key) != key {
				t.Errorf("listing: %v", list.Contents)
			}
			_, err = e.s3.CopyObject(ctx, &s3.CopyObjectInput{Bucket: b, Key: aws.String(key + ".copy"),
				CopySource: aws.String("bucket-a/" + url.PathEscape(key))})
			testutil.Must(t, err)
			if got := e.mustGet("bucket-a", key+".copy", ""); !bytes.Equal(got, data) {
				t.Errorf("copy holds %q", got)
			}
			_, err = e.s3.DeleteObject(ctx, &s3.DeleteObjectInput{Bucket: b, Key: aws.String(key)})
			testutil.Must(t, err)
			_, err = e.s3.DeleteObjects(ctx, &s3.DeleteObjectsInput{Bucket: b, Delete: &types.Delete{
				Objects: []types.ObjectIdentifier{{Key: aws.String(key + ".copy")}}}})
			testutil.Must(t, err)
			if e.existsInS3("bucket-a", key) || e.existsInS3("bucket-a", key+".copy") {
				t.Error("still in S3 after the deletes")
			}
			_, _, err = e.get("bucket-a", key, "")
			wantCode(t, "read after delete", err, "NoSuchKey", http.StatusNotFound)
		})
	}
}

// TestKeysWithDotAndEmptySegments: keys that HTTP path cleaning would turn
// into other keys ("a//b" into "a/b"). The gateway must reach S3 with the
// key as given: it works where S3 accepts the key, fails where S3 refuses
// it (MinIO refuses them all), and never touches the cleaned key. (A
// leading '/' is left out: MinIO itself takes "/k" for "k".)
func TestKeysWithDotAndEmptySegments(t *testing.T) {
	e := newEnv(t, envOptions{})
	ctx := context.Background()
	b := aws.String("bucket-a")
	for key, cleaned := range map[string]string{"a//b": "a/b", "x/./y": "x/y", "x/../y": "y", "z/..": "z"} {
		e.cluster.PutDirect("bucket-a", cleaned, []byte("the cleaned key"))
		_, directErr := e.cluster.Direct.PutObject(ctx, &s3.PutObjectInput{Bucket: b, Key: aws.String(key), Body: bytes.NewReader([]byte("d"))})
		_, putErr := e.s3.PutObject(ctx, &s3.PutObjectInput{Bucket: b, Key: aws.String(key), Body: bytes.NewReader([]byte("g"))})
		_, delErr := e.s3.DeleteObject(ctx, &s3.DeleteObjectInput{Bucket: b, Key: aws.String(key)})
		if (directErr == nil) != (putErr == nil) {
			t.Errorf("%q: PUT direct: %v; through the gateway: %v", key, directErr, putErr)
		}
		if directErr == nil && delErr != nil {
			t.Errorf("%q: DELETE through the gateway: %v", key, delErr)
		}
		if !e.existsInS3("bucket-a", cleaned) {
			t.Errorf("%q: the requests reached %q instead: it is gone (PUT direct: %v, gateway: %v, DELETE: %v)", key, cleaned, directErr, putErr, delErr)
		} else if got := e.cluster.GetDirect("bucket-a", cleaned, ""); string(got) != "the cleaned key" {
			t.Errorf("%q: the requests reached %q instead (now %q)", key, cleaned, got)
		}
	}
}
