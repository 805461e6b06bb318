package main

import (
	"context"
	"errors"
	"log/slog"
	"net/http"
	"sync/atomic"
	"time"
)

// waitAndDrain blocks until a signal (ctx) or a server failure, then drains:
// readiness turns false so endpoints stop sending traffic, and the servers
// finish in-flight requests within grace. Nil servers are skipped.
func waitAndDrain(ctx context.Context, errc <-chan error, log *slog.Logger, draining *atomic.Bool,
	grace time.Duration, servers ...*http.Server) error {
	select {
	case <-ctx.Done():
	case err := <-errc:
		if !errors.Is(err, http.ErrServerClosed) {
			return err
		}
	}
	log.Info("shutting down")
	draining.Store(true)
	sctx, cancel := context.WithTimeout(context.Background(), grace)
	defer cancel()
	for _, s := range servers {
		if s != nil {
			_ = s.Shutdown(sctx)
		}
	}
	return nil
}
