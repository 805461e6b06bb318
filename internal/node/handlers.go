package node

import (
	"encoding/json"
	"errors"
	"net/http"
	"strconv"
	"time"
	"unicode/utf8"

	"github.com/distcache/distcache/internal/chunk"
	"github.com/distcache/distcache/internal/httprange"
	"github.com/distcache/distcache/internal/metrics"
	"github.com/distcache/distcache/internal/nodeapi"
	"github.com/distcache/distcache/internal/s3backend"
	"github.com/distcache/distcache/internal/tenancy"
)

// Response headers of the node API.
const (
	HeaderObjectSize = "X-Distcache-Object-Size"
	HeaderChunkSize  = "X-Distcache-Chunk-Size"
	HeaderCache      = "X-Distcache-Cache" // hit_ram, hit_disk, miss or forwarded (relayed to the owner)
	HeaderRingEpoch  = "X-Distcache-Ring-Epoch"
)

// Operation labels.
const (
	opGetChunk  = "get_chunk"
	opGetObject = "get_object"
	opHead      = "head"
	opPut       = "put"
	opDelete    = "delete"
)

// maxKeyLen is S3's limit on object key length in bytes.
const maxKeyLen = 1024

// validKey reports whether key fits S3's rules for key names: at most 1024
// bytes of UTF-8. S3 answers other names with errors that depend on the
// implementation (MinIO: 403 for invalid UTF-8), so they are refused here.
func validKey(key string) bool { return len(key) <= maxKeyLen && utf8.ValidString(key) }

// request is the parsed, authorized target of a call.
type request struct {
	caller
	obj   chunk.Object
	start time.Time
}

// begin parses and authorizes; on failure it has already answered.
func (s *Server) begin(w http.ResponseWriter, r *http.Request, op string) (request, bool) {
	return s.beginAt(w, r, op, r.PathValue("bucket"), r.PathValue("key"))
}

// beginAt is begin for a bucket and key already taken from the path.
func (s *Server) beginAt(w http.ResponseWriter, r *http.Request, op, bucket, key string) (request, bool) {
	start := time.Now()
	if key == "" || !validKey(key) {
		s.fail(w, op, "", start, newError(http.StatusBadRequest, CodeBadRequest, "object key must be 1 to 1024 bytes of valid UTF-8"))
		return request{}, false
	}
	c, aerr := s.authorize(r, bucket)
	if aerr != nil {
		s.fail(w, op, "", start, aerr)
		return request{}, false
	}
	return request{caller: c, obj: chunk.Object{Tenant: c.tenant.Name, Bucket: bucket, Key: key}, start: start}, true
}

func (s *Server) fail(w http.ResponseWriter, op, tenant string, start time.Time, e *apiError) {
	writeError(w, e)
	s.observe(op, tenant, metrics.ResultError, 0, start)
}

// observe counts a finished request and the n body bytes it sent.
func (s *Server) observe(op, tenant, result string, n int, start time.Time) {
	s.countBytes(op, tenant, result, n)
	s.countRequest(op, tenant, result, start)
}

func (s *Server) countRequest(op, tenant, result string, start time.Time) {
	s.series.requests.get(labelKey{tenant, op, result}).Inc()
	s.series.duration.get(labelKey{op, result}).Observe(time.Since(start).Seconds())
}

func (s *Server) countBytes(op, tenant, result string, n int) {
	s.series.bytes.get(labelKey{tenant, op, result}).Add(float64(n))
}

func (s *Server) countChunk(tenant, result string) {
	s.series.chunks.get(labelKey{tenant, result}).Inc()
}

func (s *Server) handleGet(w http.ResponseWriter, r *http.Request) {
	s.get(w, r, r.PathValue("bucket"), r.PathValue("key"))
}

// get serves GET /v1/objects/{bucket}/{key...}: one chunk or the object.
// It is the one HTTP entry of reads: routeReads calls it for plain paths,
// the mux (handleGet) for the others, on read connections as on any other;
// both kinds of read go on to readChunk.
func (s *Server) get(w http.ResponseWriter, r *http.Request, bucket, key string) {
	// Parsed once, and only for the parameters a read uses.
	query := parseReadQuery(r.URL.RawQuery)
	if query.hasChunk {
		s.getChunk(w, r, bucket, key, query)
		return
	}
	s.getObject(w, r, bucket, key, query)
}

// getChunk serves one chunk, or a sub-range of it given by Range relative to
// the chunk's first byte.
func (s *Server) getChunk(w http.ResponseWriter, r *http.Request, bucket, key string, query readQuery) {
	q, ok := s.beginAt(w, r, opGetChunk, bucket, key)
	if !ok {
		return
	}
	tenant := q.tenant.Name
	idx, err := strconv.ParseInt(query.chunk, 10, 64)
	if err != nil || idx < 0 {
		s.fail(w, opGetChunk, tenant, q.start, newError(http.StatusBadRequest, CodeBadRequest, "chunk must be a non-negative integer"))
		return
	}
	v := version{etag: query.etag, size: -1}
	if query.size != "" && q.peer { // a peer's hint; tenants' are not trusted
		if size, err := strconv.ParseInt(query.size, 10, 64); err == nil && size >= 0 {
			v.size = size
		}
	}
	m, data, result, err := s.readChunk(r.Context(), q.caller, q.obj, idx, v)
	if err != nil {
		s.countChunk(tenant, metrics.ResultError)
		s.fail(w, opGetChunk, tenant, q.start, asAPIError(err))
		return
	}
	s.countChunk(tenant, result)
	rng, partial, aerr := parseRange(r.Header.Get("Range"), int64(len(data)))
	if aerr != nil {
		s.fail(w, opGetChunk, tenant, q.start, aerr)
		return
	}
	body := data
	// Header values are assigned under their canonical keys (what Set
	// would do, without canonicalizing each key again); the constant ones
	// share read-only slices, the per-request ones one backing array.
	h := w.Header()
	vals := make([]string, 3)
	if m.Size >= 0 {
		setMetaHeaders(h, m)
	} else {
		h[hkETag] = one(vals, 0, m.ETag) // a pinned hit: the version is known, the rest was not needed
	}
	h[hkChunkSize] = s.chunkSizeValue
	h[hkCache] = cacheValue(result)
	h[hkContentType] = octetStream
	status := http.StatusOK
	if partial {
		body = data[rng.Off : rng.Off+rng.Len]
		h[hkContentRange] = one(vals, 1, rng.ContentRange(int64(len(data))))
		status = http.StatusPartialContent
	}
	h[hkContentLength] = one(vals, 2, strconv.Itoa(len(body)))
	w.WriteHeader(status)
	n, _ := w.Write(body)
	s.observe(opGetChunk, tenant, result, n, q.start)
}

// getObject streams a whole object (or a Range of it) chunk by chunk, for
// simple clients. A failure after the headers went out aborts the connection
// so the client sees a short body, never silently wrong bytes.
//
// The request is counted once, under objectResult of its chunks; the body
// bytes are counted chunk by chunk under each chunk's own result, so bytes
// a chunk's owner served (and counted) are relayed here (result
// "forwarded"), never a hit.
func (s *Server) getObject(w http.ResponseWriter, r *http.Request, bucket, key string, query readQuery) {
	q, ok := s.beginAt(w, r, opGetObject, bucket, key)
	if !ok {
		return
	}
	tenant := q.tenant.Name
	m, err := s.pinnedMeta(r.Context(), q.caller, q.obj, query.etag)
	if err != nil {
		s.fail(w, opGetObject, tenant, q.start, asAPIError(err))
		return
	}
	rng, partial, aerr := objectRange(r, m)
	if aerr != nil {
		s.fail(w, opGetObject, tenant, q.start, aerr)
		return
	}
	// The first chunk is read before anything goes out, so that when S3 no
	// longer has the version the metadata named (overwritten behind the
	// cache's back within --meta-ttl, If-Match refused), a read of the
	// current version starts over with the new one instead of failing.
	var (
		firstData   []byte
		firstResult string
	)
	for again := query.etag == ""; rng.Len > 0; again = false {
		idx, _ := chunk.Span(rng.Off, rng.Len, s.cfg.ChunkSize)
		_, firstData, firstResult, err = s.readChunk(r.Context(), q.caller, q.obj, idx, version{meta: m, known: true})
		if err == nil || !again || !errors.Is(err, s3backend.ErrPreconditionFailed) {
			break
		}
		if m, err = s.meta(r.Context(), q.caller, q.obj, true); err != nil {
			break
		}
		if rng, partial, aerr = objectRange(r, m); aerr != nil {
			s.fail(w, opGetObject, tenant, q.start, aerr)
			return
		}
	}
	if err != nil {
		s.countChunk(tenant, metrics.ResultError)
		s.fail(w, opGetObject, tenant, q.start, asAPIError(err))
		return
	}
	h := w.Header()
	// Headers go out with the first chunk: an error before it must not
	// carry this object's Content-Length.
	setHeaders := func() {
		setMetaHeaders(h, m)
		h.Set("Content-Length", strconv.FormatInt(rng.Len, 10))
		h.Set(HeaderChunkSize, strconv.FormatInt(s.cfg.ChunkSize, 10))
		if partial {
			h.Set("Content-Range", rng.ContentRange(m.Size))
		}
	}
	if rng.Len == 0 {
		setHeaders()
		w.WriteHeader(http.StatusOK)
		s.observe(opGetObject, tenant, metrics.ResultHitRAM, 0, q.start)
		return
	}
	first, last := chunk.Span(rng.Off, rng.Len, s.cfg.ChunkSize)
	overall := metrics.ResultHitRAM
	for idx := first; idx <= last; idx++ {
		data, result := firstData, firstResult
		if idx > first {
			_, data, result, err = s.readChunk(r.Context(), q.caller, q.obj, idx, version{meta: m, known: true})
		}
		if err != nil {
			s.countChunk(tenant, metrics.ResultError)
			s.countRequest(opGetObject, tenant, metrics.ResultError, q.start)
			s.log.Warn("aborting object read mid-stream", "object", q.obj.String(), "chunk", idx, "err", err)
			panic(http.ErrAbortHandler)
		}
		s.countChunk(tenant, result)
		overall = objectResult(overall, result)
		if idx == first {
			setHeaders()
			h.Set(HeaderCache, result)
			status := http.StatusOK
			if partial {
				status = http.StatusPartialContent
			}
			w.WriteHeader(status)
		}
		chunkOff := idx * s.cfg.ChunkSize
		lo := max(rng.Off, chunkOff) - chunkOff
		hi := min(rng.Off+rng.Len, chunkOff+int64(len(data))) - chunkOff
		n, err := w.Write(data[lo:hi])
		s.countBytes(opGetObject, tenant, result, n)
		if err != nil {
			break // client went away
		}
	}
	s.countRequest(opGetObject, tenant, overall, q.start)
}

// objectRange is the part of object version m a GET asks for (its Range
// header, else all of it).
func objectRange(r *http.Request, m chunk.Meta) (httprange.Range, bool, *apiError) {
	rng, partial, aerr := parseRange(r.Header.Get("Range"), m.Size)
	if aerr == nil && !partial {
		rng = httprange.Range{Off: 0, Len: m.Size}
	}
	return rng, partial, aerr
}

// objectResults ranks the results of an object read's chunks; the read is
// counted under the highest rank among them:
//
//	hit_ram < hit_disk < miss < forwarded
//
// Local outcomes rank by the slowest tier that answered. Relayed chunks
// ("forwarded") rank above them all: the owners counted those chunks as
// their own requests, so a read that relayed any chunk is left out of
// cluster-wide sums that leave result="forwarded" out, and no chunk is
// counted twice there.
var objectResults = map[string]int{
	metrics.ResultHitRAM:  0,
	metrics.ResultHitDisk: 1,
	metrics.ResultMiss:    2,
	metrics.ResultRelayed: 3,
}

// objectResult is the result of an object read whose chunks so far add up
// to overall and whose next chunk's result is next.
func objectResult(overall, next string) string {
	if objectResults[next] > objectResults[overall] {
		return next
	}
	return overall
}

// Canonical header keys (textproto.CanonicalMIMEHeaderKey of the names
// above) for direct assignment on the hot path.
const (
	hkETag          = "Etag"
	hkChunkSize     = "X-Distcache-Chunk-Size"
	hkCache         = "X-Distcache-Cache"
	hkRingEpoch     = "X-Distcache-Ring-Epoch"
	hkContentType   = "Content-Type"
	hkContentRange  = "Content-Range"
	hkContentLength = "Content-Length"
)

// Constant header values, shared by every response. Their capacity equals
// their length, so an Add on a response's header copies instead of writing
// into them.
var (
	octetStream = []string{"application/octet-stream"}
	cacheValues = map[string][]string{
		metrics.ResultHitRAM: {metrics.ResultHitRAM}, metrics.ResultHitDisk: {metrics.ResultHitDisk},
		metrics.ResultMiss: {metrics.ResultMiss}, metrics.ResultRelayed: {metrics.ResultRelayed},
	}
)

// cacheValue is the X-Distcache-Cache header value for a result.
func cacheValue(result string) []string {
	if v, ok := cacheValues[result]; ok {
		return v
	}
	return []string{result}
}

// one sets vals[i] to v and returns it as a one-value header slice whose
// capacity is one.
func one(vals []string, i int, v string) []string {
	vals[i] = v
	return vals[i : i+1 : i+1]
}

func setMetaHeaders(h http.Header, m chunk.Meta) {
	h.Set("ETag", m.ETag)
	h.Set(HeaderObjectSize, strconv.FormatInt(m.Size, 10))
	if !m.LastModified.IsZero() {
		h.Set("Last-Modified", m.LastModified.UTC().Format(http.TimeFormat))
	}
	if m.ContentType != "" {
		h.Set("X-Distcache-Content-Type", m.ContentType)
	}
}

// metaFor parses, authorizes and resolves an object's metadata; on failure
// it has already answered. lease is the HeaderMetaLease value when a
// gateway may keep the answer.
func (s *Server) metaFor(w http.ResponseWriter, r *http.Request) (q request, m chunk.Meta, lease string, ok bool) {
	q, ok = s.begin(w, r, opHead)
	if !ok {
		return q, chunk.Meta{}, "", false
	}
	seq := s.leases.Seq() // before the metadata: a change after it is numbered later
	m, owned, err := s.resolveMeta(r.Context(), q.caller, q.obj, r.Header.Get(HeaderRevalidate) != "")
	if err != nil {
		s.fail(w, opHead, q.tenant.Name, q.start, asAPIError(err))
		return q, m, "", false
	}
	return q, m, s.metaLease(m, seq, owned && !q.hop), true
}

func (s *Server) handleHead(w http.ResponseWriter, r *http.Request) {
	q, m, lease, ok := s.metaFor(w, r)
	if !ok {
		return
	}
	h := w.Header()
	setMetaHeaders(h, m)
	// Only the metadata answer carries the stored headers: chunk answers
	// (read connections take a handful of header lines) need none.
	nodeapi.SetStored(h, m.Headers)
	if m.ContentType != "" {
		h.Set("Content-Type", m.ContentType)
	}
	h.Set("Content-Length", strconv.FormatInt(m.Size, 10))
	h.Set(HeaderChunkSize, strconv.FormatInt(s.cfg.ChunkSize, 10))
	if p := q.policy(q.obj.Bucket, q.obj.Key); p.Mode != tenancy.WriteThrough {
		h.Set(nodeapi.HeaderPolicy, string(p.Mode))
	}
	if m.Held != "" {
		h.Set(HeaderHeld, m.Held)
	}
	switch {
	case q.noCache(q.obj): // clients keep nothing of it either
	case lease != "":
		h.Set(nodeapi.HeaderMetaLease, lease) // clients may keep it while they hold a lease
	}
	w.WriteHeader(http.StatusOK)
	s.observe(opHead, q.tenant.Name, metrics.ResultHitRAM, 0, q.start)
}

func (s *Server) metaResponse(o chunk.Object, m chunk.Meta) nodeapi.MetaResponse {
	return nodeapi.MetaResponse{Bucket: o.Bucket, Key: o.Key, Size: m.Size, ETag: m.ETag, ContentType: m.ContentType,
		LastModified: m.LastModified, Headers: m.Headers, ChunkSize: s.cfg.ChunkSize}
}

func (s *Server) handleMeta(w http.ResponseWriter, r *http.Request) {
	q, m, _, ok := s.metaFor(w, r)
	if !ok {
		return
	}
	writeJSON(w, http.StatusOK, s.metaResponse(q.obj, m))
	s.observe(opHead, q.tenant.Name, metrics.ResultHitRAM, 0, q.start)
}

func writeJSON(w http.ResponseWriter, status int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	_ = json.NewEncoder(w).Encode(v)
}

// handleDelete deletes in S3 first, then invalidates, so a failed delete
// leaves the cache consistent with S3.
func (s *Server) handleDelete(w http.ResponseWriter, r *http.Request) {
	q, ok := s.begin(w, r, opDelete)
	if !ok {
		return
	}
	if e := checkWritable(q.caller, q.obj.Bucket, q.obj.Key); e != nil {
		s.fail(w, opDelete, q.tenant.Name, q.start, e)
		return
	}
	if p, ok := s.heldPolicy(q.caller, q.obj); ok {
		s.deleteHeld(w, r, q, p)
		return
	}
	if err := s.s3.Delete(r.Context(), q.creds, q.obj.Bucket, q.obj.Key); err != nil {
		s.fail(w, opDelete, q.tenant.Name, q.start, asAPIError(err))
		return
	}
	s.invalidateObjects(r.Context(), q.caller, q.obj)
	w.WriteHeader(http.StatusNoContent)
	s.observe(opDelete, q.tenant.Name, metrics.ResultMiss, 0, q.start)
}

// handleRing serves the ring this node routes by, so gateways and clients
// can route to owners directly and refresh when the epoch changes.
func (s *Server) handleRing(w http.ResponseWriter, r *http.Request) {
	rg := s.currentRing()
	if rg == nil {
		writeError(w, newError(http.StatusNotFound, "NoRing", "this node runs alone, without a ring"))
		return
	}
	// Clients learn the chunk size with the ring, before their first read.
	w.Header().Set(HeaderChunkSize, strconv.FormatInt(s.cfg.ChunkSize, 10))
	writeJSON(w, http.StatusOK, rg)
}

func itoa(n int64) string { return strconv.FormatInt(n, 10) }

// handlePeerPost takes what other members tell this node: a chunk of a
// write-through that this node serves, or that an object changed
// (?invalidate=1). Only peers may: a tenant could otherwise plant bytes S3
// never had.
func (s *Server) handlePeerPost(w http.ResponseWriter, r *http.Request) {
	q, ok := s.begin(w, r, opPut)
	if !ok {
		return
	}
	if !q.peer {
		s.fail(w, opPut, q.tenant.Name, q.start, newError(http.StatusForbidden, CodeAccessDenied, "only cache nodes may store chunks directly"))
		return
	}
	if r.URL.Query().Has("invalidate") {
		s.takeInvalidation(r.Context(), q.caller, q.obj, r.URL.Query())
		w.WriteHeader(http.StatusNoContent)
		return
	}
	idx, err := strconv.ParseInt(r.URL.Query().Get("chunk"), 10, 64)
	etag := r.URL.Query().Get("etag")
	if err != nil || idx < 0 || etag == "" || r.ContentLength <= 0 || r.ContentLength > s.cfg.ChunkSize {
		s.fail(w, opPut, q.tenant.Name, q.start, newError(http.StatusBadRequest, CodeBadRequest, "need chunk, etag and a body of at most one chunk"))
		return
	}
	id := chunk.ID{Object: q.obj, ETag: etag, Size: s.cfg.ChunkSize, Index: idx}
	if !s.storeWritten(id, r.ContentLength, r.Body) {
		s.fail(w, opPut, q.tenant.Name, q.start, newError(http.StatusBadRequest, CodeBadRequest, "short body"))
		return
	}
	w.WriteHeader(http.StatusNoContent)
	s.observe(opPut, q.tenant.Name, metrics.ResultMiss, 0, q.start)
}
