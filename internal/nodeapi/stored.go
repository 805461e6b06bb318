package nodeapi

import (
	"net/http"
	"strings"

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
