package sigv4

import (
	"fmt"
	"io"
	"maps"
	"net"
	"net/http"
	"net/http/httptest"
	"slices"
	"testing"
	"time"

	"github.com/distcache/distcache/internal/testutil"
)

func TestURIEncode(t *testing.T) {
	for _, tc := range []struct {
		in, path, query string
	}{
		{"abcXYZ019-_.~", "abcXYZ019-_.~", "abcXYZ019-_.~"},
		{"a b", "a%20b", "a%20b"},
		{"a/b", "a/b", "a%2Fb"},
		{"+=&%?#", "%2B%3D%26%25%3F%23", "%2B%3D%26%25%3F%23"},
		{"ü✓", "%C3%BC%E2%9C%93", "%C3%BC%E2%9C%93"},
		{"(!*')$@,;:", "%28%21%2A%27%29%24%40%2C%3B%3A", "%28%21%2A%27%29%24%40%2C%3B%3A"},
	} {
		if got := uriEncode(tc.in, true); got != tc.path {
			t.Errorf("path %q: %q, want %q", tc.in, got, tc.path)
		}
		if got := uriEncode(tc.in, false); got != tc.query {
			t.Errorf("query %q: %q, want %q", tc.in, got, tc.query)
		}
	}
}

func TestCanonicalQueries(t *testing.T) {
	for _, tc := range []struct {
		raw  string
		want []string
	}{
		{"", []string{""}},
		{"lifecycle", []string{"lifecycle=", "lifecycle"}},
		{"max-keys=2&prefix=J", []string{"max-keys=2&prefix=J"}},
		{"b=2&a=1&a=0", []string{"a=0&a=1&b=2", "b=2&a=1&a=0"}},
		// '+' is a space; the raw forms keep it for clients that sign the wire.
		{"prefix=a+b", []string{"prefix=a%20b", "prefix=a+b"}},
		{"prefix=%c3%bc~%7E", []string{"prefix=%C3%BC~~", "prefix=%c3%bc~%7E"}},
		// Sorting happens after encoding: "a%2Fb" < "a-b" although "a/b" > "a-b".
		{"k=a-b&k=a%2Fb", []string{"k=a%2Fb&k=a-b", "k=a-b&k=a%2Fb"}},
		{"k=a/b&k=a-b", []string{"k=a%2Fb&k=a-b", "k=a-b&k=a/b", "k=a/b&k=a-b"}},
		{"&&a=1&", []string{"a=1", "&&a=1&"}},
		{"bad=%zz", []string{"bad=%25zz", "bad=%zz"}},
	} {
		got := canonicalQueries(parseQuery(tc.raw), tc.raw, "", true)
		if !slices.Equal(got, tc.want) {
			t.Errorf("%q: %q, want %q", tc.raw, got, tc.want)
		}
	}
	// For presigned URLs X-Amz-Signature is left out, and the raw query
	// (which contains it) is never a candidate.
	raw := "X-Amz-Signature=abc&b=1&a=2"
	if got := canonicalQueries(parseQuery(raw), raw, qSignature, true); !slices.Equal(got, []string{"a=2&b=1"}) {
		t.Errorf("presigned: %q", got)
	}
}

func TestCanonicalURIs(t *testing.T) {
	for _, tc := range []struct {
		uri  string
		want []string
	}{
		{"/", []string{"/"}},
		{"/bkt/a%20b", []string{"/bkt/a%20b"}},
		{"/bkt/a%2fb", []string{"/bkt/a/b", "/bkt/a%2fb"}},
		{"/bkt/a(b)", []string{"/bkt/a%28b%29", "/bkt/a(b)"}},
		{"/bkt//x/./y", []string{"/bkt//x/./y"}},
		{"/bkt/%C3%BC", []string{"/bkt/%C3%BC"}},
		{"/bkt/%c3%bc", []string{"/bkt/%C3%BC", "/bkt/%c3%bc"}},
	} {
		r := httptest.NewRequest("GET", tc.uri, nil)
		if got := canonicalURIs(r, true); !slices.Equal(got, tc.want) {
			t.Errorf("%q: %q, want %q", tc.uri, got, tc.want)
		}
	}
}

func TestTrimAll(t *testing.T) {
	for in, want := range map[string]string{
		"":               "",
		"  a  ":          "a",
		"a   b  c":       "a b c",
		"\ta \t b":       "a \t b",
		"bytes=0-9":      "bytes=0-9",
		" x  y ,  z    ": "x y , z",
	} {
		if got := trimAll(in); got != want {
			t.Errorf("trimAll(%q) = %q, want %q", in, got, want)
		}
	}
}

func TestChecksums(t *testing.T) {
	// Check values of each algorithm for "123456789".
	for name, want := range map[string]string{
		"x-amz-checksum-crc32":     "cbf43926",
		"x-amz-checksum-crc32c":    "e3069283",
		"x-amz-checksum-crc64nvme": "ae8b14860a799888",
		"x-amz-checksum-sha1":      "f7c3bc1d808e04732adf679965ccc34ca7ae3441",
		"x-amz-checksum-sha256":    "15e2b0d3c33891ebb0f1ef609ec419420c20e320ce94c65fbc8c3312448eb225",
	} {
		h := newChecksum(name)
		h.Write([]byte("123456789"))
		if got := fmt.Sprintf("%x", h.Sum(nil)); got != want {
			t.Errorf("%s: %s, want %s", name, got, want)
		}
	}
	if newChecksum("x-amz-checksum-md5") != nil || newChecksum("x-amz-checksum-type") != nil {
		t.Error("unknown algorithms must not be checked")
	}
}

func TestKeyCacheBounded(t *testing.T) {
	var c keyCache
	k1 := c.get("secret", "20240101", "r", "s3")
	for i := range 3 * maxCachedKeys {
		c.get("secret", "20240101", fmt.Sprint(i), "s3")
	}
	if n := len(c.keys); n > maxCachedKeys {
		t.Errorf("%d cached keys", n)
	}
	if got := c.get("secret", "20240101", "r", "s3"); string(got.key) != string(k1.key) {
		t.Error("a key derived again differs")
	}
}

// headerValue must find headers where Go's server puts them: Host in
// r.Host, Transfer-Encoding in r.TransferEncoding, repeated headers as
// several values.
func TestHeaderValueBehindServer(t *testing.T) {
	type seen map[string]string
	got := make(chan seen, 1)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		m := seen{}
		for _, n := range []string{"host", "transfer-encoding", "content-length", "x-amz-meta-multi", "x-amz-meta-spaces", "x-absent"} {
			if v, ok := headerValue(r, n); ok {
				m[n] = v
			}
		}
		io.Copy(io.Discard, r.Body)
		got <- m
	}))
	defer srv.Close()
	send := func(raw string) seen {
		t.Helper()
		c, err := net.Dial("tcp", srv.Listener.Addr().String())
		testutil.Must(t, err)
		defer c.Close()
		if _, err := io.WriteString(c, raw); err != nil {
			t.Fatal(err)
		}
		select {
		case m := <-got:
			return m
		case <-time.After(10 * time.Second):
			t.Fatal("no request")
			return nil
		}
	}
	m := send("PUT /b/k HTTP/1.1\r\nHost: Example.COM:8080\r\nTransfer-Encoding: chunked\r\n" +
		"X-Amz-Meta-Multi: one\r\nx-amz-meta-multi:   two  \r\nX-Amz-Meta-Spaces: a    b\t c\r\n\r\n" +
		"3\r\nabc\r\n0\r\n\r\n")
	want := seen{"host": "Example.COM:8080", "transfer-encoding": "chunked", "x-amz-meta-multi": "one,two", "x-amz-meta-spaces": "a b\t c"}
	if !maps.Equal(m, want) {
		t.Errorf("chunked request: %q, want %q", m, want)
	}
	m = send("PUT /b/k HTTP/1.1\r\nHost: h\r\nContent-Length: 3\r\n\r\nabc")
	want = seen{"host": "h", "content-length": "3"}
	if !maps.Equal(m, want) {
		t.Errorf("sized request: %q, want %q", m, want)
	}
}

func TestEscapePath(t *testing.T) {
	for in, want := range map[string]string{
		"a/b c+d(1).bin": "a/b%20c%2Bd%281%29.bin", "日本": "%E6%97%A5%E6%9C%AC", "a//b/": "a//b/", "~x-_.": "~x-_.",
	} {
		if got := EscapePath(in); got != want {
			t.Errorf("EscapePath(%q) = %q, want %q", in, got, want)
		}
	}
}
