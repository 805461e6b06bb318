package sigv4

import (
	"net/http"
	"net/url"
	"slices"
	"strconv"
	"strings"
)

// This file builds the parts of the SigV4 canonical request:
//
//	Method \n CanonicalURI \n CanonicalQuery \n CanonicalHeaders \n SignedHeaders \n HashedPayload
//
// S3 differs from other services in one way that matters here: the path is
// URI-encoded once (never twice) and not normalised ("//" and "/./" stay).

const upperHex = "0123456789ABCDEF"

// unreserved reports the RFC 3986 unreserved characters SigV4 leaves as they
// are: A-Z a-z 0-9 - _ . ~. Everything else is %XX-encoded, uppercase hex,
// byte by byte (so UTF-8 sequences become several escapes).
func unreserved(c byte) bool {
	return 'A' <= c && c <= 'Z' || 'a' <= c && c <= 'z' || '0' <= c && c <= '9' ||
		c == '-' || c == '_' || c == '.' || c == '~'
}

// EscapePath encodes a bucket or key for a request path as S3 and SigV4
// expect (UriEncode with '/' kept): every byte except unreserved characters
// and '/' percent-encoded. The gateway escapes the paths it sends nodes
// with it, and a node the paths it sends S3.
func EscapePath(s string) string { return uriEncode(s, true) }

// uriEncode is the SigV4 UriEncode function. With keepSlash, '/' is left as
// is (for the path); otherwise it becomes %2F (for query names and values).
func uriEncode(s string, keepSlash bool) string {
	n := 0
	for i := 0; i < len(s); i++ {
		if c := s[i]; !unreserved(c) && !(keepSlash && c == '/') {
			n++
		}
	}
	if n == 0 {
		return s
	}
	var b strings.Builder
	b.Grow(len(s) + 2*n)
	for i := 0; i < len(s); i++ {
		c := s[i]
		if unreserved(c) || keepSlash && c == '/' {
			b.WriteByte(c)
			continue
		}
		b.WriteByte('%')
		b.WriteByte(upperHex[c>>4])
		b.WriteByte(upperHex[c&15])
	}
	return b.String()
}

// canonicalURIs returns the canonical URIs to try, best first (only the
// first unless all is set, which is all a conforming client needs). The first
// is the spec's form: the decoded path, URI-encoded once with '/' kept,
// which is what the AWS SDKs send and sign. The second, when different, is
// the path exactly as it appeared on the request line, for clients (curl)
// that leave sub-delimiters such as ( ) ! * ' unencoded on the wire and sign
// them that way. Both decode to the same path, so accepting either lets no
// one change what the request addresses.
func canonicalURIs(r *http.Request, all bool) []string {
	first := canonicalURI(r)
	if !all {
		return []string{first}
	}
	if raw := rawPath(r); raw != first {
		return []string{first, raw}
	}
	return []string{first}
}

// canonicalURI is the first of canonicalURIs: the spec's form.
func canonicalURI(r *http.Request) string {
	p := r.URL.Path
	if p == "" {
		p = "/"
	}
	return uriEncode(p, true)
}

// rawPath is the path as sent: from RequestURI when the server filled it in
// (origin-form), otherwise Go's escaped form of the URL path.
func rawPath(r *http.Request) string {
	if u := r.RequestURI; strings.HasPrefix(u, "/") {
		if i := strings.IndexByte(u, '?'); i >= 0 {
			u = u[:i]
		}
		return u
	}
	if p := r.URL.EscapedPath(); p != "" {
		return p
	}
	return "/"
}

// queryParam is one name=value pair of the query string, raw (as on the
// wire) and decoded.
type queryParam struct {
	rawName, rawValue string
	name, value       string
}

// parseQuery splits a raw query string into its pairs, keeping order and
// duplicates. Pairs are separated by '&' only; a pair without '=' has an
// empty value. '+' decodes to a space, as url.ParseQuery (and so the SDKs'
// own canonicalisation) does; an undecodable escape is kept raw.
func parseQuery(raw string) []queryParam {
	if raw == "" {
		return nil
	}
	ps := make([]queryParam, 0, strings.Count(raw, "&")+1)
	for part := range strings.SplitSeq(raw, "&") {
		if part == "" {
			continue
		}
		rn, rv, _ := strings.Cut(part, "=")
		ps = append(ps, queryParam{rawName: rn, rawValue: rv, name: queryUnescape(rn), value: queryUnescape(rv)})
	}
	return ps
}

func queryUnescape(s string) string {
	if !strings.ContainsAny(s, "%+") {
		return s
	}
	if u, err := url.QueryUnescape(s); err == nil {
		return u
	}
	return s
}

// lookup returns the decoded value of the first parameter named name.
func lookup(ps []queryParam, name string) (string, bool) {
	for _, p := range ps {
		if p.name == name {
			return p.value, true
		}
	}
	return "", false
}

// canonicalQuery is the first of canonicalQueries: the spec's form. A
// query already in that form (every pair name=value of unreserved
// characters only, so decoding and encoding leave it as it is, sorted, no
// empty pairs), as the SDKs send GetObject's ?x-id=GetObject, is its own
// canonical form.
func canonicalQuery(ps []queryParam, rawQuery, skip string) string {
	if skip == "" && inCanonicalForm(ps, rawQuery) {
		return rawQuery
	}
	return canonicalQueries(ps, rawQuery, skip, false)[0]
}

func inCanonicalForm(ps []queryParam, rawQuery string) bool {
	rest := rawQuery
	for i, p := range ps {
		if !allUnreserved(p.rawName) || !allUnreserved(p.rawValue) {
			return false
		}
		if i > 0 {
			if c := strings.Compare(ps[i-1].rawName, p.rawName); c > 0 || c == 0 && ps[i-1].rawValue > p.rawValue {
				return false
			}
			var ok bool
			if rest, ok = strings.CutPrefix(rest, "&"); !ok {
				return false
			}
		}
		var ok bool
		if rest, ok = cutPair(rest, p.rawName, p.rawValue); !ok {
			return false
		}
	}
	return rest == ""
}

// cutPair cuts name=value from the start of s.
func cutPair(s, name, value string) (string, bool) {
	if len(s) < len(name)+1+len(value) || s[:len(name)] != name || s[len(name)] != '=' ||
		s[len(name)+1:len(name)+1+len(value)] != value {
		return s, false
	}
	return s[len(name)+1+len(value):], true
}

func allUnreserved(s string) bool {
	for i := 0; i < len(s); i++ {
		if !unreserved(s[i]) {
			return false
		}
	}
	return true
}

// checkQuery returns url.ParseQuery's error for raw, if any, without
// building the map when raw cannot have one: without ';' or '%' (the
// errors it reports are a ';' separator and a bad escape) and with far
// fewer parameters than its limit.
func checkQuery(raw string) error {
	if !strings.ContainsAny(raw, ";%") && strings.Count(raw, "&") < 100 {
		return nil
	}
	_, err := url.ParseQuery(raw)
	return err
}

// canonicalQueries returns the canonical query strings to try, best first
// (only the first unless all is set); parameters named skip (X-Amz-Signature for presigned URLs) are left out.
// The first is the spec's: every name and value decoded, URI-encoded with
// the SigV4 rules, sorted by name then value. The others serve clients that
// sign their wire form without re-encoding it: the pairs as sent, sorted,
// and (curl before 8.0) the query string exactly as sent. All of them
// decode to the same parameters, which is what the gateway acts on.
func canonicalQueries(ps []queryParam, rawQuery, skip string, all bool) []string {
	if len(ps) == 0 {
		return []string{""}
	}
	type pair struct{ n, v string }
	enc := make([]pair, 0, len(ps))
	raw := make([]pair, 0, len(ps))
	for _, p := range ps {
		if skip != "" && p.name == skip {
			continue
		}
		enc = append(enc, pair{uriEncode(p.name, false), uriEncode(p.value, false)})
		if all {
			raw = append(raw, pair{p.rawName, p.rawValue})
		}
	}
	join := func(s []pair) string {
		slices.SortFunc(s, func(a, b pair) int {
			if c := strings.Compare(a.n, b.n); c != 0 {
				return c
			}
			return strings.Compare(a.v, b.v)
		})
		var b strings.Builder
		for i, p := range s {
			if i > 0 {
				b.WriteByte('&')
			}
			b.WriteString(p.n)
			b.WriteByte('=')
			b.WriteString(p.v)
		}
		return b.String()
	}
	out := []string{join(enc)}
	if !all {
		return out
	}
	for _, q := range []string{join(raw), rawQuery} {
		if skip != "" && q == rawQuery {
			continue // the signature itself is in there
		}
		if !slices.Contains(out, q) {
			out = append(out, q)
		}
	}
	return out
}

// headerValue returns the canonical value of the header named name
// (lowercase) as the client sent it: all its values trimmed, inner runs of
// spaces collapsed, joined with ','. It reports false when the request does
// not carry the header. Go's server moves Host to r.Host and
// Transfer-Encoding to r.TransferEncoding, and drops Content-Length when the
// body is chunked; those are read from where Go put them.
func headerValue(r *http.Request, name string) (string, bool) {
	switch name {
	case "host":
		return trimAll(r.Host), r.Host != ""
	case "transfer-encoding":
		if len(r.TransferEncoding) > 0 {
			return strings.Join(r.TransferEncoding, ","), true
		}
	case "content-length":
		if vs := r.Header["Content-Length"]; len(vs) > 0 {
			return joinValues(vs), true
		}
		if r.ContentLength > 0 {
			return strconv.FormatInt(r.ContentLength, 10), true
		}
		return "", false
	}
	vs, ok := headerByLowerName(r.Header, name)
	if !ok {
		// Header names Go could not canonicalise are stored as sent.
		for k, v := range r.Header {
			if strings.EqualFold(k, name) {
				vs, ok = v, true
				break
			}
		}
	}
	if !ok {
		return "", false
	}
	return joinValues(vs), true
}

// headerByLowerName is h[http.CanonicalHeaderKey(name)] for a lower-case
// name, without building the canonical name as a string.
func headerByLowerName(h http.Header, name string) ([]string, bool) {
	var buf [64]byte
	if len(name) > len(buf) {
		vs, ok := h[http.CanonicalHeaderKey(name)]
		return vs, ok
	}
	k := buf[:len(name)]
	upper := true
	for i := 0; i < len(name); i++ {
		c := name[i]
		if !tokenByte(c) {
			// CanonicalHeaderKey leaves such a name as it is.
			vs, ok := h[name]
			return vs, ok
		}
		if upper && 'a' <= c && c <= 'z' {
			c -= 'a' - 'A'
		} else if !upper && 'A' <= c && c <= 'Z' {
			c += 'a' - 'A'
		}
		k[i] = c
		upper = c == '-'
	}
	vs, ok := h[string(k)]
	return vs, ok
}

// tokenByte reports the bytes of an HTTP token (RFC 9110 tchar), the bytes
// a header name CanonicalHeaderKey changes may have.
func tokenByte(c byte) bool { return tokenBytes[c] }

// tokenBytes is tokenByte's table: it runs for every byte of every signed
// header name.
var tokenBytes = func() (t [256]bool) {
	for c := range 256 {
		t[c] = 'a' <= c && c <= 'z' || 'A' <= c && c <= 'Z' || '0' <= c && c <= '9' || strings.IndexByte("!#$%&'*+-.^_`|~", byte(c)) >= 0
	}
	return t
}()

func joinValues(vs []string) string {
	if len(vs) == 1 {
		return trimAll(vs[0])
	}
	out := make([]string, len(vs))
	for i, v := range vs {
		out[i] = trimAll(v)
	}
	return strings.Join(out, ",")
}

// trimAll collapses inner runs of spaces to one and trims leading and
// trailing white space, the SigV4 Trimall function as aws-sdk-go-v2 applies
// it: the ends are trimmed of Unicode white space (strings.TrimSpace), so a
// value that starts or ends with, say, a no-break space verifies.
func trimAll(s string) string {
	s = strings.TrimSpace(s)
	if !strings.Contains(s, "  ") {
		return s
	}
	var b strings.Builder
	b.Grow(len(s))
	space := false
	for i := 0; i < len(s); i++ {
		c := s[i]
		if c == ' ' {
			if space {
				continue
			}
			space = true
		} else {
			space = false
		}
		b.WriteByte(c)
	}
	return b.String()
}
