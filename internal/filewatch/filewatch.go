// Package filewatch keeps something current with a file's content.
//
// It watches the file's directory, not the file: writers that replace the
// file by rename, and Kubernetes' atomic swap of the ..data symlink in a
// mounted ConfigMap or Secret, both leave a watch on the file itself pointing
// at a deleted inode. Any event in the directory leads, after a short
// settling delay that coalesces the burst one update makes, to re-reading
// the file; it is also re-read periodically, in case events were lost. The
// content is handed to the caller only when it differs from the content last
// applied successfully, and each failure is reported once.
package filewatch

import (
	"context"
	"crypto/sha256"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"time"

	"github.com/fsnotify/fsnotify"
)

const (
	// DefaultSettle is Options.Settle when unset.
	DefaultSettle = 50 * time.Millisecond
	// DefaultResync is Options.Resync when unset.
	DefaultResync = time.Minute
)

// Options configure a Watcher.
type Options struct {
	// Apply is handed the file's content when it differs from the content
	// of the last successful Apply (every content, until one succeeds). An
	// error means the content was not applied: it is handed again at the
	// next re-read, and the error is reported. Required.
	Apply func(data []byte) error
	// OnError is told why a re-read applied nothing: the error of
	// os.ReadFile, or Apply's error unchanged. Each failure is reported once
	// (a read error by its message, an Apply error by the content) until a
	// re-read finds the content applied or applies one. Optional.
	OnError func(err error)
	// Logger gets a warning on a watch error (typically a queue overflow,
	// after which the file is re-read). Nil discards it.
	Logger *slog.Logger
	// Settle is how long after the first event of a burst the file is
	// re-read; DefaultSettle if zero.
	Settle time.Duration
	// Resync is how often the file is re-read without events; DefaultResync
	// if zero.
	Resync time.Duration
}

// Watcher watches one file. Its methods must not be called concurrently.
type Watcher struct {
	path string
	opts Options
	fsw  *fsnotify.Watcher

	applied     bool
	appliedSum  [sha256.Size]byte
	lastFailure string // identifies the failure last reported
}

// New sets up the watch on the directory of path, so that no change after it
// returns is missed. It neither reads the file nor calls Apply; call Run, and
// Load first if the content is needed before the caller goes on.
func New(path string, opts Options) (*Watcher, error) {
	if opts.Apply == nil {
		panic("filewatch: Options.Apply is nil")
	}
	if opts.Logger == nil {
		opts.Logger = slog.New(slog.DiscardHandler)
	}
	if opts.Settle <= 0 {
		opts.Settle = DefaultSettle
	}
	if opts.Resync <= 0 {
		opts.Resync = DefaultResync
	}
	abs, err := filepath.Abs(path)
	if err != nil {
		return nil, fmt.Errorf("watch %s: %w", path, err)
	}
	fsw, err := fsnotify.NewWatcher()
	if err != nil {
		return nil, fmt.Errorf("watch %s: %w", abs, err)
	}
	if err := fsw.Add(filepath.Dir(abs)); err != nil {
		_ = fsw.Close()
		return nil, fmt.Errorf("watch %s: %w", filepath.Dir(abs), err)
	}
	opts.Logger = opts.Logger.With("path", abs)
	return &Watcher{path: abs, opts: opts, fsw: fsw}, nil
}

// Path returns the absolute path of the watched file.
func (w *Watcher) Path() string { return w.path }

// Load reads the file and hands it to Apply if it changed, like a re-read,
// but returns the read or Apply error instead of reporting it. It is meant
// for a first load whose failure is fatal to the caller, before Run.
func (w *Watcher) Load() error {
	_, err := w.load()
	return err
}

// Run reads the file (unless Load applied it: the watch was already set up,
// so nothing since was missed), then re-reads it whenever it may have
// changed, until ctx is done or the watch breaks; it then releases the watch.
func (w *Watcher) Run(ctx context.Context) {
	defer w.fsw.Close()
	if !w.applied {
		w.reload()
	}

	resync := time.NewTicker(w.opts.Resync)
	defer resync.Stop()
	settle := time.NewTimer(w.opts.Settle)
	settle.Stop()
	pending := false
	for {
		select {
		case <-ctx.Done():
			return
		case _, ok := <-w.fsw.Events:
			if !ok {
				return
			}
			if !pending {
				pending = true
				settle.Reset(w.opts.Settle)
			}
		case err, ok := <-w.fsw.Errors:
			if !ok {
				return
			}
			// Typically a queue overflow: events were lost, so re-read.
			w.opts.Logger.Warn("file watch error; re-reading", "err", err)
			w.reload()
		case <-settle.C:
			pending = false
			w.reload()
		case <-resync.C:
			w.reload()
		}
	}
}

// Close releases the watch of a Watcher whose Run is not called. Calling it
// again, or after Run, does nothing.
func (w *Watcher) Close() error { return w.fsw.Close() }

func (w *Watcher) reload() {
	failure, err := w.load()
	if err == nil {
		w.lastFailure = ""
		return
	}
	if failure == w.lastFailure {
		return
	}
	w.lastFailure = failure
	if w.opts.OnError != nil {
		w.opts.OnError(err)
	}
}

// load reads the file and applies it if it changed. On failure it returns
// the error and a key that identifies the failure.
func (w *Watcher) load() (failure string, err error) {
	data, err := os.ReadFile(w.path)
	if err != nil {
		return "read:" + err.Error(), err
	}
	sum := sha256.Sum256(data)
	if w.applied && sum == w.appliedSum {
		return "", nil
	}
	if err := w.opts.Apply(data); err != nil {
		return "apply:" + string(sum[:]), err
	}
	w.applied, w.appliedSum = true, sum
	return "", nil
}
