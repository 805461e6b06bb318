package s3backend

import (
	"bytes"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"errors"
	"fmt"
	"hash"
	"io"

	"github.com/distcache/distcache/internal/chunk"
	"github.com/distcache/distcache/internal/holdback"
	"github.com/distcache/distcache/internal/sigv4"
)

// ErrPayloadSHA256Mismatch is the error (in a BodyError) of a body that is
// not the one whose SHA-256 was declared (CheckPayloadSHA256).
var ErrPayloadSHA256Mismatch = errors.New("the body does not have the declared x-amz-content-sha256")

// CheckPayloadSHA256 passes body through and checks that it has SHA-256
// sum (64 hex digits) where no S3 checks it before the bytes are kept: a
// multipart upload (S3 checks each part's own hash) or a write the cache
// holds. The last byte is handed out only once the end is seen and the sum
// matched (holdback), so a reader copying a known length never gets a
// whole body that fails; a mismatch is a BodyError wrapping
// ErrPayloadSHA256Mismatch. An invalid sum declares nothing: body is
// returned as it is.
func CheckPayloadSHA256(body io.Reader, sum string) io.Reader {
	want, err := hex.DecodeString(sum)
	if err != nil || len(want) != sha256.Size {
		return body
	}
	return holdback.New(&digestCheck{r: body, h: sha256.New(), want: want, mismatch: ErrPayloadSHA256Mismatch})
}

// ErrChecksumMismatch is the error (in a BodyError) of a body that does
// not have the x-amz-checksum-* value declared for it
// (CheckDeclaredChecksum).
var ErrChecksumMismatch = errors.New("the body does not have the declared x-amz-checksum")

// ErrChecksumInvalid is the error of a declared x-amz-checksum-* value
// that is no checksum of its algorithm (CheckDeclaredChecksum).
var ErrChecksumInvalid = errors.New("a declared x-amz-checksum value is not a checksum of its algorithm")

// CheckDeclaredChecksum passes body through and checks that it has each
// checksum declared in h (X-Amz-Checksum-*, base64 of the digest), as
// CheckPayloadSHA256 checks its sum, where no S3 checks it before the bytes
// are kept: a write the cache holds. A mismatch is a BodyError wrapping
// ErrChecksumMismatch; a value that cannot be a checksum of its algorithm
// is ErrChecksumInvalid, at once.
func CheckDeclaredChecksum(body io.Reader, h chunk.Headers) (io.Reader, error) {
	var checks []*digestCheck
	for _, k := range chunk.ChecksumHeaders {
		v, ok := h[k]
		if !ok {
			continue
		}
		d := sigv4.NewChecksum(k)
		want, err := base64.StdEncoding.DecodeString(v)
		if err != nil || len(want) != d.Size() {
			return nil, fmt.Errorf("%w: %s: %q", ErrChecksumInvalid, k, v)
		}
		checks = append(checks, &digestCheck{h: d, want: want, mismatch: ErrChecksumMismatch})
	}
	for _, c := range checks {
		c.r, body = body, c
	}
	if len(checks) == 0 {
		return body, nil
	}
	return holdback.New(body), nil
}

// digestCheck hashes what it reads and returns mismatch (in a BodyError)
// in place of io.EOF when the digest is not want.
type digestCheck struct {
	r        io.Reader
	h        hash.Hash
	want     []byte
	mismatch error
}

func (c *digestCheck) Read(p []byte) (int, error) {
	n, err := c.r.Read(p)
	c.h.Write(p[:n])
	switch {
	case err == io.EOF && !bytes.Equal(c.h.Sum(nil), c.want):
		return n, &BodyError{Err: c.mismatch}
	case err != nil && err != io.EOF:
		if _, ours := err.(*BodyError); ours {
			return n, err
		}
		return n, &BodyError{Err: err}
	}
	return n, err
}
