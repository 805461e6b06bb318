package scaleout

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

// s3Counter is a reverse proxy between the cache nodes and MinIO that counts
// what the cache costs at the S3 side: GET and HEAD requests, and the body
// bytes of GET answers. Requests pass unchanged, Host included (the nodes
// sign for the proxy's address and MinIO checks the Host it receives).
//
// It is the counting half of internal/testutil/s3proxy, which needs a
// testing.TB.
type s3Counter struct {
	url     string
	latency time.Duration // before each GET and HEAD
	srv     *http.Server
	tr      *http.Transport

	gets, heads, others atomic.Int64
	getBytes            atomic.Int64
}

// s3Counts is a snapshot of an s3Counter.
type s3Counts struct {
	Gets, Heads, Others, GetBytes int64
}

func (a s3Counts) minus(b s3Counts) s3Counts {
	return s3Counts{Gets: a.Gets - b.Gets, Heads: a.Heads - b.Heads, Others: a.Others - b.Others, GetBytes: a.GetBytes - b.GetBytes}
}

func startS3Counter(target string, latency time.Duration) (*s3Counter, error) {
	u, err := url.Parse(target)
	if err != nil {
		return nil, fmt.Errorf("S3 counter: target %q: %w", target, err)
	}
	tr := http.DefaultTransport.(*http.Transport).Clone()
	tr.DisableCompression = true // bytes and Content-Length pass untouched
	tr.MaxIdleConnsPerHost = 128
	rp := &httputil.ReverseProxy{
		Rewrite: func(r *httputil.ProxyRequest) {
			r.SetURL(u)
			r.Out.Host = r.In.Host // keep the Host the node signed
		},
		Transport: tr,
		ErrorLog:  log.New(io.Discard, "", 0),
	}
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, fmt.Errorf("S3 counter: %w", err)
	}
	c := &s3Counter{url: "http://" + l.Addr().String(), latency: latency, tr: tr}
	c.srv = &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		switch r.Method {
		case http.MethodGet:
			c.gets.Add(1)
			w = &countingWriter{ResponseWriter: w, n: &c.getBytes}
		case http.MethodHead:
			c.heads.Add(1)
		default:
			c.others.Add(1)
		}
		if r.Method == http.MethodGet || r.Method == http.MethodHead {
			select { // S3 is tens of milliseconds away; loopback MinIO is not
			case <-time.After(c.latency):
			case <-r.Context().Done():
				return
			}
		}
		rp.ServeHTTP(w, r)
	}), ErrorLog: log.New(io.Discard, "", 0)}
	go func() { _ = c.srv.Serve(l) }()
	return c, nil
}

// counts is what the proxy has seen so far.
func (c *s3Counter) counts() s3Counts {
	return s3Counts{Gets: c.gets.Load(), Heads: c.heads.Load(), Others: c.others.Load(), GetBytes: c.getBytes.Load()}
}

func (c *s3Counter) close() {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if err := c.srv.Shutdown(ctx); err != nil {
		_ = c.srv.Close()
	}
	c.tr.CloseIdleConnections()
}

// countingWriter adds the body bytes written through it to n.
type countingWriter struct {
	http.ResponseWriter
	n *atomic.Int64
}

func (w *countingWriter) Write(b []byte) (int, error) {
	n, err := w.ResponseWriter.Write(b)
	w.n.Add(int64(n))
	return n, err
}

// Unwrap lets http.ResponseController (ReverseProxy's flushes) reach the
// connection's writer.
func (w *countingWriter) Unwrap() http.ResponseWriter { return w.ResponseWriter }
