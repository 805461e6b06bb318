// Package miniotest starts a real MinIO server for tests.
//
// The binary is built from MinIO's Go module by hack/build-minio.sh (make
// bin/minio). Start looks for it in $MINIO_BIN, else in bin/minio at the root
// of the module that contains the working directory. Each Server gets its own
// loopback port, data directory and random root credentials, so tests can run
// in parallel. The server's log goes to a file that is printed when the test
// fails.
package miniotest

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/credentials"
	"github.com/aws/aws-sdk-go-v2/service/s3"
)

// readyTimeout bounds how long Start and Restart wait for MinIO to report
// ready. Generous on purpose: a loaded CI machine with -race can be slow.
const readyTimeout = 60 * time.Second

// Server is one running (or stopped) MinIO process.
type Server struct {
	Endpoint  string // http://127.0.0.1:PORT
	AccessKey string
	SecretKey string
	Region    string
	Dir       string // data directory

	bin      string
	addr     string // 127.0.0.1:PORT
	logPath  string
	certsDir string // empty; keeps MinIO out of ~/.minio

	mu   sync.Mutex
	cmd  *exec.Cmd
	done chan struct{} // closed when cmd has exited
}

// Start starts MinIO on a free loopback port with a fresh data directory and
// waits until it is ready. The server is stopped when the test ends.
func Start(t testing.TB) *Server {
	t.Helper()
	bin := findBinary(t)
	tmp := t.TempDir()
	s := &Server{
		AccessKey: "minio-" + randomHex(t, 6),
		SecretKey: randomHex(t, 20),
		Region:    "us-east-1",
		Dir:       filepath.Join(tmp, "data"),
		bin:       bin,
		logPath:   filepath.Join(tmp, "minio.log"),
		certsDir:  filepath.Join(tmp, "certs"),
	}
	if err := os.MkdirAll(s.Dir, 0o755); err != nil {
		t.Fatalf("miniotest: %v", err)
	}
	s.addr = freeAddr(t)
	s.Endpoint = "http://" + s.addr
	t.Cleanup(func() {
		s.Stop()
		if t.Failed() {
			s.dumpLog(t)
		}
	})
	s.start(t)
	return s
}

// Stop kills the MinIO process, as if S3 went away. It is idempotent and
// safe to call on a stopped server.
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

// Restart starts MinIO again on the same port and data directory, with the
// same credentials, and waits until it is ready. Objects written before Stop
// are still there. Restarting a running server stops it first.
func (s *Server) Restart(t testing.TB) {
	t.Helper()
	s.Stop()
	s.start(t)
}

// Client returns an aws-sdk-go-v2 client that talks to the server directly
// (path-style, root credentials).
func (s *Server) Client(t testing.TB) *s3.Client {
	t.Helper()
	return s3.New(s3.Options{
		Region:       s.Region,
		BaseEndpoint: aws.String(s.Endpoint),
		UsePathStyle: true,
		Credentials:  credentials.NewStaticCredentialsProvider(s.AccessKey, s.SecretKey, ""),
	})
}

// CreateBucket creates a bucket or fails the test.
func (s *Server) CreateBucket(t testing.TB, name string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if _, err := s.Client(t).CreateBucket(ctx, &s3.CreateBucketInput{Bucket: aws.String(name)}); err != nil {
		t.Fatalf("miniotest: create bucket %q: %v", name, err)
	}
}

func (s *Server) start(t testing.TB) {
	t.Helper()
	logf, err := os.OpenFile(s.logPath, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		t.Fatalf("miniotest: %v", err)
	}
	defer logf.Close() // the child has its own copy of the descriptor
	fmt.Fprintf(logf, "==== starting %s at %s\n", s.bin, time.Now().Format(time.RFC3339Nano))

	cmd := exec.Command(s.bin, "server", "--quiet", "--address", s.addr, "--certs-dir", s.certsDir, s.Dir)
	cmd.Env = s.env()
	cmd.Stdout = logf
	cmd.Stderr = logf
	setProcAttrs(cmd)
	if err := cmd.Start(); err != nil {
		t.Fatalf("miniotest: start %s: %v", s.bin, err)
	}
	done := make(chan struct{})
	go func() {
		_ = cmd.Wait()
		close(done)
	}()
	s.mu.Lock()
	s.cmd, s.done = cmd, done
	s.mu.Unlock()

	if err := s.waitReady(done); err != nil {
		s.Stop()
		s.dumpLog(t)
		t.Fatalf("miniotest: %v", err)
	}
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

func (s *Server) waitReady(exited <-chan struct{}) error {
	client := &http.Client{Timeout: 2 * time.Second}
	url := s.Endpoint + "/minio/health/ready"
	deadline := time.Now().Add(readyTimeout)
	for {
		resp, err := client.Get(url)
		if err == nil {
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				return nil
			}
			err = fmt.Errorf("status %s", resp.Status)
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("MinIO at %s not ready after %s: %v", s.addr, readyTimeout, err)
		}
		select {
		case <-exited:
			return fmt.Errorf("MinIO exited before it was ready (see log)")
		case <-time.After(50 * time.Millisecond):
		}
	}
}

func (s *Server) dumpLog(t testing.TB) {
	t.Helper()
	b, err := os.ReadFile(s.logPath)
	if err != nil {
		t.Logf("miniotest: no MinIO log: %v", err)
		return
	}
	const max = 16 << 10
	if len(b) > max {
		b = b[len(b)-max:]
	}
	t.Logf("miniotest: MinIO log (%s):\n%s", s.logPath, b)
}

func findBinary(t testing.TB) string {
	t.Helper()
	const hint = "run `make bin/minio` (hack/build-minio.sh)"
	if p := os.Getenv("MINIO_BIN"); p != "" {
		if _, err := os.Stat(p); err != nil {
			t.Fatalf("miniotest: MINIO_BIN=%s: %v; %s", p, err, hint)
		}
		return p
	}
	root, err := moduleRoot()
	if err != nil {
		t.Fatalf("miniotest: %v; %s", err, hint)
	}
	p := filepath.Join(root, "bin", "minio")
	if _, err := os.Stat(p); err != nil {
		t.Fatalf("miniotest: MinIO binary not found at %s: %v; %s", p, err, hint)
	}
	return p
}

// moduleRoot walks up from the working directory to the directory holding
// go.mod.
func moduleRoot() (string, error) {
	dir, err := os.Getwd()
	if err != nil {
		return "", err
	}
	for {
		if _, err := os.Stat(filepath.Join(dir, "go.mod")); err == nil {
			return dir, nil
		} else if !errors.Is(err, os.ErrNotExist) {
			return "", err
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			return "", errors.New("no go.mod above the working directory")
		}
		dir = parent
	}
}

func freeAddr(t testing.TB) string {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatalf("miniotest: %v", err)
	}
	defer l.Close()
	return l.Addr().String()
}

func randomHex(t testing.TB, n int) string {
	t.Helper()
	b := make([]byte, n)
	if _, err := rand.Read(b); err != nil {
		t.Fatalf("miniotest: %v", err)
	}
	return hex.EncodeToString(b)
}
