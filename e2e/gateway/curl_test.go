package gateway_test

import (
	"bytes"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/distcache/distcache/internal/testutil"
)

// TestCurl uses curl --aws-sigv4 as the S3 client: it signs differently
// from the SDKs (before curl 8, no x-amz-content-sha256; path and query
// signed as typed).
func TestCurl(t *testing.T) {
	curl := testutil.NewCurl(t, region)
	e := newEnv(t, envOptions{pageCache: 8 << 20})
	run := func(t *testing.T, secret string, args ...string) ([]byte, error) {
		t.Helper()
		return curl.Run(accessKey, secret, args...)
	}
	ok := func(t *testing.T, args ...string) []byte {
		t.Helper()
		out, err := run(t, secretKey, args...)
		if err != nil {
			t.Fatalf("curl %s: %v\n%s", strings.Join(args, " "), err, out)
		}
		return out
	}
	body := testutil.RandomBytes(rand.New(rand.NewPCG(13, 14)), 3*chunkSize+11)
	file := filepath.Join(t.TempDir(), "body")
	testutil.Must(t, os.WriteFile(file, body, 0o600))
	for _, path := range []string{"/bucket-a/curl/plain.bin", "/bucket-a/curl/sp%20ace%2Bplus(1).bin"} {
		t.Run(path, func(t *testing.T) {
			ok(t, "-X", "PUT", "-H", "Content-Type: application/octet-stream", "--data-binary", "@"+file, e.srv.URL()+path)
			if got := ok(t, e.srv.URL()+path); !bytes.Equal(got, body) {
				t.Errorf("GET returned %d bytes, want the %d PUT", len(got), len(body))
			}
			if got := ok(t, "-H", "Range: bytes=100-199", e.srv.URL()+path); !bytes.Equal(got, body[100:200]) {
				t.Error("ranged GET differs")
			}
			if got := ok(t, "-H", "Range: bytes=-5", e.srv.URL()+path); !bytes.Equal(got, body[len(body)-5:]) {
				t.Error("suffix GET differs")
			}
		})
	}
	if got := e.cluster.GetDirect("bucket-a", "curl/sp ace+plus(1).bin", ""); !bytes.Equal(got, body) {
		t.Error("S3 does not hold the object under the decoded key")
	}
	t.Run("list", func(t *testing.T) {
		out := ok(t, e.srv.URL()+"/bucket-a?list-type=2&prefix=curl%2Fsp&delimiter=%2F")
		if !bytes.Contains(out, []byte("<Key>curl/sp ace+plus(1).bin</Key>")) {
			t.Errorf("listing: %s", out)
		}
	})
	t.Run("delete", func(t *testing.T) {
		ok(t, "-X", "DELETE", e.srv.URL()+"/bucket-a/curl/plain.bin")
		out, err := run(t, secretKey, e.srv.URL()+"/bucket-a/curl/plain.bin")
		if err == nil || !bytes.Contains(out, []byte("<Code>NoSuchKey</Code>")) {
			t.Errorf("GET after DELETE: %v %s", err, out)
		}
	})
	t.Run("wrong secret", func(t *testing.T) {
		out, err := run(t, "wrong", e.srv.URL()+"/bucket-a/curl/sp%20ace%2Bplus(1).bin")
		if err == nil || !bytes.Contains(out, []byte("<Code>SignatureDoesNotMatch</Code>")) {
			t.Errorf("got %v %s", err, out)
		}
	})
}
