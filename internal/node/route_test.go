package node

import (
	"bufio"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
)

// FuzzObjectReadPath checks the read fast route against the mux: a request
// it takes must be one the node's mux routes to the read handler as it is
// (no redirect), with the same bucket and key.
func FuzzObjectReadPath(f *testing.F) {
	for _, s := range []string{"/v1/objects/b/k", "/v1/objects/b/a/b/c.bin", "/v1/objects/b/", "/v1/objects/b",
		"/v1/objects//k", "/v1/objects/b//k", "/v1/objects/b/./k", "/v1/objects/b/../k", "/v1/objects/b/k/..",
		"/v1/objects/b/k/.", "/v1/objects/b/...", "/v1/objects/b/.x/..y/k.", "/v1/objects/b/%2E", "/v1/objects/b/a%2Fb",
		"/v1/objects/b/a b", "/v1/objects/b/a+b", "/v1/objects/b/k?chunk=1", "/v1/meta/b/k", "/v1/objects/b/~_-",
		"http://host/v1/objects/b/k", "*", "/v1/objects/b/k#f", "/v1/objects/b/\u00e9"} {
		f.Add("GET", s)
	}
	f.Add("HEAD", "/v1/objects/b/k")
	f.Add("POST", "/v1/objects/b/k")
	mux := (&Server{}).mux()
	var gotBucket, gotKey string
	values := http.NewServeMux()
	values.HandleFunc(patternGetObject, func(_ http.ResponseWriter, r *http.Request) {
		gotBucket, gotKey = r.PathValue("bucket"), r.PathValue("key")
	})
	f.Fuzz(func(t *testing.T, method, uri string) {
		r, err := http.ReadRequest(bufio.NewReader(strings.NewReader(method + " " + uri + " HTTP/1.1\r\nHost: node\r\n\r\n")))
		if err != nil {
			return
		}
		bucket, key, ok := objectReadPath(r)
		if !ok {
			return
		}
		if _, pattern := mux.Handler(r); pattern != patternGetObject {
			t.Fatalf("%s %q: fast route took it, the mux routes it to %q", method, uri, pattern)
		}
		gotBucket, gotKey = "", ""
		values.ServeHTTP(httptest.NewRecorder(), r) // a redirect leaves them empty
		if gotBucket != bucket || gotKey != key {
			t.Fatalf("%s %q: fast route gives %q/%q, the mux %q/%q", method, uri, bucket, key, gotBucket, gotKey)
		}
	})
}
