package nodeapi

import (
	"net/http"
	"net/http/httptest"
	"testing"
)

func TestObjectPath(t *testing.T) {
	for _, tc := range []struct{ key, want string }{
		{"plain/key.bin", "/v1/objects/b/plain/key.bin"},
		{"a b+c%d?e#f", "/v1/objects/b/a%20b+c%25d%3Fe%23f"},
		{"ünï", "/v1/objects/b/%C3%BCn%C3%AF"},
		{"a//b", "/v1/objects/b/a/%2Fb"},
		{"/lead", "/v1/objects/b/%2Flead"},
		{"trail/", "/v1/objects/b/trail/"},
		{"./x", "/v1/objects/b/%2E/x"},
		{"x/../y", "/v1/objects/b/x/%2E%2E/y"},
		{"..", "/v1/objects/b/%2E%2E"},
		{"...", "/v1/objects/b/..."},
		{"%2F", "/v1/objects/b/%252F"},
	} {
		if got := ObjectPath("b", tc.key); got != tc.want {
			t.Errorf("ObjectPath(%q) = %q, want %q", tc.key, got, tc.want)
		}
	}
}

// The node's router (Go's ServeMux with the node API's patterns) must give
// back exactly the key for every path ObjectPath builds.
func TestObjectPathRoundTripsThroughServeMux(t *testing.T) {
	var got string
	mux := http.NewServeMux()
	mux.HandleFunc("GET /v1/objects/{bucket}/{key...}", func(w http.ResponseWriter, r *http.Request) {
		got = r.PathValue("bucket") + "|" + r.PathValue("key")
	})
	for _, key := range []string{"k", "a b", "a//b", "//", "/", "/x/", "./x", "x/.", "x/..", "..", ".", "a/./b/../c",
		"%", "%2F", "?#", "ü/日本", "a///b/", "\x7f\x01", "+"} {
		got = ""
		req := httptest.NewRequest(http.MethodGet, "https://n"+ObjectPath("bkt", key)+"?chunk=0", nil)
		w := httptest.NewRecorder()
		mux.ServeHTTP(w, req)
		if w.Code != http.StatusOK || got != "bkt|"+key {
			t.Errorf("key %q: path %q routed to %q (status %d)", key, ObjectPath("bkt", key), got, w.Code)
		}
	}
}
