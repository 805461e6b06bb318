package gateway_test

import (
	"bytes"
	"context"
	"math/rand/v2"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/s3"

	"github.com/distcache/distcache/internal/testutil"
)

// TestOverwriteBehindTheCache overwrites objects in S3 directly, where the
// cache cannot see it. Within the metadata TTL a read returns the old or
// the new version, complete, never a mix; once the TTL passed, the new one.
func TestOverwriteBehindTheCache(t *testing.T) {
	e := newEnv(t, envOptions{pageCache: 8 << 20})
	ctx := context.Background()
	r := rand.New(rand.NewPCG(23, 24))
	v1, v2 := testutil.RandomBytes(r, 4*chunkSize), testutil.RandomBytes(r, 4*chunkSize)

	// Read before: the chunks of v1 are cached.
	e.cluster.PutDirect("bucket-a", "behind/read", v1)
	e.mustGet("bucket-a", "behind/read", "")
	// Only HEAD before: v1's metadata is cached, none of its chunks.
	e.cluster.PutDirect("bucket-a", "behind/headed", v1)
	_, err := e.s3.HeadObject(ctx, &s3.HeadObjectInput{Bucket: aws.String("bucket-a"), Key: aws.String("behind/headed")})
	testutil.Must(t, err)

	e.cluster.PutDirect("bucket-a", "behind/read", v2)
	e.cluster.PutDirect("bucket-a", "behind/headed", v2)
	for _, key := range []string{"behind/read", "behind/headed"} {
		got, _, err := e.get("bucket-a", key, "")
		switch {
		case err != nil:
			t.Errorf("%s within the TTL: %v", key, err)
		case !bytes.Equal(got, v1) && !bytes.Equal(got, v2):
			t.Errorf("%s within the TTL: %d bytes of neither version", key, len(got))
		}
	}
	e.cluster.Clock.Advance(2 * time.Minute)
	for _, key := range []string{"behind/read", "behind/headed"} {
		if got := e.mustGet("bucket-a", key, ""); !bytes.Equal(got, v2) {
			t.Errorf("%s after the TTL: still the old version", key)
		}
	}
}
