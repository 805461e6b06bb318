package node

import (
	"context"
	"encoding/xml"
	"io"
	"maps"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"

	"github.com/distcache/distcache/internal/chunk"
	"github.com/distcache/distcache/internal/httprange"
	"github.com/distcache/distcache/internal/metrics"
	"github.com/distcache/distcache/internal/s3backend"
	"github.com/distcache/distcache/internal/s3cond"
	"github.com/distcache/distcache/internal/tenancy"
)

// Copies the cache serves itself instead of S3, because S3 would copy the
// wrong bytes or none:
//
//   - CopyObject and UploadPartCopy into a held key (WriteBack, Transient):
//     the copy is a new held version (or a part of a held upload), as a
//     PutObject or UploadPart of the source's bytes would be;
//   - the same from a held source into any other key: S3 does not have the
//     source yet (or has an older version of it), so the bytes go to S3 as
//     a write-through PutObject or UploadPart.
//
// The source's bytes are read through the cache (its held version, cached
// chunks, S3 on a miss), at the version its metadata names when the copy
// starts; its x-amz-copy-source-if-* conditions are checked against that
// version. Held versions keep the body, Content-Type and the headers S3
// stores (user metadata, Cache-Control, ...: the source's, or with
// x-amz-metadata-directive REPLACE the request's), so a copy that asks for
// more (tagging, encryption, storage class, ...) is refused rather than
// done without it.

// copyHeaders are the x-amz-* request headers of a copy the cache serves
// itself honours (or that only sign or describe the request).
var copyHeaders = map[string]bool{
	"X-Amz-Copy-Source": true, "X-Amz-Copy-Source-Range": true, "X-Amz-Metadata-Directive": true,
	"X-Amz-Copy-Source-If-Match": true, "X-Amz-Copy-Source-If-None-Match": true,
	"X-Amz-Copy-Source-If-Modified-Since": true, "X-Amz-Copy-Source-If-Unmodified-Since": true,
	"X-Amz-Content-Sha256": true, "X-Amz-Date": true, "X-Amz-Security-Token": true, "X-Amz-User-Agent": true,
	"X-Amz-Sdk-Checksum-Algorithm": true, "X-Amz-Checksum-Algorithm": true,
}

// copyRequest is a CopyObject or UploadPartCopy the cache serves.
type copyRequest struct {
	request
	src      chunk.Object
	srcMeta  chunk.Meta
	rng      httprange.Range // of the source
	part     int             // UploadPartCopy's part number; 0 for CopyObject
	uploadID string
}

// copyInto serves a copy into held key q.obj under policy p (dstHeld) or,
// for any other key, a copy whose source is held; it reports false when
// the copy is S3's to make (neither end held). r must carry one
// x-amz-copy-source.
func (s *Server) copyInto(w http.ResponseWriter, r *http.Request, q request, p tenancy.Policy, dstHeld bool) bool {
	src, perr := copySource(r.Header.Get("X-Amz-Copy-Source"), q.tenant.Name)
	if perr != nil {
		if !dstHeld {
			return false // S3 answers its own errors
		}
		s.failCopy(w, q, perr)
		return true
	}
	if !dstHeld && !s.mayHold(q.caller, src.Bucket) {
		return false
	}
	m, err := s.meta(r.Context(), q.caller, src, true)
	if !dstHeld && (err != nil || m.Held == "") {
		return false // not held: S3 copies what it has
	}
	if err != nil {
		s.failCopy(w, q, asAPIError(err))
		return true
	}
	cr := copyRequest{request: q, src: src, srcMeta: m, rng: httprange.Range{Len: m.Size}}
	if aerr := s.checkCopy(r, &cr); aerr != nil {
		s.failCopy(w, q, aerr)
		return true
	}
	body := &sourceReader{s: s, ctx: r.Context(), c: q.caller, o: src, m: m, off: cr.rng.Off, end: cr.rng.Off + cr.rng.Len}
	switch {
	case dstHeld && cr.part == 0:
		s.copyToHeld(w, r, cr, p, body)
	case dstHeld:
		if part, ok := s.keepHeldPart(w, q, cr.uploadID, cr.part, body, cr.rng.Len); ok {
			s.writeXML(w, q, copyResult("CopyPartResult", part.ETag, s.cfg.Now()))
		}
	default:
		s.copyToS3(w, r, cr, body)
	}
	return true
}

// copySource parses x-amz-copy-source ("bucket/key" or "/bucket/key",
// URL-encoded). Versions are S3's alone: the cache keeps the current one.
func copySource(h, tenant string) (chunk.Object, *apiError) {
	path, query, _ := strings.Cut(h, "?")
	if query != "" {
		return chunk.Object{}, newError(http.StatusNotImplemented, "NotImplemented",
			"copies of a source version (x-amz-copy-source with ?"+query+") involving a WriteBack or Transient key are not supported")
	}
	path, err := url.PathUnescape(strings.TrimPrefix(path, "/"))
	bucket, key, ok := strings.Cut(path, "/")
	if err != nil || !ok || bucket == "" || key == "" || !validKey(key) {
		return chunk.Object{}, newError(http.StatusBadRequest, "InvalidArgument", "x-amz-copy-source must be bucket/key")
	}
	return chunk.Object{Tenant: tenant, Bucket: bucket, Key: key}, nil
}

// checkCopy checks a copy as S3 would before it reads a byte: headers the
// cache cannot honour, the source's conditions, the part and its range, a
// copy of an object onto itself that changes nothing.
func (s *Server) checkCopy(r *http.Request, cr *copyRequest) *apiError {
	for k := range r.Header {
		if strings.HasPrefix(k, "X-Amz-") && !copyHeaders[k] && !chunk.IsStoredHeader(k) {
			return newError(http.StatusNotImplemented, "NotImplemented",
				k+" cannot be kept by a copy involving a WriteBack or Transient key: the cache keeps the body, Content-Type, "+
					"user metadata, Cache-Control, Content-Disposition, Content-Encoding, Content-Language and Expires")
		}
	}
	directive := r.Header.Get("X-Amz-Metadata-Directive")
	if directive != "" && directive != "COPY" && directive != "REPLACE" {
		return newError(http.StatusBadRequest, "InvalidArgument", "Unknown metadata directive.")
	}
	if aerr := checkStoredHeaders(cr.storedHeaders(r)); aerr != nil {
		return aerr
	}
	if cond := s3cond.EvalCopySource(r.Header, cr.srcMeta.ETag, cr.srcMeta.LastModified); cond != "" {
		return newError(http.StatusPreconditionFailed, CodePreconditionFailed, "At least one of the pre-conditions you specified did not hold: "+cond)
	}
	q := r.URL.Query()
	if !q.Has("uploadId") {
		if r.Header.Get("X-Amz-Copy-Source-Range") != "" {
			return newError(http.StatusBadRequest, "InvalidArgument", "x-amz-copy-source-range is for UploadPartCopy only")
		}
		if cr.src == cr.obj && directive != "REPLACE" && r.Header.Get(chunk.StorageClassHeader) == "" {
			return newError(http.StatusBadRequest, "InvalidRequest", "This copy request is illegal because it is trying to copy an object to itself without changing the object's metadata, storage class, website redirect location or encryption attributes.")
		}
		return nil
	}
	n, err := strconv.Atoi(q.Get("partNumber"))
	if err != nil || n < 1 || n > 10000 {
		return newError(http.StatusBadRequest, "InvalidArgument", "partNumber must be an integer from 1 to 10000")
	}
	cr.part, cr.uploadID = n, q.Get("uploadId")
	if h := r.Header.Get("X-Amz-Copy-Source-Range"); h != "" {
		// S3 takes bytes=first-last only, inside the source.
		rng, ok, rerr := httprange.Parse(h, cr.srcMeta.Size, false)
		if rerr != nil || !ok || h != "bytes="+strconv.FormatInt(rng.Off, 10)+"-"+strconv.FormatInt(rng.Off+rng.Len-1, 10) {
			return newError(http.StatusBadRequest, "InvalidArgument",
				"Range specified is not valid for source object of size: "+strconv.FormatInt(cr.srcMeta.Size, 10))
		}
		cr.rng = rng
	}
	return nil
}

// contentType is the copy's: the source's, or with REPLACE the request's.
func (cr copyRequest) contentType(r *http.Request) string {
	if r.Header.Get("X-Amz-Metadata-Directive") == "REPLACE" {
		return r.Header.Get("Content-Type")
	}
	return cr.srcMeta.ContentType
}

// storedHeaders are the headers S3 is to store with the copy: the
// source's (without the cache's own version mark, which is the source
// version's), or with REPLACE the request's. The storage class is the
// request's either way, as in S3: a copy names its own or gets STANDARD.
// The copy is sent with no checksum (S3 keeps what it computes itself, if
// anything), so it keeps none of the source's.
func (cr copyRequest) storedHeaders(r *http.Request) chunk.Headers {
	if r.Header.Get("X-Amz-Metadata-Directive") == "REPLACE" {
		return chunk.StoredHeaders(r.Header).WithoutChecksum()
	}
	h := maps.Clone(cr.srcMeta.Headers.WithoutChecksum())
	delete(h, versionMetaHeader)
	delete(h, chunk.StorageClassHeader)
	if class := chunk.StoredHeaders(http.Header{chunk.StorageClassHeader: r.Header.Values(chunk.StorageClassHeader)}); class != nil {
		if h == nil {
			h = chunk.Headers{}
		}
		maps.Copy(h, class)
	}
	return h
}

// copyToHeld makes the source's bytes a new held version of cr.obj.
func (s *Server) copyToHeld(w http.ResponseWriter, r *http.Request, cr copyRequest, p tenancy.Policy, body *sourceReader) {
	if s.cfg.Journal == nil {
		s.fail(w, opPassthrough, cr.tenant.Name, cr.start, errNoJournal)
		return
	}
	holders, aerr := s.holdersFor(cr.obj, p.ReplicaCount())
	if aerr != nil {
		s.fail(w, opPassthrough, cr.tenant.Name, cr.start, aerr)
		return
	}
	stored := cr.storedHeaders(r)
	if aerr := checkHeldHeaders(stored); aerr != nil {
		s.failCopy(w, cr.request, aerr)
		return
	}
	e := s.heldPut(cr.obj, p, cr.rng.Len, cr.contentType(r), holders)
	e.Headers = stored
	m, aerr := s.holdWrite(r.Context(), cr.caller, e, body)
	if body.err != nil {
		aerr = asAPIError(body.err) // the source failed, not the journal
	}
	if aerr != nil {
		s.failCopy(w, cr.request, aerr)
		return
	}
	s.writeXML(w, cr.request, copyResult("CopyObjectResult", m.ETag, m.LastModified))
}

// copyToS3 writes a held source's bytes to S3 as cr.obj (PutObject) or as
// a part of its upload (UploadPart), then answers as S3's copy would.
func (s *Server) copyToS3(w http.ResponseWriter, r *http.Request, cr copyRequest, body *sourceReader) {
	ctx := r.Context()
	if cr.part == 0 {
		m, err := s.s3.Put(s3backend.WithHeaders(ctx, cr.storedHeaders(r)), cr.creds, cr.obj.Bucket, cr.obj.Key, body, cr.rng.Len, cr.contentType(r))
		if body.err != nil {
			err = body.err
		}
		if err != nil {
			s.failCopy(w, cr.request, asAPIError(err))
			return
		}
		s.invalidateObjects(ctx, cr.caller, cr.obj)
		s.writeXML(w, cr.request, copyResult("CopyObjectResult", m.ETag, m.LastModified))
		return
	}
	query := url.Values{"partNumber": {strconv.Itoa(cr.part)}, "uploadId": {cr.uploadID}}
	resp, err := s.s3.Passthrough(ctx, cr.creds, http.MethodPut, cr.obj.Bucket, cr.obj.Key, query.Encode(), http.Header{}, body, cr.rng.Len)
	if body.err != nil {
		err = body.err
	}
	if err != nil {
		s.failCopy(w, cr.request, asAPIError(err))
		return
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		// S3's own error (NoSuchUpload, ...) goes back as S3 sent it.
		w.Header().Set("Content-Type", resp.Header.Get("Content-Type"))
		w.WriteHeader(resp.StatusCode)
		_, _ = io.Copy(w, resp.Body)
		s.observe(opPassthrough, cr.tenant.Name, metrics.ResultError, 0, cr.start)
		return
	}
	s.writeXML(w, cr.request, copyResult("CopyPartResult", resp.Header.Get("ETag"), s.cfg.Now()))
}

// failCopy answers a copy's failure: what S3 would refuse too as S3
// XML (which the gateway passes on as it is), the cache's own failures
// (SlowDown, unavailable S3 or holders) as every node error.
func (s *Server) failCopy(w http.ResponseWriter, q request, e *apiError) {
	if e.Status < 500 || e.Status == http.StatusNotImplemented {
		s.failS3(w, q, e.Status, e.Code, e.Message)
		return
	}
	s.fail(w, opPassthrough, q.tenant.Name, q.start, e)
}

// copyResult is CopyObject's or UploadPartCopy's answer.
func copyResult(name, etag string, lastModified time.Time) any {
	return struct {
		XMLName      xml.Name
		Xmlns        string `xml:"xmlns,attr"`
		LastModified string `xml:"LastModified"`
		ETag         string `xml:"ETag"`
	}{XMLName: xml.Name{Local: name}, Xmlns: xmlns, LastModified: lastModified.UTC().Format("2006-01-02T15:04:05.000Z"), ETag: etag}
}

// sourceReader reads bytes [off, end) of version m of object o through
// the cache, one chunk at a time (readChunk, as a GET does). err keeps the
// read's failure, so that a copy reports the source's error rather than
// what its writer made of a short body.
type sourceReader struct {
	s        *Server
	ctx      context.Context
	c        caller
	o        chunk.Object
	m        chunk.Meta
	off, end int64
	buf      []byte
	err      error
}

func (r *sourceReader) Read(p []byte) (int, error) {
	for len(r.buf) == 0 {
		if r.err != nil {
			return 0, r.err
		}
		if r.off >= r.end {
			return 0, io.EOF
		}
		size := r.s.cfg.ChunkSize
		idx := r.off / size
		_, data, result, err := r.s.readChunk(r.ctx, r.c, r.o, idx, version{meta: r.m, known: true})
		r.s.countChunk(r.c.tenant.Name, result)
		if err == nil && int64(len(data)) <= r.off-idx*size {
			err = newError(http.StatusServiceUnavailable, CodeServiceUnavailable, "a chunk of the copy source was short")
		}
		if err != nil {
			r.err = err
			return 0, err
		}
		r.buf = data[r.off-idx*size : min(int64(len(data)), r.end-idx*size)]
	}
	n := copy(p, r.buf)
	r.buf = r.buf[n:]
	r.off += int64(n)
	return n, nil
}
