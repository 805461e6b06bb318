package gateway_test

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"math/rand/v2"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/s3"

	"github.com/distcache/distcache/internal/testutil"
)

// BenchmarkGetObjectHit is the gateway's hit path as an S3 client sees it:
// aws-sdk-go-v2 GetObject of a range of an object the gateway's page cache
// holds, in the default (TTL) mode with the metadata kept on a lease, over
// plain HTTP on loopback. Client and gateway run in this process: profile
// with -cpuprofile and read the gateway's share (internal/gateway,
// internal/client, internal/sigv4, net/http's server side).
func BenchmarkGetObjectHit(b *testing.B) {
	for _, size := range []int64{64 << 10, chunkSize} {
		b.Run(fmt.Sprintf("range=%dKiB", size>>10), func(b *testing.B) { benchGetObjectHit(b, size) })
	}
}

func benchGetObjectHit(b *testing.B, size int64) {
	e := newEnv(b, envOptions{pageCache: 64 << 20})
	ctx := context.Background()
	r := rand.New(rand.NewPCG(71, 72))
	const objectSize = 16 * chunkSize
	data := testutil.RandomBytes(r, objectSize)
	_, err := e.s3.PutObject(ctx, &s3.PutObjectInput{Bucket: aws.String("bucket-a"), Key: aws.String("bench"), Body: bytes.NewReader(data)})
	testutil.Must(b, err)
	for range 3 { // fill the page cache, and keep the metadata
		testutil.Must(b, e.readAll("bench", 0, objectSize))
	}
	b.SetBytes(size)
	b.ResetTimer()
	for b.Loop() {
		off := r.Int64N(objectSize/size) * size
		if err := e.readAll("bench", off, size); err != nil {
			b.Fatal(err)
		}
	}
	b.StopTimer()
	if hits := e.metaHits(); hits < float64(b.N) {
		b.Fatalf("%v of %d reads had their metadata kept: the hit path asked a node", hits, b.N)
	}
}

// readAll reads n bytes at off of bucket-a/key and discards them.
func (e *env) readAll(key string, off, n int64) error {
	out, err := e.s3.GetObject(context.Background(), &s3.GetObjectInput{Bucket: aws.String("bucket-a"), Key: aws.String(key),
		Range: aws.String(fmt.Sprintf("bytes=%d-%d", off, off+n-1))})
	if err != nil {
		return err
	}
	defer out.Body.Close()
	got, err := io.Copy(io.Discard, out.Body)
	if err == nil && got != n {
		err = fmt.Errorf("read %d bytes, want %d", got, n)
	}
	return err
}

// BenchmarkGetObjectHitParallel is BenchmarkGetObjectHit with 16 clients
// per core at once (B1's 32 clients on two cores): profile it with
// -mutexprofile and -blockprofile for what serializes hits.
func BenchmarkGetObjectHitParallel(b *testing.B) {
	e := newEnv(b, envOptions{pageCache: 64 << 20})
	ctx := context.Background()
	const objectSize, size = 16 * chunkSize, 64 << 10
	data := testutil.RandomBytes(rand.New(rand.NewPCG(73, 74)), objectSize)
	_, err := e.s3.PutObject(ctx, &s3.PutObjectInput{Bucket: aws.String("bucket-a"), Key: aws.String("bench"), Body: bytes.NewReader(data)})
	testutil.Must(b, err)
	for range 3 {
		testutil.Must(b, e.readAll("bench", 0, objectSize))
	}
	b.SetBytes(size)
	b.SetParallelism(16)
	b.ResetTimer()
	b.RunParallel(func(pb *testing.PB) {
		r := rand.New(rand.NewPCG(rand.Uint64(), 0))
		for pb.Next() {
			if err := e.readAll("bench", r.Int64N(objectSize/size)*size, size); err != nil {
				b.Error(err)
				return
			}
		}
	})
}
