package node

import (
	"net/http"
	"strings"
)

const objectsPrefix = "/v1/objects/"

// objectReadPath recognizes a GET /v1/objects/{bucket}/{key...} whose path
// needs neither cleaning nor unescaping, and returns the bucket and key the
// mux would give the handler. Anything else (escapes, "//", dot segments,
// characters the URL would escape, other methods) returns ok=false and is
// left to the mux, with its redirects and its 404 and 405 answers.
func objectReadPath(r *http.Request) (bucket, key string, ok bool) {
	if r.Method != http.MethodGet || r.URL.RawPath != "" || r.RequestURI == "*" {
		return "", "", false
	}
	p := r.URL.Path
	rest, found := strings.CutPrefix(p, objectsPrefix)
	if !found || !plainPath(p) {
		return "", "", false
	}
	bucket, key, found = strings.Cut(rest, "/")
	if !found || bucket == "" || key == "" {
		return "", "", false
	}
	return bucket, key, true
}

// plainPath reports whether p is made only of bytes a URL path carries
// unescaped (letters, digits, "-._~/"), has no empty segment ("//") and no
// "." or ".." segment: a path that the mux's cleaning leaves as it is and
// whose segments unescape to themselves.
func plainPath(p string) bool {
	for i := 0; i < len(p); i++ {
		c := p[i]
		switch {
		case 'a' <= c && c <= 'z', 'A' <= c && c <= 'Z', '0' <= c && c <= '9', c == '-', c == '_', c == '~':
		case c == '/':
			if i+1 < len(p) && p[i+1] == '/' {
				return false
			}
		case c == '.':
			// A segment of "." or "..": the dots run from a '/' to a '/'
			// or the end.
			j := i
			for j < len(p) && p[j] == '.' {
				j++
			}
			if i > 0 && p[i-1] == '/' && j-i <= 2 && (j == len(p) || p[j] == '/') {
				return false
			}
			i = j - 1
		default:
			return false
		}
	}
	return true
}
