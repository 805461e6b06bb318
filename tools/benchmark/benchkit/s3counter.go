package benchkit

import (
	"context"
	"fmt"
	"io"
	"log"
	"net"
	"net/http"
	"net/http/httputil"
	"net/url"
	"sync/atomic"
	"time"
)

// S3Counter is a reverse proxy in front of an S3 server (MinIO) that counts
// what a cell costs at the S3 side: GET and HEAD requests, other requests,
// and the body bytes of GET answers. Requests pass unchanged, Host included
// (clients sign for the address they dial and MinIO checks the Host it
// receives). internal/testutil/s3proxy does the same for tests, tied to a
// testing.TB.
type S3Counter struct {
	URL string // http://127.0.0.1:PORT

	latency                       time.Duration
	srv                           *http.Server
	tr                            *http.Transport
	gets, heads, others, getBytes atomic.Int64
}

// S3Counts is a snapshot of an S3Counter.
type S3Counts struct {
	GETs, HEADs, Others int64
	GETBytes            int64 // response body bytes of GETs
}

// Sub is c - o.
func (c S3Counts) Sub(o S3Counts) S3Counts {
	return S3Counts{GETs: c.GETs - o.GETs, HEADs: c.HEADs - o.HEADs, Others: c.Others - o.Others, GETBytes: c.GETBytes - o.GETBytes}
}

// StartS3Counter starts a counter in front of target. latency, when not
// zero, is waited before passing on each GET and HEAD: S3's first-byte
// latency, which MinIO on loopback does not have.
func StartS3Counter(target string, latency time.Duration) (*S3Counter, error) {
	u, err := url.Parse(target)
	if err != nil {
		return nil, fmt.Errorf("S3 counter: target %q: %w", target, err)
	}
	c := &S3Counter{latency: latency, tr: http.DefaultTransport.(*http.Transport).Clone()}
	c.tr.DisableCompression = true // bytes and Content-Length pass untouched
	c.tr.MaxIdleConnsPerHost = 256
	rp := &httputil.ReverseProxy{
		Rewrite: func(r *httputil.ProxyRequest) {
			r.SetURL(u)
			r.Out.Host = r.In.Host // keep the Host the client signed
		},
		Transport: c.tr,
		ModifyResponse: func(resp *http.Response) error {
			if resp.Request.Method == http.MethodGet {
				resp.Body = &countingBody{ReadCloser: resp.Body, n: &c.getBytes}
			}
			return nil
		},
		ErrorLog:      log.New(io.Discard, "", 0),
		FlushInterval: -1,
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, fmt.Errorf("S3 counter: %w", err)
	}
	c.URL = "http://" + ln.Addr().String()
	c.srv = &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		switch r.Method {
		case http.MethodGet:
			c.gets.Add(1)
		case http.MethodHead:
			c.heads.Add(1)
		default:
			c.others.Add(1)
		}
		if c.latency > 0 && (r.Method == http.MethodGet || r.Method == http.MethodHead) {
			select {
			case <-time.After(c.latency):
			case <-r.Context().Done():
				return
			}
		}
		rp.ServeHTTP(w, r)
	}), ErrorLog: log.New(io.Discard, "", 0)}
	go func() { _ = c.srv.Serve(ln) }()
	return c, nil
}

// Addr is the counter's host:port.
func (c *S3Counter) Addr() string { return c.URL[len("http://"):] }

// Counts is what the counter has seen so far.
func (c *S3Counter) Counts() S3Counts {
	return S3Counts{GETs: c.gets.Load(), HEADs: c.heads.Load(), Others: c.others.Load(), GETBytes: c.getBytes.Load()}
}

// Close stops the proxy.
func (c *S3Counter) Close() {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if err := c.srv.Shutdown(ctx); err != nil {
		_ = c.srv.Close()
	}
	c.tr.CloseIdleConnections()
}

type countingBody struct {
	io.ReadCloser
	n *atomic.Int64
}

func (b *countingBody) Read(p []byte) (int, error) {
	n, err := b.ReadCloser.Read(p)
	b.n.Add(int64(n))
	return n, err
}
