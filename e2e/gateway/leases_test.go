package gateway_test

//lint:file-ignore SA1019 feature/s3/manager's Uploader and Downloader are what aws-sdk-go-v2 users run; its successor, transfermanager, is v0.x

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/feature/s3/manager"
	"github.com/aws/aws-sdk-go-v2/service/s3"
	"github.com/aws/aws-sdk-go-v2/service/s3/types"

	"github.com/distcache/distcache/internal/testutil"
	"github.com/distcache/distcache/internal/testutil/nodecluster"
)

// metaHits is how many Stats the gateway answered from metadata it keeps.
func (e *env) metaHits() float64 {
	return nodecluster.Gather(e.t, e.registry, "distcache_client_metadata_cache_requests_total", map[string]string{"result": "hit"})
}

// readUntilKept reads the object through the gateway until a read is
// answered from kept metadata (no metadata round trip), checking the bytes.
func (e *env) readUntilKept(bucket, key string, want []byte) {
	e.t.Helper()
	deadline := time.Now().Add(20 * time.Second)
	for {
		before := e.metaHits()
		if got := e.mustGet(bucket, key, ""); !bytes.Equal(got, want) {
			e.t.Fatalf("%s: %d bytes, not the version expected", key, len(got))
		}
		if e.metaHits() > before {
			return
		}
		if time.Now().After(deadline) {
			e.t.Fatalf("%s: the gateway still asks a node for its metadata after 20s", key)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// Two gateways of one cache, both keeping metadata between reads, in the
// default (TTL) mode and in immutable mode: whatever one of them writes
// (PutObject, CopyObject, a multipart upload, DeleteObjects) the other
// reads at once.
func TestAWriteThroughOneGatewayIsReadAtOnceThroughAnother(t *testing.T) {
	for _, immutable := range []bool{false, true} {
		t.Run(fmt.Sprintf("immutable=%v", immutable), func(t *testing.T) {
			writeThroughOneReadThroughAnother(t, envOptions{pageCache: 8 << 20, immutable: immutable})
		})
	}
}

func writeThroughOneReadThroughAnother(t *testing.T, opts envOptions) {
	writer := newEnv(t, opts)
	reader := gatewayOn(t, writer.cluster, opts)
	ctx := context.Background()
	r := rand.New(rand.NewPCG(61, 62))
	const key = "leases/object"
	put := func(data []byte) {
		t.Helper()
		_, err := writer.s3.PutObject(ctx, &s3.PutObjectInput{Bucket: aws.String("bucket-a"), Key: aws.String(key), Body: bytes.NewReader(data)})
		testutil.Must(t, err)
	}

	v := testutil.RandomBytes(r, 2*chunkSize+17)
	put(v)
	reader.readUntilKept("bucket-a", key, v)
	for i := range 5 {
		v = testutil.RandomBytes(r, chunkSize+i)
		put(v)
		if got := reader.mustGet("bucket-a", key, ""); !bytes.Equal(got, v) {
			t.Fatalf("PutObject %d: the other gateway read %d bytes of another version", i, len(got))
		}
		reader.readUntilKept("bucket-a", key, v)
	}

	// CopyObject onto the key (passed through to S3 by the nodes).
	src := testutil.RandomBytes(r, 3*chunkSize)
	_, err := writer.s3.PutObject(ctx, &s3.PutObjectInput{Bucket: aws.String("bucket-a"), Key: aws.String("leases/source"), Body: bytes.NewReader(src)})
	testutil.Must(t, err)
	_, err = writer.s3.CopyObject(ctx, &s3.CopyObjectInput{Bucket: aws.String("bucket-a"), Key: aws.String(key),
		CopySource: aws.String("bucket-a/leases/source")})
	testutil.Must(t, err)
	if got := reader.mustGet("bucket-a", key, ""); !bytes.Equal(got, src) {
		t.Fatalf("CopyObject: the other gateway read %d bytes of another version", len(got))
	}
	reader.readUntilKept("bucket-a", key, src)

	// A multipart upload (CompleteMultipartUpload passes through).
	big := testutil.RandomBytes(r, 11<<20)
	up := manager.NewUploader(writer.s3, func(u *manager.Uploader) { u.PartSize = 5 << 20 })
	_, err = up.Upload(ctx, &s3.PutObjectInput{Bucket: aws.String("bucket-a"), Key: aws.String(key), Body: bytes.NewReader(big)})
	testutil.Must(t, err)
	if got := reader.mustGet("bucket-a", key, ""); !bytes.Equal(got, big) {
		t.Fatalf("multipart upload: the other gateway read %d bytes of another version", len(got))
	}
	reader.readUntilKept("bucket-a", key, big)

	// DeleteObjects.
	_, err = writer.s3.DeleteObjects(ctx, &s3.DeleteObjectsInput{Bucket: aws.String("bucket-a"),
		Delete: &types.Delete{Objects: []types.ObjectIdentifier{{Key: aws.String(key)}}}})
	testutil.Must(t, err)
	_, _, err = reader.get("bucket-a", key, "")
	var nsk *types.NoSuchKey
	if !errors.As(err, &nsk) {
		t.Fatalf("GetObject through the other gateway after DeleteObjects: %v, want NoSuchKey", err)
	}
}

// An object overwritten in S3 behind the cache's back: both gateways serve
// one version or the other within the nodes' metadata TTL, and the new one
// once it passed.
func TestTwoGatewaysServeAnObjectChangedBehindTheCacheAtMostTheTTL(t *testing.T) {
	a := newEnv(t, envOptions{pageCache: 8 << 20})
	b := gatewayOn(t, a.cluster, envOptions{pageCache: 8 << 20})
	r := rand.New(rand.NewPCG(63, 64))
	const key = "leases/behind"
	v1, v2 := testutil.RandomBytes(r, 2*chunkSize), testutil.RandomBytes(r, 2*chunkSize)
	a.cluster.PutDirect("bucket-a", key, v1)
	a.readUntilKept("bucket-a", key, v1)
	b.readUntilKept("bucket-a", key, v1)
	a.cluster.PutDirect("bucket-a", key, v2)

	a.cluster.Clock.Advance(30 * time.Second) // the TTL is a minute
	for _, e := range []*env{a, b} {
		if got := e.mustGet("bucket-a", key, ""); !bytes.Equal(got, v1) && !bytes.Equal(got, v2) {
			t.Fatalf("within the TTL: %d bytes of neither version", len(got))
		}
	}
	a.cluster.Clock.Advance(31 * time.Second)
	for i, e := range []*env{a, b} {
		if got := e.mustGet("bucket-a", key, ""); !bytes.Equal(got, v2) {
			t.Fatalf("gateway %d past the TTL: still the old version", i)
		}
	}
}
