package node

import (
	"bufio"
	"net/http"
	"reflect"
	"strings"
	"testing"

	"github.com/distcache/distcache/internal/testutil"
)

// TestReadRequestIsWhatReadRequestGives parses requests as clients send
// them on read connections with both parsers.
func TestReadRequestIsWhatReadRequestGives(t *testing.T) {
	for _, raw := range []string{
		"GET /v1/objects/b/k?chunk=0&etag=%22e%22 HTTP/1.1\r\nHost: 127.0.0.1:9000\r\nRange: bytes=0-65535\r\n\r\n",
		"GET /v1/objects/b/a/b.bin?chunk=3 HTTP/1.1\r\nHost: node\r\nX-Distcache-Tenant: team-a\r\nUser-Agent: Go-http-client/1.1\r\nAccept-Encoding: gzip\r\n\r\n",
		"GET /v1/objects/b/a%2Fb?chunk=1 HTTP/1.1\r\nHost: node\r\nConnection: keep-alive, close\r\n\r\n",
		"GET /v1/objects/b/k? HTTP/1.1\nHost: node\nX-Odd: 1\nx-odd: 2\n\n",
		"PUT /v1/objects/b/k?chunk=0 HTTP/1.1\r\nHost: node\r\nContent-Length: 5\r\n\r\nhello",
		"GET /v1/ring HTTP/1.1\r\nHost: node\r\nX-Distcache-Hop: 1\r\nX-Distcache-Local-Only: 1\r\n\r\n",
		"GET https://node/v1/objects/b/k?chunk=0 HTTP/1.1\r\nHost: node\r\n\r\n",
	} {
		want, err := http.ReadRequest(bufio.NewReader(strings.NewReader(raw)))
		testutil.Must(t, err)
		got, err := readRequest(t.Context(), bufio.NewReader(strings.NewReader(raw)), http.Header{})
		if err != nil {
			t.Fatalf("%q: %v", raw, err)
		}
		if got.Method != want.Method || got.URL.String() != want.URL.String() || got.URL.Path != want.URL.Path ||
			got.URL.RawPath != want.URL.RawPath || got.URL.RawQuery != want.URL.RawQuery || got.RequestURI != want.RequestURI ||
			got.Host != want.Host || got.Close != want.Close || got.ContentLength != want.ContentLength ||
			!reflect.DeepEqual(got.Header, want.Header) || got.Proto != want.Proto {
			t.Errorf("%q:\ngot  %s %q %q %q host %q close %v len %d %v\nwant %s %q %q %q host %q close %v len %d %v", raw,
				got.Method, got.URL, got.URL.Path, got.RequestURI, got.Host, got.Close, got.ContentLength, got.Header,
				want.Method, want.URL, want.URL.Path, want.RequestURI, want.Host, want.Close, want.ContentLength, want.Header)
		}
	}
	for _, raw := range []string{
		"GET /v1/objects/b/k HTTP/1.0\r\nHost: node\r\n\r\n",
		"GET /v1/objects/b/k HTTP/1.1\r\n\r\n",
		"GET /v1/objects/b/k HTTP/1.1\r\nHost: a\r\nHost: b\r\n\r\n",
		"GET /v1/objects/b/k HTTP/1.1\r\nHost: a\r\nBad Name: x\r\n\r\n",
		"GET /v1/objects/b/k HTTP/1.1\r\nHost: a\r\nno colon\r\n\r\n",
		"GET /v1/objects/b/\x01k HTTP/1.1\r\nHost: a\r\n\r\n",
		"GET /v1/objects/b/k HTTP/1.1\r\nHost: a\r\n",
		"G(T /v1/objects/b/k HTTP/1.1\r\nHost: a\r\n\r\n",
	} {
		if _, err := readRequest(t.Context(), bufio.NewReader(strings.NewReader(raw)), http.Header{}); err == nil {
			t.Errorf("%q parsed without error", raw)
		}
	}
}
