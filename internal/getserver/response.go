package getserver

import (
	"net/http"
	"net/textproto"
	"strconv"
	"strings"
	"sync/atomic"
	"time"

	"golang.org/x/net/http/httpguts"
)

// bufferBeforeChunking is how much of a body without a Content-Length is
// held before the head is sent: a body that ends within it gets a
// Content-Length, a longer one is chunked (net/http's 2048).
const bufferBeforeChunking = 2048

// response is the ResponseWriter of a request served here. Its framing
// follows net/http's chunkWriter.writeHeader, cut down to bodiless GET and
// HEAD requests.
type response struct {
	c      *conn
	req    *http.Request
	isHEAD bool
	header http.Header
	// snapshot is the header as it was at WriteHeader, when the head is
	// sent later (net/http's: later changes are not sent).
	snapshot      http.Header
	status        int
	wroteHeader   bool
	sentHead      bool
	chunking      bool
	closeAfter    bool
	handlerDone   bool
	contentLength int64 // -1: not declared
	written       int64
	held          []byte // body held before the head is sent
	werr          error
}

func newResponse(c *conn, req *http.Request) *response {
	return &response{c: c, req: req, isHEAD: req.Method == http.MethodHead, header: make(http.Header, 16), contentLength: -1}
}

func (w *response) Header() http.Header { return w.header }

func (w *response) WriteHeader(code int) {
	if code < 100 || code > 999 {
		panic("invalid WriteHeader code " + strconv.Itoa(code)) // as net/http
	}
	if w.wroteHeader {
		return
	}
	if code >= 100 && code <= 199 && code != http.StatusSwitchingProtocols {
		w.writeInformational(code)
		return
	}
	w.wroteHeader, w.status = true, code
	if cl := w.header.Get("Content-Length"); cl != "" {
		v, err := strconv.ParseInt(cl, 10, 64)
		if err == nil && v >= 0 {
			w.contentLength = v
		} else {
			w.c.s.logf("http: invalid Content-Length of %q", cl)
			w.header.Del("Content-Length")
		}
	}
	if w.contentLength != -1 && !w.maySniff() {
		w.sendHead(nil) // nothing left to decide: no copy of the header
		return
	}
	w.snapshot = w.header.Clone()
}

// maySniff reports whether the head may take a Content-Type from the body.
func (w *response) maySniff() bool {
	_, haveType := w.header["Content-Type"]
	return !haveType && w.header.Get("Content-Encoding") == "" && w.header.Get("Transfer-Encoding") == "" &&
		bodyAllowedForStatus(w.status)
}

func (w *response) writeInformational(code int) {
	b := w.c.bw
	writeStatusLine(b, w.req.ProtoAtLeast(1, 1), code)
	w.writeFields(w.header, excludedNoBody)
	_, _ = b.WriteString("\r\n")
	_ = b.Flush()
}

func (w *response) Write(p []byte) (int, error) {
	if !w.wroteHeader {
		w.WriteHeader(http.StatusOK)
	}
	if len(p) == 0 {
		return 0, nil
	}
	if !bodyAllowedForStatus(w.status) {
		return 0, http.ErrBodyNotAllowed
	}
	w.written += int64(len(p))
	if w.contentLength != -1 && w.written > w.contentLength {
		return 0, http.ErrContentLength
	}
	if !w.sentHead {
		if len(w.held)+len(p) <= bufferBeforeChunking {
			w.held = append(w.held, p...)
			return len(p), nil
		}
		held := w.held
		w.held = nil
		w.sendHead(append(held, p...))
		if err := w.writeBody(held); err != nil {
			return 0, err
		}
	}
	if err := w.writeBody(p); err != nil {
		return 0, err
	}
	return len(p), nil
}

// writeBody sends body bytes (none for HEAD), chunked or not.
func (w *response) writeBody(p []byte) error {
	if w.isHEAD || len(p) == 0 || w.werr != nil {
		return w.werr
	}
	b := w.c.bw
	if w.chunking {
		_, _ = b.WriteString(strconv.FormatInt(int64(len(p)), 16))
		_, _ = b.WriteString("\r\n")
	}
	if _, err := b.Write(p); err != nil {
		w.werr = err
		return err
	}
	if w.chunking {
		_, w.werr = b.WriteString("\r\n")
	}
	return w.werr
}

// Flush sends the head and what is written (http.Flusher).
func (w *response) Flush() {
	if !w.wroteHeader {
		w.WriteHeader(http.StatusOK)
	}
	w.sendHeld()
	if err := w.c.bw.Flush(); err != nil && w.werr == nil {
		w.werr = err
	}
}

// date is the Date of answers, made once a second: formatting it took a
// few percent of a 64 KiB hit's CPU.
var date atomic.Pointer[datedSecond]

type datedSecond struct {
	unix int64
	text string
}

func httpDate() string {
	now := time.Now()
	if d := date.Load(); d != nil && d.unix == now.Unix() {
		return d.text
	}
	d := &datedSecond{unix: now.Unix(), text: now.UTC().Format(http.TimeFormat)}
	date.Store(d)
	return d.text
}

// sendHeld sends the head, if not yet sent, and the body held for it.
func (w *response) sendHeld() {
	if !w.sentHead {
		held := w.held
		w.held = nil
		w.sendHead(held)
		_ = w.writeBody(held)
	}
}

// SetWriteDeadline sets the connection's (http.ResponseController's).
func (w *response) SetWriteDeadline(t time.Time) error { return w.c.rwc.SetWriteDeadline(t) }

// finish ends the answer once the handler has returned.
func (w *response) finish() error {
	w.handlerDone = true
	if !w.wroteHeader {
		w.WriteHeader(http.StatusOK)
	}
	w.sendHeld()
	if w.chunking && w.werr == nil {
		_, w.werr = w.c.bw.WriteString("0\r\n\r\n")
	}
	if err := w.c.bw.Flush(); err != nil && w.werr == nil {
		w.werr = err
	}
	return w.werr
}

// reusable reports whether the connection may serve another request: not
// if it is to close, or the body was shorter than its Content-Length.
func (w *response) reusable() bool {
	if w.closeAfter || w.werr != nil {
		return false
	}
	return w.isHEAD || w.contentLength == -1 || !bodyAllowedForStatus(w.status) || w.contentLength == w.written
}

// sendHead writes the status line and the header, p being the first of
// the body (all of it once the handler is done): net/http's rules.
func (w *response) sendHead(p []byte) {
	w.sentHead = true
	header := w.header
	if w.snapshot != nil {
		header = w.snapshot
	}
	keepAlives := !w.c.s.shutdown.Load()
	var extra extraHeader
	var exclude map[string]bool
	del := func(k string) {
		if _, ok := header[k]; ok {
			if exclude == nil {
				exclude = make(map[string]bool)
			}
			exclude[k] = true
		}
	}
	te := header.Get("Transfer-Encoding")
	hasTE := te != ""
	bodyAllowed := bodyAllowedForStatus(w.status)
	if w.handlerDone && !hasTE && bodyAllowed && !has(header, "Content-Length") && (!w.isHEAD || len(p) > 0) {
		w.contentLength = int64(len(p))
		extra.contentLength = strconv.Itoa(len(p))
	}
	wants10KeepAlive := w.req.ProtoMajor == 1 && w.req.ProtoMinor == 0 && hasToken(w.req.Header.Get("Connection"), "keep-alive")
	wantsClose := w.req.Close || hasToken(w.req.Header.Get("Connection"), "close")
	hasCL := w.contentLength != -1
	if wants10KeepAlive && (w.isHEAD || hasCL || !bodyAllowed) {
		if _, ok := header["Connection"]; !ok {
			extra.connection = "keep-alive"
		}
	} else if !w.req.ProtoAtLeast(1, 1) || wantsClose {
		w.closeAfter = true
	}
	if header.Get("Connection") == "close" || !keepAlives {
		w.closeAfter = true
	}
	if bodyAllowed {
		_, haveType := header["Content-Type"]
		if header.Get("Content-Encoding") == "" && !haveType && !hasTE && len(p) > 0 {
			extra.contentType = http.DetectContentType(p)
		}
	} else {
		for _, k := range suppressedHeaders(w.status) {
			del(k)
		}
	}
	if !has(header, "Date") {
		extra.date = httpDate()
	}
	if hasCL && hasTE && te != "identity" {
		w.c.s.logf("http: WriteHeader called with both Transfer-Encoding of %q and a Content-Length of %d", te, w.contentLength)
		del("Content-Length")
		hasCL = false
	}
	switch {
	case w.isHEAD || !bodyAllowed || w.status == http.StatusNoContent, hasCL:
		del("Transfer-Encoding")
	case w.req.ProtoAtLeast(1, 1):
		if hasTE && te == "identity" {
			w.closeAfter = true
			del("Transfer-Encoding")
		} else {
			w.chunking = true
			extra.transferEncoding = "chunked"
			if hasTE && te == "chunked" {
				del("Transfer-Encoding")
			}
		}
	default: // HTTP/1.0 without a length: the end of the body is the end of the connection
		w.closeAfter = true
		del("Transfer-Encoding")
	}
	if w.chunking {
		del("Content-Length")
	}
	if w.closeAfter && (!keepAlives || !hasToken(header.Get("Connection"), "close")) {
		del("Connection")
		if w.req.ProtoAtLeast(1, 1) {
			extra.connection = "close"
		}
	}

	b := w.c.bw
	writeStatusLine(b, w.req.ProtoAtLeast(1, 1), w.status)
	w.writeFields(header, exclude)
	extra.write(b)
	_, _ = b.WriteString("\r\n")
}

// writeFields writes the header's fields but those excluded, values with
// their line breaks made spaces (as net/http's Header.Write).
func (w *response) writeFields(h http.Header, exclude map[string]bool) {
	b := w.c.bw
	for k, vv := range h {
		if exclude[k] || !httpguts.ValidHeaderFieldName(k) {
			continue
		}
		for _, v := range vv {
			if strings.ContainsAny(v, "\r\n") {
				v = newlineToSpace.Replace(v)
			}
			_, _ = b.WriteString(k)
			_, _ = b.WriteString(": ")
			_, _ = b.WriteString(textproto.TrimString(v))
			_, _ = b.WriteString("\r\n")
		}
	}
}

var (
	newlineToSpace = strings.NewReplacer("\n", " ", "\r", " ")
	excludedNoBody = map[string]bool{"Content-Length": true, "Transfer-Encoding": true}
)

// extraHeader is what the server adds to a handler's header.
type extraHeader struct {
	contentType, connection, transferEncoding, date, contentLength string
}

func (e *extraHeader) write(b interface{ WriteString(string) (int, error) }) {
	for _, f := range [...]struct{ k, v string }{
		{"Content-Type", e.contentType}, {"Connection", e.connection}, {"Transfer-Encoding", e.transferEncoding},
		{"Date", e.date}, {"Content-Length", e.contentLength},
	} {
		if f.v != "" {
			_, _ = b.WriteString(f.k)
			_, _ = b.WriteString(": ")
			_, _ = b.WriteString(f.v)
			_, _ = b.WriteString("\r\n")
		}
	}
}

func writeStatusLine(b interface{ WriteString(string) (int, error) }, is11 bool, code int) {
	if is11 {
		_, _ = b.WriteString("HTTP/1.1 ")
	} else {
		_, _ = b.WriteString("HTTP/1.0 ")
	}
	_, _ = b.WriteString(strconv.Itoa(code))
	_, _ = b.WriteString(" ")
	if text := http.StatusText(code); text != "" {
		_, _ = b.WriteString(text)
	} else {
		_, _ = b.WriteString("status code " + strconv.Itoa(code))
	}
	_, _ = b.WriteString("\r\n")
}

// has reports whether h has the canonical key k.
func has(h http.Header, k string) bool {
	_, ok := h[k]
	return ok
}

func bodyAllowedForStatus(status int) bool {
	switch {
	case status >= 100 && status <= 199:
		return false
	case status == http.StatusNoContent, status == http.StatusNotModified:
		return false
	}
	return true
}

func suppressedHeaders(status int) []string {
	switch {
	case status == http.StatusNotModified:
		return []string{"Content-Type", "Content-Length", "Transfer-Encoding"}
	case !bodyAllowedForStatus(status):
		return []string{"Content-Length", "Transfer-Encoding"}
	}
	return nil
}

// hasToken reports whether the comma-separated list v holds token,
// case-insensitively (net/http's hasToken).
func hasToken(v, token string) bool {
	for f := range strings.SplitSeq(v, ",") {
		if strings.EqualFold(textproto.TrimString(f), token) {
			return true
		}
	}
	return false
}
