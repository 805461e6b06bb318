package node

// The write-through: a PUT goes to S3, and only once S3 has it are its
// chunks cached, here and at their owners.

import (
	"context"
	"io"
	"net/http"
	"strconv"
	"sync"
	"time"

	"github.com/distcache/distcache/internal/chunk"
	"github.com/distcache/distcache/internal/metrics"
	"github.com/distcache/distcache/internal/nodeapi"
	"github.com/distcache/distcache/internal/s3backend"
	"github.com/distcache/distcache/internal/store"
)

// handlePut writes through: the body goes to S3 (s3backend.Put: as it
// arrives when the writer's SHA-256 came along, multipart when large), the
// client is answered only after S3 has the object, and only then are the
// chunks cached under the new ETag. The metadata cached is what S3's answer
// to the upload says (size, ETag; Last-Modified from its Date): asking S3
// again would cost every write another round trip. When another change of
// the key overlapped the write, or the upload was long, a HEAD after the
// answer puts S3's own Last-Modified and content type in its place, or
// drops the metadata if the ETag is no longer S3's (confirmWrite).
func (s *Server) handlePut(w http.ResponseWriter, r *http.Request) {
	q, ok := s.begin(w, r, opPut)
	if !ok {
		return
	}
	tenant := q.tenant.Name
	if e := checkWritable(q.caller, q.obj.Bucket, q.obj.Key); e != nil {
		s.fail(w, opPut, tenant, q.start, e)
		return
	}
	stored, aerr := storedHeadersOf(r.Header)
	if aerr != nil {
		s.fail(w, opPut, tenant, q.start, aerr)
		return
	}
	if p, ok := s.heldPolicy(q.caller, q.obj); ok {
		// No S3 checks a held write's body before it is acknowledged.
		if sum := r.Header.Get(nodeapi.HeaderContentSHA256); sum != "" {
			r.Body = readCloser{s3backend.CheckPayloadSHA256(r.Body, sum), r.Body}
		}
		checked, err := s3backend.CheckDeclaredChecksum(r.Body, stored)
		if err != nil {
			s.fail(w, opPut, tenant, q.start, newError(http.StatusBadRequest, "InvalidRequest", err.Error()))
			return
		}
		r.Body = readCloser{checked, r.Body}
		s.putHeld(w, r, q, p, stored)
		return
	}
	noCache := q.noCache(q.obj)
	since := s.leases.Seq() // the object's changes from here on are this write's or overlap it
	col := newCollector(s.cfg.ChunkSize, s.cfg.WriteCacheBytes, r.ContentLength, s.chunkBufs)
	body := io.TeeReader(r.Body, col)
	contentType := r.Header.Get("Content-Type")
	// With the SHA-256 the writer signed, the upload streams (s3backend.Put).
	ctx := s3backend.WithPayloadSHA256(r.Context(), r.Header.Get(nodeapi.HeaderContentSHA256))
	ctx = s3backend.WithHeaders(ctx, stored)
	uploadStart := time.Now()
	m, err := s.s3.Put(ctx, q.creds, q.obj.Bucket, q.obj.Key, body, r.ContentLength, contentType)
	took := time.Since(uploadStart)
	if err != nil {
		// No recycling here: the HTTP transport may still be copying the
		// body into the collector after a failed upload returns.
		s.fail(w, opPut, tenant, q.start, asAPIError(err))
		return
	}
	etag := m.ETag
	// S3 has it: whatever was cached for this key is now stale.
	s.invalidateObjects(r.Context(), q.caller, q.obj)
	m.FetchedAt = s.cfg.Now()
	if _, remote := s.metaOwner(q.caller, q.obj); !remote && !noCache {
		if err := s.store.PutMeta(q.obj, m); err != nil {
			s.storeFailed("put_meta", err)
		}
		s.confirmWrite(r.Context(), q.creds, q.obj, etag, since, took)
	}
	if col.total == m.Size && !noCache {
		s.cacheWritten(r.Context(), q.caller, q.obj, etag, col.chunks())
	} else {
		col.recycle() // S3 answered: it read the whole body, nothing writes the chunks any more
	}
	writeJSON(w, http.StatusOK, s.metaResponse(q.obj, m))
	s.observe(opPut, tenant, metrics.ResultMiss, 0, q.start)
}

// readCloser reads from one reader and closes another.
type readCloser struct {
	io.Reader
	io.Closer
}

// cacheWritten caches the chunks of a write S3 has: those this node serves
// in its store, the others at their owners (handOut), both at once, and
// returns when they are cached (or failed), so the first read after the
// write is a hit wherever it lands. Storing its own chunks before handing
// the others out kept a large write's answer waiting for the two in turn.
// The buffers of the chunks handed out, and of the whole chunks stored
// (storeChunk), are reused (chunkBufs).
func (s *Server) cacheWritten(ctx context.Context, c caller, o chunk.Object, etag string, chunks []store.Value) {
	rg := s.currentRing()
	var (
		mineIDs, otherIDs []chunk.ID
		mine, handed      []store.Value
		others            [][]byte
	)
	for i, v := range chunks {
		id := chunk.ID{Object: o, ETag: etag, Size: s.cfg.ChunkSize, Index: int64(i)}
		if rg != nil && rg.Owner(id).Name != s.cfg.Self {
			otherIDs, others, handed = append(otherIDs, id), append(others, v.Payload()), append(handed, v)
		} else {
			mineIDs, mine = append(mineIDs, id), append(mine, v)
		}
	}
	var wg sync.WaitGroup
	if len(otherIDs) > 0 {
		wg.Go(func() {
			for i, done := range s.handOut(ctx, rg, c, otherIDs, others) {
				if done {
					s.chunkBufs.put(handed[i])
				}
			}
		})
	}
	for i, id := range mineIDs {
		s.storeChunk(id, mine[i])
	}
	wg.Wait()
}

// storedHeadersOf are the headers a PUT to this node asks S3 to store with
// the object (nodeapi.HeaderStoredPrefix), refused as S3 would refuse them
// when S3 could not store them as they are: a held version must never be
// acknowledged with what its upload to S3 would fail on or change.
func storedHeadersOf(h http.Header) (chunk.Headers, *apiError) {
	stored := nodeapi.Stored(h)
	return stored, checkStoredHeaders(stored)
}

// checkStoredHeaders refuses stored headers S3 would refuse or could not
// keep as they are.
func checkStoredHeaders(stored chunk.Headers) *apiError {
	if stored.UserMetadataSize() > chunk.MaxUserMetadata {
		return newError(http.StatusBadRequest, "MetadataTooLarge", "Your metadata headers exceed the maximum allowed metadata size.")
	}
	if v, ok := stored["Expires"]; ok {
		if _, err := http.ParseTime(v); err != nil {
			return newError(http.StatusBadRequest, "InvalidArgument", "Expires must be an HTTP date, not "+strconv.Quote(v))
		}
	}
	return nil
}

// storeWritten stores chunk id of a write-through, n bytes read from body
// (false: the body was shorter). A whole chunk is read into a reused buffer
// and stored on disk only (storeChunk); a shorter one is read where the
// store keeps it.
func (s *Server) storeWritten(id chunk.ID, n int64, body io.Reader) bool {
	var v store.Value
	if n == s.cfg.ChunkSize {
		v = s.chunkBufs.get()
	} else {
		v = store.NewValue(int(n))
	}
	if _, err := io.ReadFull(body, v.Payload()); err != nil {
		s.chunkBufs.put(v) // only a whole chunk's is kept
		return false
	}
	s.storeChunk(id, v)
	return true
}

// storeChunk stores chunk v of a write-through. A whole chunk goes to disk
// only and its buffer back to chunkBufs: nothing has read it yet, and
// filling fresh memory for the chunks the RAM tier kept (page faults) was
// a tenth to a third of the CPU of B5's 16 MiB PUTs, where a reused buffer
// costs only the copy; a read brings the chunk to RAM. A shorter one (a
// small object's, or an object's last) is kept in RAM too, without a copy.
func (s *Server) storeChunk(id chunk.ID, v store.Value) {
	whole := int64(len(v.Payload())) == s.cfg.ChunkSize
	var err error
	if whole {
		err = s.store.PutValueOnDisk(id, v)
		s.chunkBufs.put(v)
	} else {
		err = s.store.PutValue(id, v)
	}
	if err != nil {
		s.storeFailed("put_chunk", err)
	}
}
