package gateway

import (
	"strconv"
	"strings"
)

// byteRange is a satisfiable range [off, off+n) of an object.
type byteRange struct {
	off, n int64
}

func (r byteRange) contentRange(size int64) string {
	return "bytes " + strconv.FormatInt(r.off, 10) + "-" + strconv.FormatInt(r.off+r.n-1, 10) + "/" + strconv.FormatInt(size, 10)
}

// parseRange resolves a Range header against an object of the given size the
// way S3 does (RFC 9110 section 14):
//
//   - no header, a unit other than bytes, a syntactically invalid range
//     (including first > last) or several ranges: the header is ignored and
//     the whole object is sent (ok = false);
//   - bytes=first-last and bytes=first-: last is clamped to size-1; first
//     at or beyond size is unsatisfiable (416 InvalidRange);
//   - bytes=-suffix: the last suffix bytes, the whole object when suffix
//     exceeds it; a zero suffix, or any range of an empty object, is
//     unsatisfiable.
func parseRange(header string, size int64) (r byteRange, ok bool, err *s3Error) {
	header = strings.TrimSpace(header)
	if header == "" {
		return byteRange{}, false, nil
	}
	unit, spec, found := strings.Cut(header, "=")
	if !found || !isBytesUnit(strings.TrimSpace(unit)) || strings.Contains(spec, ",") {
		return byteRange{}, false, nil
	}
	first, last, found := strings.Cut(strings.TrimSpace(spec), "-")
	if !found {
		return byteRange{}, false, nil
	}
	first, last = strings.TrimSpace(first), strings.TrimSpace(last)
	if first == "" {
		n, ok := parseDigits(last)
		if !ok {
			return byteRange{}, false, nil
		}
		if n == 0 || size == 0 {
			return byteRange{}, false, errInvalidRange(header, size)
		}
		n = min(n, size)
		return byteRange{off: size - n, n: n}, true, nil
	}
	start, ok := parseDigits(first)
	if !ok {
		return byteRange{}, false, nil
	}
	end := int64(-1)
	if last != "" {
		if end, ok = parseDigits(last); !ok || lessDecimal(last, first) {
			return byteRange{}, false, nil
		}
	}
	if start >= size {
		return byteRange{}, false, errInvalidRange(header, size)
	}
	if end < 0 || end >= size {
		end = size - 1
	}
	return byteRange{off: start, n: end - start + 1}, true, nil
}

// parseDigits parses a non-empty run of ASCII digits; values beyond int64
// saturate (a huge last-byte position simply means "to the end").
func parseDigits(s string) (int64, bool) {
	if s == "" {
		return 0, false
	}
	var n int64
	for i := 0; i < len(s); i++ {
		c := s[i]
		if c < '0' || c > '9' {
			return 0, false
		}
		if n > (1<<63-1-int64(c-'0'))/10 {
			n = 1<<63 - 1
			continue
		}
		n = n*10 + int64(c-'0')
	}
	return n, true
}

// isBytesUnit reports whether a range unit is "bytes", ASCII
// case-insensitively (strings.EqualFold would also take "byteſ").
func isBytesUnit(u string) bool {
	if len(u) != len("bytes") {
		return false
	}
	for i := 0; i < len(u); i++ {
		if u[i]|0x20 != "bytes"[i] {
			return false
		}
	}
	return true
}

// lessDecimal compares two runs of ASCII digits as numbers of any size
// (parseDigits saturates, so two huge positions would compare equal).
func lessDecimal(a, b string) bool {
	a, b = strings.TrimLeft(a, "0"), strings.TrimLeft(b, "0")
	if len(a) != len(b) {
		return len(a) < len(b)
	}
	return a < b
}
