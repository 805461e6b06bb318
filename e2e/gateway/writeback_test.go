package gateway_test

import (
	"bytes"
	"context"
	"crypto/md5"
	"encoding/hex"
	"errors"
	"fmt"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/s3"
	"github.com/aws/aws-sdk-go-v2/service/s3/types"

	"github.com/distcache/distcache/internal/testutil"
	"github.com/distcache/distcache/internal/testutil/miniotest"
	"github.com/distcache/distcache/internal/testutil/s3proxy"
)

// heldTenants puts team-a's bucket-a/wb/ under WriteBack and tmp/ under
// Transient, two copies each.
var heldTenants = teamAPolicies(
	"{bucket: bucket-a, prefix: wb/, mode: WriteBack, replicas: 2}",
	"{bucket: bucket-a, prefix: tmp/, mode: Transient, replicas: 2}")

// inMinIO is what MinIO itself holds at bucket-a/key (nil: nothing).
func inMinIO(t *testing.T, e *env, key string) []byte {
	t.Helper()
	return miniotest.Object(t, e.cluster.Direct, "bucket-a", key)
}

// waitInMinIO waits until MinIO itself holds want (key -> bytes) and none
// of absent.
func waitInMinIO(t *testing.T, e *env, want map[string][]byte, absent ...string) {
	t.Helper()
	testutil.WaitFor(t, "MinIO holds every acknowledged write", func() bool {
		for key, b := range want {
			if !bytes.Equal(inMinIO(t, e, key), b) {
				return false
			}
		}
		for _, key := range absent {
			if inMinIO(t, e, key) != nil {
				return false
			}
		}
		return true
	})
}

func s3ETag(b []byte) string {
	h := md5.Sum(b)
	return `"` + hex.EncodeToString(h[:]) + `"`
}

// WriteBack: PUTs are acknowledged while S3 refuses every write, read at
// once through another gateway (and one without a page cache, so the
// chunks come from the nodes), overwrites and deletes included; once S3
// takes writes again, MinIO ends with exactly what was acknowledged last,
// and a key deleted through the cache before it reached S3 is not there.
func TestWriteBackIsReadEverywhereBeforeS3HasIt(t *testing.T) {
	writer := newEnv(t, envOptions{tenants: heldTenants, pageCache: 8 << 20})
	reader := gatewayOn(t, writer.cluster, envOptions{pageCache: 8 << 20})
	cold := gatewayOn(t, writer.cluster, envOptions{})
	r := testutil.NewRand(71)
	ctx := context.Background()

	// An older version in S3 that a held delete must not let reappear.
	writer.cluster.PutDirect("bucket-a", "wb/deleted", testutil.RandomBytes(r, 1000))
	writer.cluster.Proxy.Inject(s3proxy.Rule{Method: "PUT", Fault: s3proxy.InternalError},
		s3proxy.Rule{Method: "DELETE", Fault: s3proxy.InternalError})
	want := map[string][]byte{}
	for i, size := range []int{1, 10 << 10, chunkSize, 2*chunkSize + 17} {
		key := fmt.Sprintf("wb/object-%d", i)
		want[key] = testutil.RandomBytes(r, size)
		out := writer.put("bucket-a", key, want[key])
		if aws.ToString(out.ETag) != s3ETag(want[key]) {
			t.Fatalf("%s: ETag %s, want the body's MD5 as S3 gives it", key, aws.ToString(out.ETag))
		}
	}
	want["wb/object-1"] = testutil.RandomBytes(r, 3*chunkSize) // an overwrite
	writer.put("bucket-a", "wb/object-1", want["wb/object-1"])
	_, err := writer.s3.DeleteObject(ctx, &s3.DeleteObjectInput{Bucket: aws.String("bucket-a"), Key: aws.String("wb/deleted")})
	testutil.Must(t, err)

	for key, b := range want {
		if got := inMinIO(t, writer, key); got != nil {
			t.Fatalf("%s reached MinIO while it refused writes", key)
		}
		for i, e := range []*env{reader, cold} {
			if got := e.mustGet("bucket-a", key, ""); !bytes.Equal(got, b) {
				t.Fatalf("%s through gateway %d before S3 has it: %d bytes, want %d", key, i, len(got), len(b))
			}
		}
		if len(b) > 100 {
			if got := cold.mustGet("bucket-a", key, "bytes=50-99"); !bytes.Equal(got, b[50:100]) {
				t.Fatalf("%s: a range read gave other bytes", key)
			}
		}
		head, err := reader.s3.HeadObject(ctx, &s3.HeadObjectInput{Bucket: aws.String("bucket-a"), Key: aws.String(key)})
		testutil.Must(t, err)
		if aws.ToInt64(head.ContentLength) != int64(len(b)) || aws.ToString(head.ETag) != s3ETag(b) {
			t.Fatalf("%s: HEAD says %d bytes, ETag %s", key, aws.ToInt64(head.ContentLength), aws.ToString(head.ETag))
		}
	}
	for _, e := range []*env{reader, cold} {
		if _, _, err := e.get("bucket-a", "wb/deleted", ""); !isNoSuchKey(err) {
			t.Fatalf("a key deleted through the cache, read through another gateway: %v, want NoSuchKey", err)
		}
	}

	writer.cluster.Proxy.ClearFaults()
	waitInMinIO(t, writer, want, "wb/deleted")
	for key, b := range want {
		if got := cold.mustGet("bucket-a", key, ""); !bytes.Equal(got, b) {
			t.Fatalf("%s after persistence: %d bytes, want %d", key, len(got), len(b))
		}
	}
}

func isNoSuchKey(err error) bool {
	var nsk *types.NoSuchKey
	return errors.As(err, &nsk)
}

// Transient: written, read through another gateway, deleted, and never a
// single request to S3 for its keys.
func TestTransientNeverReachesS3(t *testing.T) {
	writer := newEnv(t, envOptions{tenants: heldTenants})
	reader := gatewayOn(t, writer.cluster, envOptions{})
	r := testutil.NewRand(72)
	data := testutil.RandomBytes(r, 2*chunkSize+5)
	writer.put("bucket-a", "tmp/spill-1", data)
	if got := reader.mustGet("bucket-a", "tmp/spill-1", ""); !bytes.Equal(got, data) {
		t.Fatalf("transient object through another gateway: %d bytes, want %d", len(got), len(data))
	}
	_, err := writer.s3.DeleteObject(context.Background(), &s3.DeleteObjectInput{Bucket: aws.String("bucket-a"), Key: aws.String("tmp/spill-1")})
	testutil.Must(t, err)
	if _, _, err := reader.get("bucket-a", "tmp/spill-1", ""); !isNoSuchKey(err) {
		t.Fatalf("deleted transient object: %v, want NoSuchKey", err)
	}
	time.Sleep(200 * time.Millisecond) // a persister that wrongly took it would have by now
	for _, rec := range writer.cluster.Proxy.Requests() {
		if strings.Contains(rec.Path, "/tmp/") {
			t.Fatalf("S3 got %s %s for a transient key", rec.Method, rec.Path)
		}
	}
}

// TestWriteBackKeyAStoreRefusesIsWrittenThrough: a key under a WriteBack
// prefix that MinIO will not name (an empty or "." segment) is written
// through, so MinIO's refusal is the answer, instead of held, acknowledged,
// and never persisted; its delete goes to S3 too. A key of the same prefix
// that MinIO takes is held as ever.
func TestWriteBackKeyAStoreRefusesIsWrittenThrough(t *testing.T) {
	e := newEnv(t, envOptions{tenants: heldTenants})
	ctx := context.Background()
	for _, key := range []string{"wb/a//double", "wb/dot/./seg"} {
		_, err := e.s3.PutObject(ctx, &s3.PutObjectInput{Bucket: aws.String("bucket-a"), Key: aws.String(key), Body: strings.NewReader("x")})
		if err == nil || httpStatus(err) != http.StatusBadRequest {
			t.Errorf("PUT %s: %v, want MinIO's 400", key, err)
		}
		_, err = e.s3.DeleteObject(ctx, &s3.DeleteObjectInput{Bucket: aws.String("bucket-a"), Key: aws.String(key)})
		t.Logf("DELETE %s: %v", key, err)
	}
	if n := e.cluster.Sum("distcache_writeback_objects", map[string]string{"tenant": "team-a", "kind": "dirty"}); n != 0 {
		t.Errorf("the nodes hold %v dirty objects after writes S3 refused, want 0", n)
	}
	for _, rec := range e.cluster.Proxy.Requests() {
		t.Logf("S3 got %s %s", rec.Method, rec.Path)
	}
	e.put("bucket-a", "wb/fine", []byte("held"))
	if _, err := e.s3.HeadObject(ctx, &s3.HeadObjectInput{Bucket: aws.String("bucket-a"), Key: aws.String("wb/fine")}); err != nil {
		t.Fatalf("a held key: %v", err)
	}
	waitInMinIO(t, e, map[string][]byte{"wb/fine": []byte("held")})
}

// TestHeldBodyThatFailsVerificationIsNotHeld: no S3 checks a held write's
// payload SHA-256 before it is acknowledged, so the gateway and the node
// check it: a correctly signed
// request whose body is not the one signed (its last byte differs), small
// or of several chunks, is refused and nothing of it is held or read back;
// the same request with the right hash is held.
func TestHeldBodyThatFailsVerificationIsNotHeld(t *testing.T) {
	e := newEnv(t, envOptions{tenants: heldTenants})
	r := testutil.NewRand(13)
	for name, size := range map[string]int{"small": 3000, "chunks": 2*chunkSize + 3} {
		body := testutil.RandomBytes(r, size)
		signed := bytes.Clone(body)
		signed[len(signed)-1] ^= 1
		key := "wb/tampered-" + name
		req, _ := http.NewRequest(http.MethodPut, e.srv.URL()+"/bucket-a/"+key, nil)
		if resp := signedDo(t, req, body, accessKey, secretKey, signed); resp.status != http.StatusBadRequest || xmlCode(resp.body) != "XAmzContentSHA256Mismatch" {
			t.Fatalf("%s: a body that is not the one signed: %d %s, want 400 XAmzContentSHA256Mismatch", name, resp.status, resp.body)
		}
		req, _ = http.NewRequest(http.MethodGet, e.srv.URL()+"/bucket-a/"+key, nil)
		if resp := signedDo(t, req, nil, accessKey, secretKey); resp.status != http.StatusNotFound {
			t.Errorf("%s: GET after the refused PUT: %d, want 404", name, resp.status)
		}
		req, _ = http.NewRequest(http.MethodPut, e.srv.URL()+"/bucket-a/"+key, nil)
		if resp := signedDo(t, req, body, accessKey, secretKey); resp.status != http.StatusOK {
			t.Fatalf("%s: honest PUT: %d %s", name, resp.status, resp.body)
		}
		if got := e.mustGet("bucket-a", key, ""); !bytes.Equal(got, body) {
			t.Errorf("%s: read back other bytes than the honest PUT's", name)
		}
	}
}
