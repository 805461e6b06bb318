package node

import (
	"encoding/xml"
	"net/http"
	"strconv"
	"strings"

	"github.com/distcache/distcache/internal/chunk"
)

// objectAttributes is S3's GetObjectAttributes answer, with what a held
// version has: its ETag (unquoted, as S3 gives it here), its checksum
// when it keeps one, size, storage class, and for a multipart upload its
// number of parts.
type objectAttributes struct {
	XMLName      xml.Name           `xml:"GetObjectAttributesResponse"`
	Xmlns        string             `xml:"xmlns,attr"`
	ETag         string             `xml:"ETag,omitempty"`
	Checksum     *checksumAttribute `xml:"Checksum,omitempty"`
	ObjectParts  *objectParts       `xml:"ObjectParts,omitempty"`
	StorageClass string             `xml:"StorageClass,omitempty"`
	ObjectSize   *int64             `xml:"ObjectSize,omitempty"`
}

type checksumAttribute struct {
	CRC32     string `xml:"ChecksumCRC32,omitempty"`
	CRC32C    string `xml:"ChecksumCRC32C,omitempty"`
	CRC64NVME string `xml:"ChecksumCRC64NVME,omitempty"`
	SHA1      string `xml:"ChecksumSHA1,omitempty"`
	SHA256    string `xml:"ChecksumSHA256,omitempty"`
	Type      string `xml:"ChecksumType,omitempty"`
}

// checksumAttributeOf is the checksum h keeps, nil when none.
func checksumAttributeOf(h chunk.Headers) *checksumAttribute {
	c := checksumAttribute{CRC32: h["X-Amz-Checksum-Crc32"], CRC32C: h["X-Amz-Checksum-Crc32c"],
		CRC64NVME: h["X-Amz-Checksum-Crc64nvme"], SHA1: h["X-Amz-Checksum-Sha1"], SHA256: h["X-Amz-Checksum-Sha256"],
		Type: h[chunk.ChecksumTypeHeader]}
	if c == (checksumAttribute{Type: c.Type}) {
		return nil
	}
	return &c
}

type objectParts struct {
	PartsCount int `xml:"PartsCount"` // the SDKs' TotalPartsCount
}

// heldAttributes answers a GetObjectAttributes of a held key while its
// current version is held (S3 has none, or an older one); it reports false
// when S3 has the current version, which S3 then answers.
func (s *Server) heldAttributes(w http.ResponseWriter, r *http.Request, q request) bool {
	m, err := s.meta(r.Context(), q.caller, q.obj, false)
	switch {
	case err != nil:
		s.failCopy(w, q, asAPIError(err)) // S3's XML errors (NoSuchKey, ...)
		return true
	case m.Held == "":
		return false
	}
	want := map[string]bool{}
	for _, v := range r.Header.Values("X-Amz-Object-Attributes") {
		for _, a := range strings.Split(v, ",") {
			want[strings.TrimSpace(a)] = true
		}
	}
	out := objectAttributes{Xmlns: xmlns}
	if want["ETag"] {
		out.ETag = strings.Trim(m.ETag, `"`)
	}
	if want["Checksum"] {
		out.Checksum = checksumAttributeOf(m.Headers)
	}
	if want["StorageClass"] {
		out.StorageClass = "STANDARD"
	}
	if want["ObjectSize"] {
		out.ObjectSize = &m.Size
	}
	if _, parts, ok := strings.Cut(strings.Trim(m.ETag, `"`), "-"); ok && want["ObjectParts"] {
		if n, err := strconv.Atoi(parts); err == nil {
			out.ObjectParts = &objectParts{PartsCount: n}
		}
	}
	if !m.LastModified.IsZero() {
		w.Header().Set("Last-Modified", m.LastModified.UTC().Format(http.TimeFormat))
	}
	s.writeXML(w, q, out)
	return true
}
