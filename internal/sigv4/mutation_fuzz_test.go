package sigv4

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"maps"
	"net/http"
	"net/url"
	"slices"
	"strings"
	"testing"
	"time"

	"golang.org/x/net/http/httpguts"

	"github.com/distcache/distcache/internal/testutil"
)

// FuzzSignedRequestMutation signs a request with aws-sdk-go-v2's signer
// (Authorization header or presigned URL), writes it as HTTP/1.1 bytes,
// checks that it verifies, then replaces up to 255 bytes of the wire form
// (of its request line, or anywhere) with up to 4 others and
// reads it back the way Go's server does. A mutated request that still
// verifies must be the same request to the gateway: the same method,
// decoded path, parsed query (url.Values, what routing acts on) and signed
// header values. Otherwise someone holding a signed request (a presigned
// URL) could make the gateway act on one that was never signed.
func FuzzSignedRequestMutation(f *testing.F) {
	creds := Credentials{AccessKeyID: testKeyID, SecretAccessKey: testSecret}
	at := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	v := &Verifier{Store: NewStaticStore(creds), Region: testRegion, Now: func() time.Time { return at }}

	// Seeds: method, key, query name and value, x-amz-meta-fuzz value,
	// presigned, and the mutation: at byte pos of the request line (inLine)
	// or of the whole request, del bytes replaced by ins.
	f.Add(uint8(0), "dir/plain.txt", "prefix", "a b", "v", false, true, uint16(20), uint8(1), []byte("x"))
	f.Add(uint8(0), "dir/ünïcødé-✓ 日本.bin", "versionId", "a+b", "x  y", false, false, uint16(9), uint8(0), []byte("/"))
	f.Add(uint8(0), "top+level=1%2F", "list-type", "2", "", true, true, uint16(5), uint8(1), []byte("+"))
	f.Add(uint8(0), "dir//double-slash", "prefix", "%zz", "", false, false, uint16(100), uint8(2), []byte("&a"))
	// Regression: a header value ending in Unicode white space, which the
	// SDK trims from the canonical value.
	f.Add(uint8(2), "dir/(paren)!*'~$@,.txt", "partNumber", "1", "\u00a0v\u2003", false, false, uint16(40), uint8(1), []byte("%"))
	// Regression: a signed ';' or '%' in a query value sent raw still
	// verified, and url.ParseQuery (routing) dropped the pair: a presigned
	// AbortMultipartUpload became a DeleteObject, a read of ?versionId= or
	// ?partNumber= a whole-object read from the cache.
	for _, tc := range []struct {
		method    uint8
		name, val string
		enc, wire string
		presigned bool
	}{
		{3, "uploadId", "a;b", "a%3Bb", "a;b", true},
		{3, "uploadId", "a%b", "a%25b", "a%b", true},
		{0, "versionId", "v;1", "v%3B1", "v;1", false},
		{0, "partNumber", "1;", "1%3B", "1;", false},
	} {
		wire := signedWire(f, tc.method, "k", tc.name, tc.val, "", tc.presigned, at)
		line, _, _ := bytes.Cut(wire, []byte("\r\n"))
		i := bytes.Index(line, []byte(tc.enc))
		f.Add(tc.method, "k", tc.name, tc.val, "", tc.presigned, true, uint16(i), uint8(len(tc.enc)), []byte(tc.wire))
	}

	f.Fuzz(func(t *testing.T, m uint8, key, qname, qvalue, hvalue string, presigned, inLine bool, pos uint16, del uint8, ins []byte) {
		if key == "" || len(key) > 256 || len(qname)+len(qvalue)+len(hvalue) > 512 || len(ins) > 4 ||
			!httpguts.ValidHeaderFieldValue(hvalue) {
			return
		}
		wire := signedWire(t, m, key, qname, qvalue, hvalue, presigned, at)
		if wire == nil {
			return
		}
		orig, err := readWire(wire)
		if err != nil {
			t.Fatalf("the signed request does not read back: %v\n%q", err, wire)
		}
		if _, err := v.Verify(orig); err != nil {
			t.Fatalf("a request signed by aws-sdk-go-v2 was refused: %v\n%q", err, wire)
		}

		span := len(wire)
		if inLine {
			span = bytes.Index(wire, []byte("\r\n"))
		}
		p := int(pos) % span
		d := min(int(del), len(wire)-p)
		mutated := slices.Concat(wire[:p], ins, wire[p+d:])
		if bytes.Equal(mutated, wire) {
			return
		}
		mut, err := readWire(mutated)
		if err != nil {
			return // Go's server refuses it before the gateway sees it
		}
		res, err := v.Verify(mut)
		if err != nil {
			var e *Error
			if !errors.As(err, &e) || e.Code == "" {
				t.Fatalf("untyped error %v", err)
			}
			return
		}
		if diff := gatewayViewDiff(orig, mut, res.Presigned); diff != "" {
			t.Fatalf("a mutated request still verifies but means something else (%s)\nsigned:  %q\nmutated: %q", diff, wire, mutated)
		}
	})
}

// signedWire is a request signed by aws-sdk-go-v2 (in the Authorization
// header, or presigned) as HTTP/1.1 bytes; nil if the inputs make no URL.
func signedWire(t testing.TB, m uint8, key, qname, qvalue, hvalue string, presigned bool, at time.Time) []byte {
	methods := []string{http.MethodGet, http.MethodHead, http.MethodPut, http.MethodDelete, http.MethodPost}
	method := methods[int(m)%len(methods)]
	q := url.Values{}
	if qname != "" {
		q.Set(qname, qvalue)
	}
	req, err := http.NewRequest(method, "http://gw.example:8080/bkt/"+url.PathEscape(key)+"?"+q.Encode(), nil)
	if err != nil {
		return nil
	}
	req.Body, req.ContentLength = http.NoBody, 0
	if hvalue != "" {
		req.Header.Set("X-Amz-Meta-Fuzz", hvalue)
	}
	if presigned {
		req.URL.RawQuery += "&" + qExpires + "=3600"
		u, h, err := s3Signer().PresignHTTP(context.Background(), testCreds, req, PayloadUnsigned, "s3", testRegion, at)
		testutil.Must(t, err)
		if req, err = http.NewRequest(method, u, nil); err != nil {
			t.Fatal(err)
		}
		req.Body, req.ContentLength = http.NoBody, 0
		req.Header = h.Clone()
		req.Header.Del("Host")
	} else {
		req.Header.Set("X-Amz-Content-Sha256", emptySHA256)
		if err := s3Signer().SignHTTP(context.Background(), testCreds, req, emptySHA256, "s3", testRegion, at); err != nil {
			t.Fatal(err)
		}
	}
	var wire bytes.Buffer
	if err := req.Write(&wire); err != nil {
		t.Fatal(err)
	}
	return wire.Bytes()
}

// readWire parses a request the way Go's HTTP server does.
func readWire(b []byte) (*http.Request, error) {
	r, err := http.ReadRequest(bufio.NewReader(bytes.NewReader(b)))
	if err != nil {
		return nil, err
	}
	return r, nil
}

// gatewayViewDiff compares what the gateway acts on in two requests.
func gatewayViewDiff(a, b *http.Request, presigned bool) string {
	switch {
	case a.Method != b.Method:
		return "method " + a.Method + " became " + b.Method
	case a.URL.Path != b.URL.Path:
		return "path " + a.URL.Path + " became " + b.URL.Path
	case a.Host != b.Host:
		return "host " + a.Host + " became " + b.Host
	}
	qa, qb := a.URL.Query(), b.URL.Query()
	if presigned {
		qa.Del(qSignature)
		qb.Del(qSignature)
	}
	if !maps.EqualFunc(qa, qb, slices.Equal) {
		return "query " + qa.Encode() + " became " + qb.Encode()
	}
	for k, va := range a.Header {
		if !hasPrefixFold(k, "x-amz-") {
			continue
		}
		if vb := b.Header.Values(k); !slices.Equal(trimmed(va), trimmed(vb)) {
			return "header " + k + ": " + strings.Join(va, "|") + " became " + strings.Join(vb, "|")
		}
	}
	for k := range b.Header {
		if hasPrefixFold(k, "x-amz-") && a.Header.Values(k) == nil {
			return "header " + k + " was added"
		}
	}
	return ""
}

func trimmed(vs []string) []string {
	out := make([]string, len(vs))
	for i, v := range vs {
		out[i] = trimAll(v)
	}
	return out
}

// FuzzPresignedQuery feeds arbitrary query strings to the presigned-URL
// parser and to Verify: what parses has sane fields, and nothing verifies
// without the key.
func FuzzPresignedQuery(f *testing.F) {
	at := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	for _, s := range []string{
		signedQuery(f, at),
		"X-Amz-Algorithm=AWS4-HMAC-SHA256&X-Amz-Credential=AKIDDISTCACHETEST%2F20260102%2Fus-east-1%2Fs3%2Faws4_request&X-Amz-Date=20260102T030405Z&X-Amz-Expires=604801&X-Amz-SignedHeaders=host&X-Amz-Signature=00",
		"X-Amz-Algorithm=AWS4-HMAC-SHA256&X-Amz-Credential=a%2Fb%2Fc%2Fd%2Faws4_request&X-Amz-Date=x&X-Amz-Expires=-1&X-Amz-SignedHeaders=&X-Amz-Signature=",
		"X-Amz-Signature=" + strings.Repeat("0", 64),
		"X-Amz-Expires=999999999999&X-Amz-Expires=1",
		"uploads&X-Amz-Algorithm=AWS4-HMAC-SHA256;x",
		"%zz=%zz&+=+",
	} {
		f.Add(s)
	}
	v := &Verifier{Store: NewStaticStore(Credentials{AccessKeyID: testKeyID, SecretAccessKey: testSecret}),
		Now: func() time.Time { return at }}
	f.Fuzz(func(t *testing.T, raw string) {
		p, signedAt, expires, err := parsePresigned(parseQuery(raw))
		if err == nil {
			if expires <= 0 || expires > maxPresignExpiry || signedAt.IsZero() || len(p.headerNames) == 0 ||
				p.scope.accessKeyID == "" || p.scope.region == "" || p.scope.service == "" {
				t.Fatalf("accepted %q with bad fields: %+v %v %v", raw, p, signedAt, expires)
			}
		} else if err.Code == "" || err.Status == 0 {
			t.Fatalf("untyped error %+v", err)
		}
		req, rerr := http.NewRequest(http.MethodGet, "http://gw.example/bkt/k", nil)
		if rerr != nil {
			t.Fatal(rerr)
		}
		req.URL.RawQuery = raw
		if _, err := v.Verify(req); err == nil {
			t.Fatalf("verified a URL nobody signed: %q", raw)
		} else if e := (*Error)(nil); !errors.As(err, &e) || e.Code == "" {
			t.Fatalf("untyped error %v", err)
		}
	})
}

// signedQuery is the query of a URL presigned by aws-sdk-go-v2 with a
// wrong host, so that it parses but never verifies.
func signedQuery(t testing.TB, at time.Time) string {
	req, _ := http.NewRequest(http.MethodGet, "http://other.example/bkt/k?uploads=&X-Amz-Expires=60", nil)
	u, _, err := s3Signer().PresignHTTP(context.Background(), testCreds, req, PayloadUnsigned, "s3", testRegion, at)
	testutil.Must(t, err)
	pu, err := url.Parse(u)
	testutil.Must(t, err)
	return pu.RawQuery
}
