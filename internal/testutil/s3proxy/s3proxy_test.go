package s3proxy_test

import (
	"context"
	"errors"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/credentials"
	"github.com/aws/aws-sdk-go-v2/service/s3"
	"github.com/aws/smithy-go"
	smithyhttp "github.com/aws/smithy-go/transport/http"

	"github.com/distcache/distcache/internal/testutil/miniotest"
	"github.com/distcache/distcache/internal/testutil/s3proxy"
)

func TestProxy(t *testing.T) {
	srv := miniotest.Start(t)
	srv.CreateBucket(t, "bkt")
	p := s3proxy.New(t, srv.Endpoint)
	// A client of the proxy that does not retry, so every call is one request.
	c := s3.New(s3.Options{
		Region:           srv.Region,
		BaseEndpoint:     aws.String(p.URL()),
		UsePathStyle:     true,
		Credentials:      credentials.NewStaticCredentialsProvider(srv.AccessKey, srv.SecretKey, ""),
		RetryMaxAttempts: 1,
	})
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	bkt, key := aws.String("bkt"), aws.String("dir/key")

	// Signed requests with bodies pass through unchanged.
	if _, err := c.PutObject(ctx, &s3.PutObjectInput{Bucket: bkt, Key: key, Body: strings.NewReader("hello")}); err != nil {
		t.Fatalf("put through the proxy: %v", err)
	}
	out, err := c.GetObject(ctx, &s3.GetObjectInput{Bucket: bkt, Key: key})
	if err != nil {
		t.Fatalf("get through the proxy: %v", err)
	}
	b, err := io.ReadAll(out.Body)
	out.Body.Close()
	if err != nil || string(b) != "hello" {
		t.Fatalf("get through the proxy = %q, %v", b, err)
	}

	p.FailNext(2, http.StatusServiceUnavailable, "SlowDown")
	for _, op := range []func() error{
		func() error { _, err := c.GetObject(ctx, &s3.GetObjectInput{Bucket: bkt, Key: key}); return err },
		func() error { _, err := c.HeadObject(ctx, &s3.HeadObjectInput{Bucket: bkt, Key: key}); return err },
	} {
		err := op()
		var re *smithyhttp.ResponseError
		if !errors.As(err, &re) || re.HTTPStatusCode() != http.StatusServiceUnavailable {
			t.Errorf("injected failure = %v; want status 503", err)
		}
	}
	var apiErr smithy.APIError
	if _, err := c.HeadObject(ctx, &s3.HeadObjectInput{Bucket: bkt, Key: key}); err != nil {
		t.Errorf("third request after FailNext(2) = %v; want success", err)
	}
	p.FailNext(1, http.StatusInternalServerError, "InternalError")
	_, err = c.GetObject(ctx, &s3.GetObjectInput{Bucket: bkt, Key: key})
	if !errors.As(err, &apiErr) || apiErr.ErrorCode() != "InternalError" {
		t.Errorf("injected failure = %v; want S3 error code InternalError", err)
	}

	for _, tc := range []struct {
		method, prefix string
		want           int
	}{
		{"", "", 6},
		{http.MethodPut, "/bkt/dir/", 1},
		{http.MethodGet, "/bkt/dir/key", 3},
		{http.MethodHead, "/bkt", 2},
		{http.MethodGet, "/other", 0},
	} {
		if got := p.Count(tc.method, tc.prefix); got != tc.want {
			t.Errorf("Count(%q, %q) = %d, want %d", tc.method, tc.prefix, got, tc.want)
		}
	}
	if m := p.InFlightMax(); m != 1 {
		t.Errorf("InFlightMax = %d after sequential requests, want 1", m)
	}
	p.Reset()
	if n, m := p.Count("", ""), p.InFlightMax(); n != 0 || m != 0 {
		t.Errorf("after Reset: Count = %d, InFlightMax = %d; want 0, 0", n, m)
	}
}
