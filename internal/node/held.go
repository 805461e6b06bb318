package node

import (
	"context"
	"errors"
	"io"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/distcache/distcache/internal/chunk"
	"github.com/distcache/distcache/internal/metrics"
	"github.com/distcache/distcache/internal/nodeapi"
	"github.com/distcache/distcache/internal/ring"
	"github.com/distcache/distcache/internal/store"
	"github.com/distcache/distcache/internal/tenancy"
	"github.com/distcache/distcache/internal/writeback"
)

// Held objects: the writes of WriteBack and Transient policies, which the
// nodes keep in their journals (internal/writeback) instead of sending to
// S3 before they answer.
//
//   - The key's metadata owner takes the write (another node answers 503
//     SlowDown, and the writer retries at the owner): it numbers the
//     version, writes it to its journal (fsync'd), copies it to the next
//     replicas-1 nodes in the key's placement order, which write it to
//     theirs, and answers once all have it. A node that cannot be reached
//     fails the write (SlowDown) rather than leaving fewer copies.
//   - Reads: the owner (or, when it cannot be reached, the next holder)
//     answers the key's metadata from its journal, with HeaderHeld naming
//     the holders; a chunk read that misses the store fills from a holder
//     instead of S3. Written chunks are handed to their owners as in a
//     write-through, so reads after the write are hits.
//   - Persistence (WriteBack): the first holder in placement order that is
//     still in the ring sends the newest version to S3 in the background
//     (writeback.Persister), then caches S3's metadata, and the holders
//     drop their copies. Transient objects never go to S3.
//   - DELETE of a held key: the holders record the delete (WriteBack: S3
//     deletes it in turn; Transient: the copies go).

// transientTombstoneLife is how long the delete of a Transient key is
// kept, so that a copy of the version it deleted arriving late is refused.
const transientTombstoneLife = 10 * time.Minute

// HeaderHeld names the holders of a held version in metadata answers.
const HeaderHeld = "X-Distcache-Held"

// holds reports whether writes of the policy are held by the nodes.
func holds(p tenancy.Policy) bool {
	return p.Mode == tenancy.WriteBack || p.Mode == tenancy.Transient
}

func heldName(o chunk.Object) writeback.Name {
	return writeback.Name{Tenant: o.Tenant, Bucket: o.Bucket, Key: o.Key}
}

func heldObject(n writeback.Name) chunk.Object {
	return chunk.Object{Tenant: n.Tenant, Bucket: n.Bucket, Key: n.Key}
}

// errNoJournal answers held writes on a node started without a journal.
var errNoJournal = newError(http.StatusNotImplemented, CodeBadRequest,
	"this node keeps no write-back journal (--writeback-fraction 0): WriteBack and Transient policies cannot be served")

// heldPolicy reports whether a write of o is held by the nodes, and under
// which policy: its policy is WriteBack or Transient, or this node still
// holds a version of o (the policy changed meanwhile: the write must come
// after it, in order, so it is held too, with the default replicas).
func (s *Server) heldPolicy(c caller, o chunk.Object) (tenancy.Policy, bool) {
	p := c.policy(o.Bucket, o.Key)
	if holds(p) {
		return p, true
	}
	if s.cfg.Journal != nil {
		if _, ok := s.cfg.Journal.Get(heldName(o)); ok {
			return tenancy.Policy{Bucket: o.Bucket, Mode: tenancy.WriteBack}, true
		}
	}
	return p, false
}

// holdersFor chooses the nodes that hold a write of o: this node, which
// must be o's metadata owner, then the next n-1 members in o's placement
// order that are not marked down.
func (s *Server) holdersFor(o chunk.Object, n int) ([]string, *apiError) {
	r := s.currentRing()
	if r == nil {
		if n > 1 {
			return nil, newError(http.StatusServiceUnavailable, CodeSlowDown,
				"a node running alone cannot keep the policy's copies on several nodes")
		}
		return []string{s.cfg.Self}, nil
	}
	cands := r.Candidates(nodeapi.MetaID(o), 0)
	if cands[0].Name != s.cfg.Self {
		return nil, newError(http.StatusServiceUnavailable, CodeSlowDown,
			"held writes of this key are taken by its metadata owner "+cands[0].Name)
	}
	holders := []string{s.cfg.Self}
	now := time.Now()
	for _, m := range cands[1:] {
		if len(holders) == n {
			break
		}
		if !s.peers.down.Down(m.Name, now) {
			holders = append(holders, m.Name)
		}
	}
	if len(holders) < n {
		return nil, newError(http.StatusServiceUnavailable, CodeSlowDown,
			"too few cache nodes can be reached to keep the policy's copies")
	}
	return holders, nil
}

// putHeld takes a PUT of a held key.
func (s *Server) putHeld(w http.ResponseWriter, r *http.Request, q request, p tenancy.Policy, stored chunk.Headers) {
	tenant := q.tenant.Name
	if s.cfg.Journal == nil {
		s.fail(w, opPut, tenant, q.start, errNoJournal)
		return
	}
	if r.ContentLength < 0 {
		s.fail(w, opPut, tenant, q.start, newError(http.StatusLengthRequired, CodeBadRequest, "a held write needs a Content-Length"))
		return
	}
	if aerr := checkHeldHeaders(stored); aerr != nil {
		s.fail(w, opPut, tenant, q.start, aerr)
		return
	}
	holders, aerr := s.holdersFor(q.obj, p.ReplicaCount())
	if aerr != nil {
		s.fail(w, opPut, tenant, q.start, aerr)
		return
	}
	e := s.heldPut(q.obj, p, r.ContentLength, r.Header.Get("Content-Type"), holders)
	if stored.HasChecksum() { // checked in handlePut
		stored[chunk.ChecksumTypeHeader] = chunk.FullObjectChecksum
	}
	e.Headers = stored
	m, aerr := s.holdWrite(r.Context(), q.caller, e, r.Body)
	if aerr != nil {
		s.fail(w, opPut, tenant, q.start, aerr)
		return
	}
	writeJSON(w, http.StatusOK, s.metaResponse(q.obj, m))
	s.observe(opPut, tenant, metrics.ResultHeld, 0, q.start)
}

// versionMetaHeader is the canonical header of writeback.VersionMetadata.
var versionMetaHeader = http.CanonicalHeaderKey("X-Amz-Meta-" + writeback.VersionMetadata)

// checkHeldHeaders refuses stored headers (storedHeadersOf's, already
// within S3's limits) that a held version cannot take as they are: a
// storage class other than STANDARD, which S3 checks only when it gets the
// version; and S3 gets the cache's own VersionMetadata beside the
// writer's, which must leave it room within S3's limit. A writer's own
// VersionMetadata is dropped from h, the new version's taking its place
// (and so is a checksum type):
// it is a mark the cache answers on every held or persisted object, and
// copying an object's metadata into a new write (boto3's and the AWS
// CLI's managed copies do: HeadObject, then CreateMultipartUpload with
// what it answered) must not be refused for it.
func checkHeldHeaders(h chunk.Headers) *apiError {
	if sc, ok := h[chunk.StorageClassHeader]; ok {
		// S3 might refuse the class only when the version is persisted,
		// long after it was acknowledged (MinIO, for one, takes STANDARD
		// and REDUCED_REDUNDANCY only).
		return newError(http.StatusNotImplemented, "NotImplemented",
			"a WriteBack or Transient key keeps no storage class (x-amz-storage-class: "+sc+"): write it without one, or use a WriteThrough prefix")
	}
	delete(h, versionMetaHeader)
	// A checksum's type is S3's to tell (a held PUT's is FULL_OBJECT).
	delete(h, chunk.ChecksumTypeHeader)
	if h.UserMetadataSize()+len(writeback.VersionMetadata)+20 > chunk.MaxUserMetadata {
		return newError(http.StatusBadRequest, "MetadataTooLarge",
			"Your metadata headers exceed the maximum allowed metadata size (a WriteBack or Transient key keeps "+
				strconv.Itoa(len(writeback.VersionMetadata)+20)+" bytes of it for the cache's own).")
	}
	return nil
}

// heldPut is a new version of o written under policy p, kept by holders.
func (s *Server) heldPut(o chunk.Object, p tenancy.Policy, size int64, contentType string, holders []string) writeback.Entry {
	now := s.cfg.Now()
	e := writeback.Entry{Name: heldName(o), Version: s.cfg.Journal.NextVersion(), Op: writeback.OpPut,
		Size: size, ContentType: contentType, LastModified: now.UTC().Truncate(time.Second),
		Transient: p.Mode == tenancy.Transient, Holders: holders}
	if d := p.ExpiryAfter(); e.Transient && d > 0 {
		e.Expires = now.Add(d)
	}
	return e
}

// holdWrite holds write e (holdVersion), then makes it what every reader
// sees: the old version, wherever cached, is stale, and gateways learn it
// before the answer; the leading chunks go to their owners in the
// background. It returns the new version's metadata.
func (s *Server) holdWrite(ctx context.Context, c caller, e writeback.Entry, body io.Reader) (chunk.Meta, *apiError) {
	stored, aerr := s.holdVersion(ctx, c, e, body)
	if aerr != nil {
		return chunk.Meta{}, aerr
	}
	o := heldObject(e.Name)
	s.invalidateObjects(ctx, c, o)
	m := heldMeta(stored, s.cfg.Now())
	// After the answer: a read that comes before the chunks reach their
	// owners reads them from a holder, as any chunk of a held version
	// not cached yet, and the answer does not wait for a body's trip to
	// another node (a 1.4 MB ClickHouse part: 4-5 ms of a busy node's
	// time, B5).
	go s.handOutHeld(context.WithoutCancel(ctx), c, stored, m)
	return m, nil
}

// deleteHeld takes a DELETE of a held key: a WriteBack key's delete is
// held like a write (S3 deletes it in turn); a Transient key's copies go.
func (s *Server) deleteHeld(w http.ResponseWriter, r *http.Request, q request, p tenancy.Policy) {
	tenant := q.tenant.Name
	if aerr := s.holdDelete(r.Context(), q.caller, q.obj, p); aerr != nil {
		s.fail(w, opDelete, tenant, q.start, aerr)
		return
	}
	s.invalidateObjects(r.Context(), q.caller, q.obj)
	w.WriteHeader(http.StatusNoContent)
	s.observe(opDelete, tenant, metrics.ResultHeld, 0, q.start)
}

func (f *fanOut) Write(p []byte) (int, error) {
	for i, w := range f.ws {
		if !f.failed[i] {
			if _, err := w.Write(p); err != nil {
				f.failed[i] = true
			}
		}
	}
	return len(p), nil
}

// journalFailed is the answer to a failed write of e to this node's
// journal (nil if err is).
func (s *Server) journalFailed(e writeback.Entry, err error) *apiError {
	switch {
	case errors.Is(err, writeback.ErrFull):
		s.countHeldFull()
		s.log.Warn("write-back space is full: held writes get SlowDown until S3 has caught up",
			"tenant", e.Tenant, "bucket", e.Bucket, "limitBytes", s.cfg.Journal.Stats().Limit)
		return newError(http.StatusServiceUnavailable, CodeSlowDown,
			"the cache's write-back space is full until S3 has caught up; retry")
	case errors.Is(err, writeback.ErrBadBody):
		return newError(http.StatusBadRequest, CodeBadRequest, "the body is not Content-Length bytes")
	case writerBodyMismatch(err): // the writer's, checked in handlePut
		return asAPIError(err)
	case err != nil:
		s.storeFailed("held_write", err)
		return newError(http.StatusInternalServerError, CodeInternal, "writing the journal: "+err.Error())
	}
	return nil
}

// countHeldFull counts a held write refused for want of pinned space.
func (s *Server) countHeldFull() {
	if s.cfg.HeldMetrics != nil {
		s.cfg.HeldMetrics.Full.Inc()
	}
}

// peerSize is the object size a chunk read passes to another node with the
// ETag, so that it needs no metadata; -1 for a held version, whose holders
// the other node learns with the metadata.
func peerSize(m chunk.Meta) int64 {
	if m.Held != "" {
		return -1
	}
	return m.Size
}

// heldMeta is the metadata of a held version.
func heldMeta(e writeback.Entry, now time.Time) chunk.Meta {
	return chunk.Meta{Size: e.Size, ETag: e.ETag, ContentType: e.ContentType, Headers: e.StoredHeaders(), LastModified: e.LastModified,
		FetchedAt: now, Held: strings.Join(e.Holders, ",")}
}

// heldMetaOf answers o's metadata from this node's journal: ok=false when
// it holds no version of o. superseded: it holds one, but a member that
// would hold a newer one does (heldSettled: the version came back with a
// restart or a ring change, and the newer one was written meanwhile); the
// caller asks the members (heldMetaFromPeers), not its cache or S3. When
// the members cannot all be asked, its version is answered.
func (s *Server) heldMetaOf(ctx context.Context, o chunk.Object) (m chunk.Meta, ok, superseded bool, err error) {
	if s.cfg.Journal == nil {
		return m, false, false, nil
	}
	e, ok := s.cfg.Journal.Get(heldName(o))
	if !ok {
		return m, false, false, nil
	}
	if s.heldSettled(ctx, e) {
		return m, false, true, nil
	}
	m, err = heldAnswer(e, s.cfg.Now())
	return m, true, false, err
}

// heldAnswer is the metadata of held version e, or S3's 404 for a delete.
func heldAnswer(e writeback.Entry, now time.Time) (chunk.Meta, error) {
	if e.Op == writeback.OpDelete {
		return chunk.Meta{}, newError(http.StatusNotFound, CodeNoSuchKey, "object deleted (the delete is held by the cache)")
	}
	return heldMeta(e, now), nil
}

// heldMetaFromPeers asks the members that may hold a version of o for it,
// when this node holds none and would otherwise ask S3: the first members
// of o's placement order, as many as the policy keeps copies and one more
// (a ring that just changed moves a key by one member), and as many under
// the previous membership, the first in that order that holds one,
// journals only (listHeld: a member asked answers from its journal, never
// from S3), all asked at once. A node finds a
// version here when it has just become the key's metadata owner and the
// handoff has not reached it yet (a scale-up; a pod back in the ring after
// a restart), or when it stands in for an owner that cannot be reached (a
// chunk read failing over while a pod restarts). Every other metadata miss
// of a held key finds none and costs this round trip before S3 is asked
// (BenchmarkMetadataMiss). S3 does not have a held version, so its answer
// (404, or a refused tenant's 403) would fail a read of an acknowledged
// write. ok=false: none of them holds a version, and S3 is asked as for
// any key. unanswered: as many of them as the policy keeps copies could
// not be asked, so every copy of an acknowledged version may be among
// them, and S3's "no such key" (or a refused tenant's 403) may hide it.
// Fewer unanswered than copies (one of two holders killed, the other, or
// this node itself, answering for its copy) leaves S3's answer standing:
// an acknowledged version is on copies members (holdersFor), so one that
// answered would hold it. A member killed for good is thus answered for
// by the others, while a rolling restart's moment of unreachable holders
// is retried rather than lose an acknowledged write to S3's 404.
func (s *Server) heldMetaFromPeers(ctx context.Context, c caller, o chunk.Object) (m chunk.Meta, ok, unanswered bool, err error) {
	p := c.policy(o.Bucket, o.Key)
	r := s.currentRing()
	if s.cfg.Journal == nil || r == nil || !holds(p) {
		return m, false, false, nil
	}
	copies := p.Replicas
	if copies <= 0 {
		copies = tenancy.DefaultReplicas
	}
	// All at once: every metadata miss of a held key comes here (mostly
	// for objects S3 has long had), so it costs one round trip, not one
	// per member asked. Members marked down are asked too (newestHeld):
	// one that failed a moment ago may be back (a pod of a rolling
	// restart, Ready again with its disk) and the only one holding the
	// newest version, while a member that is up still holds an older one
	// the ring's handoff has not yet taken from it (e2e/gateway
	// TestGatewaysReadTheirWritesThroughNodeChurn read a delete's 404, and
	// a copy read an older version's bytes, when the up members were asked
	// first and answered alone). S3's answer for a held key is wrong (a
	// 404 or 403, or an older version).
	//
	// The candidates under the previous membership are asked too: a pod
	// of a rolling restart is out of the ring until it is Ready again, with
	// its disk, and may hold a copy no current candidate has yet (the
	// others copy what it held only as they see the new epoch). With 3
	// members, one restarting, the current ring lists 2: this node and one
	// other, whose failure alone would never make copies unanswered.
	id := nodeapi.MetaID(o)
	var asked []ring.Member
	for _, mem := range slices.Concat(r.Candidates(id, copies+1), r.PreviousCandidates(id, copies+1)) {
		if mem.Name != s.cfg.Self && !slices.ContainsFunc(asked, func(m ring.Member) bool { return m.Name == mem.Name }) {
			asked = append(asked, mem)
		}
	}
	newest, errs := s.newestHeld(ctx, c.tenant.Name, o, asked, "held_meta")
	failed := 0
	for _, err := range errs {
		if err != nil {
			failed++
		}
	}
	if newest == nil {
		return m, false, failed >= copies, nil
	}
	m, err = heldAnswer(*newest, s.cfg.Now())
	return m, true, false, err
}

// heldDownAskTimeout bounds how long newestHeld waits for a member marked
// down: long enough for one back since, not the whole peer timeout for
// one still gone.
const heldDownAskTimeout = 2 * time.Second

// newestHeld asks members' journals, all at once, for their held version
// of o (counted as peer requests of kind), and returns the newest any of
// them holds (nil: none; one may have kept an older copy across a restart
// while the others took a newer write) and each member's error. A member
// marked down is given heldDownAskTimeout.
func (s *Server) newestHeld(ctx context.Context, tenant string, o chunk.Object, members []ring.Member, kind string) (*writeback.Entry, []error) {
	answers := make([][]writeback.Entry, len(members))
	errs := make([]error, len(members))
	now := time.Now()
	var wg sync.WaitGroup
	for i, mem := range members {
		wg.Go(func() {
			ctx := ctx
			if s.peers.down.Down(mem.Name, now) {
				var cancel context.CancelFunc
				ctx, cancel = context.WithTimeout(ctx, heldDownAskTimeout)
				defer cancel()
			}
			es, err := s.peers.listHeld(ctx, mem, tenant, o.Bucket, o.Key)
			result := "ok"
			if err != nil {
				result = "error"
			}
			s.metrics.PeerRequests.WithLabelValues(kind, result).Inc()
			answers[i], errs[i] = es, err
		})
	}
	wg.Wait()
	var newest *writeback.Entry
	for _, es := range answers {
		for i, e := range es {
			if e.Key == o.Key && (newest == nil || e.Version > newest.Version) { // listHeld takes a prefix
				newest = &es[i]
			}
		}
	}
	return newest, errs
}

// handOutHeld caches a held write's leading chunks at their owners (up to
// WriteCacheBytes), read back from the journal, so reads after the write
// are hits.
func (s *Server) handOutHeld(ctx context.Context, c caller, e writeback.Entry, m chunk.Meta) {
	f, err := s.cfg.Journal.OpenBody(e)
	if err != nil {
		return
	}
	defer f.Close()
	r := s.currentRing()
	var ids []chunk.ID
	var chunks [][]byte
	for i := int64(0); i < chunk.Count(m.Size, s.cfg.ChunkSize) && (i+1)*s.cfg.ChunkSize <= max(s.cfg.WriteCacheBytes, s.cfg.ChunkSize); i++ {
		off, n, _ := chunk.Bounds(m.Size, s.cfg.ChunkSize, i)
		v := store.NewValue(int(n))
		if _, err := f.ReadAt(v.Payload(), off); err != nil && !errors.Is(err, io.EOF) {
			return
		}
		id := chunk.ID{Object: heldObject(e.Name), ETag: m.ETag, Size: s.cfg.ChunkSize, Index: i}
		if r == nil || r.Owner(id).Name == s.cfg.Self {
			if err := s.store.PutValue(id, v); err != nil {
				s.storeFailed("put_chunk", err)
			}
			continue
		}
		ids, chunks = append(ids, id), append(chunks, v.Payload())
	}
	if len(ids) > 0 {
		s.handOut(ctx, r, c, ids, chunks)
	}
}

// fromHolders reads [off, off+n) of held version m: from this node's
// journal when it is a holder, else from the holders in turn.
func (s *Server) fromHolders(ctx context.Context, c caller, o chunk.Object, m chunk.Meta, off int64, dst []byte) error {
	if s.cfg.Journal != nil {
		if e, ok := s.cfg.Journal.Get(heldName(o)); ok && e.Op == writeback.OpPut && e.ETag == m.ETag {
			f, err := s.cfg.Journal.OpenBody(e)
			if err == nil {
				defer f.Close()
				if _, err := f.ReadAt(dst, off); err == nil || errors.Is(err, io.EOF) {
					return nil
				}
			}
		}
	}
	r := s.currentRing()
	if r == nil {
		return newError(http.StatusServiceUnavailable, CodeServiceUnavailable, "no holder of the held object can be reached")
	}
	var last error = errors.New("no holder named")
	for _, name := range strings.Split(m.Held, ",") {
		if name == s.cfg.Self || name == "" {
			continue
		}
		mem, ok := r.Member(name)
		if !ok {
			continue
		}
		err := s.peers.getHeld(ctx, mem, c.tenant.Name, o, m.ETag, off, dst)
		result := "ok"
		if err != nil {
			result = "error"
			last = err
		}
		s.metrics.PeerRequests.WithLabelValues("held_read", result).Inc()
		if err == nil {
			return nil
		}
	}
	return newError(http.StatusServiceUnavailable, CodeServiceUnavailable,
		"no holder of the held object could serve it: "+last.Error())
}

// passthroughHeld takes the pass-through writes of held keys before they
// reach S3: a DeleteObject is held like a DELETE; the keys a DeleteObjects
// (deleteBody, when it may name held keys) names that are held get a held
// delete too, and only the others go to S3 (held_deletes.go); multipart
// uploads into a held key are held (held_multipart.go); copies into a held
// key, or from one, are served by the cache (held_copy.go). It reports
// whether it answered.
func (s *Server) passthroughHeld(w http.ResponseWriter, r *http.Request, c caller, bucket, key string, start time.Time, deleteBody []byte) bool {
	q := r.URL.Query()
	if key != "" {
		o := chunk.Object{Tenant: c.tenant.Name, Bucket: bucket, Key: key}
		p, held := s.heldPolicy(c, o)
		rq := request{caller: c, obj: o, start: start}
		isCopy := r.Method == http.MethodPut && r.Header.Get("X-Amz-Copy-Source") != ""
		switch {
		case !held:
			return isCopy && s.copyInto(w, r, rq, p, false) // from a held source (held_copy.go)
		case q.Has("tagging"):
			// S3 may not have the version yet, and a DELETE of its tags is
			// not a DELETE of it.
			s.failS3(w, rq, http.StatusNotImplemented, "NotImplemented",
				"a "+string(p.Mode)+" key ("+p.String()+") keeps no tags: tagging is S3's, which may not have the key yet")
			return true
		case (r.Method == http.MethodGet || r.Method == http.MethodHead) &&
			(q.Has("partNumber") || q.Has("versionId") || r.Header.Get("X-Amz-Server-Side-Encryption-Customer-Algorithm") != ""):
			// S3 may not have the key's current version yet.
			s.failS3(w, rq, http.StatusNotImplemented, "NotImplemented",
				"a "+string(p.Mode)+" key ("+p.String()+") is read whole or by range: its parts (partNumber), versions (versionId) "+
					"and SSE-C reads are S3's, which may not have it yet")
			return true
		case r.Method == http.MethodGet && q.Has("attributes"):
			return s.heldAttributes(w, r, rq)
		case (r.Method == http.MethodGet || r.Method == http.MethodHead) && !q.Has("uploadId"):
			return false
		case r.Method == http.MethodDelete && !q.Has("uploadId"):
			s.deleteHeld(w, r, rq, p)
			return true
		case isCopy:
			return s.copyInto(w, r, rq, p, true)
		case s.heldUpload(w, r, rq, p):
			return true
		}
		// A PutObject the gateway passes on because it asks for more than
		// the body and the headers S3 stores (tagging, encryption, a
		// conditional write, ...).
		s.failS3(w, rq, http.StatusNotImplemented, "NotImplemented",
			"a "+string(p.Mode)+" key ("+p.String()+") keeps the body, Content-Type, user metadata, Cache-Control, Content-Disposition, "+
				"Content-Encoding, Content-Language and Expires only: this request asks for more (tagging, encryption, a conditional write, ...)")
		return true
	}
	return deleteBody != nil && s.deleteObjectsHeld(w, r, c, bucket, deleteBody, start)
}

// holdDelete holds a delete of o on its holders.
func (s *Server) holdDelete(ctx context.Context, c caller, o chunk.Object, p tenancy.Policy) *apiError {
	if s.cfg.Journal == nil {
		return errNoJournal
	}
	holders, aerr := s.holdersFor(o, p.ReplicaCount())
	if aerr != nil {
		return aerr
	}
	_, aerr = s.holdVersion(ctx, c, s.heldDelete(o, p, holders), http.NoBody)
	return aerr
}

// heldDelete is the version that deletes o.
func (s *Server) heldDelete(o chunk.Object, p tenancy.Policy, holders []string) writeback.Entry {
	e := writeback.Entry{Name: heldName(o), Version: s.cfg.Journal.NextVersion(), Op: writeback.OpDelete,
		LastModified: s.cfg.Now().UTC(), Transient: p.Mode == tenancy.Transient, Holders: holders}
	if e.Transient {
		// Nothing to delete in S3: the delete only has to outlive late
		// copies of what it deletes.
		e.Expires = s.cfg.Now().Add(transientTombstoneLife)
	}
	return e
}

// mayHold reports whether a DeleteObjects of bucket may name held keys:
// the tenant has WriteBack or Transient policies there, or this node holds
// some of the bucket's keys.
func (s *Server) mayHold(c caller, bucket string) bool {
	for _, p := range c.tenant.Policies {
		if p.Bucket == bucket && holds(p) {
			return true
		}
	}
	return s.cfg.Journal != nil && len(s.cfg.Journal.List(c.tenant.Name, bucket, "")) > 0
}
