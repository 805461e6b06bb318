package sigv4

import (
	"bytes"
	"context"
	"crypto/hmac"
	"crypto/md5"
	"crypto/sha256"
	"encoding/base64"
	"encoding/binary"
	"encoding/hex"
	"fmt"
	"hash/crc32"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	v4 "github.com/aws/aws-sdk-go-v2/aws/signer/v4"

	"github.com/distcache/distcache/internal/testutil"
)

// Requests built by hand and signed with aws-sdk-go-v2's SigV4 signer (and
// its StreamSigner for aws-chunked chunk signatures, which computes exactly
// the chunk string to sign when given no event headers): the payload modes
// the S3 client never produces on its own, and malformed or tampered
// requests.

var testCreds = aws.Credentials{AccessKeyID: testKeyID, SecretAccessKey: testSecret}

// s3Signer signs like the S3 client: the path is signed as it is in the URL.
func s3Signer() *v4.Signer {
	return v4.NewSigner(func(o *v4.SignerOptions) { o.DisableURIPathEscaping = true })
}

func sign(t *testing.T, req *http.Request, payload string, at time.Time) {
	t.Helper()
	if err := s3Signer().SignHTTP(context.Background(), testCreds, req, payload, "s3", testRegion, at); err != nil {
		t.Fatal(err)
	}
}

func newSignedRequest(t *testing.T, method, url string, body []byte, payload string, header map[string]string) *http.Request {
	t.Helper()
	req, err := http.NewRequest(method, url, bytes.NewReader(body))
	testutil.Must(t, err)
	if body == nil {
		req.Body, req.ContentLength = http.NoBody, 0
	}
	for k, v := range header {
		req.Header.Set(k, v)
	}
	if payload != "" {
		req.Header.Set("X-Amz-Content-Sha256", payload)
	}
	sign(t, req, payload, time.Now())
	return req
}

// signature extracts Signature= from a signed request.
func seedSignature(t *testing.T, req *http.Request) []byte {
	t.Helper()
	_, sig, ok := strings.Cut(req.Header.Get("Authorization"), "Signature=")
	if !ok {
		t.Fatal("no signature")
	}
	b, err := hex.DecodeString(sig)
	testutil.Must(t, err)
	return b
}

// streamingUpload is an aws-chunked PUT signed chunk by chunk, as the AWS
// SDKs for Java and C++ send with STREAMING-AWS4-HMAC-SHA256-PAYLOAD[-TRAILER].
type streamingUpload struct {
	data      []byte
	chunkSize int
	trailer   bool // STREAMING-...-TRAILER with a signed x-amz-checksum-crc32c trailer
	chunkedTE bool // no Content-Length: the HTTP body is Transfer-Encoding: chunked

	decodedLength string              // x-amz-decoded-content-length; "" means len(data)
	crc           string              // trailer value; "" means the right one
	tamper        func([]byte) []byte // applied to the encoded body after signing
}

func (u streamingUpload) mode() string {
	if u.trailer {
		return PayloadStreamingSignedTrailer
	}
	return PayloadStreamingSigned
}

// encode frames the data; sigs returns the signature of each chunk (the last
// one empty) and the trailer.
func (u streamingUpload) encode(chunkSig func([]byte) string, trailerSig func(string) string) []byte {
	var b bytes.Buffer
	data := u.data
	for {
		n := min(len(data), u.chunkSize)
		chunk := data[:n]
		data = data[n:]
		fmt.Fprintf(&b, "%x;chunk-signature=%s\r\n", n, chunkSig(chunk))
		b.Write(chunk)
		if n == 0 {
			break
		}
		b.WriteString("\r\n")
	}
	if u.trailer {
		line := "x-amz-checksum-crc32c:" + u.crcValue()
		b.WriteString(line + "\r\n")
		b.WriteString("x-amz-trailer-signature:" + trailerSig(line+"\n") + "\r\n")
	}
	b.WriteString("\r\n")
	return b.Bytes()
}

func (u streamingUpload) crcValue() string {
	if u.crc != "" {
		return u.crc
	}
	var sum [4]byte
	binary.BigEndian.PutUint32(sum[:], crc32.Checksum(u.data, crc32.MakeTable(crc32.Castagnoli)))
	return base64.StdEncoding.EncodeToString(sum[:])
}

func (u streamingUpload) request(t *testing.T, url string) *http.Request {
	t.Helper()
	at := time.Now()
	req, err := http.NewRequest(http.MethodPut, url, nil)
	testutil.Must(t, err)
	dl := u.decodedLength
	if dl == "" {
		dl = fmt.Sprint(len(u.data))
	}
	req.Header.Set("Content-Encoding", "aws-chunked")
	req.Header.Set("X-Amz-Decoded-Content-Length", dl)
	req.Header.Set("X-Amz-Content-Sha256", u.mode())
	req.Header.Set("X-Amz-Storage-Class", "STANDARD")
	if u.trailer {
		req.Header.Set("X-Amz-Trailer", "x-amz-checksum-crc32c")
	}
	dummy := strings.Repeat("0", 64)
	req.ContentLength = -1
	if !u.chunkedTE {
		req.ContentLength = int64(len(u.encode(func([]byte) string { return dummy }, func(string) string { return dummy })))
	}
	sign(t, req, u.mode(), at)

	seed := seedSignature(t, req)
	ss := v4.NewStreamSigner(testCreds, "s3", testRegion, seed)
	var prev []byte
	chunkSig := func(chunk []byte) string {
		sig, err := ss.GetSignature(context.Background(), nil, chunk, at)
		testutil.Must(t, err)
		prev = sig
		return hex.EncodeToString(sig)
	}
	trailerSig := func(canonical string) string {
		sum := sha256.Sum256([]byte(canonical))
		sts := "AWS4-HMAC-SHA256-TRAILER\n" + at.UTC().Format(amzDateFormat) + "\n" +
			at.UTC().Format(scopeDateFormat) + "/" + testRegion + "/s3/aws4_request\n" +
			hex.EncodeToString(prev) + "\n" + hex.EncodeToString(sum[:])
		return hex.EncodeToString(mac(testSigningKey(at), sts))
	}
	body := u.encode(chunkSig, trailerSig)
	if u.tamper != nil {
		body = u.tamper(body)
	}
	if u.chunkedTE {
		req.Body = io.NopCloser(io.MultiReader(bytes.NewReader(body))) // no length: chunked
	} else {
		req.Body = io.NopCloser(bytes.NewReader(body))
		req.ContentLength = int64(len(body))
	}
	return req
}

func mac(key []byte, s string) []byte {
	m := hmac.New(sha256.New, key)
	m.Write([]byte(s))
	return m.Sum(nil)
}

// testSigningKey derives the signing key independently of the package.
func testSigningKey(at time.Time) []byte {
	k := mac([]byte("AWS4"+testSecret), at.UTC().Format("20060102"))
	return mac(mac(mac(k, testRegion), "s3"), "aws4_request")
}

func TestStreamingSigned(t *testing.T) {
	s := newS3Server(t)
	for _, trailer := range []bool{false, true} {
		for _, size := range []int{0, 1, 8 << 10, 64 << 10, 200<<10 + 3} {
			for _, te := range []bool{false, true} {
				u := streamingUpload{data: testutil.SeededBytes(uint64(size), size), chunkSize: 64 << 10, trailer: trailer, chunkedTE: te}
				t.Run(fmt.Sprintf("%s/%d/chunkedTE=%v", u.mode(), size, te), func(t *testing.T) {
					status, msg := s.do(t, u.request(t, s.URL+"/bkt/stream/a%20b+c"))
					if status != http.StatusOK {
						t.Fatalf("status %d: %s", status, msg)
					}
					o := s.requireAllVerified(t)[0]
					if o.Result.PayloadMode != u.mode() {
						t.Errorf("mode %s", o.Result.PayloadMode)
					}
					if !bytes.Equal(o.Body, u.data) {
						t.Errorf("decoded %d bytes, want %d", len(o.Body), len(u.data))
					}
					if stored, _ := s.object("bkt", "stream/a b+c"); !bytes.Equal(stored, u.data) {
						t.Error("stored object differs")
					}
					if trailer && o.Trailer.Get("X-Amz-Checksum-Crc32c") != u.crcValue() {
						t.Errorf("trailer %v", o.Trailer)
					}
				})
			}
		}
	}
}

func TestStreamingTampered(t *testing.T) {
	data := testutil.SeededBytes(5, 150<<10)
	flipAt := func(i int) func([]byte) []byte {
		return func(b []byte) []byte { b[i] ^= 1; return b }
	}
	chunk2 := func(b []byte) int { // offset of the second chunk's first data byte
		start := 88 + 64<<10 + 2 // after chunk 1: 88-byte header, data, CRLF
		return start + bytes.Index(b[start:], []byte("\r\n")) + 2
	}
	for _, tc := range []struct {
		name      string
		u         streamingUpload
		code      string
		delivered int // bytes handed out before the failure
	}{
		{"flipped byte in chunk 2", streamingUpload{tamper: func(b []byte) []byte { return flipAt(chunk2(b) + 10)(b) }},
			CodeSignatureDoesNotMatch, 64 << 10},
		{"flipped byte in chunk 1", streamingUpload{tamper: flipAt(100)}, CodeSignatureDoesNotMatch, 0},
		{"chunks reordered", streamingUpload{tamper: func(b []byte) []byte {
			// Keep the framing, swap the first two signatures.
			s1 := string(b[22:86])
			i := chunk2(b) - 66
			s2 := string(b[i : i+64])
			copy(b[22:86], s2)
			copy(b[i:i+64], s1)
			return b
		}}, CodeSignatureDoesNotMatch, 0},
		{"truncated before the final chunk", streamingUpload{tamper: func(b []byte) []byte {
			return b[:bytes.LastIndex(b, []byte("0;chunk-signature="))]
		}}, CodeIncompleteBody, len(data)},
		{"truncated inside a chunk", streamingUpload{tamper: func(b []byte) []byte { return b[:5000] }}, CodeIncompleteBody, 0},
		{"data after the final chunk", streamingUpload{tamper: func(b []byte) []byte { return append(b, "junk"...) }},
			CodeInvalidRequest, len(data)},
		{"decoded length larger than sent", streamingUpload{decodedLength: fmt.Sprint(len(data) + 1)}, CodeIncompleteBody, len(data)},
		{"decoded length smaller than sent", streamingUpload{decodedLength: fmt.Sprint(len(data) - 1)}, CodeIncompleteBody, 128 << 10},
		{"trailer value changed", streamingUpload{trailer: true, tamper: func(b []byte) []byte {
			i := bytes.Index(b, []byte("x-amz-checksum-crc32c:")) + 22
			b[i] ^= 1
			return b
		}}, CodeSignatureDoesNotMatch, len(data)},
		{"trailer signature dropped", streamingUpload{trailer: true, tamper: func(b []byte) []byte {
			i := bytes.Index(b, []byte("x-amz-trailer-signature:"))
			return append(b[:i], "\r\n"...)
		}}, CodeSignatureDoesNotMatch, len(data)},
		{"wrong checksum, correctly signed", streamingUpload{trailer: true, crc: "AAAAAA=="}, CodeBadDigest, len(data)},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s := newS3Server(t)
			u := tc.u
			// Chunked transfer, so that changing the body's length is not
			// caught by the signed Content-Length first.
			u.data, u.chunkSize, u.chunkedTE = data, 64<<10, true
			s.do(t, u.request(t, s.URL+"/bkt/tampered"))
			o := s.takeOutcomes()[0]
			if o.Result == nil {
				t.Fatalf("Verify failed (%v); the headers were intact, the body read should fail", o.Err)
			}
			wantCode(t, o.Err, tc.code)
			if len(o.Body) != tc.delivered || !bytes.Equal(o.Body, data[:len(o.Body)]) {
				t.Errorf("%d bytes handed out before the failure, want %d", len(o.Body), tc.delivered)
			}
			if _, ok := s.object("bkt", "tampered"); ok {
				t.Error("object stored")
			}
		})
	}
}

func TestBodyDigests(t *testing.T) {
	s := newS3Server(t)
	body := []byte("digest me, please")
	md := md5.Sum(body)
	goodMD5 := base64.StdEncoding.EncodeToString(md[:])
	var c [4]byte
	binary.BigEndian.PutUint32(c[:], crc32.Checksum(body, crc32.MakeTable(crc32.Castagnoli)))
	goodCRC := base64.StdEncoding.EncodeToString(c[:])

	for _, tc := range []struct {
		name   string
		header map[string]string
		tamper bool
		code   string // "" = success
	}{
		{"content-md5", map[string]string{"Content-Md5": goodMD5}, false, ""},
		{"content-md5 mismatch", map[string]string{"Content-Md5": goodMD5}, true, CodeBadDigest},
		{"content-md5 invalid", map[string]string{"Content-Md5": "not base64!"}, false, CodeInvalidDigest},
		{"crc32c header", map[string]string{"X-Amz-Checksum-Crc32c": goodCRC}, false, ""},
		{"crc32c header mismatch", map[string]string{"X-Amz-Checksum-Crc32c": goodCRC}, true, CodeBadDigest},
		{"crc32c header invalid", map[string]string{"X-Amz-Checksum-Crc32c": "AAA="}, false, CodeInvalidRequest},
	} {
		t.Run(tc.name, func(t *testing.T) {
			req := newSignedRequest(t, http.MethodPut, s.URL+"/bkt/digest", body, PayloadUnsigned, tc.header)
			if tc.tamper {
				b := bytes.Clone(body)
				b[0] ^= 1
				req.Body = io.NopCloser(bytes.NewReader(b))
			}
			s.do(t, req)
			o := s.takeOutcomes()[0]
			if tc.code == "" {
				if o.Err != nil || !bytes.Equal(o.Body, body) {
					t.Fatalf("err %v", o.Err)
				}
				return
			}
			wantCode(t, o.Err, tc.code)
		})
	}
}

func TestHandSignedRequests(t *testing.T) {
	s := newS3Server(t)
	ok := func(t *testing.T, req *http.Request) outcome {
		t.Helper()
		if status, msg := s.do(t, req); status >= 300 && status != http.StatusNotFound {
			t.Fatalf("status %d: %s", status, msg)
		}
		return s.requireAllVerified(t)[0]
	}
	fails := func(t *testing.T, req *http.Request, code string) {
		t.Helper()
		s.do(t, req)
		wantCode(t, s.takeOutcomes()[0].Err, code)
	}

	t.Run("path signed as sent", func(t *testing.T) {
		// Sub-delimiters Go sends unescaped, signed unescaped (as curl
		// does), and the same key signed in the spec's encoding.
		req := newSignedRequest(t, http.MethodPut, s.URL+"/bkt/a(b)!*'c", []byte("x"), sha256Hex([]byte("x")), nil)
		ok(t, req)
		req = newSignedRequest(t, http.MethodGet, s.URL+"/bkt/a%28b%29%21%2A%27c", nil, emptySHA256, nil)
		ok(t, req)
		req = newSignedRequest(t, http.MethodGet, s.URL+"/bkt/a(b)!*'c", nil, emptySHA256, nil)
		if o := ok(t, req); o.Result == nil {
			t.Fatal("no result")
		}
	})
	t.Run("no x-amz-content-sha256, body hashed", func(t *testing.T) {
		// Plain SigV4: the payload line is the body's SHA-256, no header.
		body := []byte("plain SigV4 body")
		req, _ := http.NewRequest(http.MethodPut, s.URL+"/bkt/plain", bytes.NewReader(body))
		sign(t, req, sha256Hex(body), time.Now())
		if o := ok(t, req); !bytes.Equal(o.Body, body) || o.Result.PayloadMode != PayloadSHA256 {
			t.Errorf("outcome %+v", o)
		}
		req, _ = http.NewRequest(http.MethodPut, s.URL+"/bkt/plain", bytes.NewReader(body))
		sign(t, req, sha256Hex([]byte("another body")), time.Now())
		fails(t, req, CodeSignatureDoesNotMatch)
	})
	t.Run("unsigned x-amz header added", func(t *testing.T) {
		req := newSignedRequest(t, http.MethodGet, s.URL+"/bkt/k", nil, emptySHA256, nil)
		req.Header.Set("X-Amz-Copy-Source", "/other/secret")
		fails(t, req, CodeAccessDenied)
	})
	t.Run("signed header removed", func(t *testing.T) {
		req := newSignedRequest(t, http.MethodGet, s.URL+"/bkt/k", nil, emptySHA256, map[string]string{"Range": "bytes=0-1"})
		req.Header.Del("Range")
		fails(t, req, CodeAccessDenied)
	})
	t.Run("header value changed", func(t *testing.T) {
		req := newSignedRequest(t, http.MethodGet, s.URL+"/bkt/k", nil, emptySHA256, map[string]string{"Range": "bytes=0-1"})
		req.Header.Set("Range", "bytes=0-2")
		fails(t, req, CodeSignatureDoesNotMatch)
	})
	t.Run("header whitespace is canonicalised", func(t *testing.T) {
		req := newSignedRequest(t, http.MethodGet, s.URL+"/bkt/k", nil, emptySHA256, map[string]string{"X-Amz-Meta-Note": "a b c"})
		req.Header.Set("X-Amz-Meta-Note", "  a   b  c ")
		ok(t, req)
	})
	t.Run("query changed", func(t *testing.T) {
		req := newSignedRequest(t, http.MethodGet, s.URL+"/bkt?list-type=2&prefix=a", nil, emptySHA256, nil)
		req.URL.RawQuery = "list-type=2&prefix=b"
		fails(t, req, CodeSignatureDoesNotMatch)
	})
	t.Run("query re-encoded in transit", func(t *testing.T) {
		// The same parameters in another encoding still verify.
		req := newSignedRequest(t, http.MethodGet, s.URL+"/bkt?prefix=a%20b&list-type=2", nil, emptySHA256, nil)
		req.URL.RawQuery = "list-type=2&prefix=a+b"
		ok(t, req)
	})
	t.Run("method changed", func(t *testing.T) {
		req := newSignedRequest(t, http.MethodGet, s.URL+"/bkt/k", nil, emptySHA256, nil)
		req.Method = http.MethodHead
		fails(t, req, CodeSignatureDoesNotMatch)
	})
	t.Run("missing authorization", func(t *testing.T) {
		req, _ := http.NewRequest(http.MethodGet, s.URL+"/bkt/k", nil)
		fails(t, req, CodeAccessDenied)
	})
	t.Run("missing date", func(t *testing.T) {
		req := newSignedRequest(t, http.MethodGet, s.URL+"/bkt/k", nil, emptySHA256, nil)
		req.Header.Del("X-Amz-Date")
		fails(t, req, CodeAccessDenied)
	})
	t.Run("invalid x-amz-content-sha256", func(t *testing.T) {
		req := newSignedRequest(t, http.MethodGet, s.URL+"/bkt/k", nil, "0123", nil)
		fails(t, req, CodeInvalidArgument)
	})
	t.Run("sha256 of a body that was not sent", func(t *testing.T) {
		req := newSignedRequest(t, http.MethodGet, s.URL+"/bkt/k", nil, sha256Hex([]byte("x")), nil)
		fails(t, req, CodeXAmzContentSHA256Mismatch)
	})
	t.Run("both header and query authentication", func(t *testing.T) {
		req := newSignedRequest(t, http.MethodGet, s.URL+"/bkt/k?X-Amz-Algorithm=AWS4-HMAC-SHA256", nil, emptySHA256, nil)
		fails(t, req, CodeInvalidArgument)
	})
	valid := newSignedRequest(t, http.MethodGet, s.URL+"/bkt/k", nil, emptySHA256, nil).Header.Get("Authorization")
	for _, tc := range []struct{ name, authz, code string }{
		{"v2 signature", "AWS " + testKeyID + ":c2lnbmF0dXJl", CodeInvalidRequest},
		{"sigv4a", strings.Replace(valid, "AWS4-HMAC-SHA256", "AWS4-ECDSA-P256-SHA256", 1), CodeInvalidRequest},
		{"garbage", "Bearer xyz", CodeAuthorizationHeaderMalformed},
		{"no components", "AWS4-HMAC-SHA256", CodeAuthorizationHeaderMalformed},
		{"no signature", valid[:strings.Index(valid, ", Signature=")], CodeAuthorizationHeaderMalformed},
		{"short signature", valid[:len(valid)-2], CodeAuthorizationHeaderMalformed},
		{"signature not hex", valid[:len(valid)-2] + "zz", CodeAuthorizationHeaderMalformed},
		{"duplicate component", valid + ", Signature=" + strings.Repeat("0", 64), CodeAuthorizationHeaderMalformed},
		{"unknown component", valid + ", Foo=bar", CodeAuthorizationHeaderMalformed},
		{"bad terminator", strings.Replace(valid, "/aws4_request", "/aws5_request", 1), CodeAuthorizationHeaderMalformed},
		{"short credential", strings.Replace(valid, "/"+testRegion+"/", "/", 1), CodeAuthorizationHeaderMalformed},
		{"wrong service", strings.Replace(valid, "/s3/", "/sqs/", 1), CodeAuthorizationHeaderMalformed},
		{"scope date not the request date", strings.Replace(valid, "Credential="+testKeyID+"/2", "Credential="+testKeyID+"/1", 1), CodeAuthorizationHeaderMalformed},
		{"host not signed", strings.Replace(valid, "SignedHeaders=host;", "SignedHeaders=", 1), CodeAuthorizationHeaderMalformed},
		{"wrong signature", valid[:len(valid)-1] + string("0123456789abcdef"[(strings.IndexByte("0123456789abcdef", valid[len(valid)-1])+1)%16]), CodeSignatureDoesNotMatch},
	} {
		t.Run("authorization/"+tc.name, func(t *testing.T) {
			req := newSignedRequest(t, http.MethodGet, s.URL+"/bkt/k", nil, emptySHA256, nil)
			req.Header.Set("Authorization", tc.authz)
			fails(t, req, tc.code)
		})
	}
}

func TestPresignedParameters(t *testing.T) {
	s := newS3Server(t)
	presign := func(t *testing.T, url string, expires time.Duration, at time.Time) string {
		t.Helper()
		req, _ := http.NewRequest(http.MethodGet, url, nil)
		q := req.URL.Query()
		q.Set("X-Amz-Expires", fmt.Sprint(int(expires.Seconds())))
		req.URL.RawQuery = q.Encode()
		u, _, err := s3Signer().PresignHTTP(context.Background(), testCreds, req, PayloadUnsigned, "s3", testRegion, at)
		testutil.Must(t, err)
		return u
	}
	get := func(t *testing.T, u string) *Error {
		t.Helper()
		req, _ := http.NewRequest(http.MethodGet, u, nil)
		s.do(t, req)
		return s.takeOutcomes()[0].Err
	}
	if err := get(t, presign(t, s.URL+"/bkt/k?versionId=a%2Bb", time.Hour, time.Now())); err != nil && err.Code != "NoSuchKey" {
		t.Fatalf("valid URL: %v", err)
	}
	wantCode(t, get(t, presign(t, s.URL+"/bkt/k", 8*24*time.Hour, time.Now())), CodeAuthorizationQueryParametersError)
	wantCode(t, get(t, presign(t, s.URL+"/bkt/k", time.Hour, time.Now().Add(time.Hour))), CodeAccessDenied) // not valid yet
	wantCode(t, get(t, presign(t, s.URL+"/bkt/k", time.Minute, time.Now().Add(-2*time.Minute))), CodeAccessDenied)
	u := presign(t, s.URL+"/bkt/k", time.Hour, time.Now())
	wantCode(t, get(t, strings.Replace(u, "X-Amz-SignedHeaders=", "X-Amz-Signed=", 1)), CodeAuthorizationQueryParametersError)
	wantCode(t, get(t, u+"&extra=1"), CodeSignatureDoesNotMatch)
	wantCode(t, get(t, strings.Replace(u, "X-Amz-Credential="+testKeyID, "X-Amz-Credential=AKIDOTHER", 1)), CodeInvalidAccessKeyID)
	// Signature Version 2, as boto3 presigns for S3 by default: S3's answer
	// for a mechanism it does not take, not Access Denied.
	v2 := get(t, s.URL+"/bkt/k?AWSAccessKeyId="+testKeyID+"&Signature=Eym%2BshSBvUF9NH50qH1h4x944WU%3D&Expires=1795888159")
	wantCode(t, v2, CodeInvalidRequest)
	if !strings.Contains(v2.Message, "Please use AWS4-HMAC-SHA256") {
		t.Errorf("v2 presigned URL: %q does not say which mechanism to use", v2.Message)
	}
}

// Verify works on requests that did not come through a server too, and
// refuses a body it would have to buffer beyond its limit.
func TestVerifyDirect(t *testing.T) {
	v := &Verifier{Store: NewStaticStore(Credentials{testKeyID, testSecret})}
	big := strings.NewReader(strings.Repeat("x", maxBufferedBody+1))
	req := httptest.NewRequest(http.MethodPut, "http://example.com/bkt/k", big)
	req.Header.Del("X-Amz-Content-Sha256")
	sign(t, req, emptySHA256, time.Now())
	_, err := v.Verify(req)
	wantCode(t, err, CodeMissingSecurityHeader)

	req = httptest.NewRequest(http.MethodGet, "http://example.com/bkt/k", nil)
	req.Header.Set("X-Amz-Content-Sha256", emptySHA256)
	sign(t, req, emptySHA256, time.Now())
	res, err := v.Verify(req)
	testutil.Must(t, err)
	if res.AccessKeyID != testKeyID || res.Region != testRegion || res.PayloadMode != PayloadSHA256 {
		t.Errorf("result %+v", res)
	}
	if d := time.Since(res.SignedTime); d < 0 || d > time.Minute {
		t.Errorf("signed time %v", res.SignedTime)
	}
	if _, err := (&Verifier{}).Verify(req); err == nil {
		t.Error("a verifier without a store accepted a request")
	}
}
