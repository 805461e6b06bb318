package gateway_test

//lint:file-ignore SA1019 feature/s3/manager's Uploader and Downloader are what aws-sdk-go-v2 users run; its successor, transfermanager, is v0.x

import (
	"bytes"
	"context"
	"errors"
	"math/rand/v2"
	"strings"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/feature/s3/manager"
	"github.com/aws/aws-sdk-go-v2/service/s3"
	"github.com/aws/aws-sdk-go-v2/service/s3/types"

	"github.com/distcache/distcache/internal/chunk"
	"github.com/distcache/distcache/internal/store"
	"github.com/distcache/distcache/internal/testutil"
	"github.com/distcache/distcache/internal/testutil/nodecluster"
)

// policyTenants is team-a with a ReadOnly and a NoCache prefix in bucket-a.
const policyTenants = `tenants:
  - name: team-a
    buckets: [bucket-a, shared, clickhouse]
    policies:
      - {bucket: bucket-a, prefix: ro/, mode: ReadOnly}
      - {bucket: bucket-a, prefix: nc/, mode: NoCache}
`

// ReadOnly keys are read through the cache as usual, and every kind of
// write of them is refused with AccessDenied naming the policy, S3
// untouched.
func TestReadOnlyPolicyRefusesEveryWrite(t *testing.T) {
	e := newEnv(t, envOptions{pageCache: 8 << 20, tenants: policyTenants})
	ctx := context.Background()
	r := rand.New(rand.NewPCG(81, 82))
	v := testutil.RandomBytes(r, chunkSize+5)
	etag := e.cluster.PutDirect("bucket-a", "ro/table", v)
	if got := e.mustGet("bucket-a", "ro/table", ""); !bytes.Equal(got, v) {
		t.Fatal("a ReadOnly key read other bytes")
	}

	refused := func(what string, err error) {
		t.Helper()
		wantCode(t, what, err, "AccessDenied", 403)
		if err != nil && !strings.Contains(err.Error(), `ReadOnly (bucket bucket-a, prefix "ro/")`) {
			t.Errorf("%s: the error does not name the policy: %v", what, err)
		}
	}
	_, err := e.s3.PutObject(ctx, &s3.PutObjectInput{Bucket: aws.String("bucket-a"), Key: aws.String("ro/table"), Body: bytes.NewReader([]byte("x"))})
	refused("PutObject", err)
	_, err = e.s3.DeleteObject(ctx, &s3.DeleteObjectInput{Bucket: aws.String("bucket-a"), Key: aws.String("ro/table")})
	refused("DeleteObject", err)
	e.put("bucket-a", "rw/source", []byte("source"))
	_, err = e.s3.CopyObject(ctx, &s3.CopyObjectInput{Bucket: aws.String("bucket-a"), Key: aws.String("ro/table"), CopySource: aws.String("bucket-a/rw/source")})
	refused("CopyObject onto it", err)
	_, err = e.s3.CreateMultipartUpload(ctx, &s3.CreateMultipartUploadInput{Bucket: aws.String("bucket-a"), Key: aws.String("ro/new")})
	refused("CreateMultipartUpload", err)
	_, err = e.s3.DeleteObjects(ctx, &s3.DeleteObjectsInput{Bucket: aws.String("bucket-a"), Delete: &types.Delete{
		Objects: []types.ObjectIdentifier{{Key: aws.String("rw/source")}, {Key: aws.String("ro/table")}}}})
	refused("DeleteObjects naming it", err)

	out, err := e.cluster.Direct.HeadObject(ctx, &s3.HeadObjectInput{Bucket: aws.String("bucket-a"), Key: aws.String("ro/table")})
	if err != nil || aws.ToString(out.ETag) != etag {
		t.Fatalf("S3's ro/table after the refused writes: %v, %v; want ETag %s", out, err, etag)
	}
	if !e.existsInS3("bucket-a", "rw/source") {
		t.Error("the refused DeleteObjects deleted the other key")
	}
	// Keys outside the prefix are written as usual.
	e.put("bucket-a", "rw/other", []byte("ok"))
}

// NoCache keys go to S3 and back on every read and write: no node keeps
// metadata or a chunk of them, the gateway keeps no page, and an object
// overwritten behind the cache's back is read new at once.
func TestNoCachePolicyKeepsNothing(t *testing.T) {
	e := newEnv(t, envOptions{pageCache: 8 << 20, tenants: policyTenants})
	ctx := context.Background()
	r := rand.New(rand.NewPCG(83, 84))
	v1 := testutil.RandomBytes(r, 3*chunkSize+11)
	etags := map[string]string{"nc/part": aws.ToString(e.put("bucket-a", "nc/part", v1).ETag)}
	big := testutil.RandomBytes(r, 11<<20)
	up := manager.NewUploader(e.s3, func(u *manager.Uploader) { u.PartSize = 5 << 20 })
	upOut, err := up.Upload(ctx, &s3.PutObjectInput{Bucket: aws.String("bucket-a"), Key: aws.String("nc/big"), Body: bytes.NewReader(big)})
	testutil.Must(t, err)
	etags["nc/big"] = aws.ToString(upOut.ETag)
	pagesBefore := nodecluster.Gather(t, e.registry, "distcache_client_page_cache_requests_total", nil)
	for range 3 {
		if got := e.mustGet("bucket-a", "nc/part", ""); !bytes.Equal(got, v1) {
			t.Fatal("NoCache object: other bytes")
		}
		if got := e.mustGet("bucket-a", "nc/part", "bytes=1000-300000"); !bytes.Equal(got, v1[1000:300001]) {
			t.Fatal("NoCache range: other bytes")
		}
		if got := e.mustGet("bucket-a", "nc/big", ""); !bytes.Equal(got, big) {
			t.Fatal("NoCache multipart object: other bytes")
		}
	}
	if n := nodecluster.Gather(t, e.registry, "distcache_client_page_cache_requests_total", nil) - pagesBefore; n != 0 {
		t.Errorf("the gateway looked %v times in its page cache for NoCache objects, want 0", n)
	}
	if hits := e.cluster.Sum("distcache_chunk_reads_total", map[string]string{"result": "hit_ram"}) +
		e.cluster.Sum("distcache_chunk_reads_total", map[string]string{"result": "hit_disk"}); hits != 0 {
		t.Errorf("%v chunk reads of NoCache objects were cache hits", hits)
	}
	for key, etag := range etags {
		o := chunk.Object{Tenant: "team-a", Bucket: "bucket-a", Key: key}
		for _, m := range e.cluster.Members() {
			if _, err := m.Store.GetMeta(o); !errors.Is(err, store.ErrNotFound) {
				t.Errorf("node %s keeps metadata of %s: %v", m.Name, key, err)
			}
			for idx := int64(0); idx*chunkSize < int64(len(big)); idx++ {
				id := chunk.ID{Object: o, ETag: etag, Size: chunkSize, Index: idx}
				if _, _, err := m.Store.GetChunk(id); !errors.Is(err, store.ErrNotFound) {
					t.Errorf("node %s keeps chunk %d of %s: %v", m.Name, idx, key, err)
				}
			}
		}
	}
	// Behind the cache's back: the next read has the new bytes.
	v2 := testutil.RandomBytes(r, chunkSize)
	e.cluster.PutDirect("bucket-a", "nc/part", v2)
	if got := e.mustGet("bucket-a", "nc/part", ""); !bytes.Equal(got, v2) {
		t.Fatal("NoCache object overwritten in S3: the gateway served the old version")
	}
	// Outside the prefix the cache works as usual: the second read hits.
	e.put("bucket-a", "cached/part", v1)
	e.mustGet("bucket-a", "cached/part", "")
	e.mustGet("bucket-a", "cached/part", "")
	if hits := e.cluster.Sum("distcache_chunk_reads_total", map[string]string{"result": "hit_ram"}); hits == 0 {
		t.Error("an object outside the NoCache prefix was not cached")
	}
}
