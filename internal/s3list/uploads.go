package s3list

import (
	"encoding/xml"
	"maps"
	"net/url"
	"sort"
	"strings"
)

// Upload is one multipart upload of a ListMultipartUploads answer, its key
// decoded.
type Upload struct {
	Key          string `xml:"Key"`
	UploadID     string `xml:"UploadId"`
	Initiator    *Owner `xml:"Initiator,omitempty"`
	Owner        *Owner `xml:"Owner,omitempty"`
	StorageClass string `xml:"StorageClass,omitempty"`
	Initiated    string `xml:"Initiated"`
}

// UploadsPage is one ListMultipartUploads answer; keys, prefixes and
// markers are decoded when EncodingType is "url" and encoded again by
// Marshal.
type UploadsPage struct {
	XMLName            xml.Name       `xml:"ListMultipartUploadsResult"`
	Xmlns              string         `xml:"xmlns,attr,omitempty"`
	Bucket             string         `xml:"Bucket"`
	KeyMarker          string         `xml:"KeyMarker"`
	UploadIDMarker     string         `xml:"UploadIdMarker"`
	NextKeyMarker      string         `xml:"NextKeyMarker"`
	NextUploadIDMarker string         `xml:"NextUploadIdMarker"`
	Delimiter          string         `xml:"Delimiter,omitempty"`
	Prefix             string         `xml:"Prefix"`
	MaxUploads         int            `xml:"MaxUploads"`
	EncodingType       string         `xml:"EncodingType,omitempty"`
	IsTruncated        bool           `xml:"IsTruncated"`
	Uploads            []Upload       `xml:"Upload"`
	CommonPrefixes     []CommonPrefix `xml:"CommonPrefixes"`
}

// ParseUploads reads a ListMultipartUploads answer.
func ParseUploads(body []byte) (*UploadsPage, error) { return parseListing[UploadsPage](body) }

// Marshal writes the page as S3 would.
func (p *UploadsPage) Marshal() ([]byte, error) {
	q := *p
	q.Uploads = append([]Upload(nil), p.Uploads...)
	q.CommonPrefixes = append([]CommonPrefix(nil), p.CommonPrefixes...)
	return marshalListing(&q)
}

func (p *UploadsPage) encoded() bool { return p.EncodingType == "url" }

func (p *UploadsPage) code(f func(string) (string, error)) error {
	ss := []*string{&p.KeyMarker, &p.NextKeyMarker, &p.Prefix, &p.Delimiter}
	for i := range p.Uploads {
		ss = append(ss, &p.Uploads[i].Key)
	}
	return codeAll(f, prefixFields(ss, p.CommonPrefixes))
}

// UploadsRequest is what a ListMultipartUploads asked for.
type UploadsRequest struct {
	Prefix, Delimiter         string
	KeyMarker, UploadIDMarker string
	MaxUploads                int
}

// heldUploadPrefix starts the IDs of the cache's own uploads
// (writeback.Uploads), which S3 never has.
const heldUploadPrefix = "distcache-"

// IsHeldUploadID reports whether id is one of the cache's own uploads.
func IsHeldUploadID(id string) bool { return strings.HasPrefix(id, heldUploadPrefix) }

// S3Query is the query to ask S3 for the page q asks for: an upload-id
// marker of the cache's own names nothing S3 knows, and the cache lists its
// uploads of a key after S3's, so S3 is asked for the keys after it.
func (q UploadsRequest) S3Query(v url.Values) url.Values {
	if IsHeldUploadID(q.UploadIDMarker) {
		v = maps.Clone(v) // Del leaves the caller's values alone
		v.Del("upload-id-marker")
	}
	return v
}

// after reports whether upload u (held: one of the cache's), whose entry
// is e (a common prefix when isPrefix), comes after q's markers. A key's
// uploads are in the order of their IDs, S3's before the cache's: after
// an S3 upload of the marker key come S3's of greater IDs and all the
// cache's, after one of the cache's those of greater IDs.
func (q UploadsRequest) after(u *Upload, held bool, e string, isPrefix bool) bool {
	switch {
	case isPrefix:
		return e > q.KeyMarker
	case u.Key != q.KeyMarker:
		return u.Key > q.KeyMarker
	case q.UploadIDMarker == "":
		return false
	case IsHeldUploadID(q.UploadIDMarker):
		return held && u.UploadID > q.UploadIDMarker
	}
	return held || u.UploadID > q.UploadIDMarker
}

// MergeUploads adds held, the cache's own uploads under way (never in S3),
// to S3's page for q: in key order, a key's held uploads after S3's, each
// in the order of their IDs, grouped under common prefixes when q has a
// delimiter, at most q.MaxUploads entries (uploads and prefixes) with the
// markers of the last one when more follow. Held uploads past the end of
// a truncated S3 page wait for the page that covers them.
func MergeUploads(page *UploadsPage, q UploadsRequest, held []Upload) {
	type item struct {
		key    string // the upload's key, or the common prefix
		upload *Upload
		held   bool
	}
	// The last entry S3's page covers, when more follow.
	var bound string
	if page.IsTruncated {
		for _, u := range page.Uploads {
			bound = max(bound, u.Key)
		}
		for _, cp := range page.CommonPrefixes {
			bound = max(bound, cp.Prefix)
		}
	}
	var items []item
	prefixes := map[string]bool{}
	// S3's entries are held to the request too: not every S3 does
	// (MinIO ignores the markers and max-uploads).
	add := func(u *Upload, held bool) {
		if !strings.HasPrefix(u.Key, q.Prefix) {
			return
		}
		e, isPrefix := entryOf(q.Prefix, q.Delimiter, u.Key)
		switch {
		case !q.after(u, held, e, isPrefix):
			return // listed on an earlier page
		case held && page.IsTruncated && e > bound:
			return // S3's next page covers it
		case isPrefix:
			if !prefixes[e] {
				prefixes[e] = true
				items = append(items, item{key: e})
			}
			return
		}
		items = append(items, item{key: u.Key, upload: u, held: held})
	}
	for i := range page.Uploads {
		add(&page.Uploads[i], false)
	}
	for _, cp := range page.CommonPrefixes {
		if strings.HasPrefix(cp.Prefix, q.Prefix) && cp.Prefix > q.KeyMarker && !prefixes[cp.Prefix] {
			prefixes[cp.Prefix] = true
			items = append(items, item{key: cp.Prefix})
		}
	}
	for i := range held {
		add(&held[i], true)
	}
	sort.SliceStable(items, func(i, j int) bool {
		a, b := items[i], items[j]
		if a.key != b.key {
			return a.key < b.key
		}
		if a.upload == nil || b.upload == nil {
			return a.upload == nil && b.upload != nil
		}
		if a.held != b.held {
			return !a.held // S3's uploads of a key first
		}
		return a.upload.UploadID < b.upload.UploadID
	})
	most := q.MaxUploads
	if most <= 0 {
		most = 1000
	}
	truncated := len(items) > most
	if truncated {
		items = items[:most]
	}
	page.Uploads, page.CommonPrefixes = page.Uploads[:0:0], page.CommonPrefixes[:0:0]
	for _, it := range items {
		if it.upload == nil {
			page.CommonPrefixes = append(page.CommonPrefixes, CommonPrefix{Prefix: it.key})
		} else {
			page.Uploads = append(page.Uploads, *it.upload)
		}
	}
	if truncated {
		last := items[len(items)-1]
		page.IsTruncated, page.NextKeyMarker, page.NextUploadIDMarker = true, last.key, ""
		if last.upload != nil {
			page.NextUploadIDMarker = last.upload.UploadID
		}
	}
}
