package s3proxy_test

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/s3"
	"github.com/aws/smithy-go"
	smithyhttp "github.com/aws/smithy-go/transport/http"

	"github.com/distcache/distcache/internal/testutil"
	"github.com/distcache/distcache/internal/testutil/miniotest"
	"github.com/distcache/distcache/internal/testutil/s3proxy"
)

func TestProxy(t *testing.T) {
	srv := miniotest.Start(t)
	srv.CreateBucket(t, "bkt")
	p := s3proxy.New(t, srv.Endpoint)
	// A client of the proxy that does not retry, so every call is one request.
	c := testutil.S3Client(p.URL(), srv.AccessKey, srv.SecretKey)
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

func TestRulesAndBrokenResponses(t *testing.T) {
	srv := miniotest.Start(t)
	srv.CreateBucket(t, "bkt")
	p := s3proxy.New(t, srv.Endpoint)
	// The SDK retries, so the log shows attempts of one invocation.
	c := testutil.S3Client(p.URL(), srv.AccessKey, srv.SecretKey, func(o *s3.Options) { o.RetryMaxAttempts = 3 })
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	bkt, key := aws.String("bkt"), aws.String("obj")
	data := []byte(strings.Repeat("0123456789", 10000))
	if _, err := c.PutObject(ctx, &s3.PutObjectInput{Bucket: bkt, Key: key, Body: strings.NewReader(string(data))}); err != nil {
		t.Fatal(err)
	}
	get := func() ([]byte, error) {
		out, err := c.GetObject(ctx, &s3.GetObjectInput{Bucket: bkt, Key: key})
		if err != nil {
			return nil, err
		}
		defer out.Body.Close()
		return io.ReadAll(out.Body)
	}

	// Two SlowDowns on GETs only, then success: one invocation, attempts 1-3.
	p.Reset()
	p.Inject(s3proxy.Rule{Method: http.MethodGet, Fault: s3proxy.SlowDown, Times: 2})
	if b, err := get(); err != nil || string(b) != string(data) {
		t.Fatalf("get after 2 SlowDowns with 3 attempts: %d bytes, %v", len(b), err)
	}
	recs := p.Requests()
	if len(recs) != 3 {
		t.Fatalf("recorded %d requests, want 3: %+v", len(recs), recs)
	}
	for i, r := range recs {
		wantStatus := http.StatusServiceUnavailable
		if i == 2 {
			wantStatus = http.StatusOK
		}
		if r.Invocation == "" || r.Invocation != recs[0].Invocation || r.Attempt != i+1 || r.Status != wantStatus {
			t.Errorf("request %d: %+v; want attempt %d of one invocation, status %d", i, r, i+1, wantStatus)
		}
	}

	// Resets and truncations: the client sees an error, never a short body
	// without one.
	for _, f := range []s3proxy.Fault{s3proxy.ResetHeaders, s3proxy.ResetBody, s3proxy.Truncate} {
		p.Reset()
		p.Inject(s3proxy.Rule{Method: http.MethodGet, Fault: f})
		b, err := get()
		if err == nil {
			t.Errorf("%v: read %d bytes without an error", f, len(b))
		}
		if f == s3proxy.ResetHeaders && !strings.Contains(fmt.Sprint(err), "reset") {
			t.Errorf("%v: %v; want a connection reset", f, err)
		}
		if f != s3proxy.ResetHeaders && (len(b) >= len(data) || p.Requests()[0].Status != http.StatusOK) {
			t.Errorf("%v: read %d bytes, status %d; want headers and a short body", f, len(b), p.Requests()[0].Status)
		}
	}

	// A window: every GET fails until it ends.
	p.Reset()
	p.Inject(s3proxy.Rule{Method: http.MethodGet, Fault: s3proxy.InternalError, Until: time.Now().Add(time.Hour)})
	if _, err := get(); err == nil {
		t.Error("get during an InternalError window succeeded")
	}
	if n := p.Count(http.MethodGet, ""); n != 3 {
		t.Errorf("%d attempts during the window, want 3", n)
	}
	p.ClearFaults()
	if _, err := get(); err != nil {
		t.Errorf("get after ClearFaults: %v", err)
	}

	// A probability replays from its seed.
	draw := func(seed uint64) string {
		p.Reset()
		p.Seed(seed)
		p.Inject(s3proxy.Rule{Method: http.MethodHead, Fault: s3proxy.SlowDown, Probability: 0.5})
		var got []byte
		for i := 0; i < 20; i++ {
			_, err := c.HeadObject(ctx, &s3.HeadObjectInput{Bucket: bkt, Key: key}, func(o *s3.Options) { o.RetryMaxAttempts = 1 })
			outcome := byte('o')
			if err != nil {
				outcome = 'x'
			}
			got = append(got, outcome)
		}
		return string(got)
	}
	a, b := draw(7), draw(7)
	if a != b || !strings.Contains(a, "o") || !strings.Contains(a, "x") {
		t.Errorf("seeded schedules %q and %q: want equal, with both outcomes", a, b)
	}

	// A hook runs before the request is forwarded.
	p.Reset()
	var hooked []string
	p.OnRequest(func(r s3proxy.Record) { hooked = append(hooked, r.Method+" "+r.Path) })
	if _, err := get(); err != nil {
		t.Fatal(err)
	}
	if len(hooked) != 1 || hooked[0] != "GET /bkt/obj" {
		t.Errorf("hook saw %q", hooked)
	}
}

func TestDelayRule(t *testing.T) {
	srv := miniotest.Start(t)
	srv.CreateBucket(t, "bkt")
	p := s3proxy.New(t, srv.Endpoint)
	p.Inject(s3proxy.Rule{Fault: s3proxy.Spike(200 * time.Millisecond), Times: 1})
	start := time.Now()
	resp, err := http.Get(p.URL() + "/bkt")
	took := time.Since(start)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if r := p.Requests(); len(r) != 1 || r[0].Fault.Kind != s3proxy.Delay {
		t.Fatalf("requests %+v", r)
	}
	// Only a lower bound: a loaded machine may take longer, never shorter.
	if took < 200*time.Millisecond {
		t.Errorf("a request delayed by 200ms took %v", took)
	}
}

// With ConditionalDeletes, a DELETE with If-Match is applied only to the
// ETag it names, as AWS S3 does: another ETag is refused 412, a missing
// object 404, and the object stays; the matching one is deleted. MinIO
// alone deletes in every case.
func TestConditionalDeletes(t *testing.T) {
	srv := miniotest.Start(t)
	srv.CreateBucket(t, "bkt")
	direct := srv.Client(t)
	p := s3proxy.New(t, srv.Endpoint)
	p.ConditionalDeletes(s3proxy.HeadWith(direct))
	c := testutil.S3Client(p.URL(), srv.AccessKey, srv.SecretKey)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	bkt, key := aws.String("bkt"), aws.String("k")
	put, err := c.PutObject(ctx, &s3.PutObjectInput{Bucket: bkt, Key: key, Body: strings.NewReader("v1")})
	testutil.Must(t, err)
	status := func(err error) int {
		var re *smithyhttp.ResponseError
		if errors.As(err, &re) {
			return re.HTTPStatusCode()
		}
		return 0
	}
	_, err = c.DeleteObject(ctx, &s3.DeleteObjectInput{Bucket: bkt, Key: key, IfMatch: aws.String(`"0123456789abcdef0123456789abcdef"`)})
	if status(err) != http.StatusPreconditionFailed {
		t.Fatalf("DELETE with another ETag: %v; want 412", err)
	}
	if _, err := direct.HeadObject(ctx, &s3.HeadObjectInput{Bucket: bkt, Key: key}); err != nil {
		t.Fatalf("the object is gone after a refused DELETE: %v", err)
	}
	if _, err := c.DeleteObject(ctx, &s3.DeleteObjectInput{Bucket: bkt, Key: key, IfMatch: put.ETag}); err != nil {
		t.Fatalf("DELETE with the object's ETag: %v", err)
	}
	_, err = c.DeleteObject(ctx, &s3.DeleteObjectInput{Bucket: bkt, Key: key, IfMatch: put.ETag})
	if status(err) != http.StatusNotFound {
		t.Fatalf("DELETE with If-Match of a missing object: %v; want 404", err)
	}
}

// With KeepAbandonedWrites, a PUT held by a delay lands although its
// client gave up on it before the delay was over, as S3 applies a request
// it received whole; the client got no answer.
func TestKeepAbandonedWrites(t *testing.T) {
	srv := miniotest.Start(t)
	srv.CreateBucket(t, "bkt")
	p := s3proxy.New(t, srv.Endpoint)
	p.KeepAbandonedWrites()
	p.Inject(s3proxy.Rule{Method: http.MethodPut, Fault: s3proxy.Spike(time.Second)})
	c := testutil.S3Client(p.URL(), srv.AccessKey, srv.SecretKey)
	ctx, cancel := context.WithTimeout(context.Background(), 200*time.Millisecond)
	defer cancel()
	body := strings.Repeat("abandoned ", 4<<10)
	if _, err := c.PutObject(ctx, &s3.PutObjectInput{Bucket: aws.String("bkt"), Key: aws.String("late"), Body: strings.NewReader(body),
		IfNoneMatch: aws.String("*")}); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("a PUT given up on after 200ms = %v; want its deadline exceeded", err)
	}
	deadline := time.Now().Add(time.Minute)
	for {
		got := miniotest.Object(t, srv.Client(t), "bkt", "late")
		if string(got) == body {
			return
		}
		if got != nil || time.Now().After(deadline) {
			t.Fatalf("MinIO holds %d bytes a minute after the abandoned PUT; want its %d", len(got), len(body))
		}
		time.Sleep(20 * time.Millisecond)
	}
}
