package tenancy

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"log/slog"
	"sync"
	"sync/atomic"

	"github.com/distcache/distcache/internal/filewatch"
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
	logger *slog.Logger

	cur     atomic.Pointer[Config]
	ok      atomic.Uint64
	failed  atomic.Uint64
	changed chan struct{}

	cancel context.CancelFunc
	done   chan struct{}

	// mu serializes applying a version, from the file or from Update.
	mu        sync.Mutex
	loadedSum [sha256.Size]byte
	// hooks run on every reload, between the swap and the count (OnReload).
	hooks []func(old, cur *Config)
}

// OnReload registers f to run on every successful reload after the new
// configuration is in force and before the reload is logged and counted:
// once Reloads has moved, f's effects are done. f may take its time (the
// node makes the gateways forget what they keep of a changed tenant, up to
// a metadata lease); reloads wait for it. Register before reloads happen.
func (w *Watcher) OnReload(f func(old, cur *Config)) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.hooks = append(w.hooks, f)
}

// Watch loads the tenants file at path, failing if it cannot be read or is
// invalid, then keeps it current until ctx is done or Close is called. A nil
// logger discards logs.
func Watch(ctx context.Context, path string, logger *slog.Logger) (*Watcher, error) {
	if logger == nil {
		logger = slog.New(slog.DiscardHandler)
	}
	w := &Watcher{
		changed: make(chan struct{}, 1),
		done:    make(chan struct{}),
	}
	// Watch before the first read, so a change right after it is not lost.
	fw, err := filewatch.New(path, filewatch.Options{Apply: w.apply, OnError: w.fail, Logger: logger})
	if err != nil {
		return nil, fmt.Errorf("tenancy: %w", err)
	}
	w.logger = logger.With("path", fw.Path())
	if err := fw.Load(); err != nil {
		_ = fw.Close()
		return nil, fmt.Errorf("tenancy: load %s: %w", fw.Path(), err)
	}

	ctx, w.cancel = context.WithCancel(ctx)
	go func() {
		defer close(w.done)
		fw.Run(ctx)
	}()
	return w, nil
}

// Current returns the configuration in force. It is never nil and must not
// be modified.
func (w *Watcher) Current() *Config { return w.cur.Load() }

// Reloads returns how many reloads after the initial load succeeded (the
// content changed and was valid) and how many failed (unreadable or invalid;
// the same failure is counted once). A reload is counted after its
// effects: once a count has moved, the reload's log line is written and,
// for a successful one, Current returns its configuration (or a later one).
// Only the Changed notification comes after the count.
func (w *Watcher) Reloads() (ok, failed uint64) { return w.ok.Load(), w.failed.Load() }

// Changed receives a value after a successful reload. It has a buffer of
// one and sends never block, so a slow receiver sees one notification for
// several reloads; it should then read Current. Meant for one receiver.
func (w *Watcher) Changed() <-chan struct{} { return w.changed }

// Close stops watching the file and waits until the watch goroutine has
// exited. Current keeps returning the last configuration, and Update still
// works: a node that follows its tenants Secret through the API server
// closes the file watch once the API has delivered the Secret, so that a
// kubelet's late copy of an older version cannot replace a newer one.
func (w *Watcher) Close() error {
	w.cancel()
	<-w.done
	return nil
}

// Update puts the configuration in data in force if it is valid, as a
// reload of the file would: content identical to the loaded version changes
// nothing, an invalid one is logged and counted as a failed reload (each
// time Update is called with it) and the previous configuration stays. It
// is how versions that come from elsewhere than the file (the API server)
// are fed in; it may be called concurrently with the file watch.
func (w *Watcher) Update(data []byte) error {
	w.mu.Lock()
	same := w.loadedSum == sha256.Sum256(data)
	w.mu.Unlock()
	if same {
		return nil
	}
	if err := w.apply(data); err != nil {
		w.fail(err)
		return err
	}
	return nil
}

// apply puts the configuration in data in force if it is valid. filewatch
// calls it only for content that differs from the loaded version. The order
// is what Reloads and Changed promise: swap, hooks, log, count, notify.
func (w *Watcher) apply(data []byte) error {
	w.mu.Lock()
	defer w.mu.Unlock()
	cfg, err := Parse(data)
	if err != nil {
		return err
	}
	old := w.cur.Swap(cfg)
	w.loadedSum = sha256.Sum256(data)
	if old == nil {
		w.logger.Info("tenants config loaded", "tenants", len(cfg.Tenants), "sha256", shortSum(w.loadedSum))
		return nil
	}
	for _, f := range w.hooks {
		f(old, cfg)
	}
	w.logger.Info("tenants config reloaded", "tenants", len(cfg.Tenants), "sha256", shortSum(w.loadedSum))
	w.ok.Add(1)
	select {
	case w.changed <- struct{}{}:
	default:
	}
	return nil
}

// fail logs and then counts a failed reload; filewatch reports each failure
// once.
func (w *Watcher) fail(err error) {
	w.mu.Lock()
	sum := w.loadedSum
	w.mu.Unlock()
	w.logger.Error("tenants config reload failed; keeping the previous config", "err", err, "loaded_sha256", shortSum(sum))
	w.failed.Add(1)
}

func shortSum(sum [sha256.Size]byte) string { return hex.EncodeToString(sum[:6]) }
