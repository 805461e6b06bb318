// Package s3cond evaluates S3's conditional request headers against an
// object's ETag and Last-Modified: GetObject and HeadObject's If-* headers
// (the gateway) and CopyObject's x-amz-copy-source-if-* (the node, for
// copies it serves itself).
package s3cond

import (
	"net/http"
	"strings"
	"time"
)

// Outcome is what an object's conditional headers decide.
type Outcome int

const (
	Proceed     Outcome = iota
	NotModified         // 304
	Failed              // 412 PreconditionFailed
)

// Eval applies If-Match, If-Unmodified-Since, If-None-Match
// and If-Modified-Since to an object's ETag and Last-Modified in the order of
// RFC 9110 section 13.2.2, which is also S3's documented behaviour: a
// matching If-Match overrides a failing If-Unmodified-Since, and a present
// If-None-Match overrides If-Modified-Since. It returns the header that
// decided a 412 as the Condition S3 reports.
func Eval(h http.Header, etag string, lastModified time.Time) (Outcome, string) {
	if im := h.Get("If-Match"); im != "" {
		if !ETagListMatches(im, etag) {
			return Failed, "If-Match"
		}
	} else if ius := h.Get("If-Unmodified-Since"); ius != "" && !lastModified.IsZero() {
		if t, err := http.ParseTime(ius); err == nil && lastModified.Truncate(time.Second).After(t) {
			return Failed, "If-Unmodified-Since"
		}
	}
	if inm := h.Get("If-None-Match"); inm != "" {
		if ETagListMatches(inm, etag) {
			return NotModified, ""
		}
	} else if ims := h.Get("If-Modified-Since"); ims != "" && !lastModified.IsZero() {
		if t, err := http.ParseTime(ims); err == nil && !lastModified.Truncate(time.Second).After(t) {
			return NotModified, ""
		}
	}
	return Proceed, ""
}

// ETagListMatches reports whether a comma-separated If-Match/If-None-Match
// value names etag or is "*". Quotes and weak prefixes are ignored, as S3
// compares opaque ETag values.
func ETagListMatches(list, etag string) bool {
	want := BareETag(etag)
	for item := range strings.SplitSeq(list, ",") {
		item = strings.TrimSpace(item)
		if item == "*" || (item != "" && BareETag(item) == want) {
			return true
		}
	}
	return false
}

func BareETag(s string) string {
	s = strings.TrimPrefix(strings.TrimSpace(s), "W/")
	return strings.Trim(s, `"`)
}

// QuoteETag returns an ETag in the quoted form S3 sends.
func QuoteETag(s string) string {
	if s == "" || strings.HasPrefix(s, `"`) || strings.HasPrefix(s, `W/"`) {
		return s
	}
	return `"` + s + `"`
}

// copySourceHeaders are CopyObject's conditions on its source, by the
// header of a GET that means the same.
var copySourceHeaders = [][2]string{
	{"X-Amz-Copy-Source-If-Match", "If-Match"},
	{"X-Amz-Copy-Source-If-None-Match", "If-None-Match"},
	{"X-Amz-Copy-Source-If-Unmodified-Since", "If-Unmodified-Since"},
	{"X-Amz-Copy-Source-If-Modified-Since", "If-Modified-Since"},
}

// EvalCopySource applies a copy's x-amz-copy-source-if-* headers to its
// source as S3 does: in GET's order and precedence, except that every
// condition that does not hold is a 412 (a copy has no 304). It returns
// the copy-source header that failed, or "" when the copy may proceed.
func EvalCopySource(h http.Header, etag string, lastModified time.Time) string {
	get := http.Header{}
	for _, names := range copySourceHeaders {
		if v := h.Get(names[0]); v != "" {
			get.Set(names[1], v)
		}
	}
	out, cond := Eval(get, etag, lastModified)
	switch out {
	case Failed:
		return "x-amz-copy-source-" + strings.ToLower(cond)
	case NotModified:
		if get.Get("If-None-Match") != "" {
			return "x-amz-copy-source-if-none-match"
		}
		return "x-amz-copy-source-if-modified-since"
	}
	return ""
}
