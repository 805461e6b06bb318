package sigv4

import (
	"crypto/sha256"
	"errors"
	"hash"
	"io"
)

// Values of x-amz-content-sha256 (and Result.PayloadMode).
const (
	// PayloadSHA256 is Result.PayloadMode when x-amz-content-sha256 is the
	// hex SHA-256 of the body: reading the body to EOF checks it.
	PayloadSHA256 = "SHA256"
	// PayloadUnsigned: the body is not covered by the signature (presigned
	// URLs always are).
	PayloadUnsigned = "UNSIGNED-PAYLOAD"
	// PayloadStreamingSigned: aws-chunked body, each chunk signed.
	PayloadStreamingSigned = "STREAMING-AWS4-HMAC-SHA256-PAYLOAD"
	// PayloadStreamingSignedTrailer: aws-chunked body, each chunk and the
	// trailer signed.
	PayloadStreamingSignedTrailer = "STREAMING-AWS4-HMAC-SHA256-PAYLOAD-TRAILER"
	// PayloadStreamingUnsignedTrailer: aws-chunked body without
	// signatures, integrity from the trailing checksum.
	PayloadStreamingUnsignedTrailer = "STREAMING-UNSIGNED-PAYLOAD-TRAILER"
)

// emptySHA256 is hex(SHA-256("")).
const emptySHA256 = "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855"

// verifyingBody passes a body through and, at EOF, checks its SHA-256
// (when x-amz-content-sha256 named one) and any declared checksums. A
// mismatch is returned, with the last bytes or alone, instead of io.EOF.
type verifyingBody struct {
	body    io.ReadCloser
	sha     hash.Hash // nil for an unsigned payload
	want    [32]byte
	digests digests
	err     error // sticky: io.EOF or the failure
}

func (b *verifyingBody) Read(p []byte) (int, error) {
	if b.err != nil {
		return 0, b.err
	}
	n, err := b.body.Read(p)
	if n > 0 {
		if b.sha != nil {
			b.sha.Write(p[:n])
		}
		b.digests.write(p[:n])
	}
	switch {
	case err == io.EOF:
		b.err = io.EOF
		if e := b.finish(); e != nil {
			b.err = e
		}
	case err != nil:
		b.err = bodyError(err)
	}
	return n, b.err
}

func (b *verifyingBody) finish() *Error {
	if b.sha != nil {
		var got [32]byte
		if [32]byte(b.sha.Sum(got[:0])) != b.want {
			return newError(CodeXAmzContentSHA256Mismatch,
				"The provided 'x-amz-content-sha256' header does not match what was computed.")
		}
	}
	return b.digests.check()
}

func (b *verifyingBody) Close() error { return b.body.Close() }

// bodyError turns a body that ended before its declared length into
// IncompleteBody; other errors (network, the caller's context) pass through.
func bodyError(err error) error {
	if errors.Is(err, io.ErrUnexpectedEOF) {
		return newError(CodeIncompleteBody, "You did not provide the number of bytes specified by the Content-Length HTTP header.")
	}
	return err
}

func newSHA256() hash.Hash { return sha256.New() }
