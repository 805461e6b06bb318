package gateway

import (
	"hash/maphash"
	"maps"
	"net/http"
	"sync/atomic"
	"time"

	"github.com/distcache/distcache/internal/chunk"
	"github.com/distcache/distcache/internal/client"
	"github.com/distcache/distcache/internal/s3cond"
)

// versionHeaders are the headers GetObject and HeadObject answer for one
// object version, formatted once: the quoted ETag, Last-Modified in HTTP
// format, Content-Type (S3's default when the object has none),
// Accept-Ranges and the headers S3 stored with it (user metadata,
// Cache-Control, ..., and apart the checksum), each a []string to put into a response's header map as
// it is (full slices: an Add copies, never appends into them).
type versionHeaders struct {
	etag, contentType string // the version's, the key of the entry
	lastModified      time.Time
	stored            chunk.Headers // the version's, the rest of the key
	values            [4][]string   // ETag, Last-Modified (nil: none), Content-Type, Accept-Ranges
	storedValues      http.Header   // stored, as header values (nil for most objects)
	checksumValues    http.Header   // the stored checksum and its type (nil for most objects)
}

// Canonical names, as http.Header.Set stores them.
var versionHeaderNames = [4]string{"Etag", "Last-Modified", "Content-Type", "Accept-Ranges"}

var acceptRangesBytes = []string{"bytes"}

func newVersionHeaders(m client.Meta) *versionHeaders {
	ct := m.ContentType
	if ct == "" {
		ct = defaultContentType
	}
	v := &versionHeaders{etag: m.ETag, contentType: m.ContentType, lastModified: m.LastModified, stored: m.Headers}
	for k, val := range m.Headers {
		to := &v.storedValues
		if chunk.IsChecksumHeader(k) {
			to = &v.checksumValues
		}
		if *to == nil {
			*to = make(http.Header, len(m.Headers))
		}
		(*to)[k] = []string{val}
	}
	v.values[0] = []string{s3cond.QuoteETag(m.ETag)}
	if !m.LastModified.IsZero() {
		v.values[1] = []string{m.LastModified.UTC().Format(http.TimeFormat)}
	}
	v.values[2] = []string{ct}
	v.values[3] = acceptRangesBytes
	return v
}

func (v *versionHeaders) describes(m client.Meta) bool {
	return v.etag == m.ETag && v.contentType == m.ContentType && v.lastModified.Equal(m.LastModified) && maps.Equal(v.stored, m.Headers)
}

// setChecksum puts the version's checksum and its type into h, as h.Set
// would: S3 answers them to a GET or HEAD of the whole object that asks
// with x-amz-checksum-mode: ENABLED.
func (v *versionHeaders) setChecksum(h http.Header) {
	for k, vs := range v.checksumValues {
		h[k] = vs
	}
}

// set puts the headers other than the checksum into h, as h.Set would.
func (v *versionHeaders) set(h http.Header) {
	for i, vs := range v.values {
		if vs != nil {
			h[versionHeaderNames[i]] = vs
		}
	}
	for k, vs := range v.storedValues {
		h[k] = vs
	}
}

// versionHeaderCache keeps the versionHeaders of recently served versions
// in a small direct-mapped table (by ETag): a version read again and again
// is formatted once, and a version pushed out by another is formatted
// again on its next read. Entries are immutable; a slot is replaced whole.
type versionHeaderCache struct {
	seed  maphash.Seed
	slots [256]atomic.Pointer[versionHeaders]
}

func newVersionHeaderCache() *versionHeaderCache {
	return &versionHeaderCache{seed: maphash.MakeSeed()}
}

func (c *versionHeaderCache) get(m client.Meta) *versionHeaders {
	slot := &c.slots[maphash.String(c.seed, m.ETag)%uint64(len(c.slots))]
	if v := slot.Load(); v != nil && v.describes(m) {
		return v
	}
	v := newVersionHeaders(m)
	slot.Store(v)
	return v
}
