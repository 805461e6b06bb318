package ring

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"reflect"

	"github.com/distcache/distcache/internal/filewatch"
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
	w := &fileWatch{holder: h, what: "ring file"}
	fw, err := filewatch.New(path, filewatch.Options{Apply: w.apply, OnError: w.report, Logger: logger})
	if err != nil {
		return fmt.Errorf("ring: %w", err)
	}
	w.logger = logger.With("path", fw.Path())
	fw.Run(ctx)
	return nil
}

type fileWatch struct {
	holder *Holder
	logger *slog.Logger
	what   string // "ring file", or where an Updater's documents come from
}

// Updater puts ring documents that come from elsewhere than a file (the
// node's watch of its ring ConfigMap through the API server) into a Holder
// with WatchFile's rules: a document is put in force only if it is valid and
// its epoch is higher than the ring in force (or the holder is empty);
// otherwise the ring in force stays and the reason is logged.
type Updater struct{ w fileWatch }

// NewUpdater returns an Updater of h. what names the source in logs (for
// example "ring ConfigMap"); a nil logger discards logs.
func NewUpdater(h *Holder, what string, logger *slog.Logger) *Updater {
	if logger == nil {
		logger = slog.New(slog.DiscardHandler)
	}
	return &Updater{w: fileWatch{holder: h, logger: logger, what: what}}
}

// Update puts the ring document data in force if it is valid and newer.
// Data equal to the ring in force is not an error. Any other document is
// logged and returned as an error, and the ring in force stays. Calls must
// not overlap.
func (u *Updater) Update(data []byte) error {
	err := u.w.apply(data)
	if err != nil {
		u.w.report(err)
	}
	return err
}

// invalidError is a ring file that does not parse.
type invalidError struct {
	err error
	sum string
}

func (e *invalidError) Error() string { return e.err.Error() }

// staleError is a valid ring file whose epoch is not higher than the ring
// in force and whose content differs from it.
type staleError struct {
	fileEpoch, epoch int64
	sum              string
}

func (e *staleError) Error() string {
	return fmt.Sprintf("ring document epoch %d is not higher than the ring in force (epoch %d)", e.fileEpoch, e.epoch)
}

// apply puts the ring document data in force if it is newer. Rewriting the
// ring in force is not an error.
func (w *fileWatch) apply(data []byte) error {
	sum := sha256.Sum256(data)
	short := hex.EncodeToString(sum[:6])
	r, err := Parse(data)
	if err != nil {
		return &invalidError{err: err, sum: short}
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
		return nil
	}
	cur = w.holder.Load()
	if reflect.DeepEqual(cur.spec, r.spec) {
		w.logger.Debug(w.what+" rewritten with the ring in force", "epoch", cur.Epoch(), "sha256", short)
		return nil
	}
	return &staleError{fileEpoch: r.Epoch(), epoch: cur.Epoch(), sum: short}
}

// report logs why a ring file was not put in force.
func (w *fileWatch) report(err error) {
	var invalid *invalidError
	var stale *staleError
	switch {
	case errors.As(err, &stale):
		w.logger.Warn(w.what+" epoch is not higher than the ring in force but its content differs; ignored",
			"fileEpoch", stale.fileEpoch, "epoch", stale.epoch, "sha256", stale.sum)
	case errors.As(err, &invalid):
		w.logger.Error(w.what+" invalid; keeping the ring in force", "err", invalid.err, "epoch", epochOf(w.holder.Load()), "sha256", invalid.sum)
	default:
		w.logger.Error(w.what+" unreadable; keeping the ring in force", "err", err, "epoch", epochOf(w.holder.Load()))
	}
}

func epochOf(r *Ring) int64 {
	if r == nil {
		return -1
	}
	return r.Epoch()
}
