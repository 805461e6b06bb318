package node

import (
	"net/url"
	"strings"
	"testing"
)

// FuzzParseReadQuery checks the chunk read's query scanner against what
// url.ParseQuery (r.URL.Query(), which the node used before) makes of the
// same query string.
func FuzzParseReadQuery(f *testing.F) {
	for _, s := range []string{"", "chunk=3", "chunk=3&etag=%22abc%22", "chunk=1&etag=e&size=9", "etag=a&etag=b",
		"chunk", "chunk=", "chunk=1;x=2&etag=e", "chunk=%zz&chunk=2", "%63hunk=4", "chunk=1+2", "etag=a%2Bb+c",
		"&&chunk=5&&", "size=%&size=7", "x=1&chunk=0&etag=%GG&etag=ok", "chunk=1&" + strings.Repeat("a&", 3000)} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, raw string) {
		v, _ := url.ParseQuery(raw)
		want := readQuery{hasChunk: v.Has("chunk"), chunk: v.Get("chunk"), etag: v.Get("etag"), size: v.Get("size")}
		if got := parseReadQuery(raw); got != want {
			t.Fatalf("parseReadQuery(%q) = %+v; url.ParseQuery gives %+v", raw, got, want)
		}
	})
}
