// Package s3list reads and writes S3's ListObjects and ListObjectsV2
// answers and merges into a page of S3's listing the objects the cache
// holds that S3 does not have yet (write-back and transient writes), so a
// listing through the cache shows exactly what S3 will.
package s3list

import (
	"encoding/base64"
	"encoding/xml"
	"errors"
	"net/url"
	"strings"
)

// Object is one entry of a listing's Contents, its key decoded.
type Object struct {
	Key               string   `xml:"Key"`
	LastModified      string   `xml:"LastModified"`
	ETag              string   `xml:"ETag"`
	ChecksumAlgorithm []string `xml:"ChecksumAlgorithm,omitempty"`
	Size              int64    `xml:"Size"`
	StorageClass      string   `xml:"StorageClass,omitempty"`
	Owner             *Owner   `xml:"Owner,omitempty"`
}

// Owner is an object's owner, as S3 gives it.
type Owner struct {
	ID          string `xml:"ID,omitempty"`
	DisplayName string `xml:"DisplayName,omitempty"`
}

// CommonPrefix is one entry of a listing's CommonPrefixes.
type CommonPrefix struct {
	Prefix string `xml:"Prefix"`
}

// Page is one ListObjects (V1) or ListObjectsV2 answer; keys, prefixes and
// markers are decoded when EncodingType is "url" and encoded again by
// Marshal.
type Page struct {
	XMLName               xml.Name       `xml:"ListBucketResult"`
	Xmlns                 string         `xml:"xmlns,attr,omitempty"`
	Name                  string         `xml:"Name"`
	Prefix                string         `xml:"Prefix"`
	Marker                *string        `xml:"Marker,omitempty"`
	NextMarker            string         `xml:"NextMarker,omitempty"`
	StartAfter            string         `xml:"StartAfter,omitempty"`
	ContinuationToken     string         `xml:"ContinuationToken,omitempty"`
	NextContinuationToken string         `xml:"NextContinuationToken,omitempty"`
	KeyCount              *int           `xml:"KeyCount,omitempty"`
	MaxKeys               int            `xml:"MaxKeys"`
	Delimiter             string         `xml:"Delimiter,omitempty"`
	EncodingType          string         `xml:"EncodingType,omitempty"`
	IsTruncated           bool           `xml:"IsTruncated"`
	Contents              []Object       `xml:"Contents"`
	CommonPrefixes        []CommonPrefix `xml:"CommonPrefixes"`
}

// V2 reports whether the page answers a ListObjectsV2 (which counts its
// keys) rather than a ListObjects.
func (p *Page) V2() bool { return p.KeyCount != nil }

// Prefixes are the page's common prefixes.
func (p *Page) Prefixes() []string {
	out := make([]string, len(p.CommonPrefixes))
	for i, c := range p.CommonPrefixes {
		out[i] = c.Prefix
	}
	return out
}

// Parse reads an S3 listing answer.
func Parse(body []byte) (*Page, error) { return parseListing[Page](body) }

// Marshal writes the page as S3 would.
func (p *Page) Marshal() ([]byte, error) {
	q := *p
	q.Contents = append([]Object(nil), p.Contents...)
	q.CommonPrefixes = append([]CommonPrefix(nil), p.CommonPrefixes...)
	if q.Xmlns == "" {
		q.Xmlns = "http://s3.amazonaws.com/doc/2006-03-01/"
	}
	return marshalListing(&q)
}

func (p *Page) encoded() bool { return p.EncodingType == "url" }

// listing is an answer whose keys, prefixes and markers encoding-type=url
// encodes (when encoded says it is): code rewrites each of them.
type listing interface {
	encoded() bool
	code(func(string) (string, error)) error
}

// parseListing reads body into a T, its keys decoded when S3 encoded them.
func parseListing[T any, P interface {
	*T
	listing
}](body []byte) (*T, error) {
	p := P(new(T))
	if err := xml.Unmarshal(body, p); err != nil {
		return nil, err
	}
	if p.encoded() {
		if err := p.code(url.QueryUnescape); err != nil {
			return nil, err
		}
	}
	return p, nil
}

// marshalListing writes p, a copy of the caller's own, as S3 would: its
// keys encoded when encoded.
func marshalListing(p listing) ([]byte, error) {
	if p.encoded() {
		if err := p.code(func(s string) (string, error) { return Escape(s), nil }); err != nil {
			return nil, err
		}
	}
	b, err := xml.Marshal(p)
	if err != nil {
		return nil, err
	}
	return append([]byte(xml.Header), b...), nil
}

// codeAll rewrites each of ss with f; the error joins f's errors.
func codeAll(f func(string) (string, error), ss []*string) error {
	var errs []error
	for _, s := range ss {
		v, err := f(*s)
		errs = append(errs, err)
		*s = v
	}
	return errors.Join(errs...)
}

// prefixFields are the prefixes of cps, for codeAll.
func prefixFields(ss []*string, cps []CommonPrefix) []*string {
	for i := range cps {
		ss = append(ss, &cps[i].Prefix)
	}
	return ss
}

// Escape is S3's encoding-type=url encoding of a key.
func Escape(s string) string {
	return strings.ReplaceAll(url.QueryEscape(s), "+", "%20")
}

// code applies f to every key, prefix and marker of the page.
func (p *Page) code(f func(string) (string, error)) error {
	ss := []*string{&p.Prefix, &p.Delimiter, &p.StartAfter, &p.NextMarker}
	if p.Marker != nil {
		ss = append(ss, p.Marker)
	}
	for i := range p.Contents {
		ss = append(ss, &p.Contents[i].Key)
	}
	return codeAll(f, prefixFields(ss, p.CommonPrefixes))
}

// tokenPrefix marks the continuation tokens the cache makes: they carry the
// last key or common prefix of the page they follow, which S3 takes as a
// start-after (S3's own tokens are opaque).
const tokenPrefix = "dc1-"

// Token is the continuation token that resumes a listing after key.
func Token(after string) string {
	return tokenPrefix + base64.RawURLEncoding.EncodeToString([]byte(after))
}

// ParseToken is the key a token made by Token resumes after; ok is false
// for any other token (S3's own).
func ParseToken(token string) (after string, ok bool) {
	rest, found := strings.CutPrefix(token, tokenPrefix)
	if !found {
		return "", false
	}
	b, err := base64.RawURLEncoding.DecodeString(rest)
	if err != nil {
		return "", false
	}
	return string(b), true
}
