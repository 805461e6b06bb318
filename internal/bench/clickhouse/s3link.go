package clickhouse

import (
	"context"
	"fmt"
	"io"
	"log"
	"net"
	"net/http"
	"net/http/httputil"
	"net/url"
	"strings"
	"sync/atomic"
	"time"

	toxiproxy "github.com/Shopify/toxiproxy/v2"
	"github.com/rs/zerolog"
)

// Link is what makes MinIO on this machine behave like S3 in a region:
// every reader of the bucket (ClickHouse on rows 1-2, the cache nodes on
// rows 3-5) goes through it.
//
//	client -> toxiproxy (latency, bandwidth) -> counter -> MinIO
//
// Toxiproxy (github.com/Shopify/toxiproxy/v2, embedded) is a TCP proxy; its
// toxics act on the byte streams of each connection:
//
//   - latency on the upstream stream (client to server): every chunk of
//     bytes a client sends is held for Latency before it goes on. A request
//     is a few hundred bytes, one chunk, so each request, including every
//     request on a kept-alive connection, reaches the server Latency later:
//     a per-request first-byte latency. (On the downstream stream the same
//     toxic would delay every 32 KiB piece of each response instead.)
//   - bandwidth on the downstream stream (server to client): each connection
//     gets at most Bandwidth bytes per second, S3's per-connection limit.
//
// The counter is an HTTP reverse proxy that counts requests by method and
// the body bytes of GET responses: the S3 requests and bytes the cell made.
type Link struct {
	URL string // http://127.0.0.1:PORT, what clients use as their S3 endpoint

	proxy   *toxiproxy.Proxy
	counter *counter
	srv     *http.Server
}

// LinkConfig are the injected S3 properties.
type LinkConfig struct {
	Latency   time.Duration // added to every request
	Bandwidth int64         // bytes per second per connection, downstream; 0 for none
}

// Counts are the S3 requests and bytes seen by a Link.
type Counts struct {
	GETs, HEADs, Others int64
	GETBytes            int64 // response body bytes of GETs
}

// Sub is c - o.
func (c Counts) Sub(o Counts) Counts {
	return Counts{GETs: c.GETs - o.GETs, HEADs: c.HEADs - o.HEADs, Others: c.Others - o.Others, GETBytes: c.GETBytes - o.GETBytes}
}

// StartLink starts the counter in front of target (MinIO's endpoint) and
// toxiproxy in front of the counter.
func StartLink(target string, cfg LinkConfig) (*Link, error) {
	u, err := url.Parse(target)
	if err != nil {
		return nil, err
	}
	c := &counter{}
	tr := http.DefaultTransport.(*http.Transport).Clone()
	tr.DisableCompression = true
	tr.MaxIdleConnsPerHost = 256
	rp := &httputil.ReverseProxy{
		Rewrite: func(r *httputil.ProxyRequest) {
			r.SetURL(u)
			r.Out.Host = r.In.Host // the client signed for the address it dialled
		},
		Transport:      tr,
		ModifyResponse: c.modifyResponse,
		ErrorLog:       log.New(io.Discard, "", 0),
		FlushInterval:  -1,
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, err
	}
	l := &Link{counter: c}
	l.srv = &http.Server{Handler: c.wrap(rp), ErrorLog: log.New(io.Discard, "", 0)}
	go func() { _ = l.srv.Serve(ln) }()

	server := toxiproxy.NewServer(toxiproxy.NewMetricsContainer(nil), zerolog.Nop())
	l.proxy = toxiproxy.NewProxy(server, "s3", "127.0.0.1:0", ln.Addr().String())
	if err := l.proxy.Start(); err != nil {
		_ = l.srv.Close()
		return nil, fmt.Errorf("toxiproxy: %w", err)
	}
	l.URL = "http://" + l.proxy.Listen
	toxics := []string{}
	if cfg.Latency > 0 {
		toxics = append(toxics, fmt.Sprintf(`{"name":"latency","type":"latency","stream":"upstream","attributes":{"latency":%d}}`,
			cfg.Latency.Milliseconds()))
	}
	if cfg.Bandwidth > 0 {
		// toxiproxy's rate is in KB/s (1000 bytes).
		toxics = append(toxics, fmt.Sprintf(`{"name":"bandwidth","type":"bandwidth","stream":"downstream","attributes":{"rate":%d}}`,
			cfg.Bandwidth/1000))
	}
	for _, t := range toxics {
		if _, err := l.proxy.Toxics.AddToxicJson(strings.NewReader(t)); err != nil {
			l.Close()
			return nil, fmt.Errorf("toxiproxy toxic %s: %w", t, err)
		}
	}
	return l, nil
}

// Counts returns what the link has seen so far.
func (l *Link) Counts() Counts { return l.counter.snapshot() }

// Close stops the proxies.
func (l *Link) Close() {
	l.proxy.Stop()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if err := l.srv.Shutdown(ctx); err != nil {
		_ = l.srv.Close()
	}
}

type counter struct {
	gets, heads, others, getBytes atomic.Int64
}

func (c *counter) wrap(h http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		switch r.Method {
		case http.MethodGet:
			c.gets.Add(1)
		case http.MethodHead:
			c.heads.Add(1)
		default:
			c.others.Add(1)
		}
		h.ServeHTTP(w, r)
	})
}

func (c *counter) modifyResponse(resp *http.Response) error {
	if resp.Request.Method == http.MethodGet {
		resp.Body = &countingBody{ReadCloser: resp.Body, n: &c.getBytes}
	}
	return nil
}

func (c *counter) snapshot() Counts {
	return Counts{GETs: c.gets.Load(), HEADs: c.heads.Load(), Others: c.others.Load(), GETBytes: c.getBytes.Load()}
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
