package sigv4

import (
	"bytes"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/distcache/distcache/internal/testutil"
)

// curl --aws-sigv4 signs differently from the SDKs: before curl 8 it sends
// no x-amz-content-sha256 (the payload line is the SHA-256 of the body), and
// it signs the path and query string as typed rather than re-encoding them.
func TestCurl(t *testing.T) {
	curl := testutil.NewCurl(t, testRegion)
	s := newS3Server(t)
	run := func(t *testing.T, args ...string) []byte {
		t.Helper()
		out, err := curl.Run(testKeyID, testSecret, args...)
		if err != nil {
			t.Fatalf("curl %s: %v\n%s", strings.Join(args, " "), err, out)
		}
		return out
	}

	body := testutil.SeededBytes(11, 300<<10)
	file := filepath.Join(t.TempDir(), "body")
	if err := os.WriteFile(file, body, 0o600); err != nil {
		t.Fatal(err)
	}
	for _, path := range []string{"/bkt/curl/plain.bin", "/bkt/curl/sp%20ace%2Bplus(1).bin"} {
		t.Run(path, func(t *testing.T) {
			run(t, "-X", "PUT", "-H", "Content-Type: application/octet-stream", "--data-binary", "@"+file, s.URL+path)
			got := run(t, s.URL+path)
			if !bytes.Equal(got, body) {
				t.Errorf("GET returned %d bytes, want the %d PUT", len(got), len(body))
			}
			part := run(t, "-H", "Range: bytes=100-199", s.URL+path)
			if !bytes.Equal(part, body[100:200]) {
				t.Error("ranged GET differs")
			}
			for _, o := range s.requireAllVerified(t) {
				if o.Result.PayloadMode != PayloadSHA256 {
					t.Errorf("%s: payload mode %s", o.Method, o.Result.PayloadMode)
				}
			}
		})
	}
	t.Run("list", func(t *testing.T) {
		out := run(t, s.URL+"/bkt?list-type=2&prefix=curl%2Fsp&delimiter=%2F")
		if !bytes.Contains(out, []byte("<Key>curl/sp ace+plus(1).bin</Key>")) {
			t.Errorf("listing: %s", out)
		}
		s.requireAllVerified(t)
	})
	t.Run("wrong secret", func(t *testing.T) {
		cmd := exec.Command(curl.Path, "-sS", "--aws-sigv4", "aws:amz:"+testRegion+":s3", "--user", testKeyID+":wrong", s.URL+"/bkt/curl/plain.bin")
		out, _ := cmd.Output()
		if !bytes.Contains(out, []byte(CodeSignatureDoesNotMatch)) {
			t.Errorf("got %s", out)
		}
		wantCode(t, s.takeOutcomes()[0].Err, CodeSignatureDoesNotMatch)
	})
}
