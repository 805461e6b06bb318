package gateway_test

import (
	"bytes"
	"context"
	"encoding/xml"
	"fmt"
	"math/rand/v2"
	"net/http"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/s3"

	"github.com/distcache/distcache/internal/testutil"
)

// TestBodyThatFailsVerificationNeverReachesS3 sends correctly signed
// requests whose body is not the one signed (x-amz-content-sha256 of other
// bytes). The gateway only learns it at the last byte; neither a
// write-through PutObject nor a passed-through UploadPart may leave data in
// S3, small (read whole first) or large (streamed, last byte held back).
func TestBodyThatFailsVerificationNeverReachesS3(t *testing.T) {
	e := newEnv(t, envOptions{})
	ctx := context.Background()
	r := rand.New(rand.NewPCG(11, 12))
	for name, size := range map[string]int{"small": 3000, "large": 6<<20 + 3} {
		t.Run("PutObject "+name, func(t *testing.T) {
			body := testutil.RandomBytes(r, size)
			signed := bytes.Clone(body)
			signed[len(signed)-1] ^= 1 // differs in the very last byte
			key := "tampered/" + name
			req, _ := http.NewRequest(http.MethodPut, e.srv.URL()+"/bucket-a/"+key, nil)
			resp := signedDo(t, req, body, accessKey, secretKey, signed)
			if resp.status != http.StatusBadRequest || xmlCode(resp.body) != "XAmzContentSHA256Mismatch" {
				t.Errorf("status %d: %s", resp.status, resp.body)
			}
			if e.existsInS3("bucket-a", key) {
				t.Fatal("the object exists in S3")
			}
			// The same request with the right hash works: the failure was
			// the body's.
			req, _ = http.NewRequest(http.MethodPut, e.srv.URL()+"/bucket-a/"+key, nil)
			if resp := signedDo(t, req, body, accessKey, secretKey); resp.status != http.StatusOK {
				t.Fatalf("honest PUT: %d %s", resp.status, resp.body)
			}
			if !bytes.Equal(e.cluster.GetDirect("bucket-a", key, ""), body) {
				t.Error("honest PUT stored other bytes")
			}
		})
		t.Run("UploadPart "+name, func(t *testing.T) {
			key := "tampered/mp-" + name
			mp, err := e.s3.CreateMultipartUpload(ctx, &s3.CreateMultipartUploadInput{Bucket: aws.String("bucket-a"), Key: aws.String(key)})
			testutil.Must(t, err)
			body := testutil.RandomBytes(r, size)
			signed := bytes.Clone(body)
			signed[len(signed)-1] ^= 1
			url := fmt.Sprintf("%s/bucket-a/%s?partNumber=1&uploadId=%s", e.srv.URL(), key, aws.ToString(mp.UploadId))
			req, _ := http.NewRequest(http.MethodPut, url, nil)
			resp := signedDo(t, req, body, accessKey, secretKey, signed)
			if resp.status != http.StatusBadRequest || xmlCode(resp.body) != "XAmzContentSHA256Mismatch" {
				t.Errorf("status %d: %s", resp.status, resp.body)
			}
			// S3 must not have the part.
			parts, err := e.cluster.Direct.ListParts(ctx, &s3.ListPartsInput{Bucket: aws.String("bucket-a"), Key: aws.String(key), UploadId: mp.UploadId})
			testutil.Must(t, err)
			if len(parts.Parts) != 0 {
				t.Errorf("S3 has %d parts of a body that failed verification", len(parts.Parts))
			}
			_, err = e.s3.AbortMultipartUpload(ctx, &s3.AbortMultipartUploadInput{Bucket: aws.String("bucket-a"), Key: aws.String(key), UploadId: mp.UploadId})
			testutil.Must(t, err)
		})
	}
	t.Run("DeleteObjects with a forged body", func(t *testing.T) {
		e.cluster.PutDirect("bucket-a", "keep-me", []byte("x"))
		doc := []byte(`<Delete><Object><Key>keep-me</Key></Object></Delete>`)
		req, _ := http.NewRequest(http.MethodPost, e.srv.URL()+"/bucket-a?delete", nil)
		resp := signedDo(t, req, doc, accessKey, secretKey, []byte(`<Delete><Object><Key>other</Key></Object></Delete>`))
		var d struct{ Code string }
		_ = xml.Unmarshal(resp.body, &d)
		if resp.status != http.StatusBadRequest || d.Code != "XAmzContentSHA256Mismatch" {
			t.Errorf("status %d: %s", resp.status, resp.body)
		}
		if !e.existsInS3("bucket-a", "keep-me") {
			t.Error("a forged DeleteObjects deleted the object")
		}
	})
}
