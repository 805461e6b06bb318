package sigv4

import (
	"bufio"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"io"
	"net/http"
	"strconv"
	"strings"
)

// The aws-chunked body encoding (Content-Encoding: aws-chunked), as sent with
// the STREAMING-* values of x-amz-content-sha256:
//
//	signed:    <hex size>;chunk-signature=<64 hex>\r\n<data>\r\n ... 0;chunk-signature=<sig>\r\n
//	unsigned:  <hex size>\r\n<data>\r\n ... 0\r\n
//
// then either \r\n (no trailer) or trailing headers, one name:value\r\n per
// line, followed by x-amz-trailer-signature:<sig>\r\n when signed, and a
// final \r\n. Chunk n's signature is an HMAC (with the request's signing key)
// of
//
//	AWS4-HMAC-SHA256-PAYLOAD \n <x-amz-date> \n <scope> \n <signature n-1> \n hex(sha256("")) \n hex(sha256(data))
//
// starting from the request's own (seed) signature, and the trailer's of
//
//	AWS4-HMAC-SHA256-TRAILER \n <x-amz-date> \n <scope> \n <last chunk signature> \n hex(sha256(trailer lines))
//
// where the trailer lines are name:value\n each.

const (
	chunkAlgorithm   = "AWS4-HMAC-SHA256-PAYLOAD"
	trailerAlgorithm = "AWS4-HMAC-SHA256-TRAILER"
	chunkSigPrefix   = "chunk-signature="
	trailerSigName   = "x-amz-trailer-signature"

	// maxSignedChunk bounds the memory one signed chunk may take: its data
	// is held back until its signature is checked. SDKs send 64 KiB.
	maxSignedChunk = 16 << 20
	// maxLine bounds a chunk header or trailer line.
	maxLine = 4096
	// maxTrailerBytes bounds the whole trailer section.
	maxTrailerBytes = 16 << 10
)

// chunkSigner carries what chunk and trailer signatures are computed from.
// A nil *chunkSigner means the chunks are unsigned.
type chunkSigner struct {
	key     []byte
	amzDate string
	scope   string
	prev    string // hex signature of the previous chunk (the seed at first)
}

func (s *chunkSigner) sign(alg string, parts ...string) []byte {
	m := hmac.New(sha256.New, s.key)
	m.Write([]byte(alg + "\n" + s.amzDate + "\n" + s.scope + "\n" + s.prev))
	for _, p := range parts {
		m.Write([]byte{'\n'})
		m.Write([]byte(p))
	}
	return m.Sum(nil)
}

// verify checks got (hex) against the expected signature and advances the
// chain.
func (s *chunkSigner) verify(got string, alg string, parts ...string) *Error {
	want := s.sign(alg, parts...)
	var g [32]byte
	if !decodeSignature(got, &g) || !hmac.Equal(g[:], want) {
		return errSignatureMismatch()
	}
	s.prev = hex.EncodeToString(want)
	return nil
}

// chunkedReader decodes an aws-chunked body, yielding the object bytes. With
// a signer, each chunk is held until its signature verifies, so no
// unauthenticated byte reaches the caller; without, data streams through.
// At the end it checks the trailer (signature, declared checksums) and the
// decoded length, and returns the first failure instead of io.EOF.
type chunkedReader struct {
	src      io.ReadCloser
	br       *bufio.Reader
	signer   *chunkSigner
	trailers bool // a trailer section follows the last chunk

	digests  digests
	declared map[string]bool // lowercase trailer names from x-amz-trailer
	trailer  http.Header     // filled with the trailer values at EOF

	want    int64 // x-amz-decoded-content-length, -1 if unknown
	decoded int64

	pending  []byte // verified data not yet handed out (signed mode)
	buf      []byte // reused chunk buffer (signed mode)
	left     int64  // bytes left in the current chunk (unsigned mode)
	needCRLF bool   // the current chunk's data has been read, its CRLF not
	err      error  // sticky: io.EOF or the failure
}

func newChunkedReader(src io.ReadCloser, signer *chunkSigner, trailers bool, ds digests, declared map[string]bool, trailer http.Header, want int64) *chunkedReader {
	return &chunkedReader{
		src:      src,
		br:       bufio.NewReaderSize(src, 32<<10),
		signer:   signer,
		trailers: trailers,
		digests:  ds,
		declared: declared,
		trailer:  trailer,
		want:     want,
	}
}

func (c *chunkedReader) Close() error { return c.src.Close() }

func (c *chunkedReader) Read(p []byte) (int, error) {
	if len(p) == 0 {
		return 0, c.err
	}
	for {
		if c.err != nil {
			return 0, c.err
		}
		if len(c.pending) > 0 {
			n := copy(p, c.pending)
			c.pending = c.pending[n:]
			return n, nil
		}
		if c.left > 0 {
			return c.readUnsigned(p)
		}
		if err := c.next(); err != nil {
			c.err = err
		}
	}
}

// readUnsigned streams data of the current unsigned chunk.
func (c *chunkedReader) readUnsigned(p []byte) (int, error) {
	if int64(len(p)) > c.left {
		p = p[:c.left]
	}
	n, err := c.br.Read(p)
	c.left -= int64(n)
	c.decoded += int64(n)
	c.digests.write(p[:n])
	if err != nil && c.left > 0 {
		c.err = truncated(err)
		if n > 0 {
			return n, nil
		}
		return 0, c.err
	}
	return n, nil
}

// next reads the next chunk header (and, when signed, the chunk), or the end
// of the body.
func (c *chunkedReader) next() error {
	if c.needCRLF {
		if err := c.expectCRLF(); err != nil {
			return truncated(err)
		}
		c.needCRLF = false
	}
	line, err := c.readLine()
	if err != nil {
		return truncated(err)
	}
	sizeHex, ext, _ := strings.Cut(line, ";")
	size, err := strconv.ParseInt(strings.TrimSpace(sizeHex), 16, 64)
	if err != nil || size < 0 || strings.HasPrefix(strings.TrimSpace(sizeHex), "+") {
		return malformedChunk("invalid chunk size %q", sizeHex)
	}
	if c.want >= 0 && c.decoded+size > c.want {
		return newError(CodeIncompleteBody, "The aws-chunked body is longer than x-amz-decoded-content-length.")
	}
	var sig string
	if c.signer != nil {
		ext = strings.TrimSpace(ext)
		if !strings.HasPrefix(ext, chunkSigPrefix) {
			return malformedChunk("chunk without chunk-signature")
		}
		sig = strings.TrimSpace(ext[len(chunkSigPrefix):])
		if size > maxSignedChunk {
			return malformedChunk("chunk of %d bytes exceeds the %d-byte limit", size, maxSignedChunk)
		}
	}
	if size == 0 {
		if c.signer != nil {
			if err := c.signer.verify(sig, chunkAlgorithm, emptySHA256, emptySHA256); err != nil {
				return err
			}
		}
		return c.finish()
	}
	if c.signer == nil {
		c.left, c.needCRLF = size, true
		return nil
	}
	if int64(cap(c.buf)) < size {
		c.buf = make([]byte, size)
	}
	data := c.buf[:size]
	if _, err := io.ReadFull(c.br, data); err != nil {
		return truncated(err)
	}
	sum := sha256.Sum256(data)
	if err := c.signer.verify(sig, chunkAlgorithm, emptySHA256, hex.EncodeToString(sum[:])); err != nil {
		return err
	}
	if err := c.expectCRLF(); err != nil {
		return truncated(err)
	}
	c.decoded += size
	c.digests.write(data)
	c.pending = data
	return nil
}

// finish handles what follows the zero-length chunk and runs the end-of-body
// checks. It returns io.EOF when all is well.
func (c *chunkedReader) finish() error {
	if c.trailers {
		if err := c.readTrailers(); err != nil {
			return err
		}
	} else if err := c.expectCRLF(); err != nil && err != io.EOF {
		// The final CRLF may be missing at EOF; anything else is wrong.
		return err
	}
	if _, err := c.br.ReadByte(); err == nil {
		return malformedChunk("data after the final chunk")
	}
	if c.want >= 0 && c.decoded != c.want {
		return newError(CodeIncompleteBody, "You did not provide the number of bytes specified by x-amz-decoded-content-length.")
	}
	if err := c.digests.check(); err != nil {
		return err
	}
	return io.EOF
}

// readTrailers reads name:value lines up to an empty line (or the end of the
// body), checks the trailer signature when signed, and records the values.
func (c *chunkedReader) readTrailers() error {
	type kv struct{ name, value string }
	var (
		lines     []kv
		sig       string
		haveSig   bool
		total     int
		canon     strings.Builder
		received  = map[string]bool{}
		blankSeen bool
	)
	for {
		line, err := c.readLine()
		if err == io.EOF {
			break // no final CRLF
		}
		if err != nil {
			return err
		}
		if line == "" {
			// Some encoders close the zero-length chunk with its own CRLF
			// before the trailer lines: a blank first line followed by
			// more data is that separator, not the end of the section.
			if len(lines) == 0 && !haveSig && !blankSeen {
				if _, err := c.br.Peek(1); err == nil {
					blankSeen = true
					continue
				}
			}
			break
		}
		if total += len(line); total > maxTrailerBytes {
			return malformedChunk("trailer section too large")
		}
		if haveSig {
			return malformedChunk("trailing header after x-amz-trailer-signature")
		}
		name, value, ok := strings.Cut(line, ":")
		name = strings.ToLower(strings.TrimSpace(name))
		value = strings.TrimSpace(value)
		if !ok || name == "" {
			return malformedChunk("invalid trailer line")
		}
		if name == trailerSigName {
			sig, haveSig = value, true
			continue
		}
		if received[name] {
			return malformedChunk("trailing header %s sent twice", name)
		}
		if !c.declared[name] {
			return newError(CodeInvalidRequest, "The trailing header %s was not declared in x-amz-trailer.", name)
		}
		received[name] = true
		lines = append(lines, kv{name, value})
		canon.WriteString(name + ":" + value + "\n")
	}
	if c.signer != nil {
		if !haveSig {
			return newError(CodeSignatureDoesNotMatch, "The trailer has no x-amz-trailer-signature.")
		}
		sum := sha256.Sum256([]byte(canon.String()))
		if err := c.signer.verify(sig, trailerAlgorithm, hex.EncodeToString(sum[:])); err != nil {
			return err
		}
	}
	for _, l := range lines {
		if d := c.digests.find(l.name); d != nil && d.trailer {
			if err := d.setValue(l.value); err != nil {
				return err
			}
		}
		if c.trailer != nil {
			c.trailer.Set(l.name, l.value)
		}
	}
	return nil
}

// readLine reads one line without its CRLF. It returns io.EOF, unwrapped,
// when the body ends before the line starts; callers decide whether that is
// allowed.
func (c *chunkedReader) readLine() (string, error) {
	b, err := c.br.ReadSlice('\n')
	switch {
	case errors.Is(err, bufio.ErrBufferFull) || len(b) > maxLine:
		return "", malformedChunk("line too long")
	case err == io.EOF && len(b) == 0:
		return "", io.EOF
	case err != nil:
		return "", truncated(err)
	}
	b = b[:len(b)-1]
	if len(b) == 0 || b[len(b)-1] != '\r' {
		return "", malformedChunk("line not terminated by CRLF")
	}
	return string(b[:len(b)-1]), nil
}

// expectCRLF consumes a CRLF. Like readLine it returns a bare io.EOF when
// the body has already ended.
func (c *chunkedReader) expectCRLF() error {
	var b [2]byte
	if _, err := io.ReadFull(c.br, b[:]); err != nil {
		if err == io.EOF {
			return io.EOF
		}
		return truncated(err)
	}
	if b != [2]byte{'\r', '\n'} {
		return malformedChunk("chunk data not followed by CRLF")
	}
	return nil
}

func malformedChunk(format string, args ...any) *Error {
	return newError(CodeInvalidRequest, "Malformed aws-chunked body: "+format, args...)
}

// truncated maps the end of the body inside the aws-chunked framing to
// IncompleteBody; other errors (network, the caller's context) pass through.
func truncated(err error) error {
	if err == io.EOF || errors.Is(err, io.ErrUnexpectedEOF) {
		return newError(CodeIncompleteBody, "The aws-chunked body ended early.")
	}
	return err
}
