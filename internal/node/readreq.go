package node

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"strings"

	"github.com/distcache/distcache/internal/nodeapi"
)

// readRequest parses one request of a read connection into r's fields,
// with h (cleared) as its header: what http.ReadRequest makes of the
// requests a read connection carries (HTTP/1.1, no body), with a few
// allocations instead of one per header line, since the header names
// clients send are constants and all values share one string. A request
// with a body comes back with its ContentLength (-1 for chunked) so that
// it can be refused; a malformed one is an error (the connection closes).
func readRequest(ctx context.Context, br *bufio.Reader, h http.Header) (*http.Request, error) {
	line, err := nodeapi.ReadLine(br)
	if err != nil {
		return nil, err
	}
	method, rest, ok1 := strings.Cut(string(line), " ")
	uri, proto, ok2 := strings.Cut(rest, " ")
	if !ok1 || !ok2 || proto != "HTTP/1.1" || method == "" || uri == "" {
		return nil, fmt.Errorf("node: malformed request line %q", line)
	}
	r, err := http.NewRequestWithContext(ctx, method, "", nil)
	if err != nil {
		return nil, err
	}
	r.RequestURI = uri
	if uri[0] == '/' && !strings.ContainsAny(uri, "%#") && !hasCTL(uri) {
		r.URL.Path, r.URL.RawQuery, _ = strings.Cut(uri, "?")
		r.URL.ForceQuery = strings.HasSuffix(uri, "?") && r.URL.RawQuery == ""
	} else if r.URL, err = url.ParseRequestURI(uri); err != nil {
		return nil, err
	}
	clear(h)
	if err := nodeapi.ReadHeader(br, h); err != nil {
		return nil, fmt.Errorf("node: request header: %w", err)
	}
	r.Header = h
	hosts := h["Host"]
	if len(hosts) != 1 {
		return nil, errors.New("node: a request needs exactly one Host")
	}
	r.Host = hosts[0]
	delete(h, "Host")
	r.Close = nodeapi.HasToken(h["Connection"], "close")
	switch n, err := nodeapi.ContentLength(h["Content-Length"]); {
	case len(h["Transfer-Encoding"]) > 0:
		r.ContentLength = -1 // chunked: refused by the caller
	case err != nil:
		return nil, fmt.Errorf("node: request header: %w", err)
	case n >= 0:
		r.ContentLength = n
	}
	return r, nil
}

// hasCTL reports whether s has ASCII control bytes (url.Parse refuses them).
func hasCTL(s string) bool {
	for i := 0; i < len(s); i++ {
		if s[i] < ' ' || s[i] == 0x7f {
			return true
		}
	}
	return false
}
