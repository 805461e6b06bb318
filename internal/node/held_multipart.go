package node

import (
	"encoding/xml"
	"errors"
	"io"
	"net/http"
	"strconv"
	"time"

	"github.com/distcache/distcache/internal/chunk"
	"github.com/distcache/distcache/internal/metrics"
	"github.com/distcache/distcache/internal/tenancy"
	"github.com/distcache/distcache/internal/writeback"
)

// Multipart uploads into held keys, taken by the key's metadata owner as
// S3 would take them (the gateway sends every write of a key, parts
// included, to that node): CreateMultipartUpload starts one here, parts
// are kept on this node's disk (writeback.Uploads), and
// CompleteMultipartUpload makes them one held version, copied to the
// policy's replicas and acknowledged as a PUT is. S3 gets it in the same
// parts, so its ETag is the one the client was given.

// maxCompleteBody bounds a CompleteMultipartUpload body (10,000 parts).
const maxCompleteBody = 2 << 20

const xmlns = "http://s3.amazonaws.com/doc/2006-03-01/"

// heldUpload serves the multipart upload operations on held key o; it
// reports false for any other request.
func (s *Server) heldUpload(w http.ResponseWriter, r *http.Request, q request, p tenancy.Policy) bool {
	query := r.URL.Query()
	id := query.Get("uploadId")
	switch {
	case r.Method == http.MethodPost && query.Has("uploads"):
		s.createHeldUpload(w, r, q, p)
	case id == "":
		return false
	case r.Method == http.MethodPut:
		s.putHeldPart(w, r, q, id)
	case r.Method == http.MethodPost:
		s.completeHeldUpload(w, r, q, p, id)
	case r.Method == http.MethodDelete:
		if _, ok := s.heldUploadOf(w, q, id); !ok {
			return true
		}
		s.cfg.Uploads.Remove(id)
		w.WriteHeader(http.StatusNoContent)
		s.observe(opPassthrough, q.tenant.Name, metrics.ResultHeld, 0, q.start)
	case r.Method == http.MethodGet:
		s.listHeldParts(w, r, q, id)
	default:
		return false
	}
	return true
}

func (s *Server) createHeldUpload(w http.ResponseWriter, r *http.Request, q request, p tenancy.Policy) {
	if s.cfg.Journal == nil || s.cfg.Uploads == nil {
		s.fail(w, opPassthrough, q.tenant.Name, q.start, errNoJournal)
		return
	}
	// Only the key's metadata owner takes its held writes.
	if _, aerr := s.holdersFor(q.obj, p.ReplicaCount()); aerr != nil {
		s.fail(w, opPassthrough, q.tenant.Name, q.start, aerr)
		return
	}
	// A pass-through: the client's own headers. A checksum S3 keeps for
	// the parts' upload is S3's to tell.
	stored := chunk.StoredHeaders(r.Header).WithoutChecksum()
	aerr := checkStoredHeaders(stored)
	if aerr == nil {
		aerr = checkHeldHeaders(stored)
	}
	if aerr != nil {
		s.fail(w, opPassthrough, q.tenant.Name, q.start, aerr)
		return
	}
	up, err := s.cfg.Uploads.Create(heldName(q.obj), r.Header.Get("Content-Type"), stored, s.cfg.Now())
	if err != nil {
		s.storeFailed("held_upload", err)
		s.fail(w, opPassthrough, q.tenant.Name, q.start, newError(http.StatusInternalServerError, CodeInternal, "starting the upload: "+err.Error()))
		return
	}
	s.writeXML(w, q, struct {
		XMLName  xml.Name `xml:"InitiateMultipartUploadResult"`
		Xmlns    string   `xml:"xmlns,attr"`
		Bucket   string   `xml:"Bucket"`
		Key      string   `xml:"Key"`
		UploadID string   `xml:"UploadId"`
	}{Xmlns: xmlns, Bucket: q.obj.Bucket, Key: q.obj.Key, UploadID: up.ID})
}

// heldUploadOf is the held upload id of q's object; if there is none it
// answers NoSuchUpload.
func (s *Server) heldUploadOf(w http.ResponseWriter, q request, id string) (writeback.Upload, bool) {
	if s.cfg.Uploads == nil {
		s.fail(w, opPassthrough, q.tenant.Name, q.start, errNoJournal)
		return writeback.Upload{}, false
	}
	up, err := s.cfg.Uploads.Get(id, heldName(q.obj))
	if err != nil {
		s.failS3(w, q, http.StatusNotFound, "NoSuchUpload",
			"The specified upload does not exist on this cache node: it was completed, aborted, or lost with the node's disk.")
		return up, false
	}
	return up, true
}

// failS3 answers an S3 operation the node serves itself with S3's error
// (passed to the client as it is, as S3's own errors are).
func (s *Server) failS3(w http.ResponseWriter, q request, status int, code, msg string) {
	b, _ := xml.Marshal(struct {
		XMLName  xml.Name `xml:"Error"`
		Code     string   `xml:"Code"`
		Message  string   `xml:"Message"`
		Resource string   `xml:"Resource"`
	}{Code: code, Message: msg, Resource: "/" + q.obj.Bucket + "/" + q.obj.Key})
	b = append([]byte(xml.Header), b...)
	w.Header().Set("Content-Type", "application/xml")
	w.Header().Set("Content-Length", strconv.Itoa(len(b)))
	w.WriteHeader(status)
	w.Write(b)
	s.observe(opPassthrough, q.tenant.Name, metrics.ResultError, 0, q.start)
}

func (s *Server) putHeldPart(w http.ResponseWriter, r *http.Request, q request, id string) {
	n, err := strconv.Atoi(r.URL.Query().Get("partNumber"))
	if err != nil || n < 1 || n > 10000 {
		s.failS3(w, q, http.StatusBadRequest, "InvalidArgument", "partNumber must be an integer from 1 to 10000")
		return
	}
	if r.ContentLength < 0 {
		if _, ok := s.heldUploadOf(w, q, id); ok {
			s.failS3(w, q, http.StatusLengthRequired, "MissingContentLength", "a part needs a Content-Length")
		}
		return
	}
	if part, ok := s.keepHeldPart(w, q, id, n, r.Body, r.ContentLength); ok {
		w.Header().Set("ETag", part.ETag)
		w.WriteHeader(http.StatusOK)
		s.observe(opPassthrough, q.tenant.Name, metrics.ResultHeld, 0, q.start)
	}
}

// keepHeldPart keeps part n of held upload id, size bytes of body (an
// UploadPart's body, or an UploadPartCopy's source); on failure it has
// answered.
func (s *Server) keepHeldPart(w http.ResponseWriter, q request, id string, n int, body io.Reader, size int64) (writeback.Part, bool) {
	tenant := q.tenant.Name
	if _, ok := s.heldUploadOf(w, q, id); !ok {
		return writeback.Part{}, false
	}
	if st := s.cfg.Journal.Stats(); st.Limit > 0 && st.Bytes+s.cfg.Uploads.Used()+size > st.Limit {
		s.countHeldFull()
		s.fail(w, opPassthrough, tenant, q.start, newError(http.StatusServiceUnavailable, CodeSlowDown,
			"the cache's write-back space is full until S3 has caught up; retry"))
		return writeback.Part{}, false
	}
	part, err := s.cfg.Uploads.PutPart(id, n, body, size)
	if src, ok := body.(*sourceReader); ok && src.err != nil {
		s.failCopy(w, q, asAPIError(src.err)) // the copy's source failed, not the disk
		return part, false
	}
	switch {
	case errors.Is(err, writeback.ErrNoSuchUpload):
		s.failS3(w, q, http.StatusNotFound, "NoSuchUpload", "the upload ended while the part was sent")
	case errors.Is(err, writeback.ErrBadBody):
		s.failS3(w, q, http.StatusBadRequest, "IncompleteBody", "the part is not Content-Length bytes")
	case err != nil:
		s.storeFailed("held_upload", err)
		s.fail(w, opPassthrough, tenant, q.start, newError(http.StatusInternalServerError, CodeInternal, "keeping the part: "+err.Error()))
	default:
		return part, true
	}
	return part, false
}

// completeRequest is a CompleteMultipartUpload body.
type completeRequest struct {
	Parts []struct {
		PartNumber int    `xml:"PartNumber"`
		ETag       string `xml:"ETag"`
	} `xml:"Part"`
}

func (s *Server) completeHeldUpload(w http.ResponseWriter, r *http.Request, q request, p tenancy.Policy, id string) {
	tenant := q.tenant.Name
	up, ok := s.heldUploadOf(w, q, id)
	if !ok {
		return
	}
	body, err := io.ReadAll(io.LimitReader(r.Body, maxCompleteBody+1))
	var req completeRequest
	if err == nil && len(body) <= maxCompleteBody {
		err = xml.Unmarshal(body, &req)
	}
	if err != nil || len(body) > maxCompleteBody || len(req.Parts) == 0 {
		s.failS3(w, q, http.StatusBadRequest, "MalformedXML", "the CompleteMultipartUpload body is not a list of parts")
		return
	}
	numbers, etags := make([]int, len(req.Parts)), make([]string, len(req.Parts))
	for i, part := range req.Parts {
		if i > 0 && part.PartNumber <= req.Parts[i-1].PartNumber {
			s.failS3(w, q, http.StatusBadRequest, "InvalidPartOrder", "the parts must be listed in ascending order of number")
			return
		}
		numbers[i], etags[i] = part.PartNumber, part.ETag
	}
	parts, err := s.cfg.Uploads.Chosen(id, numbers, etags)
	if err != nil {
		s.failS3(w, q, http.StatusBadRequest, "InvalidPart", err.Error())
		return
	}
	sizes, sums := make([]int64, len(parts)), make([][]byte, len(parts))
	var size int64
	for i, part := range parts {
		if part.Size < writeback.MinPartSize && i < len(parts)-1 {
			s.failS3(w, q, http.StatusBadRequest, "EntityTooSmall",
				"part "+strconv.Itoa(part.Number)+" is smaller than 5 MiB and not the last")
			return
		}
		sizes[i], sums[i] = part.Size, part.MD5
		size += part.Size
	}
	holders, aerr := s.holdersFor(q.obj, p.ReplicaCount())
	if aerr != nil {
		s.fail(w, opPassthrough, tenant, q.start, aerr)
		return
	}
	e := s.heldPut(q.obj, p, size, up.ContentType, holders)
	e.Headers = up.Headers
	e.Parts, e.ETag = sizes, writeback.MultipartETag(sums) // the journal checks the parts' bytes against it
	f, err := s.cfg.Uploads.Open(id, parts)
	if err != nil {
		s.failS3(w, q, http.StatusNotFound, "NoSuchUpload", "the upload ended while it was completed")
		return
	}
	m, aerr := s.holdWrite(r.Context(), q.caller, e, f)
	f.Close()
	if aerr != nil {
		s.fail(w, opPassthrough, tenant, q.start, aerr)
		return
	}
	s.cfg.Uploads.Remove(id)
	s.writeXML(w, q, struct {
		XMLName  xml.Name `xml:"CompleteMultipartUploadResult"`
		Xmlns    string   `xml:"xmlns,attr"`
		Location string   `xml:"Location"`
		Bucket   string   `xml:"Bucket"`
		Key      string   `xml:"Key"`
		ETag     string   `xml:"ETag"`
	}{Xmlns: xmlns, Location: "/" + q.obj.Bucket + "/" + q.obj.Key, Bucket: q.obj.Bucket, Key: q.obj.Key, ETag: m.ETag})
}

// listHeldParts answers ListParts of a held upload.
func (s *Server) listHeldParts(w http.ResponseWriter, r *http.Request, q request, id string) {
	if _, ok := s.heldUploadOf(w, q, id); !ok {
		return
	}
	query := r.URL.Query()
	marker, _ := strconv.Atoi(query.Get("part-number-marker"))
	max := 1000
	if v, err := strconv.Atoi(query.Get("max-parts")); err == nil && v >= 0 {
		max = min(v, 1000)
	}
	parts, _ := s.cfg.Uploads.Parts(id)
	type xmlPart struct {
		PartNumber   int    `xml:"PartNumber"`
		LastModified string `xml:"LastModified"`
		ETag         string `xml:"ETag"`
		Size         int64  `xml:"Size"`
	}
	out := struct {
		XMLName              xml.Name  `xml:"ListPartsResult"`
		Xmlns                string    `xml:"xmlns,attr"`
		Bucket               string    `xml:"Bucket"`
		Key                  string    `xml:"Key"`
		UploadID             string    `xml:"UploadId"`
		PartNumberMarker     int       `xml:"PartNumberMarker"`
		NextPartNumberMarker int       `xml:"NextPartNumberMarker"`
		MaxParts             int       `xml:"MaxParts"`
		IsTruncated          bool      `xml:"IsTruncated"`
		Parts                []xmlPart `xml:"Part"`
	}{Xmlns: xmlns, Bucket: q.obj.Bucket, Key: q.obj.Key, UploadID: id, PartNumberMarker: marker, MaxParts: max}
	for _, part := range parts {
		if part.Number <= marker {
			continue
		}
		if len(out.Parts) == max {
			out.IsTruncated = true
			break
		}
		out.Parts = append(out.Parts, xmlPart{part.Number, s.cfg.Now().UTC().Format(time.RFC3339), part.ETag, part.Size})
		out.NextPartNumberMarker = part.Number
	}
	s.writeXML(w, q, out)
}

// writeXML answers an S3 operation the node served itself.
func (s *Server) writeXML(w http.ResponseWriter, q request, v any) {
	b, err := xml.Marshal(v)
	if err != nil {
		s.fail(w, opPassthrough, q.tenant.Name, q.start, newError(http.StatusInternalServerError, CodeInternal, err.Error()))
		return
	}
	b = append([]byte(xml.Header), b...)
	w.Header().Set("Content-Type", "application/xml")
	w.Header().Set("Content-Length", strconv.Itoa(len(b)))
	w.WriteHeader(http.StatusOK)
	n, _ := w.Write(b)
	s.observe(opPassthrough, q.tenant.Name, metrics.ResultHeld, n, q.start)
}
