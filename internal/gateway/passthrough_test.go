package gateway

import (
	"encoding/xml"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
)

func TestPassthroughHeaders(t *testing.T) {
	in := http.Header{}
	for k, v := range map[string]string{
		"Authorization": "AWS4-HMAC-SHA256 ...", "X-Amz-Date": "20260101T000000Z", "X-Amz-Content-Sha256": "UNSIGNED-PAYLOAD",
		"X-Amz-Decoded-Content-Length": "10", "X-Amz-Trailer": "x-amz-checksum-crc32", "Content-Length": "10",
		"X-Distcache-Tenant": "someone-else", "Expect": "100-continue", "Connection": "keep-alive",
		"X-Amz-Copy-Source": "bkt/src", "X-Amz-Meta-A": "b", "Content-Type": "text/plain",
		"X-Amz-Sdk-Checksum-Algorithm": "CRC32", "X-Amz-Security-Token": "tok",
	} {
		in.Set(k, v)
	}
	out := passthroughHeaders(in)
	for _, k := range []string{"Authorization", "X-Amz-Date", "X-Amz-Content-Sha256", "X-Amz-Decoded-Content-Length",
		"X-Amz-Trailer", "Content-Length", "X-Distcache-Tenant", "Expect", "Connection", "X-Amz-Security-Token",
		"X-Amz-Sdk-Checksum-Algorithm"} {
		if out.Get(k) != "" {
			t.Errorf("%s passed through", k)
		}
	}
	for _, k := range []string{"X-Amz-Copy-Source", "X-Amz-Meta-A", "Content-Type"} {
		if out.Get(k) != in.Get(k) {
			t.Errorf("%s not passed through", k)
		}
	}
	// With the checksum itself as a header, the algorithm goes along.
	in.Set("X-Amz-Checksum-Crc32", "AAAAAA==")
	if out := passthroughHeaders(in); out.Get("X-Amz-Sdk-Checksum-Algorithm") != "CRC32" || out.Get("X-Amz-Checksum-Crc32") == "" {
		t.Errorf("checksum headers dropped: %v", out)
	}
}

func TestPassthroughQuery(t *testing.T) {
	for in, want := range map[string]string{
		"":                            "",
		"list-type=2&prefix=a%2Fb":    "list-type=2&prefix=a%2Fb",
		"uploadId=x%2By&partNumber=3": "uploadId=x%2By&partNumber=3",
		"X-Amz-Algorithm=AWS4-HMAC-SHA256&X-Amz-Credential=a%2Fb&X-Amz-Date=1&X-Amz-Expires=60&X-Amz-SignedHeaders=host&X-Amz-Signature=ff&uploads=": "uploads=",
		"prefix=X-Amz-Date": "prefix=X-Amz-Date",
	} {
		if got := passthroughQuery(in); got != want {
			t.Errorf("passthroughQuery(%q) = %q, want %q", in, got, want)
		}
	}
}

func TestPassthroughURLPath(t *testing.T) {
	for _, tt := range []struct{ bucket, key, want string }{
		{"bkt", "", "/v1/s3/bkt"},
		{"bkt", "a/b c", "/v1/s3/bkt/a/b%20c"},
		{"bkt", "a//b", "/v1/s3/bkt/a/%2Fb"},
		{"bkt", "a/./b/..", "/v1/s3/bkt/a/%2E/b/%2E%2E"},
	} {
		if got := passthroughURLPath(tt.bucket, tt.key); got != tt.want {
			t.Errorf("(%q, %q) = %q, want %q", tt.bucket, tt.key, got, tt.want)
		}
	}
}

func TestWriteError(t *testing.T) {
	r := httptest.NewRequest(http.MethodGet, "/bkt/some%20key", nil)
	w := httptest.NewRecorder()
	w.Header().Set("ETag", `"stale"`)
	writeError(w, r, route{bucket: "bkt", key: "some key"}, "REQ1", errInvalidRange("bytes=10-", 5))
	if w.Code != http.StatusRequestedRangeNotSatisfiable || w.Header().Get("ETag") != "" ||
		w.Header().Get("Content-Range") != "bytes */5" || w.Header().Get("Content-Type") != "application/xml" {
		t.Fatalf("status %d, headers %v", w.Code, w.Header())
	}
	var body struct {
		Code, Message, Resource, RequestID, Key, BucketName, RangeRequested, ActualObjectSize string
	}
	if err := xml.Unmarshal(w.Body.Bytes(), &body); err != nil {
		t.Fatalf("%v: %s", err, w.Body)
	}
	if body.Code != CodeInvalidRange || body.Resource != "/bkt/some key" || body.Key != "some key" ||
		body.BucketName != "bkt" || body.RangeRequested != "bytes=10-" || body.ActualObjectSize != "5" {
		t.Errorf("body %+v", body)
	}
	if !strings.Contains(w.Body.String(), "<RequestId>REQ1</RequestId>") {
		t.Errorf("no request id: %s", w.Body)
	}
	// HEAD: status and headers only.
	w = httptest.NewRecorder()
	writeError(w, httptest.NewRequest(http.MethodHead, "/bkt/k", nil), route{}, "REQ2", errNoSuchKey())
	if w.Code != http.StatusNotFound || w.Body.Len() != 0 {
		t.Errorf("HEAD error: %d with %d body bytes", w.Code, w.Body.Len())
	}
}

// A node's own errors reach the client as the S3 errors they mean: what
// the cache does not do is 501 NotImplemented (not a 503 to retry), its
// failures are 503, a refusal keeps its status.
func TestNodeError(t *testing.T) {
	for _, tt := range []struct {
		status     int
		code       string
		wantStatus int
		wantCode   string
	}{
		{http.StatusNotImplemented, "BadRequest", http.StatusNotImplemented, CodeNotImplemented},
		{http.StatusInternalServerError, "InternalError", http.StatusServiceUnavailable, CodeServiceUnavailable},
		{http.StatusServiceUnavailable, "ServiceUnavailable", http.StatusServiceUnavailable, CodeServiceUnavailable},
		{http.StatusForbidden, "AccessDenied", http.StatusForbidden, CodeAccessDenied},
		{http.StatusBadRequest, "BadRequest", http.StatusBadRequest, CodeInvalidRequest},
	} {
		resp := &http.Response{StatusCode: tt.status, Header: http.Header{headerNodeError: {tt.code}},
			Body: io.NopCloser(strings.NewReader(`{"code":"` + tt.code + `","message":"why"}`))}
		if e := nodeError(resp); e.Status != tt.wantStatus || e.Code != tt.wantCode {
			t.Errorf("node %d %s: %d %s, want %d %s", tt.status, tt.code, e.Status, e.Code, tt.wantStatus, tt.wantCode)
		}
	}
}
