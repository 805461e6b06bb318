package getserver

import (
	"net/http"
	"net/url"
	"strings"

	"golang.org/x/net/http/httpguts"
)

// parseRead builds the request of head (a whole head, CRLF CRLF at its
// end) when it is a read served here in a form whose parse by
// http.ReadRequest is known field by field: GET or HEAD of an origin-form
// target, HTTP/1.1 with one Host or HTTP/1.0 with at most one, fields of
// token names and visible-ASCII values, none of the fields that make
// ReadRequest or net/http's server do more (Content-Length,
// Transfer-Encoding, Expect, Upgrade, Pragma). ok is false for any other
// head, which then takes ReadRequest's way.
//
// Why: ReadRequest (textproto) was 12-15% of the gateway's CPU per 64 KiB
// hit. This takes one string for the whole head, slices the values out of
// it and shares one backing array among them: 8 allocations for the head
// of an SDK's GetObject where ReadRequest made 25, in 0.6-0.7x the time
// (BenchmarkReadHead).
func parseRead(head []byte) (req *http.Request, ok bool) {
	if !plainHead(head) {
		return nil, false
	}
	s := string(head)
	line, fields := cutLine(s)
	method, target, major, minor, ok := parseRequestLine(line)
	if !ok {
		return nil, false
	}
	u, err := url.ParseRequestURI(target)
	if err != nil {
		return nil, false // ReadRequest fails too: net/http answers it
	}
	req = &http.Request{Method: method, URL: u, Proto: line[len(line)-len("HTTP/1.1"):],
		ProtoMajor: major, ProtoMinor: minor, Body: http.NoBody, RequestURI: target}
	if req.Header, req.Host, ok = parseFields(fields); !ok {
		return nil, false
	}
	if req.Host == "" && minor == 1 {
		return nil, false // net/http answers 400
	}
	conn := req.Header["Connection"]
	hasClose := httpguts.HeaderValuesContainsToken(conn, "close")
	req.Close = hasClose || (minor == 0 && !httpguts.HeaderValuesContainsToken(conn, "keep-alive"))
	return req, true
}

// plainHead reports whether head holds only visible ASCII, spaces and tabs
// in lines each ended by CRLF: bytes whose meaning here and in textproto is
// the same (no obs-text, no control bytes, no bare CR or LF).
func plainHead(head []byte) bool {
	for i := 0; i < len(head); i++ {
		if !fieldByte[head[i]] {
			if head[i] != '\r' || i+1 == len(head) || head[i+1] != '\n' {
				return false
			}
			i++
		}
	}
	return true
}

// fieldByte marks visible ASCII, space and tab.
var fieldByte = func() (t [256]bool) {
	for c := 0x20; c < 0x7f; c++ {
		t[c] = true
	}
	t['\t'] = true
	return t
}()

// cutLine cuts the first line of s, a plainHead: each LF ends a CRLF.
func cutLine(s string) (line, rest string) {
	i := strings.IndexByte(s, '\n')
	if i < 0 {
		return s, ""
	}
	return s[:i-1], s[i+1:]
}

// trimSpaceTab trims spaces and tabs from both ends of s (textproto's trim).
func trimSpaceTab(s string) string {
	for len(s) > 0 && (s[0] == ' ' || s[0] == '\t') {
		s = s[1:]
	}
	for len(s) > 0 && (s[len(s)-1] == ' ' || s[len(s)-1] == '\t') {
		s = s[:len(s)-1]
	}
	return s
}

// parseRequestLine reads "GET /target HTTP/1.1".
func parseRequestLine(line string) (method, target string, major, minor int, ok bool) {
	switch {
	case strings.HasPrefix(line, "GET "):
		method, line = http.MethodGet, line[len("GET "):]
	case strings.HasPrefix(line, "HEAD "):
		method, line = http.MethodHead, line[len("HEAD "):]
	default:
		return "", "", 0, 0, false
	}
	target, proto, found := strings.Cut(line, " ")
	if !found || !strings.HasPrefix(target, "/") || strings.IndexByte(target, '\t') >= 0 {
		return "", "", 0, 0, false
	}
	switch proto {
	case "HTTP/1.1":
		return method, target, 1, 1, true
	case "HTTP/1.0":
		return method, target, 1, 0, true
	}
	return "", "", 0, 0, false
}

// parseFields reads the header fields of a head, from the line after the
// request line to the blank line, as textproto.Reader.ReadMIMEHeader reads
// them, less Host (returned apart, as http.ReadRequest does). ok is false
// for what this does not read as textproto would or what net/http would do
// more with (see parseRead).
func parseFields(fields string) (h http.Header, host string, ok bool) {
	n := strings.Count(fields, "\n") - 1 // the last is the blank line's
	if n < 0 || !strings.HasSuffix(fields, "\r\n\r\n") && fields != "\r\n" {
		return nil, "", false
	}
	h = make(http.Header, n)
	values := make([]string, n)
	hosts := 0
	for range n {
		var line string
		line, fields = cutLine(fields)
		name, value, found := strings.Cut(line, ":")
		// A line starting with a space or tab continues the one before
		// (obs-fold): textproto's way, not taken here (no valid name).
		if !found || !httpguts.ValidHeaderFieldName(name) {
			return nil, "", false
		}
		key := canonicalKey(name)
		value = trimSpaceTab(value)
		switch key {
		case "Host":
			if hosts++; hosts > 1 || !httpguts.ValidHostHeader(value) {
				return nil, "", false
			}
			host = value
			continue
		case "Content-Length", "Transfer-Encoding", "Expect", "Upgrade", "Pragma":
			return nil, "", false
		}
		if vv := h[key]; vv != nil {
			h[key] = append(vv, value) // a copy: the shared array is not written past its slot
			continue
		}
		values[0] = value
		h[key], values = values[:1:1], values[1:]
	}
	return h, host, true
}

// canonicalKey is http.CanonicalHeaderKey of a valid field name, without
// an allocation for the names S3 clients send: those already canonical
// are returned as they are, the rest interned or made.
func canonicalKey(name string) string {
	upper := true
	for i := 0; i < len(name); i++ {
		c := name[i]
		if upper && 'a' <= c && c <= 'z' || !upper && 'A' <= c && c <= 'Z' {
			return http.CanonicalHeaderKey(name)
		}
		upper = c == '-'
	}
	return name
}
