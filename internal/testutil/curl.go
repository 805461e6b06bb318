package testutil

import (
	"context"
	"os/exec"
	"testing"
	"time"
)

// Curl is curl on PATH as an S3 client: it signs with --aws-sigv4, unlike
// the SDKs (before curl 8, no x-amz-content-sha256; path and query signed
// as typed).
type Curl struct {
	Path   string // the curl binary
	Region string // signed for this region's s3
}

// NewCurl finds curl on PATH, skipping the test when there is none.
func NewCurl(t testing.TB, region string) Curl {
	t.Helper()
	path, err := exec.LookPath("curl")
	if err != nil {
		t.Skip("curl not on PATH")
	}
	return Curl{Path: path, Region: region}
}

// Run runs curl -sS --fail-with-body with args, signing as
// accessKey:secret, and returns what it printed (for a failed request, the
// error answer's body and an error); it gives up after 30 seconds.
func (c Curl) Run(accessKey, secret string, args ...string) ([]byte, error) {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	base := []string{"-sS", "--fail-with-body", "--aws-sigv4", "aws:amz:" + c.Region + ":s3", "--user", accessKey + ":" + secret}
	return exec.CommandContext(ctx, c.Path, append(base, args...)...).Output()
}
