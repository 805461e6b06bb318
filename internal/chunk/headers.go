package chunk

import (
	"net/http"
	"strings"
)

// Headers are the headers S3 keeps with an object version besides its
// Content-Type and answers with it on GET and HEAD: user metadata
// (X-Amz-Meta-*), the stored Cache-Control, Content-Disposition,
// Content-Encoding, Content-Language and Expires, and the storage class
// (X-Amz-Storage-Class, only when not STANDARD), and the object's
// full-object checksum with its type (X-Amz-Checksum-*), which S3 answers
// only to a whole-object GET or HEAD that asks for it
// (x-amz-checksum-mode: ENABLED). Keys are canonical header names
// (http.CanonicalHeaderKey), one value each; nil when the object has none,
// which is the common case.
//
// A checksum is kept only where the cache is sure of it: from S3's HEAD
// answer, or from a single PUT that sent S3 a checksum the writer
// declared in a header (S3 checks it). Kept nowhere else, it is answered
// by no one: a client then checks nothing, which is what S3 gives an
// object stored without one.
type Headers map[string]string

// userMetaPrefix starts the canonical name of a user metadata header.
const userMetaPrefix = "X-Amz-Meta-"

// storedHeaders are the standard headers S3 stores as they came with the
// PUT.
var storedHeaders = map[string]bool{
	"Cache-Control": true, "Content-Disposition": true, "Content-Encoding": true,
	"Content-Language": true, "Expires": true, StorageClassHeader: true,
}

// StorageClassHeader names the object's storage class. S3 answers it on
// GET and HEAD only for classes other than StandardStorageClass, and a
// PUT that names StandardStorageClass is one that names none, so Headers
// never hold that value.
const (
	StorageClassHeader   = "X-Amz-Storage-Class"
	StandardStorageClass = "STANDARD"
)

// ChecksumHeaders are the canonical names of the full-object checksums S3
// knows, and ChecksumTypeHeader the checksum's type (FULL_OBJECT, or
// COMPOSITE for most multipart uploads).
var ChecksumHeaders = []string{"X-Amz-Checksum-Crc32", "X-Amz-Checksum-Crc32c", "X-Amz-Checksum-Crc64nvme",
	"X-Amz-Checksum-Sha1", "X-Amz-Checksum-Sha256"}

const (
	ChecksumTypeHeader = "X-Amz-Checksum-Type"
	FullObjectChecksum = "FULL_OBJECT"
)

var checksumHeaders = func() map[string]bool {
	m := map[string]bool{ChecksumTypeHeader: true}
	for _, k := range ChecksumHeaders {
		m[k] = true
	}
	return m
}()

// IsStoredHeader reports whether a header of this canonical name is one
// that S3 keeps with the object (one of Headers).
func IsStoredHeader(canonical string) bool {
	return storedHeaders[canonical] || checksumHeaders[canonical] ||
		(strings.HasPrefix(canonical, userMetaPrefix) && len(canonical) > len(userMetaPrefix))
}

// IsChecksumHeader reports whether a header of this canonical name is a
// checksum of the object or its type.
func IsChecksumHeader(canonical string) bool {
	return checksumHeaders[canonical]
}

// HasChecksum reports whether h holds a checksum of the object.
func (h Headers) HasChecksum() bool {
	for k := range h {
		if checksumHeaders[k] {
			return true
		}
	}
	return false
}

// WithoutChecksum returns h without its checksum headers: h itself when it
// has none, else a copy (nil when nothing else is left).
func (h Headers) WithoutChecksum() Headers {
	if !h.HasChecksum() {
		return h
	}
	var out Headers
	for k, v := range h {
		if !checksumHeaders[k] {
			if out == nil {
				out = Headers{}
			}
			out[k] = v
		}
	}
	return out
}

// StoredHeaders picks the stored headers out of h (a request's or an
// answer's), nil when there are none.
func StoredHeaders(h http.Header) Headers {
	var out Headers
	for k, vs := range h {
		if len(vs) == 0 || !IsStoredHeader(k) || (k == StorageClassHeader && vs[0] == StandardStorageClass) {
			continue
		}
		if out == nil {
			out = Headers{}
		}
		out[k] = strings.Join(vs, ",")
	}
	return out
}

// UserMetadata is the user metadata as the AWS SDK takes and gives it:
// names without the prefix, in lower case.
func (h Headers) UserMetadata() map[string]string {
	var md map[string]string
	for k, v := range h {
		if name, ok := strings.CutPrefix(k, userMetaPrefix); ok {
			if md == nil {
				md = map[string]string{}
			}
			md[strings.ToLower(name)] = v
		}
	}
	return md
}

// WithUserMetadata returns h with the user metadata md (as the AWS SDK
// gives it) added.
func (h Headers) WithUserMetadata(md map[string]string) Headers {
	for k, v := range md {
		if h == nil {
			h = Headers{}
		}
		h[http.CanonicalHeaderKey(userMetaPrefix+k)] = v
	}
	return h
}

// UserMetadataSize is what S3 counts against its 2 KiB limit of user
// metadata: the bytes of each name (without the prefix) and value.
func (h Headers) UserMetadataSize() int {
	n := 0
	for k, v := range h {
		if name, ok := strings.CutPrefix(k, userMetaPrefix); ok {
			n += len(name) + len(v)
		}
	}
	return n
}

// MaxUserMetadata is S3's limit of UserMetadataSize for one object.
const MaxUserMetadata = 2 << 10
