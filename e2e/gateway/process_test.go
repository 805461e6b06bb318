package gateway_test

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"math/rand/v2"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/s3"

	"github.com/distcache/distcache/internal/testutil"
	"github.com/distcache/distcache/internal/testutil/freeport"
	"github.com/distcache/distcache/internal/testutil/gobin"
	"github.com/distcache/distcache/internal/testutil/nodecluster"
)

// processCluster builds the cachenode binary and starts a cache of n nodes
// for a gateway process to front, with team-a's certificate written into
// its directory (tenant-team-a.crt and .key).
func processCluster(t *testing.T, n int) (bin string, c *nodecluster.Cluster) {
	t.Helper()
	if testing.Short() {
		t.Skip("builds the cachenode binary")
	}
	bin = gobin.Cachenode(t)
	c = nodecluster.StartWith(t, n, nodecluster.Options{ChunkSize: chunkSize, Tenants: tenants})
	c.TenantTLS("team-a")
	return bin, c
}

// TestGatewayProcess runs `cachenode gateway` as the operator would (flags
// plus DISTCACHE_* environment, credentials from a file) in front of a
// cache cluster, and checks the S3 API, readiness and metrics.
func TestGatewayProcess(t *testing.T) {
	bin, c := processCluster(t, 3)
	creds := filepath.Join(t.TempDir(), "creds.yaml")
	testutil.Must(t, os.WriteFile(creds, []byte("accessKeyID: "+accessKey+"\nsecretAccessKey: "+secretKey+"\n"), 0o600))
	listen, metricsAddr := freeport.Addr(t), freeport.Addr(t)

	cmd := exec.Command(bin, "gateway",
		"--listen", listen, "--credentials-file", creds, "--region", region,
		"--tls-cert", filepath.Join(c.Dir, "tenant-team-a.crt"), "--tls-key", filepath.Join(c.Dir, "tenant-team-a.key"),
		"--ca", c.CAFile, "--log-level", "info")
	cmd.Env = append(os.Environ(),
		"DISTCACHE_NODES="+strings.Join(c.Seeds(), ","),
		"DISTCACHE_METRICS_LISTEN="+metricsAddr,
		"DISTCACHE_PAGE_CACHE_BYTES=16Mi",
		"DISTCACHE_PARALLELISM=4",
	)
	gw := testutil.StartProcess(t, "gateway", cmd)
	logs := gw.Logs
	testutil.WaitStatus(t, "http://"+metricsAddr+"/readyz", http.StatusOK, gw.Done())
	// No --chunk-size: GetObject reads in the nodes' chunks (the default
	// 1 MiB page does not fit 256 KiB chunks), 4 of them ahead.
	want := fmt.Sprintf(`"readPieceBytes":%d,"readAhead":4`, chunkSize)
	for deadline := time.Now().Add(10 * time.Second); !strings.Contains(logs.String(), want); time.Sleep(20 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("the gateway's ready line lacks %s", want)
		}
	}

	ctx := context.Background()
	cl := testutil.S3Client("http://"+listen, accessKey, secretKey)
	data := testutil.RandomBytes(rand.New(rand.NewPCG(21, 22)), 5*chunkSize+9)
	_, err := cl.PutObject(ctx, &s3.PutObjectInput{Bucket: aws.String("bucket-a"), Key: aws.String("proc/obj"), Body: bytes.NewReader(data)})
	testutil.Must(t, err)
	for i := 0; i < 2; i++ {
		out, err := cl.GetObject(ctx, &s3.GetObjectInput{Bucket: aws.String("bucket-a"), Key: aws.String("proc/obj"), Range: aws.String("bytes=1000-")})
		testutil.Must(t, err)
		got, err := io.ReadAll(out.Body)
		out.Body.Close()
		testutil.Must(t, err)
		if !bytes.Equal(got, data[1000:]) {
			t.Fatalf("read %d through the process differs", i)
		}
	}
	list, err := cl.ListObjectsV2(ctx, &s3.ListObjectsV2Input{Bucket: aws.String("bucket-a"), Prefix: aws.String("proc/")})
	testutil.Must(t, err)
	if len(list.Contents) != 1 {
		t.Errorf("listing: %d objects", len(list.Contents))
	}
	_, err = testutil.S3Client("http://"+listen, accessKey, "wrong").ListObjectsV2(ctx, &s3.ListObjectsV2Input{Bucket: aws.String("bucket-a")})
	wantCode(t, "wrong secret", err, "SignatureDoesNotMatch", http.StatusForbidden)

	testutil.WantMetrics(t, metricsAddr,
		`distcache_gateway_requests_total{operation="GetObject",status="206"} 2`,
		`distcache_gateway_requests_total{operation="PutObject",status="200"} 1`,
		`distcache_gateway_requests_total{operation="ListObjectsV2",status="403"} 1`,
		`distcache_client_page_cache_requests_total{result="hit"}`,
		`distcache_gateway_request_duration_seconds_bucket`,
	)
}

// TestGatewayProcessWaitsForTheCache starts the gateway before any cache
// node is reachable: it answers 503 ServiceUnavailable (S3 XML) and is not
// ready, then serves once a node comes up.
func TestGatewayProcessWaitsForTheCache(t *testing.T) {
	bin, c := processCluster(t, 1)
	listen, metricsAddr := freeport.Addr(t), freeport.Addr(t)
	nodeAddr := freeport.Addr(t) // nothing listens there yet
	cmd := exec.Command(bin, "gateway", "--listen", listen, "--metrics-listen", metricsAddr,
		"--nodes", "https://"+nodeAddr, "--access-key", accessKey, "--ca", c.CAFile,
		"--tls-cert", filepath.Join(c.Dir, "tenant-team-a.crt"), "--tls-key", filepath.Join(c.Dir, "tenant-team-a.key"))
	cmd.Env = append(os.Environ(), "DISTCACHE_SECRET_KEY="+secretKey)
	gw := testutil.StartProcess(t, "gateway", cmd)
	testutil.WaitStatus(t, "http://"+metricsAddr+"/healthz", http.StatusOK, gw.Done())
	resp, err := http.Get("http://" + metricsAddr + "/readyz")
	testutil.Must(t, err)
	resp.Body.Close()
	if resp.StatusCode != http.StatusServiceUnavailable {
		t.Errorf("/readyz without a cache node: %d", resp.StatusCode)
	}
	resp, err = http.Get("http://" + listen + "/bucket-a/k")
	testutil.Must(t, err)
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != http.StatusServiceUnavailable || xmlCode(body) != "ServiceUnavailable" {
		t.Errorf("S3 request without a cache node: %d %s", resp.StatusCode, body)
	}
	// The node comes up on the address the gateway was given (a TCP
	// forwarder to the cluster's member stands in for it).
	forwardTCP(t, nodeAddr, c.Member(0).Addr)
	testutil.WaitStatus(t, "http://"+metricsAddr+"/readyz", http.StatusOK, gw.Done())
	c.PutDirect("bucket-a", "late", []byte("hello"))
	out, err := testutil.S3Client("http://"+listen, accessKey, secretKey).GetObject(context.Background(),
		&s3.GetObjectInput{Bucket: aws.String("bucket-a"), Key: aws.String("late")})
	testutil.Must(t, err)
	got, _ := io.ReadAll(out.Body)
	out.Body.Close()
	if string(got) != "hello" {
		t.Errorf("got %q", got)
	}
}

// forwardTCP listens on addr and pipes every connection to target.
func forwardTCP(t *testing.T, addr, target string) {
	t.Helper()
	ln, err := net.Listen("tcp", addr)
	testutil.Must(t, err)
	t.Cleanup(func() { _ = ln.Close() })
	go func() {
		for {
			in, err := ln.Accept()
			if err != nil {
				return
			}
			go func() {
				defer in.Close()
				out, err := net.Dial("tcp", target)
				if err != nil {
					return
				}
				defer out.Close()
				go func() { _, _ = io.Copy(out, in); _ = out.(*net.TCPConn).CloseWrite() }()
				_, _ = io.Copy(in, out)
			}()
		}
	}()
}

// TestGatewayProcessRefusesBadFlags: configuration mistakes stop the
// process at once with a message, rather than a gateway that cannot work.
func TestGatewayProcessRefusesBadFlags(t *testing.T) {
	bin, c := processCluster(t, 1)
	c.PeerTLS("gw-1")
	tenantCert := []string{"--tls-cert", filepath.Join(c.Dir, "tenant-team-a.crt"), "--tls-key", filepath.Join(c.Dir, "tenant-team-a.key")}
	peerCert := []string{"--tls-cert", filepath.Join(c.Dir, "peer-gw-1.crt"), "--tls-key", filepath.Join(c.Dir, "peer-gw-1.key")}
	base := []string{"gateway", "--listen", "127.0.0.1:0", "--metrics-listen", "", "--nodes", c.Seeds()[0], "--ca", c.CAFile}
	creds := filepath.Join(t.TempDir(), "creds.yaml")
	testutil.Must(t, os.WriteFile(creds, []byte("accessKeyID: a\nsecretKey: typo\n"), 0o600))
	for name, tt := range map[string]struct {
		args []string
		want string
	}{
		"no credentials":         {append(tenantCert, "--access-key", "a"), "an access key and a secret key are required"},
		"credentials file typo":  {append(tenantCert, "--credentials-file", creds), "unknown field"},
		"no nodes":               {append(tenantCert, "--nodes", "", "--access-key", "a", "--secret-key", "b"), "--nodes is required"},
		"peer without a tenant":  {append(peerCert, "--access-key", "a", "--secret-key", "b"), "--tenant"},
		"half a listen TLS pair": {append(tenantCert, "--access-key", "a", "--secret-key", "b", "--listen-tls-cert", "x"), "go together"},
	} {
		t.Run(name, func(t *testing.T) {
			ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
			defer cancel()
			out, err := exec.CommandContext(ctx, bin, append(append([]string{}, base...), tt.args...)...).CombinedOutput()
			if err == nil || !strings.Contains(string(out), tt.want) {
				t.Errorf("err %v, output %s; want a failure mentioning %q", err, out, tt.want)
			}
		})
	}
}
