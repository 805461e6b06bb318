package nodeapi

import (
	"net/http"
	"strings"
	"time"

	"github.com/distcache/distcache/internal/chunk"
)

// HeaderStoredPrefix prefixes, on a node's metadata answer and on a PUT to
// a node, each header S3 keeps with the object (chunk.Headers):
// X-Distcache-Stored-X-Amz-Meta-Color carries X-Amz-Meta-Color. The
// prefix keeps them apart from the hop's own headers (a Cache-Control or
// Content-Encoding of the answer itself).
const HeaderStoredPrefix = "X-Distcache-Stored-"

// SetStored puts hs into h under HeaderStoredPrefix.
func SetStored(h http.Header, hs chunk.Headers) {
	for k, v := range hs {
		h[HeaderStoredPrefix+k] = []string{v}
	}
}

// Stored reads the headers SetStored put into h (nil when none).
func Stored(h http.Header) chunk.Headers {
	var hs chunk.Headers
	for k, vs := range h {
		name, ok := strings.CutPrefix(k, HeaderStoredPrefix)
		if !ok || len(vs) == 0 || !chunk.IsStoredHeader(name) {
			continue
		}
		if hs == nil {
			hs = chunk.Headers{}
		}
		hs[name] = vs[0]
	}
	return hs
}

// MetaResponse is the JSON body a node answers a successful PUT with: the
// new version's metadata as S3 (or the held version) has it.
type MetaResponse struct {
	Bucket       string        `json:"bucket"`
	Key          string        `json:"key"`
	Size         int64         `json:"size"`
	ETag         string        `json:"etag"`
	ContentType  string        `json:"contentType,omitempty"`
	LastModified time.Time     `json:"lastModified"`
	Headers      chunk.Headers `json:"headers,omitempty"`
	ChunkSize    int64         `json:"chunkSize"`
}
