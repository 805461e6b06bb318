package main

import (
	"context"
	"errors"
	"log/slog"
	"net/http"
	"time"
)

// server is a node or a gateway (internal/embed).
type server interface {
	Err() <-chan error
	Shutdown(ctx context.Context) error
	Close()
}

// runUntilSignal blocks until a signal (ctx) or a server failure, then
// drains: readiness turns false so endpoints stop sending traffic, and the
// servers finish in-flight requests within grace.
func runUntilSignal(ctx context.Context, s server, log *slog.Logger, grace time.Duration) error {
	select {
	case <-ctx.Done():
	case err := <-s.Err():
		if !errors.Is(err, http.ErrServerClosed) {
			s.Close()
			return err
		}
	}
	log.Info("shutting down")
	sctx, cancel := context.WithTimeout(context.Background(), grace)
	defer cancel()
	_ = s.Shutdown(sctx) // past grace, the connections left are closed
	return nil
}
