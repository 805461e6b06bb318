package gateway

import (
	"net/http"
	"net/url"
	"strings"
	"testing"
)

func TestParseRoute(t *testing.T) {
	tests := []struct {
		method, target string
		headers        map[string]string
		op             string
		handling       handling
		code           string // error code when refused
		bucket, key    string
	}{
		{method: "GET", target: "/bkt/a/b.bin", op: OpGetObject, handling: viaCacheRead, bucket: "bkt", key: "a/b.bin"},
		{method: "GET", target: "/bkt/a/b/", op: OpGetObject, handling: viaCacheRead, bucket: "bkt", key: "a/b/"},
		{method: "GET", target: "/bkt/a..b/.c/d.", op: OpGetObject, handling: viaCacheRead, bucket: "bkt", key: "a..b/.c/d."},
		{method: "GET", target: "/bkt/a//b", op: OpGetObject, handling: viaCacheRead, bucket: "bkt", key: "a//b"},
		{method: "DELETE", target: "/bkt//a", op: OpDeleteObject, handling: viaPassthrough, bucket: "bkt", key: "/a"},
		{method: "PUT", target: "/bkt/a/./b", op: OpPutObject, handling: viaCacheWrite, bucket: "bkt", key: "a/./b"},
		{method: "GET", target: "/bkt/k?x-id=GetObject&response-content-type=text/plain", op: OpGetObject, handling: viaCacheRead},
		{method: "HEAD", target: "/bkt/k", op: OpHeadObject, handling: viaCacheRead},
		// What the cache does not keep, S3 answers.
		{method: "GET", target: "/bkt/k?versionId=3", op: OpGetObject, handling: viaPassthrough},
		{method: "HEAD", target: "/bkt/k?partNumber=1", op: OpHeadObject, handling: viaPassthrough},
		{method: "GET", target: "/bkt/k", headers: map[string]string{"X-Amz-Server-Side-Encryption-Customer-Algorithm": "AES256"},
			op: OpGetObject, handling: viaPassthrough},
		{method: "GET", target: "/bkt/k?uploadId=u", op: OpListParts, handling: viaPassthrough},
		{method: "GET", target: "/bkt/k?attributes", op: OpGetObjectAttributes, handling: viaPassthrough},
		{method: "GET", target: "/bkt/k?acl", op: OpUnsupported, handling: refused, code: CodeNotImplemented},
		{method: "GET", target: "/bkt/k?tagging", op: OpGetObjectTagging, handling: viaPassthrough},
		{method: "PUT", target: "/bkt/k?tagging", op: OpPutObjectTagging, handling: viaPassthrough},
		{method: "DELETE", target: "/bkt/k?tagging", op: OpDeleteObjectTagging, handling: viaPassthrough},
		{method: "POST", target: "/bkt/k?tagging", op: OpUnsupported, handling: refused, code: CodeMethodNotAllowed},
		{method: "PUT", target: "/bkt/k?acl", op: OpUnsupported, handling: refused, code: CodeNotImplemented},
		{method: "PUT", target: "/bkt/k", op: OpPutObject, handling: viaCacheWrite},
		{method: "PUT", target: "/bkt/k", headers: map[string]string{"Content-Type": "text/csv", "X-Amz-Checksum-Crc32": "AAAAAA==",
			"X-Amz-Sdk-Checksum-Algorithm": "CRC32", "Content-Md5": "x"}, op: OpPutObject, handling: viaCacheWrite},
		// The headers S3 stores go through the cache, which keeps them.
		{method: "PUT", target: "/bkt/k", headers: map[string]string{"X-Amz-Meta-Owner": "me"}, op: OpPutObject, handling: viaCacheWrite},
		{method: "PUT", target: "/bkt/k", headers: map[string]string{"Cache-Control": "no-cache", "Content-Language": "de",
			"Expires": "Thu, 01 Jan 2032 00:00:00 GMT"}, op: OpPutObject, handling: viaCacheWrite},
		{method: "PUT", target: "/bkt/k", headers: map[string]string{"If-None-Match": "*"}, op: OpPutObject, handling: viaPassthrough},
		{method: "PUT", target: "/bkt/k", headers: map[string]string{"Expires": "tomorrow"}, op: OpPutObject, handling: viaPassthrough},
		{method: "PUT", target: "/bkt/k", headers: map[string]string{"X-Amz-Storage-Class": "STANDARD_IA"}, op: OpPutObject, handling: viaCacheWrite},
		{method: "PUT", target: "/bkt/k", headers: map[string]string{"X-Amz-Tagging": "team=a"}, op: OpPutObject, handling: viaPassthrough},
		{method: "PUT", target: "/bkt/k", headers: map[string]string{"X-Amz-Storage-Class": "GLACIER"}, op: OpPutObject, handling: viaPassthrough},
		{method: "PUT", target: "/bkt/k", headers: map[string]string{"X-Amz-Storage-Class": "DEEP_ARCHIVE"}, op: OpPutObject, handling: viaPassthrough},
		{method: "PUT", target: "/bkt/k", headers: map[string]string{"X-Amz-Copy-Source": "bkt/src"}, op: OpCopyObject, handling: viaPassthrough},
		{method: "PUT", target: "/bkt/k?partNumber=2&uploadId=u", op: OpUploadPart, handling: viaPassthrough},
		{method: "PUT", target: "/bkt/k?partNumber=2&uploadId=u", headers: map[string]string{"X-Amz-Copy-Source": "bkt/src"},
			op: OpUploadPartCopy, handling: viaPassthrough},
		{method: "POST", target: "/bkt/k?uploads", op: OpCreateMultipartUpload, handling: viaPassthrough},
		{method: "POST", target: "/bkt/k?uploadId=u", op: OpCompleteMultipartUpload, handling: viaPassthrough},
		{method: "POST", target: "/bkt/k?select&select-type=2", op: OpUnsupported, handling: refused, code: CodeNotImplemented},
		{method: "POST", target: "/bkt/k", op: OpUnsupported, handling: refused, code: CodeNotImplemented},
		{method: "DELETE", target: "/bkt/k?uploadId=u", op: OpAbortMultipartUpload, handling: viaPassthrough},
		{method: "DELETE", target: "/bkt/k", op: OpDeleteObject, handling: viaPassthrough},
		{method: "PATCH", target: "/bkt/k", op: OpUnsupported, handling: refused, code: CodeMethodNotAllowed},
		{method: "GET", target: "/bkt?list-type=2&prefix=a%2F&delimiter=%2F&max-keys=2&continuation-token=x", op: OpListObjectsV2,
			handling: viaPassthrough, bucket: "bkt"},
		{method: "GET", target: "/bkt/?list-type=2", op: OpListObjectsV2, handling: viaPassthrough, bucket: "bkt"},
		{method: "GET", target: "/bkt?prefix=a&marker=b", op: OpListObjects, handling: viaPassthrough},
		{method: "GET", target: "/bkt", op: OpListObjects, handling: viaPassthrough},
		{method: "GET", target: "/bkt?location", op: OpGetBucketLocation, handling: viaPassthrough},
		{method: "GET", target: "/bkt?uploads", op: OpListMultipartUploads, handling: viaPassthrough},
		{method: "GET", target: "/bkt?policy", op: OpUnsupported, handling: refused, code: CodeNotImplemented},
		{method: "GET", target: "/bkt?list-type=2&acl", op: OpUnsupported, handling: refused, code: CodeNotImplemented},
		{method: "HEAD", target: "/bkt", op: OpHeadBucket, handling: viaPassthrough},
		{method: "POST", target: "/bkt?delete", op: OpDeleteObjects, handling: viaPassthrough},
		{method: "PUT", target: "/bkt", op: OpUnsupported, handling: refused, code: CodeNotImplemented},
		{method: "DELETE", target: "/bkt", op: OpUnsupported, handling: refused, code: CodeNotImplemented},
		{method: "GET", target: "/", op: OpListBuckets, handling: refused, code: CodeNotImplemented},
		{method: "PUT", target: "/", op: OpUnsupported, handling: refused, code: CodeMethodNotAllowed},
		{method: "GET", target: "/Bad_Bucket/k", op: OpGetObject, handling: refused, code: CodeInvalidBucketName},
		{method: "GET", target: "/ab/k", op: OpGetObject, handling: refused, code: CodeInvalidBucketName},
		{method: "GET", target: "/bkt/" + strings.Repeat("k", 1025), op: OpGetObject, handling: refused, code: CodeKeyTooLong},
		// Presigned-URL parameters never select an operation.
		{method: "GET", target: "/bkt/k?X-Amz-Algorithm=AWS4-HMAC-SHA256&X-Amz-Signature=00", op: OpGetObject, handling: viaCacheRead},
		{method: "GET", target: "/bkt?list-type=2&X-Amz-Signature=00", op: OpListObjectsV2, handling: viaPassthrough},
	}
	for _, tt := range tests {
		u, err := url.Parse(tt.target)
		if err != nil {
			t.Fatal(err)
		}
		h := http.Header{}
		for k, v := range tt.headers {
			h.Set(k, v)
		}
		rt := parseRoute(tt.method, u.Path, u.Query(), h)
		if rt.op != tt.op || rt.handling != tt.handling {
			t.Errorf("%s %s: got op %s handling %d, want %s %d", tt.method, tt.target, rt.op, rt.handling, tt.op, tt.handling)
			continue
		}
		if tt.code != "" && (rt.err == nil || rt.err.Code != tt.code) {
			t.Errorf("%s %s: error %v, want %s", tt.method, tt.target, rt.err, tt.code)
		}
		if tt.code == "" && rt.err != nil {
			t.Errorf("%s %s: unexpected error %v", tt.method, tt.target, rt.err)
		}
		if tt.bucket != "" && (rt.bucket != tt.bucket || rt.key != tt.key) {
			t.Errorf("%s %s: bucket %q key %q, want %q %q", tt.method, tt.target, rt.bucket, rt.key, tt.bucket, tt.key)
		}
	}
}

func TestValidBucketName(t *testing.T) {
	for name, want := range map[string]bool{
		"abc": true, "my-bucket.data": true, "0bucket9": true, strings.Repeat("a", 63): true,
		"ab": false, strings.Repeat("a", 64): false, "Upper": false, "a_b": false, "-ab": false, "ab-": false,
		"a..b": false, ".ab": false,
	} {
		if got := validBucketName(name); got != want {
			t.Errorf("validBucketName(%q) = %v, want %v", name, got, want)
		}
	}
}
