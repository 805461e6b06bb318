package node

import (
	"bytes"
	"encoding/xml"
	"io"
	"net/http"
	"net/url"
	"strings"
	"time"

	"github.com/distcache/distcache/internal/chunk"
	"github.com/distcache/distcache/internal/metrics"
)

const opPassthrough = "passthrough"

// maxDeleteBody bounds a DeleteObjects request body kept to learn which keys
// to invalidate (S3 allows 1000 keys of at most 1 KiB each).
const maxDeleteBody = 2 << 20

// requestHeadersNotPassed are the client's signature, transport and
// distcache headers: the node signs the request again with the tenant's
// backend credentials.
var requestHeadersNotPassed = map[string]bool{
	"Authorization": true, "X-Amz-Date": true, "X-Amz-Content-Sha256": true, "X-Amz-Security-Token": true,
	"Connection": true, "Keep-Alive": true, "Proxy-Connection": true, "Te": true, "Trailer": true,
	"Transfer-Encoding": true, "Upgrade": true, "Host": true, "Content-Length": true, "Accept-Encoding": true,
	"Expect": true,
}

var responseHeadersNotPassed = map[string]bool{
	"Connection": true, "Keep-Alive": true, "Transfer-Encoding": true, "Trailer": true, "Upgrade": true,
	"Content-Length": true,
}

// handlePassthrough passes an S3 operation the cache does not interpret
// (listings, multipart uploads, copies, batch deletes, attributes) to S3 with
// the tenant's credentials, after the same bucket checks as every other
// request, and streams S3's answer back unchanged. Errors of the node itself
// are JSON with X-Distcache-Error; S3's own errors pass through as S3 XML.
// Operations that change objects invalidate the cache once S3 accepted them.
func (s *Server) handlePassthrough(w http.ResponseWriter, r *http.Request) {
	start := time.Now()
	bucket, key := r.PathValue("bucket"), r.PathValue("key")
	c, aerr := s.authorize(r, bucket)
	if aerr != nil {
		s.fail(w, opPassthrough, "", start, aerr)
		return
	}
	tenant := c.tenant.Name
	if !validKey(key) {
		s.fail(w, opPassthrough, tenant, start, newError(http.StatusBadRequest, CodeBadRequest, "object key must be valid UTF-8 of at most 1024 bytes"))
		return
	}
	// The bucket checked must be the one S3 copies from: with several
	// copy sources, which one S3 uses is up to S3.
	if len(r.Header.Values("X-Amz-Copy-Source")) > 1 {
		s.fail(w, opPassthrough, tenant, start, newError(http.StatusBadRequest, CodeBadRequest, "only one x-amz-copy-source header is allowed"))
		return
	}
	if src := r.Header.Get("X-Amz-Copy-Source"); src != "" {
		srcBucket, ok := copySourceBucket(src)
		if !ok {
			s.fail(w, opPassthrough, tenant, start, newError(http.StatusBadRequest, CodeBadRequest, "x-amz-copy-source must be bucket/key"))
			return
		}
		if !c.tenant.AllowsBucket(srcBucket) {
			s.fail(w, opPassthrough, tenant, start, newError(http.StatusForbidden, CodeAccessDenied,
				"copy source bucket "+srcBucket+" is not allowed for tenant "+tenant))
			return
		}
	}
	if r.ContentLength < 0 && (r.Method == http.MethodPut || r.Method == http.MethodPost) {
		s.fail(w, opPassthrough, tenant, start, newError(http.StatusLengthRequired, "MissingContentLength",
			"pass-through uploads need a Content-Length"))
		return
	}
	body, perr := checkPassthroughWrite(r, c, bucket, key, r.Body)
	if perr != nil {
		s.fail(w, opPassthrough, tenant, start, perr)
		return
	}
	if key == "" && isListing(r) {
		if minCopies, ok := s.listsHeld(c, bucket, r.URL.Query().Get("prefix")); ok {
			s.listHeld(w, r, c, bucket, minCopies, start)
			return
		}
	}
	if key == "" && isUploadsListing(r) && s.cfg.Uploads != nil {
		if _, ok := s.listsHeld(c, bucket, r.URL.Query().Get("prefix")); ok {
			s.listHeldUploads(w, r, c, bucket, start)
			return
		}
	}
	var heldDeletes []byte // a DeleteObjects that may name held keys
	if key == "" && isDeleteObjects(r) && s.mayHold(c, bucket) {
		if heldDeletes, _, perr = readDeleteObjects(body); perr != nil {
			s.fail(w, opPassthrough, tenant, start, perr)
			return
		}
		body = bytes.NewReader(heldDeletes)
	}
	if s.passthroughHeld(w, r, c, bucket, key, start, heldDeletes) {
		return
	}
	var deleteBody *bytes.Buffer
	if r.Method == http.MethodPost && r.URL.Query().Has("delete") {
		if r.ContentLength > maxDeleteBody {
			s.fail(w, opPassthrough, tenant, start, newError(http.StatusBadRequest, CodeBadRequest, "DeleteObjects body too large"))
			return
		}
		deleteBody = &bytes.Buffer{}
		body = io.TeeReader(body, deleteBody)
	}
	header := http.Header{}
	for k, v := range r.Header {
		if !requestHeadersNotPassed[k] && !strings.HasPrefix(k, "X-Distcache-") {
			header[k] = v
		}
	}
	resp, err := s.s3.Passthrough(r.Context(), c.creds, r.Method, bucket, key, r.URL.RawQuery, header, body, r.ContentLength)
	if err != nil {
		s.fail(w, opPassthrough, tenant, start, asAPIError(err))
		return
	}
	defer resp.Body.Close()
	for k, v := range resp.Header {
		if !responseHeadersNotPassed[k] {
			w.Header()[k] = v
		}
	}
	if resp.ContentLength >= 0 {
		w.Header().Set("Content-Length", itoa(resp.ContentLength))
	}
	w.WriteHeader(resp.StatusCode)
	n, _ := io.Copy(w, resp.Body)
	result := metrics.ResultMiss
	if resp.StatusCode >= 300 {
		result = metrics.ResultError
	} else {
		s.invalidateAfter(r, c, bucket, key, deleteBody)
	}
	s.observe(opPassthrough, tenant, result, int(n), start)
}

// invalidateAfter drops cached data of objects a successful pass-through
// operation changed. Invalidating too much is harmless; too little is not.
func (s *Server) invalidateAfter(r *http.Request, c caller, bucket, key string, deleteBody *bytes.Buffer) {
	q := r.URL.Query()
	obj := func(k string) chunk.Object { return chunk.Object{Tenant: c.tenant.Name, Bucket: bucket, Key: k} }
	switch {
	case deleteBody != nil: // DeleteObjects
		keys, err := deleteObjectsKeys(deleteBody.Bytes())
		if err != nil {
			s.log.Warn("cannot read DeleteObjects keys to invalidate", "bucket", bucket, "err", err)
			return
		}
		objs := make([]chunk.Object, len(keys))
		for i, k := range keys {
			objs[i] = obj(k)
		}
		s.invalidateObjects(r.Context(), c, objs...)
	case key == "", q.Has("tagging"): // tags: nothing the cache keeps changed
	case r.Method == http.MethodDelete && !q.Has("uploadId"),
		r.Method == http.MethodPut && !q.Has("uploadId"), // CopyObject, or PutObject sent this way
		r.Method == http.MethodPost && q.Has("uploadId"): // CompleteMultipartUpload
		s.invalidateObjects(r.Context(), c, obj(key))
	}
}

// deleteObjectsKeys are the keys a DeleteObjects request body names.
func deleteObjectsKeys(body []byte) ([]string, error) {
	var req struct {
		Objects []struct {
			Key string `xml:"Key"`
		} `xml:"Object"`
	}
	if err := xml.Unmarshal(body, &req); err != nil {
		return nil, err
	}
	keys := make([]string, len(req.Objects))
	for i, o := range req.Objects {
		keys[i] = o.Key
	}
	return keys, nil
}

// copySourceBucket extracts the bucket of an x-amz-copy-source header
// ("bucket/key" or "/bucket/key", URL-encoded, optional ?versionId=).
func copySourceBucket(src string) (string, bool) {
	if i := strings.IndexByte(src, '?'); i >= 0 {
		src = src[:i]
	}
	src, err := url.PathUnescape(strings.TrimPrefix(src, "/"))
	if err != nil {
		return "", false
	}
	bucket, key, ok := strings.Cut(src, "/")
	return bucket, ok && bucket != "" && key != ""
}
