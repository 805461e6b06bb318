package gateway

import (
	"net/http"
	"strings"
	"time"
)

// precondition is the outcome of a GET or HEAD's conditional headers.
type precondition int

const (
	proceed        precondition = iota
	notModified                 // 304
	conditionFails              // 412 PreconditionFailed
)

// evalPreconditions applies If-Match, If-Unmodified-Since, If-None-Match
// and If-Modified-Since to an object's ETag and Last-Modified in the order of
// RFC 9110 section 13.2.2, which is also S3's documented behaviour: a
// matching If-Match overrides a failing If-Unmodified-Since, and a present
// If-None-Match overrides If-Modified-Since. It returns the header that
// decided a 412 as the Condition S3 reports.
func evalPreconditions(h http.Header, etag string, lastModified time.Time) (precondition, string) {
	if im := h.Get("If-Match"); im != "" {
		if !etagListMatches(im, etag) {
			return conditionFails, "If-Match"
		}
	} else if ius := h.Get("If-Unmodified-Since"); ius != "" && !lastModified.IsZero() {
		if t, err := http.ParseTime(ius); err == nil && lastModified.Truncate(time.Second).After(t) {
			return conditionFails, "If-Unmodified-Since"
		}
	}
	if inm := h.Get("If-None-Match"); inm != "" {
		if etagListMatches(inm, etag) {
			return notModified, ""
		}
	} else if ims := h.Get("If-Modified-Since"); ims != "" && !lastModified.IsZero() {
		if t, err := http.ParseTime(ims); err == nil && !lastModified.Truncate(time.Second).After(t) {
			return notModified, ""
		}
	}
	return proceed, ""
}

// etagListMatches reports whether a comma-separated If-Match/If-None-Match
// value names etag or is "*". Quotes and weak prefixes are ignored, as S3
// compares opaque ETag values.
func etagListMatches(list, etag string) bool {
	want := bareETag(etag)
	for item := range strings.SplitSeq(list, ",") {
		item = strings.TrimSpace(item)
		if item == "*" || (item != "" && bareETag(item) == want) {
			return true
		}
	}
	return false
}

func bareETag(s string) string {
	s = strings.TrimPrefix(strings.TrimSpace(s), "W/")
	return strings.Trim(s, `"`)
}

// quoteETag returns an ETag in the quoted form S3 sends.
func quoteETag(s string) string {
	if s == "" || strings.HasPrefix(s, `"`) || strings.HasPrefix(s, `W/"`) {
		return s
	}
	return `"` + s + `"`
}
