package main

import (
	"context"
	"errors"
	"log/slog"
	"net/http"
	"os/signal"
	"syscall"
	"time"

	"github.com/prometheus/client_golang/prometheus"
)

// server is a node or a gateway (internal/embed).
type server interface {
	Err() <-chan error
	Shutdown(ctx context.Context) error
	Close()
}

// startUntilSignal starts a server (start is given a fresh registry and a
// logger at logLevel) and runs it until SIGINT or SIGTERM (runUntilSignal).
func startUntilSignal(logLevel string, grace time.Duration, start func(context.Context, *prometheus.Registry, *slog.Logger) (server, error)) error {
	log := newLogger(logLevel)
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGINT, syscall.SIGTERM)
	defer stop()
	s, err := start(ctx, newRegistry(), log)
	if err != nil {
		return err
	}
	return runUntilSignal(ctx, s, log, grace)
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
