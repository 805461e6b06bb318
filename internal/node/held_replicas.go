package node

// How a held write reaches every holder: the journal here and the copies
// there, at once, and what a failure on either side undoes.

import (
	"bytes"
	"context"
	"crypto/md5"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"net/http"
	"slices"
	"strings"
	"sync"

	"github.com/distcache/distcache/internal/ring"
	"github.com/distcache/distcache/internal/writeback"
)

// holdVersion writes version e to this node's journal and copies it to the
// other holders; it returns once every holder has it on disk. If one
// cannot take it, the copies made are dropped and the write fails.
func (s *Server) holdVersion(ctx context.Context, c caller, e writeback.Entry, body io.Reader) (writeback.Entry, *apiError) {
	others := slices.DeleteFunc(slices.Clone(e.Holders), func(n string) bool { return n == s.cfg.Self })
	switch {
	case len(others) > 0 && e.Size <= heldInMemoryBytes:
		return s.holdEverywhere(ctx, c, e, body, others)
	case len(others) > 0:
		return s.holdStreaming(ctx, c, e, body, others)
	}
	stored, err := s.cfg.Journal.Write(e, body)
	return stored, s.journalFailed(e, err)
}

// holdStreaming holds a large version on this node and the other holders
// at once: the body goes to each of them as it arrives, while this node
// writes its own copy, so a copy costs no second pass over the body. The
// ETag is known only at the end: each holder answers the one it computed,
// which must be this node's.
func (s *Server) holdStreaming(ctx context.Context, c caller, e writeback.Entry, body io.Reader, others []string) (writeback.Entry, *apiError) {
	r := s.currentRing()
	readers := make([]*io.PipeReader, len(others))
	fan := &fanOut{ws: make([]*io.PipeWriter, len(others)), failed: make([]bool, len(others))}
	for i := range others {
		readers[i], fan.ws[i] = io.Pipe()
	}
	errs := make([]error, len(others))
	etags := make([]string, len(others))
	var wg sync.WaitGroup
	for i, name := range others {
		wg.Go(func() {
			etags[i], errs[i] = s.sendHeldTagged(ctx, r, c, name, e, readers[i])
			readers[i].CloseWithError(io.ErrClosedPipe) // a holder that stopped reading holds back nobody
		})
	}
	stored, err := s.cfg.Journal.Write(e, io.TeeReader(body, fan))
	for _, w := range fan.ws {
		if err != nil {
			w.CloseWithError(err) // the holders' copies are incomplete: they fail
		} else {
			w.Close()
		}
	}
	wg.Wait()
	for i, tag := range etags {
		if err == nil && errs[i] == nil && tag != "" && tag != stored.ETag && stored.Version == e.Version {
			errs[i] = fmt.Errorf("its copy has ETag %s, this node's %s", tag, stored.ETag)
		}
	}
	return s.heldEverywhere(ctx, r, c, e, stored, err, others, errs)
}

// fanOut writes to every holder's pipe that still reads; a holder that
// fails drops out (its error is its send's), the others go on.
type fanOut struct {
	ws     []*io.PipeWriter
	failed []bool
}

// heldInMemoryBytes is the largest body holdEverywhere reads into memory.
const heldInMemoryBytes = 256 << 10

// holdEverywhere holds a small version (or a delete) on this node and the
// other holders at once: its body is read into memory first, so the
// copies do not wait for this node's journal; each holder has its copy on
// disk before it answers, this node before this returns, as holdVersion.
func (s *Server) holdEverywhere(ctx context.Context, c caller, e writeback.Entry, body io.Reader, others []string) (writeback.Entry, *apiError) {
	var data []byte
	if e.Op == writeback.OpPut {
		data = make([]byte, e.Size+1) // one more, to see a body longer than its size
		n, err := io.ReadFull(body, data)
		if writerBodyMismatch(err) { // the writer's, checked in handlePut
			return writeback.Entry{}, asAPIError(err)
		}
		if err != nil && !errors.Is(err, io.ErrUnexpectedEOF) && !errors.Is(err, io.EOF) {
			return writeback.Entry{}, newError(http.StatusBadRequest, CodeBadRequest, "reading the body: "+err.Error())
		}
		if int64(n) != e.Size {
			return writeback.Entry{}, s.journalFailed(e, writeback.ErrBadBody)
		}
		data = data[:n]
		if e.ETag == "" { // the ETag every holder checks its copy against
			sum := md5.Sum(data)
			e.ETag = `"` + hex.EncodeToString(sum[:]) + `"`
		}
	}
	r := s.currentRing()
	errs := make([]error, len(others))
	var wg sync.WaitGroup
	for i, name := range others {
		wg.Go(func() { errs[i] = s.sendHeld(ctx, r, c, name, e, bytes.NewReader(data)) })
	}
	stored, err := s.cfg.Journal.Write(e, bytes.NewReader(data))
	wg.Wait()
	return s.heldEverywhere(ctx, r, c, e, stored, err, others, errs)
}

// heldEverywhere ends a write of e held on this node (its journal's
// answer: stored, err) and on others at once (their errs): a failure here
// drops the copies the others took; a failure there, copiesTaken.
func (s *Server) heldEverywhere(ctx context.Context, r *ring.Ring, c caller, e, stored writeback.Entry, err error,
	others []string, errs []error) (writeback.Entry, *apiError) {
	if aerr := s.journalFailed(e, err); aerr != nil {
		for i, name := range others {
			if errs[i] == nil {
				s.dropHeldAt(ctx, r, c, name, e, false)
			}
		}
		return stored, aerr
	}
	if stored.Version != e.Version {
		return stored, nil // a newer version came first (cannot happen at the owner, which numbers them)
	}
	return stored, s.copiesTaken(ctx, r, c, stored, others, errs)
}

// copiesTaken ends a held write whose copies to others ended with errs:
// nil if every holder took it; else the copies made, this node's
// included, are dropped and the write fails.
func (s *Server) copiesTaken(ctx context.Context, r *ring.Ring, c caller, stored writeback.Entry, others []string, errs []error) *apiError {
	var failed []string
	for i, err := range errs {
		if err != nil {
			failed = append(failed, others[i])
			if pe := (*peerError)(nil); !errors.As(err, &pe) || pe.status >= 500 {
				s.peers.down.MarkDown(others[i]) // a refusal (4xx) is no sign the peer is down
			}
			s.log.Warn("a holder could not take a held write", "peer", others[i], "object", stored.String(), "err", err)
		}
	}
	if len(failed) == 0 {
		return nil
	}
	s.cfg.Journal.Drop(stored)
	for i, name := range others {
		if errs[i] == nil {
			s.dropHeldAt(ctx, r, c, name, stored, false)
		}
	}
	return newError(http.StatusServiceUnavailable, CodeSlowDown,
		"cache node "+strings.Join(failed, ", ")+" could not keep a copy of the write; retry")
}

// copyHeld sends version e to holder name, from this node's journal.
func (s *Server) copyHeld(ctx context.Context, r *ring.Ring, c caller, name string, e writeback.Entry) error {
	var body io.ReadCloser = http.NoBody
	if e.Op == writeback.OpPut {
		f, err := s.cfg.Journal.OpenBody(e)
		if err != nil {
			return err
		}
		body = f
	}
	defer body.Close()
	return s.sendHeld(ctx, r, c, name, e, body)
}

// sendHeld sends version e with its body to holder name.
func (s *Server) sendHeld(ctx context.Context, r *ring.Ring, c caller, name string, e writeback.Entry, body io.Reader) error {
	_, err := s.sendHeldTagged(ctx, r, c, name, e, body)
	return err
}

// sendHeldTagged is sendHeld, returning the ETag the holder computed of
// its copy ("" from a node too old to say).
func (s *Server) sendHeldTagged(ctx context.Context, r *ring.Ring, c caller, name string, e writeback.Entry, body io.Reader) (string, error) {
	m, ok := r.Member(name)
	if !ok {
		return "", errors.New("not in the ring")
	}
	etag, err := s.peers.putHeld(ctx, m, c.tenant.Name, e, body)
	result := "ok"
	if err != nil {
		result = "error"
	}
	s.metrics.PeerRequests.WithLabelValues("held_copy", result).Inc()
	return etag, err
}

// dropHeldAt tells holder name that version e is no longer to be kept.
func (s *Server) dropHeldAt(ctx context.Context, r *ring.Ring, c caller, name string, e writeback.Entry, applied bool) {
	m, ok := r.Member(name)
	if !ok {
		return
	}
	result := "ok"
	if err := s.peers.dropHeld(context.WithoutCancel(ctx), m, c.tenant.Name, e, applied); err != nil {
		result = "error"
		s.log.Debug("telling a holder to drop its copy failed", "peer", name, "object", e.String(), "err", err)
	}
	s.metrics.PeerRequests.WithLabelValues("held_drop", result).Inc()
}
