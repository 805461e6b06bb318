package sigv4

import (
	"context"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"
)

// A GetObject with a Range, carrying the headers aws-sdk-go-v2 sends and signs.
func benchGET(b *testing.B) (*Verifier, *http.Request) {
	req := httptest.NewRequest(http.MethodGet, "http://127.0.0.1:9000/bucket/data/part-00042/col%20umn.bin?x-id=GetObject", nil)
	req.Header.Set("Range", "bytes=1048576-2097151")
	req.Header.Set("Accept-Encoding", "identity")
	req.Header.Set("Amz-Sdk-Invocation-Id", "0a6fc3a2-c572-4bf6-adcf-d85b61fc21b4")
	req.Header.Set("Amz-Sdk-Request", "attempt=1; max=3")
	req.Header.Set("X-Amz-Checksum-Mode", "ENABLED")
	req.Header.Set("X-Amz-Content-Sha256", emptySHA256)
	req.Header.Set("User-Agent", "aws-sdk-go-v2/1.47.6 os/linux lang/go#1.26 api/s3#1.114.7")
	if err := s3Signer().SignHTTP(context.Background(), testCreds, req, emptySHA256, "s3", testRegion, time.Now()); err != nil {
		b.Fatal(err)
	}
	v := &Verifier{Store: NewStaticStore(Credentials{AccessKeyID: testKeyID, SecretAccessKey: testSecret}), Region: testRegion}
	return v, req
}

func BenchmarkVerifyGET(b *testing.B) {
	v, req := benchGET(b)
	b.ReportAllocs()
	for b.Loop() {
		req.Body = http.NoBody
		if _, err := v.Verify(req); err != nil {
			b.Fatal(err)
		}
	}
}

func BenchmarkVerifyGETParallel(b *testing.B) {
	v, req := benchGET(b)
	b.ReportAllocs()
	b.RunParallel(func(pb *testing.PB) {
		r := req.Clone(context.Background())
		for pb.Next() {
			r.Body = http.NoBody
			if _, err := v.Verify(r); err != nil {
				b.Error(err)
				return
			}
		}
	})
}
