// Package httprange resolves a single-range HTTP Range header ("bytes=")
// against a content length: the one parser of the gateway (which reads
// the header as S3 does) and the node API (which refuses what it cannot
// read). The two differ only in what a header they do not take means,
// which Lenient says.
package httprange

import (
	"strconv"
	"strings"
)

// Range is a satisfiable range [Off, Off+Len) of the content.
type Range struct {
	Off, Len int64
}

// ContentRange is the Content-Range value of r in content of size bytes.
func (r Range) ContentRange(size int64) string {
	var buf [6 + 3*20 + 2]byte // one allocation: the string
	b := append(buf[:0], "bytes "...)
	b = strconv.AppendInt(b, r.Off, 10)
	b = append(b, '-')
	b = strconv.AppendInt(b, r.Off+r.Len-1, 10)
	b = append(b, '/')
	b = strconv.AppendInt(b, size, 10)
	return string(b)
}

// Reason says what is wrong with a Range header.
type Reason uint8

const (
	// NotSingle: not one range of unit bytes.
	NotSingle Reason = iota + 1
	// NoDash: the range has no '-'.
	NoDash
	// BadSuffix: bytes=-N with N not a number.
	BadSuffix
	// BadFirst: the first byte position is not a number.
	BadFirst
	// BadLast: the last byte position is not a number, or before the first.
	BadLast
	// Unsatisfiable: the range starts at or past the end of the content,
	// asks for a zero-length suffix, or for any bytes of empty content
	// (416 Range Not Satisfiable).
	Unsatisfiable
)

// Error is a Range header that cannot be served. Its message is built only
// when asked for.
type Error struct {
	Reason Reason
	Header string // the header, as read (trimmed when Lenient)
	Size   int64  // the content's length
}

func (e *Error) Error() string {
	switch e.Reason {
	case NotSingle:
		return "Range must be a single bytes=first-last, bytes=first- or bytes=-suffix range"
	case NoDash:
		return "Range " + e.Header + " has no '-'"
	case BadSuffix:
		return "bad suffix length in Range " + e.Header
	case BadFirst:
		return "bad first byte in Range " + e.Header
	case BadLast:
		return "bad last byte in Range " + e.Header
	}
	return "Range " + e.Header + " is outside the " + strconv.FormatInt(e.Size, 10) + "-byte content"
}

// Parse resolves header against content of size bytes. ok is false when
// there is no range to serve (no header, or one Lenient ignores): the
// whole content is sent.
//
// The forms taken: bytes=first-last and bytes=first- (last clamped to
// size-1; first at or beyond size is Unsatisfiable) and bytes=-suffix (the
// last suffix bytes, all of them when suffix exceeds size; a zero suffix,
// or any range of empty content, is Unsatisfiable). Anything else, several
// ranges included, is an error of its Reason, unless lenient.
//
// With lenient, the header is read as S3 reads it (RFC 9110 section 14):
// spaces around the unit, '=' and '-' are allowed, the unit is
// case-insensitive, positions are plain digits whose values beyond int64
// saturate (a huge last position means "to the end"), and a header it
// cannot read is ignored rather than refused: only Unsatisfiable remains
// an error. Without it, the header is exactly bytes=first-last (as the Go
// client and gateways send), positions are what strconv.ParseInt takes,
// and every other form is an error.
func Parse(header string, size int64, lenient bool) (r Range, ok bool, err *Error) {
	if lenient {
		header = strings.TrimSpace(header)
	}
	if header == "" {
		return Range{}, false, nil
	}
	p := parser{header: header, size: size, lenient: lenient}
	unit, spec, found := strings.Cut(header, "=")
	if lenient {
		unit, spec = strings.TrimSpace(unit), strings.TrimSpace(spec)
	}
	if !found || !p.bytesUnit(unit) || strings.Contains(spec, ",") {
		return p.fail(NotSingle)
	}
	first, last, found := strings.Cut(spec, "-")
	if !found {
		return p.fail(NoDash)
	}
	if lenient {
		first, last = strings.TrimSpace(first), strings.TrimSpace(last)
	}
	if first == "" { // suffix: the last N bytes
		n, ok := p.position(last)
		if !ok {
			return p.fail(BadSuffix)
		}
		if n == 0 || size == 0 {
			return p.fail(Unsatisfiable)
		}
		n = min(n, size)
		return Range{Off: size - n, Len: n}, true, nil
	}
	start, ok := p.position(first)
	if !ok {
		return p.fail(BadFirst)
	}
	end := size - 1
	if last != "" {
		n, ok := p.position(last)
		if !ok || p.before(last, n, first, start) {
			return p.fail(BadLast)
		}
		end = min(n, size-1)
	}
	if start >= size {
		return p.fail(Unsatisfiable)
	}
	return Range{Off: start, Len: end - start + 1}, true, nil
}

// parser holds what Parse's steps share.
type parser struct {
	header  string
	size    int64
	lenient bool
}

// fail is Parse's answer to a header that cannot be served for reason.
func (p parser) fail(reason Reason) (Range, bool, *Error) {
	if p.lenient && reason != Unsatisfiable {
		return Range{}, false, nil // ignored: the whole content
	}
	return Range{}, false, &Error{Reason: reason, Header: p.header, Size: p.size}
}

// bytesUnit reports whether unit is "bytes": exactly, or ASCII
// case-insensitively when lenient (strings.EqualFold would also take
// "byteſ").
func (p parser) bytesUnit(unit string) bool {
	if !p.lenient || len(unit) != len("bytes") {
		return unit == "bytes"
	}
	for i := 0; i < len(unit); i++ {
		if unit[i]|0x20 != "bytes"[i] {
			return false
		}
	}
	return true
}

// position parses a byte position.
func (p parser) position(s string) (int64, bool) {
	if p.lenient {
		return parseDigits(s)
	}
	n, err := strconv.ParseInt(s, 10, 64)
	return n, err == nil && n >= 0
}

// before reports whether the last position (text and value) comes before
// the first. Lenient positions saturate, so two huge ones compare as text.
func (p parser) before(last string, lastN int64, first string, firstN int64) bool {
	if p.lenient {
		return lessDecimal(last, first)
	}
	return lastN < firstN
}

// parseDigits parses a non-empty run of ASCII digits; values beyond int64
// saturate.
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

// lessDecimal compares two runs of ASCII digits as numbers of any size.
func lessDecimal(a, b string) bool {
	a, b = strings.TrimLeft(a, "0"), strings.TrimLeft(b, "0")
	if len(a) != len(b) {
		return len(a) < len(b)
	}
	return a < b
}
