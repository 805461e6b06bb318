package sigv4

import (
	"bytes"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"testing"
	"time"
)

// The seed corpora run as ordinary tests; `go test -fuzz=FuzzX` explores
// further.

func FuzzParseAuthorization(f *testing.F) {
	for _, s := range []string{
		docAuth("host;range;x-amz-content-sha256;x-amz-date", "f0e8bdb87c964420e857bd35b5d6ed310bd44f0170aba48dd91039c6036bdb41"),
		"AWS4-HMAC-SHA256 Credential=AKID/20130524/us-east-1/s3/aws4_request, SignedHeaders=host;x-amz-date, Signature=" + strings.Repeat("ab", 32),
		"AWS4-HMAC-SHA256 Signature=00,Credential=a/b/c/d/aws4_request,SignedHeaders=;",
		"AWS4-HMAC-SHA256 Credential=/////, SignedHeaders=host, Signature=",
		"AWS4-HMAC-SHA256 Credential=a/b/c/d/e/f/aws4_request,,,",
		"AWS4-HMAC-SHA256   Credential==,SignedHeaders==;=,Signature===",
		"AWS AKID:sig",
		"",
		"\x00\xff",
	} {
		f.Add(s)
	}
	v := &Verifier{Store: NewStaticStore(Credentials{AccessKeyID: "AKID", SecretAccessKey: "secret"}),
		Now: func() time.Time { return docTime }}
	f.Fuzz(func(t *testing.T, h string) {
		p, err := parseAuthorization(h)
		if err == nil {
			if p.scope.accessKeyID == "" || p.scope.region == "" || p.scope.service == "" || len(p.headerNames) == 0 {
				t.Fatalf("accepted %q with empty fields: %+v", h, p)
			}
		} else if err.Code == "" || err.Status == 0 {
			t.Fatalf("untyped error %+v", err)
		}
		// Whole requests carrying it must be refused with an *Error.
		req := httptest.NewRequest(http.MethodGet, "http://s3.example.com/bkt/key?a=b", nil)
		req.Header.Set("Authorization", h)
		req.Header.Set("X-Amz-Date", "20130524T000000Z")
		req.Header.Set("X-Amz-Content-Sha256", emptySHA256)
		if _, err := v.Verify(req); err == nil {
			t.Fatalf("accepted a request signed with %q", h)
		} else if e := (*Error)(nil); !errors.As(err, &e) {
			t.Fatalf("untyped error %v", err)
		}
	})
}

func FuzzChunkedDecoder(f *testing.F) {
	f.Add([]byte(docChunkedBody), true, false)
	f.Add([]byte("5\r\nhello\r\n0\r\nx-amz-checksum-crc32:NhCmhg==\r\n\r\n"), false, true)
	f.Add([]byte("5\r\nhello\r\n0\r\n\r\nx-amz-checksum-crc32:NhCmhg==\r\n\r\n"), false, true)
	f.Add([]byte("3;ext=1\r\nabc\r\n0\r\n\r\n"), false, false)
	f.Add([]byte("ffffffffffffffff;chunk-signature=00\r\n"), true, false)
	f.Add([]byte("7fffffffffffffff\r\nabc"), false, false)
	f.Add([]byte("0;chunk-signature=b6c6ea8a5354eaf15b3cb7646744f4275b71ea724fed81ceb9323e279d449df9\r\nx-amz-trailer-signature:zz\r\n"), true, true)
	f.Add([]byte("-1\r\n"), false, false)
	f.Add([]byte("\r\n\r\n\r\n"), false, true)
	f.Add([]byte(strings.Repeat("0", 5000)), false, false)

	key := deriveSigningKey(docSecret, "20130524", "us-east-1", "s3")
	f.Fuzz(func(t *testing.T, body []byte, signed, trailers bool) {
		var signer *chunkSigner
		if signed {
			signer = &chunkSigner{key: key, amzDate: "20130524T000000Z", scope: "20130524/us-east-1/s3/aws4_request",
				prev: "4f232c4386841ef735655705268965c44a0e4690baa4adea153f7db9fa80a0a9"}
		}
		ds := digests{{name: "x-amz-checksum-crc32", h: newChecksum("x-amz-checksum-crc32"), trailer: true}}
		if !trailers {
			ds = nil
		}
		declared := map[string]bool{"x-amz-checksum-crc32": true}
		r := newChunkedReader(io.NopCloser(bytes.NewReader(body)), signer, trailers, ds, declared, http.Header{}, -1)
		out, err := io.ReadAll(io.LimitReader(r, 1<<20))
		if err != nil {
			if e := (*Error)(nil); !errors.As(err, &e) || e == nil || e.Code == "" {
				t.Fatalf("untyped error %v", err)
			}
			return
		}
		if int64(len(out)) != r.decoded && len(out) < 1<<20 {
			t.Fatalf("returned %d bytes, decoded %d", len(out), r.decoded)
		}
		if len(out) > len(body) {
			t.Fatalf("decoded more bytes (%d) than were sent (%d)", len(out), len(body))
		}
	})
}

// The shortcuts of the hot path must agree with what they stand for:
// canonicalQuery with the first of canonicalQueries, checkQuery with
// url.ParseQuery's error, headerByLowerName with a lookup by
// http.CanonicalHeaderKey.
func FuzzShortcuts(f *testing.F) {
	for _, s := range []string{
		"", "x-id=GetObject", "a=1&b=2", "b=2&a=1", "a=1&a=0", "a=0&a=1", "a", "a=", "&a=1", "a=1&", "a=1&&b=2",
		"a;b=1", "a=%zz", "a=%41", "a=+", "prefix=a+b", "k=a/b", "list-type=2&prefix=x%2Fy", "x-amz-date", "X-Amz-Date",
		"content-type", "x_amz", "a b", "ü", strings.Repeat("a", 65), strings.Repeat("&", 200),
	} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		ps := parseQuery(s)
		if got, want := canonicalQuery(ps, s, ""), canonicalQueries(ps, s, "", false)[0]; got != want {
			t.Fatalf("canonicalQuery(%q) = %q, want %q", s, got, want)
		}
		_, perr := url.ParseQuery(s)
		if err := checkQuery(s); (err == nil) != (perr == nil) {
			t.Fatalf("checkQuery(%q) = %v, url.ParseQuery: %v", s, err, perr)
		}
		name := strings.ToLower(s)
		h := http.Header{http.CanonicalHeaderKey(name): {"v"}}
		if vs, ok := headerByLowerName(h, name); !ok || len(vs) != 1 {
			t.Fatalf("headerByLowerName(%q) did not find %q", name, http.CanonicalHeaderKey(name))
		}
		if _, ok := headerByLowerName(http.Header{http.CanonicalHeaderKey(name) + "x": {"v"}}, name); ok {
			t.Fatalf("headerByLowerName(%q) found another name", name)
		}
	})
}
