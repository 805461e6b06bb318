package node

import (
	"bytes"
	"crypto/md5"
	"encoding/base64"
	"encoding/xml"
	"io"
	"net/http"
	"strconv"
	"time"

	"github.com/distcache/distcache/internal/chunk"
	"github.com/distcache/distcache/internal/metrics"
)

// DeleteObjects naming held keys: each held key gets a held delete (S3
// deletes a WriteBack key in its turn, after any held write of it), and
// only the other keys go to S3, so a batch of held keys (ClickHouse
// removing a part's files) needs no S3 at all. The answer lists the held
// keys as deleted beside S3's own result.

// deleteRequest is a DeleteObjects body.
type deleteRequest struct {
	XMLName xml.Name       `xml:"Delete"`
	Quiet   bool           `xml:"Quiet,omitempty"`
	Objects []deleteObject `xml:"Object"`
}

type deleteObject struct {
	Key       string `xml:"Key"`
	VersionID string `xml:"VersionId,omitempty"`
}

// deleteResult is a DeleteObjects answer.
type deleteResult struct {
	XMLName xml.Name       `xml:"DeleteResult"`
	Xmlns   string         `xml:"xmlns,attr,omitempty"`
	Deleted []deleteObject `xml:"Deleted"`
	Errors  []deleteError  `xml:"Error"`
}

type deleteError struct {
	Key       string `xml:"Key"`
	VersionID string `xml:"VersionId,omitempty"`
	Code      string `xml:"Code"`
	Message   string `xml:"Message"`
}

// deleteObjectsHeld serves a DeleteObjects of bucket whose body (data)
// names held keys. It reports false, having done nothing, when none is
// held.
func (s *Server) deleteObjectsHeld(w http.ResponseWriter, r *http.Request, c caller, bucket string, data []byte, start time.Time) bool {
	var req deleteRequest
	if err := xml.Unmarshal(data, &req); err != nil {
		return false // readDeleteObjects read it; S3 will say what is wrong
	}
	var held, rest []deleteObject
	for _, d := range req.Objects {
		o := chunk.Object{Tenant: c.tenant.Name, Bucket: bucket, Key: d.Key}
		if p, ok := s.heldPolicy(c, o); ok && d.VersionID == "" {
			if aerr := s.holdDelete(r.Context(), c, o, p); aerr != nil {
				s.fail(w, opPassthrough, c.tenant.Name, start, aerr)
				return true
			}
			s.invalidateObjects(r.Context(), c, o)
			held = append(held, d)
		} else {
			rest = append(rest, d)
		}
	}
	if len(held) == 0 {
		return false
	}
	result := deleteResult{Xmlns: xmlns}
	if len(rest) > 0 {
		body, err := xml.Marshal(deleteRequest{Quiet: req.Quiet, Objects: rest})
		if err != nil {
			s.fail(w, opPassthrough, c.tenant.Name, start, newError(http.StatusInternalServerError, CodeInternal, err.Error()))
			return true
		}
		sum := md5.Sum(body)
		header := http.Header{"Content-Type": {"application/xml"}, "Content-Md5": {base64.StdEncoding.EncodeToString(sum[:])}}
		resp, err := s.s3.Passthrough(r.Context(), c.creds, http.MethodPost, bucket, "", r.URL.RawQuery, header, bytes.NewReader(body), int64(len(body)))
		if err != nil {
			s.fail(w, opPassthrough, c.tenant.Name, start, asAPIError(err))
			return true
		}
		answer, err := io.ReadAll(io.LimitReader(resp.Body, maxDeleteBody+1))
		resp.Body.Close()
		if err == nil && resp.StatusCode == http.StatusOK {
			err = xml.Unmarshal(answer, &result)
		}
		if err != nil || resp.StatusCode != http.StatusOK {
			// S3 refused the rest (the held deletes stand, as a DELETE
			// of each would have): the client sees S3's answer.
			writeS3Answer(w, s3Answer{status: resp.StatusCode, header: resp.Header, body: answer})
			s.observe(opPassthrough, c.tenant.Name, metrics.ResultError, len(answer), start)
			return true
		}
		s.invalidateAfter(r, c, bucket, "", bytes.NewBuffer(body))
	}
	if !req.Quiet {
		result.Deleted = append(result.Deleted, held...)
	}
	out, err := xml.Marshal(result)
	if err != nil {
		s.fail(w, opPassthrough, c.tenant.Name, start, newError(http.StatusInternalServerError, CodeInternal, err.Error()))
		return true
	}
	out = append([]byte(xml.Header), out...)
	w.Header().Set("Content-Type", "application/xml")
	w.Header().Set("Content-Length", strconv.Itoa(len(out)))
	w.WriteHeader(http.StatusOK)
	n, _ := w.Write(out)
	s.observe(opPassthrough, c.tenant.Name, metrics.ResultHeld, n, start)
	return true
}
