package embed

import (
	"context"
	"fmt"
	"net"
	"net/http"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"
)

// serveOps serves the plain port of a node or a gateway on addr (empty:
// none): metrics, liveness and readiness. A server that stops sends its
// error to errc.
func serveOps(addr string, reg *prometheus.Registry, ready func() error, errc chan<- error) (*http.Server, error) {
	if addr == "" {
		return nil, nil
	}
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return nil, err
	}
	ops := &http.Server{Addr: ln.Addr().String(), Handler: opsHandler(reg, ready), ReadHeaderTimeout: 10 * time.Second}
	go func() { errc <- ops.Serve(ln) }()
	return ops, nil
}

// opsAddr is the address ops listens on ("" for nil).
func opsAddr(ops *http.Server) string {
	if ops == nil {
		return ""
	}
	return ops.Addr
}

// opsHandler serves the plain port: metrics, liveness and readiness.
func opsHandler(reg *prometheus.Registry, ready func() error) http.Handler {
	mux := http.NewServeMux()
	mux.Handle("GET /metrics", promhttp.HandlerFor(reg, promhttp.HandlerOpts{Registry: reg}))
	mux.HandleFunc("GET /healthz", func(w http.ResponseWriter, _ *http.Request) { fmt.Fprintln(w, "ok") })
	mux.HandleFunc("GET /readyz", func(w http.ResponseWriter, _ *http.Request) {
		if err := ready(); err != nil {
			http.Error(w, err.Error(), http.StatusServiceUnavailable)
			return
		}
		fmt.Fprintln(w, "ok")
	})
	return mux
}

// shutdownAll shuts the servers down in order, each finishing its
// in-flight requests until ctx ends; nil servers are skipped. It returns
// the first error.
func shutdownAll(ctx context.Context, servers ...*http.Server) error {
	var first error
	for _, s := range servers {
		if s == nil {
			continue
		}
		if err := s.Shutdown(ctx); err != nil && first == nil {
			first = err
		}
	}
	return first
}

// closeAll closes the servers that were started (not nil) at once, with
// their open connections.
func closeAll(servers ...*http.Server) {
	for _, s := range servers {
		if s != nil {
			_ = s.Close()
		}
	}
}
