package s3cond

import (
	"net/http"
	"strings"
	"testing"
	"time"
)

func TestEval(t *testing.T) {
	const etag = `"0123abcd"`
	lm := time.Date(2026, 3, 1, 12, 0, 0, 500e6, time.UTC) // sub-second: compared at second precision
	before := lm.Add(-time.Hour).Format(http.TimeFormat)
	at := lm.Format(http.TimeFormat)
	after := lm.Add(time.Hour).Format(http.TimeFormat)
	tests := []struct {
		name    string
		headers map[string]string
		want    Outcome
		cond    string
	}{
		{"none", nil, Proceed, ""},
		{"if-match quoted", map[string]string{"If-Match": etag}, Proceed, ""},
		{"if-match bare", map[string]string{"If-Match": "0123abcd"}, Proceed, ""},
		{"if-match list", map[string]string{"If-Match": `"x", "0123abcd"`}, Proceed, ""},
		{"if-match star", map[string]string{"If-Match": "*"}, Proceed, ""},
		{"if-match mismatch", map[string]string{"If-Match": `"other"`}, Failed, "If-Match"},
		{"if-none-match match", map[string]string{"If-None-Match": etag}, NotModified, ""},
		{"if-none-match weak", map[string]string{"If-None-Match": `W/"0123abcd"`}, NotModified, ""},
		{"if-none-match star", map[string]string{"If-None-Match": "*"}, NotModified, ""},
		{"if-none-match mismatch", map[string]string{"If-None-Match": `"other"`}, Proceed, ""},
		{"if-unmodified-since before", map[string]string{"If-Unmodified-Since": before}, Failed, "If-Unmodified-Since"},
		{"if-unmodified-since at", map[string]string{"If-Unmodified-Since": at}, Proceed, ""},
		{"if-modified-since after", map[string]string{"If-Modified-Since": after}, NotModified, ""},
		{"if-modified-since at", map[string]string{"If-Modified-Since": at}, NotModified, ""},
		{"if-modified-since before", map[string]string{"If-Modified-Since": before}, Proceed, ""},
		{"if-modified-since garbage", map[string]string{"If-Modified-Since": "yesterday"}, Proceed, ""},
		// S3: If-Match true overrides If-Unmodified-Since false.
		{"if-match wins over if-unmodified-since", map[string]string{"If-Match": etag, "If-Unmodified-Since": before}, Proceed, ""},
		// S3: If-None-Match false (no match) overrides If-Modified-Since.
		{"if-none-match wins over if-modified-since", map[string]string{"If-None-Match": `"other"`, "If-Modified-Since": after}, Proceed, ""},
		{"412 before 304", map[string]string{"If-Match": `"other"`, "If-None-Match": etag}, Failed, "If-Match"},
	}
	for _, tt := range tests {
		h := http.Header{}
		for k, v := range tt.headers {
			h.Set(k, v)
		}
		got, cond := Eval(h, etag, lm)
		if got != tt.want || cond != tt.cond {
			t.Errorf("%s: got %v %q, want %v %q", tt.name, got, cond, tt.want, tt.cond)
		}
	}
}

func TestQuoteETag(t *testing.T) {
	for in, want := range map[string]string{"abc": `"abc"`, `"abc"`: `"abc"`, `W/"abc"`: `W/"abc"`, "": ""} {
		if got := QuoteETag(in); got != want {
			t.Errorf("QuoteETag(%q) = %q, want %q", in, got, want)
		}
	}
}

func TestEvalCopySource(t *testing.T) {
	const etag = `"0123abcd"`
	lm := time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)
	before := lm.Add(-time.Hour).Format(http.TimeFormat)
	after := lm.Add(time.Hour).Format(http.TimeFormat)
	tests := []struct {
		name    string
		headers map[string]string
		want    string
	}{
		{"none", nil, ""},
		{"if-match", map[string]string{"X-Amz-Copy-Source-If-Match": etag}, ""},
		{"if-match mismatch", map[string]string{"X-Amz-Copy-Source-If-Match": `"x"`}, "x-amz-copy-source-if-match"},
		// S3: if-match true and if-unmodified-since false: the copy proceeds.
		{"if-match wins", map[string]string{"X-Amz-Copy-Source-If-Match": etag, "X-Amz-Copy-Source-If-Unmodified-Since": before}, ""},
		{"if-unmodified-since", map[string]string{"X-Amz-Copy-Source-If-Unmodified-Since": before}, "x-amz-copy-source-if-unmodified-since"},
		// A copy has no 304: what a GET answers 304 to is a 412.
		{"if-none-match match", map[string]string{"X-Amz-Copy-Source-If-None-Match": etag}, "x-amz-copy-source-if-none-match"},
		{"if-none-match other", map[string]string{"X-Amz-Copy-Source-If-None-Match": `"x"`, "X-Amz-Copy-Source-If-Modified-Since": after}, ""},
		{"if-modified-since", map[string]string{"X-Amz-Copy-Source-If-Modified-Since": after}, "x-amz-copy-source-if-modified-since"},
		{"modified since before", map[string]string{"X-Amz-Copy-Source-If-Modified-Since": before}, ""},
		{"get headers are not copy conditions", map[string]string{"If-Match": `"x"`}, ""},
	}
	for _, tt := range tests {
		h := http.Header{}
		for k, v := range tt.headers {
			h.Set(k, v)
		}
		if got := EvalCopySource(h, etag, lm); got != tt.want {
			t.Errorf("%s: got %q, want %q", tt.name, got, tt.want)
		}
	}
}

func FuzzPreconditions(f *testing.F) {
	f.Add("abc", `"abc"`, "", "", "", int64(0))
	f.Add(`"abc"`, `W/"abc", "x"`, "*", "Mon, 02 Jan 2006 15:04:05 GMT", "", int64(1136214245))
	f.Add("abc-3", "", `"abc-3"`, "", "Mon, 02 Jan 2006 15:04:05 GMT", int64(1136214246))
	f.Add(`W/"a,b"`, `"a`, " , ", "garbage", "Sunday, 06-Nov-94 08:49:37 GMT", int64(-1))
	f.Fuzz(func(t *testing.T, etag, ifMatch, ifNoneMatch, ius, ims string, lm int64) {
		// S3 ETags are hex digits, a "-N" part count, in quotes.
		s3Like := etag != "" && strings.Trim(etag, "0123456789abcdefABCDEF-") == ""
		for _, form := range []string{etag, QuoteETag(etag), "W/" + QuoteETag(etag), `"x", ` + QuoteETag(etag)} {
			if s3Like && !ETagListMatches(form, etag) {
				t.Fatalf("ETag %q does not match %q", etag, form)
			}
		}
		h := http.Header{}
		set := func(k, v string) {
			if v != "" {
				h.Set(k, v)
			}
		}
		set("If-Match", ifMatch)
		set("If-None-Match", ifNoneMatch)
		set("If-Unmodified-Since", ius)
		set("If-Modified-Since", ims)
		var last time.Time
		if lm > 0 {
			last = time.Unix(lm, 0)
		}
		pre, cond := Eval(h, etag, last)
		switch pre {
		case Failed:
			if cond != "If-Match" && cond != "If-Unmodified-Since" || h.Get(cond) == "" ||
				cond == "If-Unmodified-Since" && ifMatch != "" {
				t.Fatalf("412 decided by %q with headers %v", cond, h)
			}
		case NotModified:
			if ifNoneMatch == "" && ims == "" {
				t.Fatalf("304 without If-None-Match or If-Modified-Since: %v", h)
			}
		}
	})
}
