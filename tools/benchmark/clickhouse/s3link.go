package clickhouse

import (
	"fmt"
	"strings"
	"time"

	toxiproxy "github.com/Shopify/toxiproxy/v2"
	"github.com/rs/zerolog"

	"github.com/distcache/distcache/tools/benchmark/benchkit"
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
	counter *benchkit.S3Counter
}

// LinkConfig are the injected S3 properties.
type LinkConfig struct {
	Latency   time.Duration // added to every request
	Bandwidth int64         // bytes per second per connection, downstream; 0 for none
}

// Counts are the S3 requests and bytes seen by a Link.
type Counts = benchkit.S3Counts

// StartLink starts the counter in front of target (MinIO's endpoint) and
// toxiproxy in front of the counter.
func StartLink(target string, cfg LinkConfig) (*Link, error) {
	c, err := benchkit.StartS3Counter(target, 0)
	if err != nil {
		return nil, err
	}
	l := &Link{counter: c}
	server := toxiproxy.NewServer(toxiproxy.NewMetricsContainer(nil), zerolog.Nop())
	l.proxy = toxiproxy.NewProxy(server, "s3", "127.0.0.1:0", c.Addr())
	if err := l.proxy.Start(); err != nil {
		c.Close()
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
func (l *Link) Counts() Counts { return l.counter.Counts() }

// Close stops the proxies.
func (l *Link) Close() {
	l.proxy.Stop()
	l.counter.Close()
}
