package node

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/distcache/distcache/internal/chunk"
	"github.com/distcache/distcache/internal/metrics"
	"github.com/distcache/distcache/internal/nodeapi"
	"github.com/distcache/distcache/internal/ring"
	"github.com/distcache/distcache/internal/writeback"
)

// The held objects' API between nodes (nodeapi.HeldPath), peers only:
//
//	PUT    /v1/held/{bucket}/{key}?version=V   keep this copy (headers: heldHeaders)
//	GET    /v1/held/{bucket}/{key}?etag=E      bytes of the version held (Range)
//	DELETE /v1/held/{bucket}/{key}?version=V   drop the copy (S3 has it, or the write failed)

const (
	headerHeldEntry = "X-Distcache-Held-Entry" // the writeback.Entry, JSON
	// headerHeldETag answers a copy with the ETag its holder computed:
	// a copy streamed as it arrives is sent before its ETag is known.
	headerHeldETag = "X-Distcache-Held-Etag"
)

// handleHeldPut keeps a copy of a held version another node took.
func (s *Server) handleHeldPut(w http.ResponseWriter, r *http.Request) {
	q, e, ok := s.beginHeld(w, r, opPut)
	if !ok {
		return
	}
	if s.cfg.Journal == nil {
		s.fail(w, opPut, q.tenant.Name, q.start, errNoJournal)
		return
	}
	if e.Op == writeback.OpPut && r.ContentLength != e.Size {
		s.fail(w, opPut, q.tenant.Name, q.start, newError(http.StatusBadRequest, CodeBadRequest, "body length is not the entry's size"))
		return
	}
	stored, err := s.cfg.Journal.Write(e, r.Body)
	if err != nil {
		status, code := http.StatusInternalServerError, CodeInternal
		switch {
		case errors.Is(err, writeback.ErrFull):
			s.countHeldFull()
			status, code = http.StatusServiceUnavailable, CodeSlowDown
		case errors.Is(err, writeback.ErrBadBody):
			status, code = http.StatusBadRequest, CodeBadRequest
		}
		s.fail(w, opPut, q.tenant.Name, q.start, newError(status, code, "keeping the copy: "+err.Error()))
		return
	}
	// What this node cached of the key (it may have been the key's
	// metadata owner before a ring change) is of an older version now.
	// The owner waits for its gateways, as for a write-through; a copy
	// does not wait again.
	s.invalidate(q.obj)
	if stored.Version == e.Version {
		w.Header().Set(headerHeldETag, stored.ETag)
	}
	w.WriteHeader(http.StatusNoContent)
	s.observe(opPut, q.tenant.Name, metrics.ResultHeld, 0, q.start)
}

// handleHeldGet serves bytes of the held version of the given ETag.
func (s *Server) handleHeldGet(w http.ResponseWriter, r *http.Request) {
	q, ok := s.beginPeer(w, r, opGetChunk)
	if !ok {
		return
	}
	var e writeback.Entry
	if s.cfg.Journal != nil {
		e, ok = s.cfg.Journal.Get(heldName(q.obj))
	}
	if !ok || e.Op != writeback.OpPut || e.ETag != r.URL.Query().Get("etag") {
		s.fail(w, opGetChunk, q.tenant.Name, q.start, newError(http.StatusNotFound, CodeNotCached, "this node holds no such version"))
		return
	}
	f, err := s.cfg.Journal.OpenBody(e)
	if err != nil {
		s.fail(w, opGetChunk, q.tenant.Name, q.start, newError(http.StatusNotFound, CodeNotCached, "the version is no longer held"))
		return
	}
	defer f.Close()
	w.Header().Set("ETag", e.ETag)
	http.ServeContent(w, r, "", time.Time{}, f) // Range, from the file
	s.observe(opGetChunk, q.tenant.Name, metrics.ResultHeld, 0, q.start)
}

// handleHeldDrop drops a held copy; ?applied: its holder persisted it
// (Journal.Applied keeps a delete as a tombstone).
func (s *Server) handleHeldDrop(w http.ResponseWriter, r *http.Request) {
	q, e, ok := s.beginHeld(w, r, opDelete)
	if !ok {
		return
	}
	switch {
	case s.cfg.Journal == nil:
	case r.URL.Query().Has("applied"):
		s.cfg.Journal.Applied(e)
	default:
		s.cfg.Journal.Drop(e)
	}
	w.WriteHeader(http.StatusNoContent)
	s.observe(opDelete, q.tenant.Name, metrics.ResultHeld, 0, q.start)
}

// beginPeer is begin for the calls only peers may make.
func (s *Server) beginPeer(w http.ResponseWriter, r *http.Request, op string) (request, bool) {
	q, ok := s.begin(w, r, op)
	if !ok {
		return q, false
	}
	if !q.peer {
		s.fail(w, op, q.tenant.Name, q.start, newError(http.StatusForbidden, CodeAccessDenied, "only cache nodes may keep or read held copies"))
		return q, false
	}
	return q, true
}

// beginHeld is beginPeer with the entry the request carries, checked to
// name the request's object.
func (s *Server) beginHeld(w http.ResponseWriter, r *http.Request, op string) (request, writeback.Entry, bool) {
	q, ok := s.beginPeer(w, r, op)
	if !ok {
		return q, writeback.Entry{}, false
	}
	var e writeback.Entry
	if err := json.Unmarshal([]byte(r.Header.Get(headerHeldEntry)), &e); err != nil || heldObject(e.Name) != q.obj || e.Version == 0 {
		s.fail(w, op, q.tenant.Name, q.start, newError(http.StatusBadRequest, CodeBadRequest, "missing or malformed "+headerHeldEntry))
		return q, e, false
	}
	return q, e, true
}

// putHeld sends a copy of version e to m.
// It returns the ETag m computed of its copy ("" from a node too old to
// say).
func (p *Peers) putHeld(ctx context.Context, m ring.Member, tenant string, e writeback.Entry, body io.Reader) (string, error) {
	if e.Size == 0 {
		body = http.NoBody // else the client sends a file body of length 0 as one of unknown length
	}
	h, err := p.sendEntry(ctx, http.MethodPut, m, tenant, e, nil, body, e.Size)
	return h.Get(headerHeldETag), err
}

// dropHeld tells m to drop its copy of version e; applied: because S3 has
// applied it (a delete is then kept as a tombstone, Journal.Applied).
func (p *Peers) dropHeld(ctx context.Context, m ring.Member, tenant string, e writeback.Entry, applied bool) error {
	var q url.Values
	if applied {
		q = url.Values{"applied": {""}}
	}
	_, err := p.sendEntry(ctx, http.MethodDelete, m, tenant, e, q, http.NoBody, 0)
	return err
}

// sendEntry sends a request about held version e, with e in its header,
// query q and a body of size bytes, to m, expecting 204 No Content
// (sendNoContent).
func (p *Peers) sendEntry(ctx context.Context, method string, m ring.Member, tenant string, e writeback.Entry, q url.Values, body io.Reader, size int64) (http.Header, error) {
	entry, err := json.Marshal(e)
	if err != nil {
		return nil, err
	}
	return p.sendNoContent(ctx, method, m, tenant, nodeapi.HeldPath(e.Bucket, e.Key), q, body, func(req *http.Request) {
		req.Header.Set(headerHeldEntry, string(entry))
		req.ContentLength = size
	})
}

// getHeld reads len(dst) bytes at off of the version etag of o that m holds.
func (p *Peers) getHeld(ctx context.Context, m ring.Member, tenant string, o chunk.Object, etag string, off int64, dst []byte) error {
	resp, err := p.send(ctx, http.MethodGet, m, tenant, nodeapi.HeldPath(o.Bucket, o.Key), url.Values{"etag": {etag}}, nil, func(req *http.Request) {
		req.Header.Set("Range", "bytes="+strconv.FormatInt(off, 10)+"-"+strconv.FormatInt(off+int64(len(dst))-1, 10))
	})
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusPartialContent && !(resp.StatusCode == http.StatusOK && off == 0) {
		return answerError(resp)
	}
	if _, err := io.ReadFull(resp.Body, dst); err != nil {
		return fmt.Errorf("holder %s: short body: %w", m.Name, err)
	}
	return nil
}

// PersistsHeld reports whether this node sends held version e of n to S3:
// of its holders, it is the first in n's placement order that is still an
// active member (the others keep their copies until told S3 has it).
func (s *Server) PersistsHeld(e writeback.Entry) bool {
	r := s.currentRing()
	if r == nil {
		return true
	}
	if _, ok := s.adopted.Load(adoptedKey(e)); ok {
		return true // its persisting holder lost it (checkHeldCopies)
	}
	for _, m := range r.Candidates(nodeapi.MetaID(heldObject(e.Name)), 0) {
		for _, h := range e.Holders {
			if h == m.Name {
				return h == s.cfg.Self
			}
		}
	}
	return false // no holder is active: the first to come back persists it
}

// HeldPersisted is told that S3 has held version e (etag: S3's for a put):
// the object becomes an ordinary cached one (its metadata S3's, cached at
// its owner; its chunks, cached under the held ETag, still valid when S3
// gave the same one), and the other holders drop their copies.
func (s *Server) HeldPersisted(e writeback.Entry, etag string) {
	ctx := context.Background()
	o := heldObject(e.Name)
	t, ok := s.tenants.Current().Tenant(e.Tenant)
	if !ok {
		return
	}
	c := caller{tenant: t}
	if e.Op == writeback.OpDelete || etag != e.ETag {
		// A multipart upload's ETag is not the body's MD5: the held
		// version's chunks and what gateways keep of it go.
		s.invalidateObjects(ctx, c, o)
	}
	if e.Op == writeback.OpPut && s.ownsMeta(o) {
		h := e.StoredHeaders()
		if strings.Contains(etag, "-") {
			// Uploaded in parts: S3 keeps a checksum of the parts', not this.
			h = h.WithoutChecksum()
		}
		m := chunk.Meta{Size: e.Size, ETag: etag, ContentType: e.ContentType, Headers: h, LastModified: e.LastModified, FetchedAt: s.cfg.Now()}
		if err := s.store.PutMeta(o, m); err != nil {
			s.storeFailed("put_meta", err)
		}
	}
	s.dropOtherCopies(ctx, c, e)
}

// HeldSuperseded is writeback.Persister.Superseded: version e, not sent
// (or undone), is superseded by a newer one held elsewhere; its other
// holders drop their copies rather than send them later.
func (s *Server) HeldSuperseded(e writeback.Entry) {
	t, ok := s.tenants.Current().Tenant(e.Tenant)
	if !ok {
		return
	}
	s.dropOtherCopies(context.Background(), caller{tenant: t}, e)
}

// dropOtherCopies tells the other holders of e that it is done with: the
// holders it was written to, and those the ring wants now (a handoff may
// have copied it there meanwhile). A delete is kept there as a tombstone.
func (s *Server) dropOtherCopies(ctx context.Context, c caller, e writeback.Entry) {
	r := s.currentRing()
	if r == nil {
		return
	}
	for _, h := range slices.Compact(slices.Sorted(slices.Values(append(slices.Clone(e.Holders), wantedHolders(r, e)...)))) {
		if h != s.cfg.Self {
			s.dropHeldAt(ctx, r, c, h, e, true)
		}
	}
}
