package ring

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"reflect"
	"time"

	"github.com/fsnotify/fsnotify"
)

const (
	// settleDelay coalesces the burst of events one update makes (the
	// kubelet's ConfigMap update is several creates, renames and removes).
	settleDelay = 50 * time.Millisecond
	// resyncInterval re-reads the file without events too, in case some were
	// dropped (inotify queue overflow).
	resyncInterval = time.Minute
)

// LoadFile reads and parses the ring document at path.
func LoadFile(path string) (*Ring, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("ring: %w", err)
	}
	r, err := Parse(data)
	if err != nil {
		return nil, fmt.Errorf("ring: load %s: %w", path, err)
	}
	return r, nil
}

// WatchFile keeps h current with the ring document at path until ctx is
// done, then returns nil; it returns an error only if the watch cannot be
// set up. Run it in its own goroutine, typically after a LoadFile whose
// ring was stored in h (so that a node does not start without a ring):
//
//	r, err := ring.LoadFile(path)
//	...
//	h := new(ring.Holder)
//	h.Store(r)
//	go ring.WatchFile(ctx, path, h, logger)
//
// It watches the file's directory, not the file, so that a rename over the
// file and Kubernetes' atomic swap of the ..data symlink in a mounted
// ConfigMap are both seen; after the watch is set up it reads the file once,
// so nothing that changed since LoadFile is missed. A document is put in
// force only if it is valid and its epoch is higher than the ring in force
// (or h is empty). An unreadable or invalid file, or a valid one whose epoch
// is not higher but whose content differs, is logged once and ignored: the
// ring in force stays. A nil logger discards logs.
func WatchFile(ctx context.Context, path string, h *Holder, logger *slog.Logger) error {
	if logger == nil {
		logger = slog.New(slog.DiscardHandler)
	}
	abs, err := filepath.Abs(path)
	if err != nil {
		return fmt.Errorf("ring: watch %s: %w", path, err)
	}
	fsw, err := fsnotify.NewWatcher()
	if err != nil {
		return fmt.Errorf("ring: watch %s: %w", abs, err)
	}
	defer fsw.Close()
	if err := fsw.Add(filepath.Dir(abs)); err != nil {
		return fmt.Errorf("ring: watch %s: %w", filepath.Dir(abs), err)
	}
	w := &fileWatch{path: abs, holder: h, logger: logger.With("path", abs)}
	w.reload()

	resync := time.NewTicker(resyncInterval)
	defer resync.Stop()
	settle := time.NewTimer(settleDelay)
	settle.Stop()
	pending := false
	for {
		select {
		case <-ctx.Done():
			return nil
		case _, ok := <-fsw.Events:
			if !ok {
				return nil
			}
			if !pending {
				pending = true
				settle.Reset(settleDelay)
			}
		case err, ok := <-fsw.Errors:
			if !ok {
				return nil
			}
			// Typically a queue overflow: events were lost, so re-read.
			w.logger.Warn("ring file watch error; re-reading", "err", err)
			w.reload()
		case <-settle.C:
			pending = false
			w.reload()
		case <-resync.C:
			w.reload()
		}
	}
}

type fileWatch struct {
	path   string
	holder *Holder
	logger *slog.Logger
	// seen is the content last dealt with (put in force or reported), so
	// that each content is parsed and reported once; readErr likewise for
	// read errors.
	seen    [sha256.Size]byte
	readErr string
}

func (w *fileWatch) reload() {
	data, err := os.ReadFile(w.path)
	if err != nil {
		if err.Error() != w.readErr {
			w.readErr = err.Error()
			w.logger.Error("ring file unreadable; keeping the ring in force", "err", err, "epoch", epochOf(w.holder.Load()))
		}
		return
	}
	w.readErr = ""
	sum := sha256.Sum256(data)
	if sum == w.seen {
		return
	}
	w.seen = sum
	short := hex.EncodeToString(sum[:6])

	r, err := Parse(data)
	if err != nil {
		w.logger.Error("ring file invalid; keeping the ring in force", "err", err, "epoch", epochOf(w.holder.Load()), "sha256", short)
		return
	}
	cur := w.holder.Load()
	if w.holder.StoreIfNewer(r) {
		active := 0
		for _, m := range r.spec.Members {
			if m.State == StateActive {
				active++
			}
		}
		w.logger.Info("ring updated", "epoch", r.Epoch(), "previousEpoch", epochOf(cur),
			"members", len(r.spec.Members), "active", active, "sha256", short)
		return
	}
	cur = w.holder.Load()
	if reflect.DeepEqual(cur.spec, r.spec) {
		w.logger.Debug("ring file rewritten with the ring in force", "epoch", cur.Epoch(), "sha256", short)
		return
	}
	w.logger.Warn("ring file epoch is not higher than the ring in force but its content differs; ignored",
		"fileEpoch", r.Epoch(), "epoch", cur.Epoch(), "sha256", short)
}

func epochOf(r *Ring) int64 {
	if r == nil {
		return -1
	}
	return r.Epoch()
}
