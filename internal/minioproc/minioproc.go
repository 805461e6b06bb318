// Package minioproc runs a MinIO server process on loopback: the S3 backend of
// the tests (through miniotest), of `make bench` (tools/benchmark) and of local stacks.
// The binary is built from MinIO's Go module by hack/build-minio.sh.
package minioproc

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"

	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/credentials"
	"github.com/aws/aws-sdk-go-v2/service/s3"

	"github.com/distcache/distcache/internal/freeport"
)

// ReadyTimeout bounds how long Start and Restart wait for MinIO to report
// ready. Generous on purpose: a loaded CI machine running -race can be slow.
const ReadyTimeout = 60 * time.Second

// Server is one running (or stopped) MinIO process.
type Server struct {
	Endpoint  string // http://127.0.0.1:PORT
	AccessKey string
	SecretKey string
	Region    string
	Dir       string // data directory
	LogPath   string // MinIO's stdout and stderr

	bin      string
	addr     string
	certsDir string // empty; keeps MinIO out of ~/.minio

	mu   sync.Mutex
	cmd  *exec.Cmd
	done chan struct{} // closed when cmd has exited
}

// Start runs bin on a free loopback port with its data under dir (created),
// random root credentials, and waits until it is ready.
func Start(ctx context.Context, bin, dir string) (*Server, error) {
	if _, err := os.Stat(bin); err != nil {
		return nil, fmt.Errorf("MinIO binary: %w; run `make bin/minio` (hack/build-minio.sh)", err)
	}
	s := &Server{
		AccessKey: "minio-" + randomHex(6),
		SecretKey: randomHex(20),
		Region:    "us-east-1",
		Dir:       filepath.Join(dir, "data"),
		LogPath:   filepath.Join(dir, "minio.log"),
		bin:       bin,
		certsDir:  filepath.Join(dir, "certs"),
	}
	if err := os.MkdirAll(s.Dir, 0o755); err != nil {
		return nil, err
	}
	for attempt := 1; ; attempt++ {
		addr, err := freeport.Next()
		if err != nil {
			return nil, err
		}
		s.addr, s.Endpoint = addr, "http://"+addr
		err = s.start(ctx)
		switch {
		case err == nil:
			return s, nil
		case errors.Is(err, errExited) && attempt < startAttempts:
			// Another process may have bound the port between its pick
			// and MinIO's bind: on a shared machine, try another.
			continue
		case errors.Is(err, errExited):
			return nil, fmt.Errorf("%w; the end of its log:\n%s", err, s.Log(4<<10))
		}
		return nil, err
	}
}

// startAttempts is how many ports Start tries MinIO on.
const startAttempts = 3

// errExited is a MinIO process that exited before it was ready.
var errExited = errors.New("MinIO exited before it was ready")

// Pid is the MinIO process's ID; 0 when it is not running.
func (s *Server) Pid() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.cmd == nil || s.cmd.Process == nil {
		return 0
	}
	return s.cmd.Process.Pid
}

// Stop kills the MinIO process, as if S3 went away. It is idempotent.
func (s *Server) Stop() {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.cmd == nil {
		return
	}
	_ = s.cmd.Process.Kill()
	<-s.done
	s.cmd, s.done = nil, nil
}

// Restart starts MinIO again on the same port, data and credentials.
func (s *Server) Restart(ctx context.Context) error {
	s.Stop()
	return s.start(ctx)
}

// Client is an aws-sdk-go-v2 client talking to the server directly
// (path-style, root credentials).
func (s *Server) Client() *s3.Client {
	return s3.New(s3.Options{
		Region:       s.Region,
		BaseEndpoint: aws.String(s.Endpoint),
		UsePathStyle: true,
		Credentials:  credentials.NewStaticCredentialsProvider(s.AccessKey, s.SecretKey, ""),
	})
}

// CreateBucket creates a bucket.
func (s *Server) CreateBucket(ctx context.Context, name string) error {
	_, err := s.Client().CreateBucket(ctx, &s3.CreateBucketInput{Bucket: aws.String(name)})
	if err != nil {
		return fmt.Errorf("create bucket %q: %w", name, err)
	}
	return nil
}

// Log returns the tail of MinIO's log, for failure reports.
func (s *Server) Log(max int) string {
	b, err := os.ReadFile(s.LogPath)
	if err != nil {
		return "no MinIO log: " + err.Error()
	}
	if len(b) > max {
		b = b[len(b)-max:]
	}
	return string(b)
}

func (s *Server) start(ctx context.Context) error {
	logf, err := os.OpenFile(s.LogPath, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return err
	}
	defer logf.Close() // the child has its own copy of the descriptor
	fmt.Fprintf(logf, "==== starting %s at %s\n", s.bin, time.Now().Format(time.RFC3339Nano))

	cmd := exec.Command(s.bin, "server", "--quiet", "--address", s.addr, "--certs-dir", s.certsDir, s.Dir)
	cmd.Env = s.env()
	cmd.Stdout = logf
	cmd.Stderr = logf
	setProcAttrs(cmd)
	if err := cmd.Start(); err != nil {
		return fmt.Errorf("start %s: %w", s.bin, err)
	}
	done := make(chan struct{})
	go func() {
		_ = cmd.Wait()
		close(done)
	}()
	s.mu.Lock()
	s.cmd, s.done = cmd, done
	s.mu.Unlock()

	if err := s.waitReady(ctx, done); err != nil {
		s.Stop()
		return err
	}
	return nil
}

// env is the parent's environment without MINIO_* variables, plus settings
// that keep MinIO local and quick to start.
func (s *Server) env() []string {
	var env []string
	for _, kv := range os.Environ() {
		if !strings.HasPrefix(kv, "MINIO_") {
			env = append(env, kv)
		}
	}
	return append(env,
		"MINIO_ROOT_USER="+s.AccessKey,
		"MINIO_ROOT_PASSWORD="+s.SecretKey,
		"MINIO_REGION="+s.Region,
		"MINIO_BROWSER=off",         // no console listener
		"MINIO_UPDATE=off",          // no update checks
		"MINIO_CALLHOME_ENABLE=off", // no phoning home
		"MINIO_CI_CD=on",            // no interactive / root-disk checks
		"MINIO_SCANNER_SPEED=slowest",
	)
}

func (s *Server) waitReady(ctx context.Context, exited <-chan struct{}) error {
	client := &http.Client{Timeout: 2 * time.Second}
	url := s.Endpoint + "/minio/health/ready"
	deadline := time.Now().Add(ReadyTimeout)
	for {
		resp, err := client.Get(url)
		if err == nil {
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				// Ready can come before the root credentials are loaded
				// (an early request then gets InvalidAccessKeyId): wait
				// for a signed request to succeed too.
				cctx, cancel := context.WithTimeout(ctx, 2*time.Second)
				_, err = s.Client().ListBuckets(cctx, &s3.ListBucketsInput{})
				cancel()
				if err == nil {
					return nil
				}
			} else {
				err = fmt.Errorf("status %s", resp.Status)
			}
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("MinIO at %s not ready after %s: %v", s.addr, ReadyTimeout, err)
		}
		select {
		case <-exited:
			return fmt.Errorf("%w (see %s)", errExited, s.LogPath)
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(50 * time.Millisecond):
		}
	}
}

func randomHex(n int) string {
	b := make([]byte, n)
	_, _ = rand.Read(b) // crypto/rand never fails on Linux
	return hex.EncodeToString(b)
}
