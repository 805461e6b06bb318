package sigv4

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"hash"
	"io"
	"net/http"
	"strconv"
	"strings"
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

// installBody replaces r.Body with a reader that enforces the payload mode.
func (v *Verifier) installBody(req *request, mode string, creds Credentials, seed [32]byte) *Error {
	r := req.r
	if r.Body == nil {
		r.Body = http.NoBody
	}
	ds, err := headerDigests(r, req.query)
	if err != nil {
		return err
	}
	switch mode {
	case PayloadSHA256:
		var want [32]byte
		decodeSignature(req.payload, &want)
		if r.ContentLength == 0 && req.payload != emptySHA256 {
			return newError(CodeXAmzContentSHA256Mismatch,
				"The provided 'x-amz-content-sha256' header does not match what was computed.")
		}
		if r.ContentLength == 0 && r.Body == http.NoBody && len(ds) == 0 {
			return nil // nothing to read, nothing to check
		}
		r.Body = &verifyingBody{body: r.Body, sha: newSHA256(), want: want, digests: ds}
	case PayloadUnsigned:
		if len(ds) > 0 {
			r.Body = &verifyingBody{body: r.Body, digests: ds}
		}
	default:
		return v.installChunked(req, mode, creds, seed, ds)
	}
	return nil
}

func (v *Verifier) installChunked(req *request, mode string, creds Credentials, seed [32]byte, ds digests) *Error {
	r, p := req.r, req.params
	want := int64(-1)
	if s := r.Header.Get("X-Amz-Decoded-Content-Length"); s != "" {
		n, ok := parseDecimal(strings.TrimSpace(s))
		if !ok {
			return newError(CodeInvalidArgument, "x-amz-decoded-content-length must be a non-negative integer")
		}
		want = n
	}
	trailers := mode != PayloadStreamingSigned
	declared := map[string]bool{}
	var trailer http.Header
	if trailers {
		for _, list := range r.Header.Values("X-Amz-Trailer") {
			for name := range strings.SplitSeq(list, ",") {
				name = strings.ToLower(strings.TrimSpace(name))
				if name == "" {
					continue
				}
				declared[name] = true
				if trailer == nil {
					trailer = make(http.Header)
				}
				trailer[http.CanonicalHeaderKey(name)] = nil
				if h := newChecksum(name); h != nil && strings.HasPrefix(name, checksumPrefix) && ds.find(name) == nil {
					ds = append(ds, &digest{name: name, h: h, trailer: true})
				}
			}
		}
	}
	var signer *chunkSigner
	if mode == PayloadStreamingSigned || mode == PayloadStreamingSignedTrailer {
		signer = &chunkSigner{
			key:     v.keys.get(creds.SecretAccessKey, p.scope.date, p.scope.region, p.scope.service).key,
			amzDate: req.stamp,
			scope:   p.scope.String(),
			prev:    hex.EncodeToString(seed[:]),
		}
	}
	if trailer != nil {
		if r.Trailer == nil {
			r.Trailer = make(http.Header)
		}
		for k := range trailer {
			r.Trailer[k] = nil
		}
		trailer = r.Trailer
	}
	r.Body = newChunkedReader(r.Body, signer, trailers, ds, declared, trailer, want)
	r.ContentLength = want
	if want >= 0 {
		r.Header.Set("Content-Length", strconv.FormatInt(want, 10))
	} else {
		r.Header.Del("Content-Length")
	}
	stripAWSChunked(r.Header)
	return nil
}

// stripAWSChunked removes the aws-chunked coding from Content-Encoding: it
// describes the framing this package removes, not the object.
func stripAWSChunked(h http.Header) {
	vs := h.Values("Content-Encoding")
	if len(vs) == 0 {
		return
	}
	var keep []string
	for _, v := range vs {
		for c := range strings.SplitSeq(v, ",") {
			if c = strings.TrimSpace(c); c != "" && !strings.EqualFold(c, "aws-chunked") {
				keep = append(keep, c)
			}
		}
	}
	if len(keep) == 0 {
		h.Del("Content-Encoding")
		return
	}
	h.Set("Content-Encoding", strings.Join(keep, ","))
}

// maxBufferedBody bounds the body hashWholeBody reads into memory.
const maxBufferedBody = 8 << 20

// hashWholeBody serves clients that sign without sending
// x-amz-content-sha256 (plain SigV4, as curl --aws-sigv4 before 8.x does):
// the canonical request then ends with the hex SHA-256 of the body, which
// can only be known by reading it first. An empty body needs no reading;
// other bodies are buffered when their declared length is at most
// maxBufferedBody and refused with MissingSecurityHeader otherwise. It runs
// after the access key and the clock were checked, so only requests naming a
// valid key get this far.
func hashWholeBody(r *http.Request) (string, *Error) {
	missing := func() *Error {
		return newError(CodeMissingSecurityHeader, "Missing required header for this request: x-amz-content-sha256")
	}
	if r.ContentLength == 0 || r.Body == nil || r.Body == http.NoBody {
		return emptySHA256, nil
	}
	if r.ContentLength < 0 || r.ContentLength > maxBufferedBody {
		return "", missing()
	}
	buf := make([]byte, r.ContentLength)
	if _, err := io.ReadFull(r.Body, buf); err != nil {
		if e, ok := bodyError(err).(*Error); ok {
			return "", e
		}
		return "", newError(CodeIncompleteBody, "The request body could not be read: %v", err)
	}
	r.Body.Close()
	r.Body = io.NopCloser(bytes.NewReader(buf))
	sum := sha256.Sum256(buf)
	return hex.EncodeToString(sum[:]), nil
}
