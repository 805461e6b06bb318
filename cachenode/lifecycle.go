package main

import (
	"context"
	"errors"
	"flag"
	"log/slog"
	"net/http"
	"os"
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

// lifecycleFlags are the flags of every command that runs a server (serve,
// gateway).
type lifecycleFlags struct {
	logLevel      string
	shutdownGrace time.Duration
}

func (l *lifecycleFlags) register(fs *flag.FlagSet) {
	fs.StringVar(&l.logLevel, "log-level", "info", "debug, info, warn or error")
	fs.DurationVar(&l.shutdownGrace, "shutdown-grace", 20*time.Second, "time to finish in-flight requests on SIGTERM")
}

func (l *lifecycleFlags) lifecycle() *lifecycleFlags { return l }

// serverCommand is the flags of a command that runs a server: start
// assembles it (internal/embed) from a fresh registry and a logger.
type serverCommand interface {
	lifecycle() *lifecycleFlags
	start(ctx context.Context, reg *prometheus.Registry, log *slog.Logger) (server, error)
}

// runServer parses a command's flags, starts its server and runs it until
// SIGINT or SIGTERM (runUntilSignal).
func runServer[F serverCommand](args []string, parse func([]string) (F, error)) error {
	f, err := parse(args)
	if err != nil {
		return err
	}
	l := f.lifecycle()
	log := newLogger(l.logLevel)
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGINT, syscall.SIGTERM)
	defer stop()
	s, err := f.start(ctx, newRegistry(), log)
	if err != nil {
		return err
	}
	return runUntilSignal(ctx, s, log, l.shutdownGrace)
}

func newLogger(level string) *slog.Logger {
	var l slog.Level
	if err := l.UnmarshalText([]byte(level)); err != nil {
		l = slog.LevelInfo
	}
	return slog.New(slog.NewJSONHandler(os.Stderr, &slog.HandlerOptions{Level: l}))
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
