package gateway

import (
	"bytes"
	"crypto/md5"
	"encoding/base64"
	"encoding/xml"
	"fmt"
	"io"
	"net/http"
	"strconv"
	"strings"
)

// maxDeleteBody bounds a DeleteObjects request body (S3: 1000 keys of at
// most 1 KiB each, plus markup).
const maxDeleteBody = 2 << 20

// s3Namespace is the XML namespace of S3 documents.
const s3Namespace = "http://s3.amazonaws.com/doc/2006-03-01/"

// deleteRequest is a DeleteObjects body; each Object is kept as sent.
type deleteRequest struct {
	Quiet   string         `xml:"Quiet"`
	Objects []deleteObject `xml:"Object"`
}

type deleteObject struct {
	Key   string `xml:"Key"`
	Inner string `xml:",innerxml"`
}

// deleteResult is a DeleteObjects answer; its entries are kept as sent.
type deleteResult struct {
	Inner string `xml:",innerxml"`
}

// deleteObjects serves DeleteObjects. A node invalidates what it cached for
// the keys it deletes, and an object's metadata is cached by its owner; so
// a batch whose keys have different owners is split into one DeleteObjects
// per owner, each sent to that owner, and the answers are merged into one
// DeleteResult. A batch with one owner (or without a ring) is passed
// through as it is.
func (g *Gateway) deleteObjects(x *exchange) {
	r := x.r
	if r.ContentLength < 0 {
		x.fail(newS3Error(http.StatusLengthRequired, CodeMissingContentLength, "You must provide the Content-Length HTTP header."))
		return
	}
	if r.ContentLength > maxDeleteBody {
		x.fail(newS3Error(http.StatusBadRequest, "MalformedXML", "The DeleteObjects request is too large."))
		return
	}
	body, ok := x.readBody(r.ContentLength)
	if !ok {
		return
	}
	groups, req := g.groupByOwner(x.rt.bucket, body)
	if len(groups) <= 1 {
		owner := ""
		if len(groups) == 1 {
			owner = groups[0].owner
		}
		g.passthroughBody(x, passthroughHeaders(r.Header), body, owner)
		return
	}
	var merged strings.Builder
	for _, grp := range groups {
		sub := buildDeleteBody(req.Quiet, grp.objects)
		h := passthroughHeaders(r.Header)
		for k := range h {
			if hasPrefixFold(k, "X-Amz-Checksum-") || k == "X-Amz-Sdk-Checksum-Algorithm" || k == "Content-Md5" {
				delete(h, k)
			}
		}
		sum := md5.Sum(sub)
		h.Set("Content-Md5", base64.StdEncoding.EncodeToString(sum[:]))
		resp, err := g.up.passthroughTo(r.Context(), r.Method, x.rt.bucket, "", passthroughQuery(r.URL.RawQuery), h, sub, grp.owner)
		if err != nil {
			x.fail(g.passthroughError(x, err))
			return
		}
		if resp.StatusCode != http.StatusOK || resp.Header.Get(headerNodeError) != "" {
			// The batch fails as a whole: a bucket or permission error is the
			// same for every part (parts before it may have been deleted, as
			// with any failed DeleteObjects).
			if resp.Header.Get(headerNodeError) != "" {
				x.fail(nodeError(resp))
			} else {
				g.copyAnswer(x, resp)
			}
			resp.Body.Close()
			return
		}
		var res deleteResult
		err = xml.NewDecoder(io.LimitReader(resp.Body, 16<<20)).Decode(&res)
		resp.Body.Close()
		if err != nil {
			x.fail(errInternal(fmt.Errorf("reading a DeleteObjects answer: %w", err)))
			return
		}
		merged.WriteString(res.Inner)
	}
	out := []byte(xml.Header + `<DeleteResult xmlns="` + s3Namespace + `">` + merged.String() + `</DeleteResult>`)
	h := x.w.Header()
	h.Set("Content-Type", "application/xml")
	h.Set("Content-Length", strconv.Itoa(len(out)))
	x.w.WriteHeader(http.StatusOK)
	_, _ = x.w.Write(out)
}

type ownerGroup struct {
	owner   string
	objects []deleteObject
}

// groupByOwner splits a DeleteObjects body by the owner of each key, in
// order of first appearance. A body that does not parse, or a gateway
// without owner placement, is one group (S3 answers malformed XML itself).
func (g *Gateway) groupByOwner(bucket string, body []byte) ([]ownerGroup, deleteRequest) {
	var req deleteRequest
	if g.up.Owners == nil || xml.Unmarshal(body, &req) != nil || len(req.Objects) == 0 {
		return nil, req
	}
	for _, o := range req.Objects {
		if usesPrefix(o.Inner) {
			// The prefix is declared outside the Object, and buildDeleteBody
			// would copy it out of scope (S3 refuses an unbound prefix).
			// Unsplit, the node invalidates at each key's owner itself.
			return nil, req
		}
	}
	var groups []ownerGroup
	index := map[string]int{}
	for _, o := range req.Objects {
		owner := ""
		if owners := g.up.Owners(bucket, o.Key); len(owners) > 0 {
			owner = owners[0]
		}
		i, ok := index[owner]
		if !ok {
			i = len(groups)
			index[owner] = i
			groups = append(groups, ownerGroup{owner: owner})
		}
		groups[i].objects = append(groups[i].objects, o)
	}
	return groups, req
}

// usesPrefix reports whether an XML fragment has a namespace-prefixed
// element or attribute.
func usesPrefix(fragment string) bool {
	d := xml.NewDecoder(strings.NewReader(fragment))
	for {
		tok, err := d.RawToken()
		if err != nil {
			return false
		}
		if e, ok := tok.(xml.StartElement); ok {
			if e.Name.Space != "" {
				return true
			}
			for _, a := range e.Attr {
				if a.Name.Space != "" {
					return true
				}
			}
		}
	}
}

func buildDeleteBody(quiet string, objects []deleteObject) []byte {
	var b bytes.Buffer
	b.WriteString(`<?xml version="1.0" encoding="UTF-8"?><Delete xmlns="` + s3Namespace + `">`)
	if quiet != "" {
		b.WriteString("<Quiet>")
		_ = xml.EscapeText(&b, []byte(strings.TrimSpace(quiet)))
		b.WriteString("</Quiet>")
	}
	for _, o := range objects {
		b.WriteString("<Object>")
		b.WriteString(o.Inner)
		b.WriteString("</Object>")
	}
	b.WriteString("</Delete>")
	return b.Bytes()
}
