package hitpath

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/distcache/distcache/internal/testutil/benchtest"
)

// testBin is a bin/ directory for Run: the repository's (at root), with
// $MINIO_BIN and $NGINX_BIN standing in for bin/minio and bin/nginx when
// set. A missing nginx skips the test (fails it under CI), as the other
// tests that need a tool from hack/ do; a missing MinIO fails it, as
// miniotest does.
func testBin(t *testing.T, root string) string {
	t.Helper()
	bin := filepath.Join(root, "bin")
	minio, nginx := filepath.Join(bin, "minio"), filepath.Join(bin, "nginx")
	if p := os.Getenv("MINIO_BIN"); p != "" {
		minio = p
	}
	if p := os.Getenv("NGINX_BIN"); p != "" {
		nginx = p
	}
	if fi, err := os.Stat(nginx); err != nil || fi.Mode()&0o111 == 0 {
		msg := fmt.Sprintf("nginx not found at %s: run hack/nginx.sh or set NGINX_BIN", nginx)
		if os.Getenv("CI") != "" {
			t.Fatal(msg + " (CI is set: not skipping)")
		}
		t.Skip(msg)
	}
	if minio == filepath.Join(bin, "minio") && nginx == filepath.Join(bin, "nginx") {
		return bin
	}
	dir := t.TempDir()
	for name, target := range map[string]string{"minio": minio, "nginx": nginx} {
		if err := os.Symlink(target, filepath.Join(dir, name)); err != nil {
			t.Fatal(err)
		}
	}
	return dir
}

// TestQuickRun runs the part in smoke mode and checks that every cell
// measured real reads, every one of them byte-exact, that the node and
// nginx served hits only, that the CPU was counted, and that the section
// carries the tables, the ratios and the plots.
func TestQuickRun(t *testing.T) {
	for _, k := range []string{"BENCH_PROFILE_DIR", "BENCH_B1_COLUMNS", "BENCH_B1_CLIENTS", "BENCH_B1_WORKLOADS", "BENCH_B1_SECONDS", "BENCH_B1_ROUNDS"} {
		t.Setenv(k, "")
	}
	env := benchtest.Env(t, "b1")
	env.Bin = testBin(t, env.Root)
	rep, err := measure(context.Background(), env)
	if err != nil {
		t.Fatal(err)
	}
	sec, err := rep.section(env.ImgDir)
	if err != nil {
		t.Fatal(err)
	}
	cfg := defaultConfig(true)
	if want := 9 * 2 * len(cfg.clients); len(rep.results) != want {
		t.Fatalf("%d cells measured, want %d", len(rep.results), want)
	}
	for _, res := range rep.results {
		name := fmt.Sprintf("%s/%s/%d", res.col.id, res.wl.id, res.clients)
		switch {
		case res.reads == 0 || res.bytes != res.reads*res.wl.size:
			t.Errorf("%s: %d reads, %d bytes", name, res.reads, res.bytes)
		case res.checked != res.reads:
			t.Errorf("%s: %d of %d reads compared byte for byte (quick mode checks all)", name, res.checked, res.reads)
		case res.lat.Count() < int(res.reads) || res.lat.Quantile(0.5) <= 0:
			t.Errorf("%s: %d latencies for %d reads", name, res.lat.Count(), res.reads)
		case res.cpu <= 0:
			t.Errorf("%s: no CPU time counted", name)
		case res.nginxMiss != 0:
			t.Errorf("%s: nginx answered %d reads from MinIO, not its cache", name, res.nginxMiss)
		case res.nodeMiss != 0:
			t.Errorf("%s: %v node reads were not RAM hits", name, res.nodeMiss)
		}
	}
	if sec.Title != "B1 — hit path" {
		t.Errorf("title %q", sec.Title)
	}
	for _, want := range []string{"distcache node (internal/client)", "gateway (own process), default: TTL mode, page cache on", "gateway (own process), --immutable nodes",
		"gateway (own process), TTL mode, page cache off", "nginx proxy_cache, plain HTTP", "nginx proxy_cache, mTLS", "MinIO direct",
		"raw TLS 1.3 ceiling", "Goal: gateway ahead of nginx", "p50 ≤ 0.3 ms", "### Ratios", "### Reading it", "img/b1-range.png", "img/b1-chunk.png", "TLS_AES"} {
		if !strings.Contains(sec.Markdown, want) {
			t.Errorf("the section lacks %q", want)
		}
	}
	for _, f := range []string{"b1-range.png", "b1-chunk.png"} {
		if fi, err := os.Stat(filepath.Join(env.ImgDir, f)); err != nil || fi.Size() == 0 {
			t.Errorf("plot %s: %v", f, err)
		}
	}
	if t.Failed() {
		t.Logf("section:\n%s", sec.Markdown)
	}
}

// TestCheckCatchesWrongBytes: the byte check the cells rely on refuses a
// wrong byte anywhere in a read.
func TestCheckCatchesWrongBytes(t *testing.T) {
	w := &world{cfg: config{verifyEvery: 1}, payload: []byte("0123456789")}
	var n atomic.Int64
	wk := &worker{}
	if err := w.check(wk, 2, []byte("2345"), &n); err != nil {
		t.Fatalf("right bytes refused: %v", err)
	}
	if err := w.check(wk, 2, []byte("2x45"), &n); err == nil {
		t.Fatal("a wrong byte in the middle was accepted")
	}
	if err := w.check(wk, 2, []byte("2346"), &n); err == nil {
		t.Fatal("a wrong last byte was accepted")
	}
}
