package node

import (
	"net/url"
	"strings"
)

// readQuery is what a GET of the object API reads from the query string:
// the chunk index, the pinned ETag and a peer's object size.
type readQuery struct {
	hasChunk          bool
	chunk, etag, size string
}

// parseReadQuery reads chunk, etag and size from a raw query string exactly
// as url.ParseQuery followed by Get and Has would (first value wins, pairs
// with a ';' or a bad escape are skipped, '+' is a space), without building
// the map of every parameter: this runs for every chunk read.
func parseReadQuery(raw string) readQuery {
	if len(raw) > maxScannedQuery {
		// Unusual: leave the limits and corner cases of long queries to
		// net/url itself.
		v, _ := url.ParseQuery(raw)
		return readQuery{hasChunk: v.Has("chunk"), chunk: v.Get("chunk"), etag: v.Get("etag"), size: v.Get("size")}
	}
	var q readQuery
	var hasEtag, hasSize bool
	for raw != "" {
		var pair string
		pair, raw, _ = strings.Cut(raw, "&")
		if pair == "" || strings.Contains(pair, ";") {
			continue
		}
		key, value, _ := strings.Cut(pair, "=")
		key, ok := unescapeQuery(key)
		if !ok || (key != "chunk" || q.hasChunk) && (key != "etag" || hasEtag) && (key != "size" || hasSize) {
			continue
		}
		if value, ok = unescapeQuery(value); !ok {
			continue // url.ParseQuery drops the whole pair
		}
		switch key {
		case "chunk":
			q.chunk, q.hasChunk = value, true
		case "etag":
			q.etag, hasEtag = value, true
		case "size":
			q.size, hasSize = value, true
		}
	}
	return q
}

// maxScannedQuery is the longest query parseReadQuery scans itself.
const maxScannedQuery = 4096

// unescapeQuery is url.QueryUnescape, free when there is nothing to undo.
func unescapeQuery(s string) (string, bool) {
	if !strings.ContainsAny(s, "%+") {
		return s, true
	}
	u, err := url.QueryUnescape(s)
	return u, err == nil
}
