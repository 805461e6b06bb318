package gateway

import (
	"net/http"
	"testing"
	"time"
)

func TestEvalPreconditions(t *testing.T) {
	const etag = `"0123abcd"`
	lm := time.Date(2026, 3, 1, 12, 0, 0, 500e6, time.UTC) // sub-second: compared at second precision
	before := lm.Add(-time.Hour).Format(http.TimeFormat)
	at := lm.Format(http.TimeFormat)
	after := lm.Add(time.Hour).Format(http.TimeFormat)
	tests := []struct {
		name    string
		headers map[string]string
		want    precondition
		cond    string
	}{
		{"none", nil, proceed, ""},
		{"if-match quoted", map[string]string{"If-Match": etag}, proceed, ""},
		{"if-match bare", map[string]string{"If-Match": "0123abcd"}, proceed, ""},
		{"if-match list", map[string]string{"If-Match": `"x", "0123abcd"`}, proceed, ""},
		{"if-match star", map[string]string{"If-Match": "*"}, proceed, ""},
		{"if-match mismatch", map[string]string{"If-Match": `"other"`}, conditionFails, "If-Match"},
		{"if-none-match match", map[string]string{"If-None-Match": etag}, notModified, ""},
		{"if-none-match weak", map[string]string{"If-None-Match": `W/"0123abcd"`}, notModified, ""},
		{"if-none-match star", map[string]string{"If-None-Match": "*"}, notModified, ""},
		{"if-none-match mismatch", map[string]string{"If-None-Match": `"other"`}, proceed, ""},
		{"if-unmodified-since before", map[string]string{"If-Unmodified-Since": before}, conditionFails, "If-Unmodified-Since"},
		{"if-unmodified-since at", map[string]string{"If-Unmodified-Since": at}, proceed, ""},
		{"if-modified-since after", map[string]string{"If-Modified-Since": after}, notModified, ""},
		{"if-modified-since at", map[string]string{"If-Modified-Since": at}, notModified, ""},
		{"if-modified-since before", map[string]string{"If-Modified-Since": before}, proceed, ""},
		{"if-modified-since garbage", map[string]string{"If-Modified-Since": "yesterday"}, proceed, ""},
		// S3: If-Match true overrides If-Unmodified-Since false.
		{"if-match wins over if-unmodified-since", map[string]string{"If-Match": etag, "If-Unmodified-Since": before}, proceed, ""},
		// S3: If-None-Match false (no match) overrides If-Modified-Since.
		{"if-none-match wins over if-modified-since", map[string]string{"If-None-Match": `"other"`, "If-Modified-Since": after}, proceed, ""},
		{"412 before 304", map[string]string{"If-Match": `"other"`, "If-None-Match": etag}, conditionFails, "If-Match"},
	}
	for _, tt := range tests {
		h := http.Header{}
		for k, v := range tt.headers {
			h.Set(k, v)
		}
		got, cond := evalPreconditions(h, etag, lm)
		if got != tt.want || cond != tt.cond {
			t.Errorf("%s: got %v %q, want %v %q", tt.name, got, cond, tt.want, tt.cond)
		}
	}
}

func TestQuoteETag(t *testing.T) {
	for in, want := range map[string]string{"abc": `"abc"`, `"abc"`: `"abc"`, `W/"abc"`: `W/"abc"`, "": ""} {
		if got := quoteETag(in); got != want {
			t.Errorf("quoteETag(%q) = %q, want %q", in, got, want)
		}
	}
}
