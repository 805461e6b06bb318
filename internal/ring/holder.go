package ring

import (
	"sync"
	"sync/atomic"
)

// Holder holds the ring in force. Load is one atomic read; Store and
// StoreIfNewer replace the ring whole and wake everyone waiting on Changed.
// The zero Holder is empty (Load returns nil) and ready to use.
type Holder struct {
	p atomic.Pointer[Ring]

	mu      sync.Mutex // serializes stores and guards changed
	changed chan struct{}
}

// Load returns the ring in force, nil before the first Store.
func (h *Holder) Load() *Ring { return h.p.Load() }

// Store puts r in force, whatever its epoch, and closes the channel
// Changed returned. r must not be nil.
func (h *Holder) Store(r *Ring) {
	if r == nil {
		panic("ring: Holder.Store(nil)")
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	h.storeLocked(r)
}

// StoreIfNewer puts r in force if the holder is empty or r's epoch is
// higher than the ring in force, and reports whether it did. r must not be
// nil.
func (h *Holder) StoreIfNewer(r *Ring) bool {
	if r == nil {
		panic("ring: Holder.StoreIfNewer(nil)")
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	if cur := h.p.Load(); cur != nil && r.Epoch() <= cur.Epoch() {
		return false
	}
	h.storeLocked(r)
	return true
}

func (h *Holder) storeLocked(r *Ring) {
	h.p.Store(r)
	if h.changed != nil {
		close(h.changed)
		h.changed = nil
	}
}

// Changed returns a channel that is closed at the next Store (or
// successful StoreIfNewer). Take the channel before Load so that no change
// between the two is missed:
//
//	for {
//		ch := h.Changed()
//		use(h.Load())
//		select {
//		case <-ch:
//		case <-ctx.Done():
//			return
//		}
//	}
//
// Any number of goroutines may wait on it.
func (h *Holder) Changed() <-chan struct{} {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.changed == nil {
		h.changed = make(chan struct{})
	}
	return h.changed
}
