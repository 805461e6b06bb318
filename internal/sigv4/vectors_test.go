package sigv4

import (
	"bytes"
	"maps"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/distcache/distcache/internal/testutil"
)

// The worked examples of the AWS documentation ("Signature Calculations for
// the Authorization Header", "... Transferring Payload in Multiple Chunks",
// "... Including Trailing Headers" and "Authenticating Requests: Using Query
// Parameters"), sent over real HTTP so that Go's server handling of Host,
// Content-Length and the path is part of what is checked.
const (
	docKeyID  = "AKIAIOSFODNN7EXAMPLE"
	docSecret = "wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY"
	docScope  = "AKIAIOSFODNN7EXAMPLE/20130524/us-east-1/s3/aws4_request"
)

var docTime = time.Date(2013, 5, 24, 0, 0, 0, 0, time.UTC)

func newDocServer(t *testing.T, now time.Time) *s3Server {
	return newS3Server(t, withVerifier(func(v *Verifier) {
		v.Store = NewStaticStore(Credentials{AccessKeyID: docKeyID, SecretAccessKey: docSecret})
		v.Now = func() time.Time { return now }
	}))
}

// docChunked is the body of the documentation's chunked examples: chunks
// of 65536 and 1024 bytes of 'a' and the final empty one, signed sig1,
// sig2 and sig3, then trailer (trailing header lines, each ending in CRLF)
// and the closing CRLF.
func docChunked(sig1, sig2, sig3, trailer string) string {
	return "10000;chunk-signature=" + sig1 + "\r\n" + strings.Repeat("a", 65536) + "\r\n" +
		"400;chunk-signature=" + sig2 + "\r\n" + strings.Repeat("a", 1024) + "\r\n" +
		"0;chunk-signature=" + sig3 + "\r\n" + trailer + "\r\n"
}

// docChunkedBody is the body of "Signature Calculations ... Transferring
// Payload in Multiple Chunks".
var docChunkedBody = docChunked("ad80c730a21e5b8d04586a2213dd63b9a0e99e0e2307b0ade35a65485a288648",
	"0055627c9e194cb4542bae2aa5492e3c1575bbb81b612b7d234b86a503ef5497",
	"b6c6ea8a5354eaf15b3cb7646744f4275b71ea724fed81ceb9323e279d449df9", "")

func docAuth(signedHeaders, sig string) string {
	return "AWS4-HMAC-SHA256 Credential=" + docScope + ",SignedHeaders=" + signedHeaders + ",Signature=" + sig
}

func TestAWSDocumentationVectors(t *testing.T) {
	s := newDocServer(t, docTime.Add(time.Minute))
	type vector struct {
		name, method, path, host string
		headers                  map[string]string
		body                     string
		mode                     string
	}
	// docGET is one of the documentation's GETs of examplebucket: no body,
	// signed with the SHA-256 of nothing, and the headers extra too.
	docGET := func(name, path, signedHeaders, sig string, extra map[string]string) vector {
		headers := map[string]string{
			"X-Amz-Content-Sha256": emptySHA256,
			"X-Amz-Date":           "20130524T000000Z",
			"Authorization":        docAuth(signedHeaders, sig),
		}
		maps.Copy(headers, extra)
		return vector{name: name, method: "GET", path: path, host: "examplebucket.s3.amazonaws.com", headers: headers, mode: PayloadSHA256}
	}
	// docChunkedPUT is one of the documentation's chunked uploads of 66560
	// bytes to examplebucket/chunkObject.txt, mode its payload mode, and the
	// headers extra too.
	docChunkedPUT := func(name, mode, signedHeaders, sig, body string, extra map[string]string) vector {
		headers := map[string]string{
			"X-Amz-Date":                   "20130524T000000Z",
			"X-Amz-Storage-Class":          "REDUCED_REDUNDANCY",
			"X-Amz-Content-Sha256":         mode,
			"Content-Encoding":             "aws-chunked",
			"X-Amz-Decoded-Content-Length": "66560",
			"Authorization":                docAuth(signedHeaders, sig),
		}
		maps.Copy(headers, extra)
		return vector{name: name, method: "PUT", path: "/examplebucket/chunkObject.txt", host: "s3.amazonaws.com",
			headers: headers, body: body, mode: mode}
	}
	vectors := []vector{
		docGET("GET Object", "/test.txt", "host;range;x-amz-content-sha256;x-amz-date",
			"f0e8bdb87c964420e857bd35b5d6ed310bd44f0170aba48dd91039c6036bdb41", map[string]string{"Range": "bytes=0-9"}),
		docGET("GET Bucket Lifecycle", "/?lifecycle", "host;x-amz-content-sha256;x-amz-date",
			"fea454ca298b7da1c68078a5d1bdbfbbe0d65c699e0f91ac7a200a0136783543", nil),
		docGET("List Objects", "/?max-keys=2&prefix=J", "host;x-amz-content-sha256;x-amz-date",
			"34b48302e7b5fa45bde8084f4b7868a86f0a534bc59db6670ed5711ef69dc6f7", nil),
		{
			name: "PUT Object", method: "PUT", path: "/test$file.text", host: "examplebucket.s3.amazonaws.com",
			headers: map[string]string{
				"Date":                 "Fri, 24 May 2013 00:00:00 GMT",
				"X-Amz-Date":           "20130524T000000Z",
				"X-Amz-Storage-Class":  "REDUCED_REDUNDANCY",
				"X-Amz-Content-Sha256": "44ce7dd67c959e0d3524ffac1771dfbba87d2b6b4b4e99e42034a8b803f8b072",
				"Authorization":        docAuth("date;host;x-amz-content-sha256;x-amz-date;x-amz-storage-class", "98ad721746da40c64f1a55b78f14c238d841ea1380cd77a1b5971af0ece108bd"),
			},
			body: "Welcome to Amazon S3.",
			mode: PayloadSHA256,
		},
		docChunkedPUT("chunked PUT Object", PayloadStreamingSigned,
			"content-encoding;content-length;host;x-amz-content-sha256;x-amz-date;x-amz-decoded-content-length;x-amz-storage-class",
			"4f232c4386841ef735655705268965c44a0e4690baa4adea153f7db9fa80a0a9", docChunkedBody, nil),
		docChunkedPUT("chunked PUT Object with trailer", PayloadStreamingSignedTrailer,
			"content-encoding;host;x-amz-content-sha256;x-amz-date;x-amz-decoded-content-length;x-amz-storage-class;x-amz-trailer",
			"106e2a8a18243abcf37539882f36619c00e2dfc72633413f02d3b74544bfeb8e",
			docChunked("b474d8862b1487a5145d686f57f013e54db672cee1c953b3010fb58501ef5aa2",
				"1c1344b170168f8e65b41376b44b20fe354e373826ccbbe2c1d40a8cae51e5c7",
				"2ca2aba2005185cf7159c6277faf83795951dd77a3a99e6e65d5c9f85863f992",
				"x-amz-checksum-crc32c:sOO8/Q==\r\n"+
					"x-amz-trailer-signature:d81f82fc3505edab99d459891051a732e8730629a2e4a59689829ca17fe2e435\r\n"),
			map[string]string{"X-Amz-Trailer": "x-amz-checksum-crc32c"}),
	}
	for _, vec := range vectors {
		t.Run(vec.name, func(t *testing.T) {
			req, err := http.NewRequest(vec.method, s.URL+vec.path, strings.NewReader(vec.body))
			testutil.Must(t, err)
			if vec.body == "" {
				req.Body, req.ContentLength = http.NoBody, 0
			}
			req.Host = vec.host
			for k, v := range vec.headers {
				req.Header.Set(k, v)
			}
			status, body := s.do(t, req)
			os := s.requireAllVerified(t)
			if status == http.StatusForbidden || status == http.StatusBadRequest {
				t.Fatalf("status %d: %s", status, body)
			}
			if got := os[0].Result.PayloadMode; got != vec.mode {
				t.Errorf("payload mode %s, want %s", got, vec.mode)
			}
			if vec.method == "PUT" && strings.HasPrefix(vec.mode, "STREAMING") {
				if want := bytes.Repeat([]byte("a"), 66560); !bytes.Equal(os[0].Body, want) {
					t.Errorf("decoded %d bytes, want 66560 'a'", len(os[0].Body))
				}
			}
			if vec.mode == PayloadStreamingSignedTrailer {
				if got := os[0].Trailer.Get("X-Amz-Checksum-Crc32c"); got != "sOO8/Q==" {
					t.Errorf("trailer x-amz-checksum-crc32c = %q", got)
				}
			}
		})
	}

	t.Run("presigned GET", func(t *testing.T) {
		s := newDocServer(t, docTime.Add(time.Hour))
		const q = "?X-Amz-Algorithm=AWS4-HMAC-SHA256&X-Amz-Credential=AKIAIOSFODNN7EXAMPLE%2F20130524%2Fus-east-1%2Fs3%2Faws4_request&X-Amz-Date=20130524T000000Z&X-Amz-Expires=86400&X-Amz-SignedHeaders=host&X-Amz-Signature=aeeed9bbccd4d02ee5c0109b86d86835f995330da4c265957d157751f604d404"
		req, _ := http.NewRequest("GET", s.URL+"/test.txt"+q, nil)
		req.Host = "examplebucket.s3.amazonaws.com"
		s.do(t, req)
		os := s.requireAllVerified(t)
		if !os[0].Result.Presigned || os[0].Result.PayloadMode != PayloadUnsigned {
			t.Errorf("result %+v", os[0].Result)
		}

		// The same URL a day and a second later has expired.
		late := newDocServer(t, docTime.Add(24*time.Hour+time.Second))
		req, _ = http.NewRequest("GET", late.URL+"/test.txt"+q, nil)
		req.Host = "examplebucket.s3.amazonaws.com"
		if status, body := late.do(t, req); status != http.StatusForbidden || !strings.Contains(body, "Request has expired") {
			t.Errorf("expired URL: status %d, body %s", status, body)
		}
		os = late.takeOutcomes()
		wantCode(t, os[0].Err, CodeAccessDenied)
	})
}
