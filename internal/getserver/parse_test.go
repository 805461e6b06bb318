package getserver

import (
	"bufio"
	"bytes"
	"net/http"
	"reflect"
	"strings"
	"testing"
)

// heads are request heads, and whether parseRead takes them (the rest go
// through http.ReadRequest as before).
var heads = []struct {
	head  string
	taken bool
}{
	{"GET /bucket/key HTTP/1.1\r\nHost: x\r\n\r\n", true},
	{"HEAD /bucket/key HTTP/1.1\r\nHost: 127.0.0.1:9000\r\n\r\n", true},
	{"GET /b/k?x-id=GetObject&partNumber=1 HTTP/1.1\r\nHost: x\r\nRange: bytes=0-65535\r\n" +
		"User-Agent: aws-sdk-go-v2/1.47.6 os/linux lang/go#1.26 api/s3#1.114.7\r\nX-Amz-Date: 20261128T090000Z\r\n" +
		"Authorization: AWS4-HMAC-SHA256 Credential=AK/20261128/us-east-1/s3/aws4_request, SignedHeaders=host;range, Signature=00\r\n" +
		"Accept-Encoding: identity\r\nAmz-Sdk-Request: attempt=1; max=3\r\n\r\n", true},
	{"GET /a%20b/c%2Fd HTTP/1.1\r\nHost: x\r\n\r\n", true},                                  // escaped path: RawPath
	{"GET /a HTTP/1.1\r\nhost: x\r\nx-amz-date: 1\r\nCONTENT-type: t\r\n\r\n", true},        // names to canonicalise
	{"GET /a HTTP/1.1\r\nHost: x\r\nX-A: 1\r\nX-A: 2\r\nx-a: 3\r\n\r\n", true},              // repeated fields
	{"GET /a HTTP/1.1\r\nHost: x\r\nX-Empty:\r\nX-Spaces: \t v  w \t\r\n\r\n", true},        // empty value, spaces around
	{"GET /a HTTP/1.1\r\nHost: x\r\nConnection: keep-alive, close\r\n\r\n", true},           // Close
	{"GET /a HTTP/1.0\r\n\r\n", true},                                                       // no Host in 1.0
	{"GET /a HTTP/1.0\r\nConnection: Keep-Alive\r\nHost: x\r\n\r\n", true},                  // 1.0 kept alive
	{"GET //double/slash HTTP/1.1\r\nHost: x\r\n\r\n", true},                                // not an authority
	{"GET /a#frag?q HTTP/1.1\r\nHost: x\r\n\r\n", true},                                     // '#' is the path's
	{"GET /a HTTP/1.1\r\nHost: x\r\nTrailer: X-T\r\nCache-Control: no-cache\r\n\r\n", true}, // no effect without chunking
	{"GET /a HTTP/1.1\r\nHost: x\r\nX_Under.score~: 1\r\n\r\n", true},

	{"GET /a HTTP/1.1\r\nHost: x\r\nHost: y\r\n\r\n", false}, // duplicate Host: net/http's 400
	{"GET /a HTTP/1.1\r\nHost: x\r\nhost: x\r\n\r\n", false},
	{"GET /a HTTP/1.1\r\n\r\n", false},                                 // no Host
	{"GET /a HTTP/1.1\r\nHost: x y\r\n\r\n", false},                    // bad Host
	{"GET /a HTTP/1.1\r\nHost: x\r\nX-Fold: a\r\n  b\r\n\r\n", false},  // obs-fold
	{"GET /a HTTP/1.1\r\n Host: x\r\n\r\n", false},                     // leading space
	{"GET /a HTTP/1.1\r\nHost: x\r\nBad Name: v\r\n\r\n", false},       // space in a name
	{"GET /a HTTP/1.1\r\nHost: x\r\nName : v\r\n\r\n", false},          // space before the colon
	{"GET /a HTTP/1.1\r\nHost: x\r\nX(y): v\r\n\r\n", false},           // not a token
	{"GET /a HTTP/1.1\r\nHost: x\r\n: v\r\n\r\n", false},               // empty name
	{"GET /a HTTP/1.1\r\nHost: x\r\nNoColon\r\n\r\n", false},           // no colon
	{"GET /a HTTP/1.1\r\nHost: x\nX: y\r\n\r\n", false},                // bare LF inside
	{"GET /a HTTP/1.1\r\nHost: x\r\nX: a\rb\r\n\r\n", false},           // bare CR
	{"GET /a HTTP/1.1\r\nHost: x\r\nX: caf\xc3\xa9\r\n\r\n", false},    // obs-text
	{"GET /a HTTP/1.1\r\nHost: x\r\nX: a\x00b\r\n\r\n", false},         // NUL
	{"GET /a HTTP/1.1\r\nHost: x\r\nX: a\x7f\r\n\r\n", false},          // DEL
	{"GET http://x/a HTTP/1.1\r\nHost: y\r\n\r\n", false},              // absolute form
	{"GET * HTTP/1.1\r\nHost: x\r\n\r\n", false},                       // asterisk form
	{"GET  /a HTTP/1.1\r\nHost: x\r\n\r\n", false},                     // two spaces
	{"GET /a HTTP/1.1 \r\nHost: x\r\n\r\n", false},                     // trailing space
	{"GET /a\tb HTTP/1.1\r\nHost: x\r\n\r\n", false},                   // tab in the target
	{"GET /a HTTP/1.2\r\nHost: x\r\n\r\n", false},                      // other versions
	{"GET /a HTTP/2.0\r\nHost: x\r\n\r\n", false},                      //
	{"get /a HTTP/1.1\r\nHost: x\r\n\r\n", false},                      // method case
	{"PUT /a HTTP/1.1\r\nHost: x\r\nContent-Length: 0\r\n\r\n", false}, // not a read
	{"GET /a HTTP/1.1\r\nHost: x\r\nContent-Length: 0\r\n\r\n", false}, // framing fields
	{"GET /a HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\n", false},
	{"GET /a HTTP/1.1\r\nHost: x\r\nExpect: 100-continue\r\n\r\n", false},
	{"GET /a HTTP/1.1\r\nHost: x\r\nUpgrade: h2c\r\nConnection: Upgrade\r\n\r\n", false},
	{"GET /a HTTP/1.1\r\nHost: x\r\nPragma: no-cache\r\n\r\n", false}, // ReadRequest adds Cache-Control
	{"GET /a%zz HTTP/1.1\r\nHost: x\r\n\r\n", false},                  // ReadRequest fails: net/http's 400
	{"GET /a HTTP/1.1\r\nHost: x\r\n" + strings.Repeat("X-Big: "+strings.Repeat("v", 100)+"\r\n", 200) + "\r\n", true},
}

// readRequest is what http.ReadRequest reads of head, with whether
// net/http's server and this one would serve it here.
func readRequest(head []byte) (req *http.Request, servedHere bool) {
	req, err := http.ReadRequest(bufio.NewReader(bytes.NewReader(head)))
	if err != nil {
		return nil, false
	}
	return req, acceptable(req, head) && servable(req)
}

func TestParseReadIsReadRequests(t *testing.T) {
	for _, tc := range heads {
		got, ok := parseRead([]byte(tc.head))
		if ok != tc.taken {
			t.Errorf("%.70q: taken %v, want %v", tc.head, ok, tc.taken)
		}
		if !ok {
			continue
		}
		want, servedHere := readRequest([]byte(tc.head))
		if !servedHere {
			t.Errorf("%.70q: taken, but not served here through ReadRequest", tc.head)
			continue
		}
		if !reflect.DeepEqual(*got, *want) {
			t.Errorf("%.70q:\n got %+v\nwant %+v", tc.head, *got, *want)
		}
	}
}

// FuzzParseRead: every head parseRead takes is read alike by ReadRequest
// and served here that way too.
func FuzzParseRead(f *testing.F) {
	for _, tc := range heads {
		f.Add([]byte(tc.head))
	}
	f.Fuzz(func(t *testing.T, head []byte) {
		got, ok := parseRead(head)
		if !ok {
			return
		}
		want, servedHere := readRequest(head)
		if want == nil || !servedHere {
			t.Fatalf("%q: taken, but ReadRequest gives %v (served here: %v)", head, want, servedHere)
		}
		if !reflect.DeepEqual(*got, *want) {
			t.Fatalf("%q:\n got %+v\nwant %+v", head, *got, *want)
		}
	})
}

// sdkHead is the head of a ranged GetObject as aws-sdk-go-v2 sends it.
const sdkHead = "GET /bucket/data/part-00042/column.bin?x-id=GetObject HTTP/1.1\r\nHost: 127.0.0.1:9000\r\n" +
	"User-Agent: aws-sdk-go-v2/1.47.6 ua/2.1 os/linux lang/go#1.26.8 md/GOOS#linux md/GOARCH#amd64 api/s3#1.114.7 m/E,Z,g\r\n" +
	"Accept-Encoding: identity\r\nAmz-Sdk-Invocation-Id: 0a6fc3a2-c572-4bf6-adcf-d85b61fc21b4\r\n" +
	"Amz-Sdk-Request: attempt=1; max=3\r\n" +
	"Authorization: AWS4-HMAC-SHA256 Credential=AKIAIOSFODNN7EXAMPLE/20261128/us-east-1/s3/aws4_request, " +
	"SignedHeaders=accept-encoding;amz-sdk-invocation-id;amz-sdk-request;host;range;x-amz-checksum-mode;x-amz-content-sha256;x-amz-date, " +
	"Signature=8a3f1e0c5d6b7a8f9e0d1c2b3a4f5e6d7c8b9a0f1e2d3c4b5a6f7e8d9c0b1a2f\r\n" +
	"Range: bytes=1048576-1114111\r\nX-Amz-Checksum-Mode: ENABLED\r\n" +
	"X-Amz-Content-Sha256: e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855\r\n" +
	"X-Amz-Date: 20261128T090000Z\r\n\r\n"

func BenchmarkReadHead(b *testing.B) {
	head := []byte(sdkHead)
	b.Run("parseRead", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			if _, ok := parseRead(head); !ok {
				b.Fatal("not taken")
			}
		}
	})
	b.Run("ReadRequest", func(b *testing.B) { // as readRequest did: a bufio.Reader reset on the head
		var r bytes.Reader
		br := bufio.NewReaderSize(&r, 4<<10)
		b.ReportAllocs()
		for b.Loop() {
			r.Reset(head)
			br.Reset(&r)
			if _, err := http.ReadRequest(br); err != nil {
				b.Fatal(err)
			}
		}
	})
}
