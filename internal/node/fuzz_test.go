package node

import (
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"testing"

	"github.com/distcache/distcache/internal/httprange"
	"github.com/distcache/distcache/internal/tenancy"
)

// FuzzParseRange resolves arbitrary Range headers. A resolved range lies
// inside the content; the ranges clients build (bytes=a-b, bytes=a-,
// bytes=-n, as internal/client sends for a chunk's sub-range) resolve to
// exactly what they ask for, clamped; and errors are 400 or 416 with a
// code.
func FuzzParseRange(f *testing.F) {
	for _, s := range []string{"", "bytes=0-0", "bytes=5-", "bytes=-5", "bytes=-0", "bytes=0-1,2-3", "bytes=7-3",
		"bytes=+1-2", "bytes=-+1", "bytes=0x1-2", "bytes=9223372036854775807-", "bytes=-9223372036854775808",
		"bytes= 1-2", "Bytes=1-2", "bytes=1-99999999999999999999"} {
		f.Add(s, int64(4<<20), int64(0), int64(0))
	}
	f.Add("", int64(0), int64(0), int64(1))
	f.Fuzz(func(t *testing.T, header string, size, a, b int64) {
		if size < 0 {
			return
		}
		check := func(h string) (httprange.Range, bool, *apiError) {
			r, ok, err := parseRange(h, size)
			switch {
			case err != nil && (ok || err.Status != http.StatusBadRequest && err.Status != http.StatusRequestedRangeNotSatisfiable || err.Code == ""):
				t.Fatalf("parseRange(%q, %d): ok=%v err=%+v", h, size, ok, err)
			case ok && (r.Off < 0 || r.Len < 1 || r.Off > size-r.Len):
				t.Fatalf("parseRange(%q, %d) = %+v: outside the content", h, size, r)
			case ok:
				first, last, total, perr := parseContentRange(r.ContentRange(size))
				if perr != nil || first != r.Off || last != r.Off+r.Len-1 || total != size {
					t.Fatalf("Content-Range %q does not describe %+v", r.ContentRange(size), r)
				}
			}
			return r, ok, err
		}
		check(header)
		if a < 0 || b < a {
			return
		}
		// What a client asks for.
		r, ok, err := check("bytes=" + strconv.FormatInt(a, 10) + "-" + strconv.FormatInt(b, 10))
		switch {
		case a >= size:
			if err == nil || err.Status != http.StatusRequestedRangeNotSatisfiable {
				t.Fatalf("bytes=%d-%d of %d: %+v %v %v, want 416", a, b, size, r, ok, err)
			}
		case !ok || r.Off != a || r.Len != min(b, size-1)-a+1:
			t.Fatalf("bytes=%d-%d of %d resolved to %+v %v %v", a, b, size, r, ok, err)
		}
		if a > 0 {
			r, ok, err = check("bytes=-" + strconv.FormatInt(a, 10))
			if size > 0 && (!ok || r.Len != min(a, size) || r.Off+r.Len != size) {
				t.Fatalf("bytes=-%d of %d resolved to %+v %v %v", a, size, r, ok, err)
			}
		}
	})
}

func parseContentRange(s string) (first, last, total int64, err error) {
	rest, _ := strings.CutPrefix(s, "bytes ")
	a, rest, _ := strings.Cut(rest, "-")
	b, c, _ := strings.Cut(rest, "/")
	if first, err = strconv.ParseInt(a, 10, 64); err == nil {
		if last, err = strconv.ParseInt(b, 10, 64); err == nil {
			total, err = strconv.ParseInt(c, 10, 64)
		}
	}
	return first, last, total, err
}

// FuzzCopySourceBucket parses arbitrary x-amz-copy-source values. The
// bucket the node checks against the tenant's list must be the bucket S3
// copies from. S3 documents the value as the URL-encoded bucket/key (a
// leading '/' allowed) with an optional ?versionId=; servers differ in how
// they decode it ('+' as a space or not, '?' found before or after
// decoding). Whenever the node's bucket is one a tenant could be allowed
// (a valid bucket name), every such reading must name the same bucket.
func FuzzCopySourceBucket(f *testing.F) {
	for _, s := range []string{"bkt/key", "/bkt/key", "bkt/dir%2Fkey?versionId=3", "bkt%2Fkey", "%2Fother/key",
		"bkt/key%3FversionId=1", "allowed?/../other/key", "bkt/../other/key", "/", "bkt/", "%zz/k", "b+kt/k", "%62kt/k",
		"bkt%3FversionId=1/other/k", "bkt/k?versionId=1/other"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, src string) {
		bucket, ok := copySourceBucket(src)
		if !ok {
			return
		}
		if bucket == "" || strings.Contains(bucket, "/") {
			t.Fatalf("copySourceBucket(%q) = %q", src, bucket)
		}
		if tenancy.ValidateBucketName(bucket) != nil {
			return // no tenant lists it: refused whatever S3 would read
		}
		for i, read := range copySourceReadings {
			if b, ok := read(src); ok && b != bucket {
				t.Fatalf("copySourceBucket(%q) = %q; reading %d names bucket %q", src, bucket, i, b)
			}
		}
	})
}

// copySourceReadings are ways an S3 server may read x-amz-copy-source's
// bucket.
var copySourceReadings = []func(string) (string, bool){
	func(src string) (string, bool) { // '?' first, then %-decoding (S3's documentation)
		p, _, _ := strings.Cut(src, "?")
		return bucketOf(url.PathUnescape(p))
	},
	func(src string) (string, bool) { // form-decoding first, then ?versionId= (MinIO)
		dec, err := url.QueryUnescape(src)
		if i := strings.LastIndex(dec, "?versionId="); i >= 0 {
			dec = dec[:i]
		}
		return bucketOf(dec, err)
	},
	func(src string) (string, bool) { // '?' first, then form-decoding
		p, _, _ := strings.Cut(src, "?")
		return bucketOf(url.QueryUnescape(p))
	},
}

func bucketOf(path string, err error) (string, bool) {
	if err != nil {
		return "", false
	}
	bucket, key, ok := strings.Cut(strings.TrimPrefix(path, "/"), "/")
	return bucket, ok && key != ""
}
