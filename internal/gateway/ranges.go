package gateway

import "github.com/distcache/distcache/internal/httprange"

// parseRange resolves a Range header against an object of the given size
// the way S3 does (httprange.Parse, lenient): no header, or one it cannot
// read (another unit, several ranges, first > last, not numbers), is
// ignored and the whole object sent (ok = false); a range outside the
// object is 416 InvalidRange.
func parseRange(header string, size int64) (r httprange.Range, ok bool, err *s3Error) {
	r, ok, rerr := httprange.Parse(header, size, true)
	if rerr != nil {
		return r, false, errInvalidRange(rerr.Header, size)
	}
	return r, ok, nil
}
