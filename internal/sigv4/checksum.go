package sigv4

import (
	"bytes"
	"crypto/md5"
	"crypto/sha1"
	"crypto/sha256"
	"encoding/base64"
	"hash"
	"hash/crc32"
	"hash/crc64"
	"net/http"
	"strings"
)

// Checksum headers (and aws-chunked trailers) S3 defines for a request body:
// x-amz-checksum-<algorithm> carries the base64 of the big-endian digest.
const checksumPrefix = "x-amz-checksum-"

// crc64NVMETable is CRC-64/NVME (polynomial 0xad93d23594c935a9, reflected,
// init and xorout all ones), which is exactly what hash/crc64 computes with
// the bit-reversed polynomial. Check value: "123456789" -> 0xae8b14860a799888.
var (
	crc64NVMETable = crc64.MakeTable(0x9a6c9329ac4bc9b5)
	crc32cTable    = crc32.MakeTable(crc32.Castagnoli)
)

// checksumNames are the lower-case names of the checksum headers, and of
// x-amz-checksum-mode, which a GetObject may carry.
var checksumNames = []string{checksumPrefix + "crc32", checksumPrefix + "crc32c", checksumPrefix + "crc64nvme",
	checksumPrefix + "sha1", checksumPrefix + "sha256", checksumPrefix + "mode"}

// lowerName is strings.ToLower(k) for a header name, without an allocation
// for the names of checksumNames.
func lowerName(k string) string {
	for _, n := range checksumNames {
		if isLowerOf(k, n) {
			return n
		}
	}
	return strings.ToLower(k)
}

// isLowerOf reports whether strings.ToLower(s) is lower, an ASCII string.
func isLowerOf(s, lower string) bool {
	if len(s) != len(lower) {
		return false
	}
	for i := 0; i < len(s); i++ {
		c := s[i]
		if 'A' <= c && c <= 'Z' {
			c += 'a' - 'A'
		}
		if c != lower[i] {
			return false
		}
	}
	return true
}

// NewChecksum returns a hash for the body checksum an
// x-amz-checksum-<algorithm> header carries (the name in any case), or
// nil for an algorithm S3 does not define.
func NewChecksum(header string) hash.Hash {
	return newChecksum(lowerName(header))
}

// newChecksum returns a hash for an x-amz-checksum-<alg> name (lowercase),
// or nil for an algorithm this package does not know.
func newChecksum(name string) hash.Hash {
	switch strings.TrimPrefix(name, checksumPrefix) {
	case "crc32":
		return crc32.NewIEEE()
	case "crc32c":
		return crc32.New(crc32cTable)
	case "crc64nvme":
		return crc64.New(crc64NVMETable)
	case "sha1":
		return sha1.New()
	case "sha256":
		return sha256.New()
	}
	return nil
}

// digest checks one declared checksum of the decoded body.
type digest struct {
	name    string // lowercase header or trailer name
	h       hash.Hash
	want    []byte
	trailer bool // value arrives in the aws-chunked trailer
	seen    bool // trailer value received
}

type digests []*digest

func (ds digests) write(p []byte) {
	for _, d := range ds {
		d.h.Write(p)
	}
}

// find returns the digest named name (lowercase), or nil.
func (ds digests) find(name string) *digest {
	for _, d := range ds {
		if d.name == name {
			return d
		}
	}
	return nil
}

// check compares every digest with the body read so far, which must be all
// of it.
func (ds digests) check() *Error {
	for _, d := range ds {
		if d.trailer && !d.seen {
			return newError(CodeIncompleteBody, "The trailing header %s declared in x-amz-trailer was not sent.", d.name)
		}
		if !bytes.Equal(d.h.Sum(nil), d.want) {
			if d.name == "content-md5" {
				return newError(CodeBadDigest, "The Content-MD5 you specified did not match what we received.")
			}
			return newError(CodeBadDigest, "The %s you specified did not match the calculated checksum.",
				strings.ToUpper(strings.TrimPrefix(d.name, checksumPrefix)))
		}
	}
	return nil
}

// setValue records the trailing checksum value that arrived in the
// aws-chunked trailer.
func (d *digest) setValue(v string) *Error {
	b, err := base64.StdEncoding.DecodeString(strings.TrimSpace(v))
	if err != nil || len(b) != d.h.Size() {
		return newError(CodeInvalidRequest, "Value for %s trailing header is invalid.", d.name)
	}
	d.want, d.seen = b, true
	return nil
}

// headerDigests collects the checksums a request declares for its body:
// Content-MD5 and x-amz-checksum-<alg> headers. CompleteMultipartUpload
// (POST ?uploadId=) is the exception: its x-amz-checksum-* headers describe
// the assembled object, not the XML body, so they are left alone.
func headerDigests(r *http.Request, ps []queryParam) (digests, *Error) {
	var ds digests
	if vs := r.Header.Values("Content-Md5"); len(vs) > 0 {
		b, err := base64.StdEncoding.DecodeString(strings.TrimSpace(vs[0]))
		if len(vs) != 1 || err != nil || len(b) != md5.Size {
			return nil, newError(CodeInvalidDigest, "The Content-MD5 you specified is not valid.")
		}
		ds = append(ds, &digest{name: "content-md5", h: md5.New(), want: b})
	}
	if _, complete := lookup(ps, "uploadId"); complete && r.Method == http.MethodPost {
		return ds, nil
	}
	for k, vs := range r.Header {
		if !hasPrefixFold(k, checksumPrefix) {
			continue
		}
		name := lowerName(k)
		h := newChecksum(name)
		if h == nil {
			continue // x-amz-checksum-type, -mode, -algorithm, unknown algorithms
		}
		b, err := base64.StdEncoding.DecodeString(strings.TrimSpace(vs[0]))
		if len(vs) != 1 || err != nil || len(b) != h.Size() {
			return nil, newError(CodeInvalidRequest, "Value for %s header is invalid.", name)
		}
		ds = append(ds, &digest{name: name, h: h, want: b})
	}
	return ds, nil
}
