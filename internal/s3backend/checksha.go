package s3backend

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"hash"
	"io"

	"github.com/distcache/distcache/internal/holdback"
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
	return holdback.New(&sha256Check{r: body, h: sha256.New(), want: want})
}

// sha256Check hashes what it reads and returns the mismatch in place of
// io.EOF.
type sha256Check struct {
	r    io.Reader
	h    hash.Hash
	want []byte
}

func (c *sha256Check) Read(p []byte) (int, error) {
	n, err := c.r.Read(p)
	c.h.Write(p[:n])
	switch {
	case err == io.EOF && !bytes.Equal(c.h.Sum(nil), c.want):
		return n, &BodyError{Err: ErrPayloadSHA256Mismatch}
	case err != nil && err != io.EOF:
		return n, &BodyError{Err: err}
	}
	return n, err
}
