// Package cachenode_test runs the real `cachenode serve` binary as a process,
// configured the way the operator will configure pods (flags and DISTCACHE_*
// environment variables), against a real MinIO.
package cachenode_test

import (
	"bytes"
	"crypto/rand"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/distcache/distcache/internal/gobuild"
	"github.com/distcache/distcache/internal/pki"
	"github.com/distcache/distcache/internal/testutil"
	"github.com/distcache/distcache/internal/testutil/certfiles"
	"github.com/distcache/distcache/internal/testutil/freeport"
	"github.com/distcache/distcache/internal/testutil/gobin"
	"github.com/distcache/distcache/internal/testutil/miniotest"
)

// testVersion is the version the binary under test is built as.
const testVersion = "v0.0.0-e2e"

// stampFlags are the -ldflags of testVersion, as make build stamps a
// version.
var stampFlags = sync.OnceValues(func() ([]byte, error) {
	stamp := exec.Command("../../hack/version-ldflags.sh")
	stamp.Env = append(os.Environ(), "VERSION="+testVersion)
	return stamp.Output()
})

// cachenode is the binary under test, stamped with testVersion, so the
// spec below sees it where users will: cachenode version and
// distcache_build_info.
func cachenode(t *testing.T) string {
	t.Helper()
	ldflags, err := stampFlags()
	if err != nil {
		t.Fatalf("hack/version-ldflags.sh: %v", err)
	}
	return gobin.Build(t, gobuild.Cachenode, strings.TrimSpace(string(ldflags)))
}

func TestServeProcess(t *testing.T) {
	minio := miniotest.Start(t)
	minio.CreateBucket(t, "data")
	payload := make([]byte, 5<<20+123)
	_, _ = rand.Read(payload)
	minio.PutObject(t, "data", "dir/table.bin", payload)

	dir := t.TempDir()
	certfiles.Write(t, dir, "e2e CA", map[string]pki.Identity{"client": {Kind: pki.KindTenant, Name: "analytics"}})
	tenants := filepath.Join(dir, "tenants.yaml")
	if err := os.WriteFile(tenants, []byte("tenants:\n  - name: analytics\n    buckets: [data]\n"), 0o600); err != nil {
		t.Fatal(err)
	}

	api, ops := freeport.Addr(t), freeport.Addr(t)
	cmd := exec.Command(cachenode(t), "serve",
		"--listen", api, "--metrics-listen", ops,
		"--tls-cert", filepath.Join(dir, "server.crt"), "--tls-key", filepath.Join(dir, "server.key"),
		"--client-ca", filepath.Join(dir, "ca.crt"), "--tenants-file", tenants,
		"--s3-endpoint", minio.Endpoint, "--s3-path-style")
	// Sizes and the data dir come from the environment, as in a pod spec.
	cmd.Env = append(os.Environ(),
		"AWS_ACCESS_KEY_ID="+minio.AccessKey, "AWS_SECRET_ACCESS_KEY="+minio.SecretKey,
		"DISTCACHE_DATA_DIR="+filepath.Join(dir, "store"), "DISTCACHE_DISK_BYTES=256Mi",
		"DISTCACHE_RAM_BYTES=64Mi", "DISTCACHE_CHUNK_SIZE=1Mi")
	node := testutil.StartProcess(t, "cachenode", cmd)
	testutil.WaitStatus(t, "http://"+ops+"/readyz", http.StatusOK, node.Done())

	tlsConfig, err := pki.ClientTLSConfig(filepath.Join(dir, "client.crt"), filepath.Join(dir, "client.key"), filepath.Join(dir, "ca.crt"))
	if err != nil {
		t.Fatal(err)
	}
	c := &http.Client{Transport: &http.Transport{TLSClientConfig: tlsConfig}}
	for _, want := range []string{"miss", "hit_ram"} {
		resp, err := c.Get("https://" + api + "/v1/objects/data/dir/table.bin")
		if err != nil {
			t.Fatal(err)
		}
		body, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != 200 || !bytes.Equal(body, payload) {
			t.Fatalf("read: status %d, %d bytes", resp.StatusCode, len(body))
		}
		if got := resp.Header.Get("X-Distcache-Cache"); got != want {
			t.Fatalf("cache result %q, want %q", got, want)
		}
		if got := resp.Header.Get("X-Distcache-Chunk-Size"); got != "1048576" {
			t.Fatalf("chunk size from DISTCACHE_CHUNK_SIZE not applied: %q", got)
		}
	}

	testutil.WantMetrics(t, ops,
		`distcache_chunk_reads_total{result="hit_ram",tenant="analytics"} 6`,
		`distcache_chunk_reads_total{result="miss",tenant="analytics"} 6`,
		`distcache_s3_requests_total{op="get",status="ok"} 6`,
		`distcache_store_disk_capacity_bytes 2.68435456e+08`,
		`distcache_tenant_config_reloads_total{outcome="ok"}`,
		`version="`+testVersion+`"`, // distcache_build_info
	)

	// SIGTERM: readiness drops, in-flight work drains, the process exits 0.
	if err := cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	select {
	case <-node.Done():
		if err := node.Err(); err != nil {
			t.Fatalf("cachenode exited with %v after SIGTERM", err)
		}
	case <-time.After(60 * time.Second):
		t.Fatal("cachenode did not exit after SIGTERM")
	}
}

func TestServeRefusesBadFlags(t *testing.T) {
	for name, args := range map[string][]string{
		"missing certificates": {"serve", "--tenants-file", "x"},
		"chunk size too large": {"serve", "--tls-cert", "a", "--tls-key", "b", "--client-ca", "c", "--tenants-file", "d", "--chunk-size", "1Gi"},
		"bad size":             {"serve", "--disk-bytes", "lots"},
	} {
		t.Run(name, func(t *testing.T) {
			out, err := exec.Command(cachenode(t), args...).CombinedOutput()
			if err == nil {
				t.Fatalf("cachenode accepted %v", args)
			}
			if !strings.Contains(string(out), "--") && !strings.Contains(string(out), "byte size") {
				t.Fatalf("error does not name the flag: %s", out)
			}
		})
	}
}

func TestVersion(t *testing.T) {
	for _, args := range [][]string{{"version"}, {"--version"}} {
		out, err := exec.Command(cachenode(t), args...).CombinedOutput()
		if err != nil {
			t.Fatalf("cachenode %s: %v\n%s", args[0], err, out)
		}
		if !strings.Contains(string(out), "cachenode, version "+testVersion) {
			t.Errorf("cachenode %s printed %q, want the version it was built as (%s)", args[0], out, testVersion)
		}
	}
}
