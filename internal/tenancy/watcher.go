package tenancy

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"sync/atomic"
	"time"

	"github.com/fsnotify/fsnotify"
)

const (
	// settleDelay coalesces the bursts of events one update makes (a
	// Kubernetes Secret update is several creates, renames and removes).
	settleDelay = 50 * time.Millisecond
	// resyncInterval re-reads the file even without events, in case the
	// kernel dropped some (inotify queue overflow) or the directory was
	// replaced under the watch.
	resyncInterval = time.Minute
)

// Watcher keeps the tenants configuration loaded from a file current.
//
// It watches the file's directory, not the file: editors and writers that
// replace the file by rename, and Kubernetes' atomic swap of the ..data
// symlink in a mounted Secret or ConfigMap, both leave a watch on the file
// itself pointing at a deleted inode. Any event in the directory leads,
// after a short settling delay, to re-reading the file; content identical to
// the loaded version is ignored. An unreadable or invalid file is logged and
// counted, and the previous configuration stays in force.
type Watcher struct {
	path   string
	logger *slog.Logger

	cur     atomic.Pointer[Config]
	ok      atomic.Uint64
	failed  atomic.Uint64
	changed chan struct{}

	cancel context.CancelFunc
	done   chan struct{}

	// Owned by the loop goroutine after Watch returns.
	loadedSum   [sha256.Size]byte
	lastFailure string // identifies the last failure reported, to report each once
}

// Watch loads the tenants file at path, failing if it cannot be read or is
// invalid, then keeps it current until ctx is done or Close is called. A nil
// logger discards logs.
func Watch(ctx context.Context, path string, logger *slog.Logger) (*Watcher, error) {
	if logger == nil {
		logger = slog.New(slog.DiscardHandler)
	}
	abs, err := filepath.Abs(path)
	if err != nil {
		return nil, fmt.Errorf("tenancy: %w", err)
	}
	fsw, err := fsnotify.NewWatcher()
	if err != nil {
		return nil, fmt.Errorf("tenancy: watch %s: %w", abs, err)
	}
	// Watch before the first read, so a change right after it is not lost.
	if err := fsw.Add(filepath.Dir(abs)); err != nil {
		_ = fsw.Close()
		return nil, fmt.Errorf("tenancy: watch %s: %w", filepath.Dir(abs), err)
	}
	w := &Watcher{
		path:    abs,
		logger:  logger.With("path", abs),
		changed: make(chan struct{}, 1),
		done:    make(chan struct{}),
	}
	data, err := os.ReadFile(abs)
	if err == nil {
		var cfg *Config
		if cfg, err = Parse(data); err == nil {
			w.cur.Store(cfg)
			w.loadedSum = sha256.Sum256(data)
		}
	}
	if err != nil {
		_ = fsw.Close()
		return nil, fmt.Errorf("tenancy: load %s: %w", abs, err)
	}
	w.logger.Info("tenants config loaded", "tenants", len(w.Current().Tenants), "sha256", shortSum(w.loadedSum))

	ctx, w.cancel = context.WithCancel(ctx)
	go w.loop(ctx, fsw)
	return w, nil
}

// Current returns the configuration in force. It is never nil and must not
// be modified.
func (w *Watcher) Current() *Config { return w.cur.Load() }

// Reloads returns how many reloads after the initial load succeeded (the
// content changed and was valid) and how many failed (unreadable or invalid;
// the same failure is counted once).
func (w *Watcher) Reloads() (ok, failed uint64) { return w.ok.Load(), w.failed.Load() }

// Changed receives a value after a successful reload. It has a buffer of
// one and sends never block, so a slow receiver sees one notification for
// several reloads; it should then read Current. Meant for one receiver.
func (w *Watcher) Changed() <-chan struct{} { return w.changed }

// Close stops watching and waits until the watch goroutine has exited.
// Current keeps returning the last configuration.
func (w *Watcher) Close() error {
	w.cancel()
	<-w.done
	return nil
}

func (w *Watcher) loop(ctx context.Context, fsw *fsnotify.Watcher) {
	defer close(w.done)
	defer fsw.Close()
	resync := time.NewTicker(resyncInterval)
	defer resync.Stop()
	settle := time.NewTimer(settleDelay)
	settle.Stop()
	pending := false
	for {
		select {
		case <-ctx.Done():
			return
		case _, ok := <-fsw.Events:
			if !ok {
				return
			}
			if !pending {
				pending = true
				settle.Reset(settleDelay)
			}
		case err, ok := <-fsw.Errors:
			if !ok {
				return
			}
			// Typically a queue overflow: events were lost, so re-read.
			w.logger.Warn("tenants config watch error; re-reading", "err", err)
			w.reload()
		case <-settle.C:
			pending = false
			w.reload()
		case <-resync.C:
			w.reload()
		}
	}
}

// reload re-reads the file and swaps in the new configuration if it changed
// and is valid.
func (w *Watcher) reload() {
	data, err := os.ReadFile(w.path)
	if err != nil {
		w.fail("read:"+err.Error(), err)
		return
	}
	sum := sha256.Sum256(data)
	if sum == w.loadedSum {
		w.lastFailure = "" // back to (or still at) the loaded version
		return
	}
	cfg, err := Parse(data)
	if err != nil {
		w.fail("parse:"+hex.EncodeToString(sum[:]), err)
		return
	}
	w.cur.Store(cfg)
	w.loadedSum = sum
	w.lastFailure = ""
	w.ok.Add(1)
	w.logger.Info("tenants config reloaded", "tenants", len(cfg.Tenants), "sha256", shortSum(sum))
	select {
	case w.changed <- struct{}{}:
	default:
	}
}

func (w *Watcher) fail(key string, err error) {
	if key == w.lastFailure {
		return
	}
	w.lastFailure = key
	w.failed.Add(1)
	w.logger.Error("tenants config reload failed; keeping the previous config", "err", err, "loaded_sha256", shortSum(w.loadedSum))
}

func shortSum(sum [sha256.Size]byte) string { return hex.EncodeToString(sum[:6]) }
