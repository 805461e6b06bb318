package miniotest_test

import (
	"bytes"
	"context"
	"io"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/s3"

	"github.com/distcache/distcache/internal/testutil/miniotest"
)

func TestStartStopRestart(t *testing.T) {
	srv := miniotest.Start(t)
	srv.CreateBucket(t, "bkt")
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	c := srv.Client(t)
	if _, err := c.PutObject(ctx, &s3.PutObjectInput{
		Bucket: aws.String("bkt"), Key: aws.String("k"), Body: bytes.NewReader([]byte("hello")),
	}); err != nil {
		t.Fatalf("put: %v", err)
	}

	srv.Stop()
	srv.Stop() // idempotent
	if _, err := c.HeadObject(ctx, &s3.HeadObjectInput{Bucket: aws.String("bkt"), Key: aws.String("k")},
		func(o *s3.Options) { o.RetryMaxAttempts = 1 }); err == nil {
		t.Fatal("head succeeded while MinIO was stopped")
	}

	srv.Restart(t)
	out, err := c.GetObject(ctx, &s3.GetObjectInput{Bucket: aws.String("bkt"), Key: aws.String("k")})
	if err != nil {
		t.Fatalf("get after restart: %v", err)
	}
	defer out.Body.Close()
	b, err := io.ReadAll(out.Body)
	if err != nil || string(b) != "hello" {
		t.Fatalf("get after restart = %q, %v; want hello", b, err)
	}
}
