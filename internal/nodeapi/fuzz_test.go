package nodeapi

import (
	"net/http"
	"net/http/httptest"
	"net/url"
	"testing"

	"github.com/distcache/distcache/internal/tenancy"
)

// FuzzObjectPath checks, for any bucket and key, that the path ObjectPath
// builds is a valid request path that the node's router (Go's ServeMux with
// the node API's patterns) gives back as exactly that bucket and key:
// nothing cleaned, collapsed or decoded twice, whatever the key holds.
func FuzzObjectPath(f *testing.F) {
	for _, k := range []string{"k", "a b", "a//b", "//", "/", "/x/", "./x", "x/.", "x/..", "..", ".", "a/./b/../c",
		"%", "%2F", "?#", "ü/日本", "a///b/", "\x7f\x01", "+", "%2E%2E", "\xff\xfe", "a/%2e%2e/b", ";a=b"} {
		f.Add("bkt", k)
	}
	f.Add("my.bucket-1", "x")
	var got string
	mux := http.NewServeMux()
	mux.HandleFunc("GET /v1/objects/{bucket}/{key...}", func(w http.ResponseWriter, r *http.Request) {
		got = r.PathValue("bucket") + "\x00" + r.PathValue("key")
	})
	f.Fuzz(func(t *testing.T, bucket, key string) {
		if key == "" || tenancy.ValidateBucketName(bucket) != nil {
			return // buckets are valid S3 names by the time a path is built
		}
		p := ObjectPath(bucket, key)
		u, err := url.ParseRequestURI(p + "?chunk=0")
		if err != nil {
			t.Fatalf("ObjectPath(%q, %q) = %q: not a request URI: %v", bucket, key, p, err)
		}
		if u.Path != "/v1/objects/"+bucket+"/"+key {
			t.Fatalf("ObjectPath(%q, %q) = %q decodes to %q", bucket, key, p, u.Path)
		}
		got = "\x00not routed"
		w := httptest.NewRecorder()
		mux.ServeHTTP(w, httptest.NewRequest(http.MethodGet, "https://node.example"+p+"?chunk=0", nil))
		if w.Code != http.StatusOK || got != bucket+"\x00"+key {
			t.Fatalf("ObjectPath(%q, %q) = %q routed to %q (status %d)", bucket, key, p, got, w.Code)
		}
	})
}
