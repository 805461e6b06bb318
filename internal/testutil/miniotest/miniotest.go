// Package miniotest starts a real MinIO server for tests (internal/minioproc
// runs the process; this package ties it to the test's lifetime).
//
// The binary is built from MinIO's Go module by hack/build-minio.sh (make
// bin/minio). Start looks for it in $MINIO_BIN, else in bin/minio at the root
// of the module that contains the working directory. Each Server gets its own
// loopback port, data directory and random root credentials, so tests can run
// in parallel. The server's log is printed when the test fails.
package miniotest

import (
	"bytes"
	"context"
	"errors"
	"io"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/service/s3"
	"github.com/aws/aws-sdk-go-v2/service/s3/types"

	"github.com/distcache/distcache/internal/minioproc"
	"github.com/distcache/distcache/internal/testutil/repo"
)

// Server is one running (or stopped) MinIO process.
type Server struct {
	*minioproc.Server
}

// Start starts MinIO on a free loopback port with a fresh data directory and
// waits until it is ready. The server is stopped when the test ends.
func Start(t testing.TB) *Server {
	t.Helper()
	srv, err := minioproc.Start(context.Background(), findBinary(t), t.TempDir())
	if err != nil {
		t.Fatalf("miniotest: %v", err)
	}
	s := &Server{srv}
	t.Cleanup(func() {
		s.Stop()
		if t.Failed() {
			t.Logf("miniotest: MinIO log (%s):\n%s", s.LogPath, s.Log(16<<10))
		}
	})
	return s
}

// Restart starts MinIO again on the same port and data directory, with the
// same credentials, and waits until it is ready. Objects written before Stop
// are still there.
func (s *Server) Restart(t testing.TB) {
	t.Helper()
	if err := s.Server.Restart(context.Background()); err != nil {
		t.Fatalf("miniotest: %v\n%s", err, s.Log(16<<10))
	}
}

// Client returns an aws-sdk-go-v2 client that talks to the server directly
// (path-style, root credentials).
func (s *Server) Client(t testing.TB) *s3.Client { return s.Server.Client() }

// PutObject writes data to bucket/key directly, or fails the test.
func (s *Server) PutObject(t testing.TB, bucket, key string, data []byte) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if _, err := s.Client(t).PutObject(ctx, &s3.PutObjectInput{Bucket: &bucket, Key: &key, Body: bytes.NewReader(data)}); err != nil {
		t.Fatalf("miniotest: put %s/%s: %v", bucket, key, err)
	}
}

// Object is what c reads at bucket/key (nil: no such key); any other error
// fails the test.
func Object(t testing.TB, c *s3.Client, bucket, key string) []byte {
	t.Helper()
	out, err := c.GetObject(context.Background(), &s3.GetObjectInput{Bucket: &bucket, Key: &key})
	var nsk *types.NoSuchKey
	if errors.As(err, &nsk) {
		return nil
	}
	if err != nil {
		t.Fatalf("miniotest: get %s/%s: %v", bucket, key, err)
	}
	defer out.Body.Close()
	b, err := io.ReadAll(out.Body)
	if err != nil {
		t.Fatalf("miniotest: get %s/%s: %v", bucket, key, err)
	}
	return b
}

// CreateBucket creates a bucket or fails the test.
func (s *Server) CreateBucket(t testing.TB, name string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if err := s.Server.CreateBucket(ctx, name); err != nil {
		t.Fatalf("miniotest: %v", err)
	}
}

func findBinary(t testing.TB) string {
	t.Helper()
	const hint = "run `make bin/minio` (hack/build-minio.sh)"
	if p := os.Getenv("MINIO_BIN"); p != "" {
		return p
	}
	root, err := repo.Root()
	if err != nil {
		t.Fatalf("miniotest: %v; %s", err, hint)
	}
	return filepath.Join(root, "bin", "minio")
}
