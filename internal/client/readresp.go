package client

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strconv"

	"github.com/distcache/distcache/internal/nodeapi"
)

// readChunkResponse parses the status line and headers of an answer on a
// nodeapi.ProtoRead connection, where the node's read loop answers: HTTP/1.1,
// a body framed by Content-Length, or by the end of the connection (with
// "Connection: close"), never chunked. It makes what http.ReadResponse
// would for those answers with a few allocations instead of one per header
// line: the header names the node sends are constants, and all values
// share one string. Anything else is an error (the connection is then
// closed).
func readChunkResponse(br *bufio.Reader, req *http.Request) (*http.Response, error) {
	h := make(http.Header, 8)
	a, err := readAnswerHeader(br, h)
	if err != nil {
		return nil, err
	}
	resp := &http.Response{Status: a.status, StatusCode: a.code, Proto: "HTTP/1.1", ProtoMajor: 1, ProtoMinor: 1,
		Request: req, Header: h, ContentLength: a.length, Close: a.close}
	switch {
	case req.Method == http.MethodHead || a.code == http.StatusNoContent || a.code == http.StatusNotModified || a.code < 200:
		resp.Body = http.NoBody
	case resp.ContentLength == 0:
		resp.Body = http.NoBody
	case resp.ContentLength > 0:
		resp.Body = io.NopCloser(io.LimitReader(br, resp.ContentLength))
	default:
		resp.Body = io.NopCloser(br) // to the end of the connection
	}
	return resp, nil
}

// answerHeader is what readAnswerHeader learns of an answer.
type answerHeader struct {
	code   int
	status string // "206 Partial Content"
	length int64  // Content-Length, -1 when the body runs to the end of the connection
	close  bool
}

// readAnswerHeader reads an answer's status line and its header into h
// (which must be empty) and checks its framing.
func readAnswerHeader(br *bufio.Reader, h http.Header) (answerHeader, error) {
	a := answerHeader{length: -1}
	line, err := nodeapi.ReadLine(br)
	if err != nil {
		return a, err
	}
	proto, status, ok := bytes.Cut(line, []byte{' '})
	if !ok || string(proto) != "HTTP/1.1" || len(status) < 3 {
		return a, fmt.Errorf("client: malformed status line %q", line)
	}
	a.code, err = strconv.Atoi(string(status[:3]))
	if err != nil || a.code < 100 || a.code > 999 || len(status) > 3 && status[3] != ' ' {
		return a, fmt.Errorf("client: malformed status line %q", line)
	}
	a.status = statusText(a.code, status)
	if err := nodeapi.ReadHeader(br, h); err != nil {
		return a, fmt.Errorf("client: the answer's header: %w", err)
	}
	if len(h["Transfer-Encoding"]) > 0 {
		return a, errors.New("client: a chunked answer on a read connection")
	}
	if a.close = nodeapi.HasToken(h["Connection"], "close"); a.close {
		delete(h, "Connection") // as http.ReadResponse does
	}
	if a.length, err = nodeapi.ContentLength(h["Content-Length"]); err != nil {
		return a, fmt.Errorf("client: the answer's header: %w", err)
	}
	if a.length < 0 && !a.close {
		return a, errors.New("client: an answer with neither Content-Length nor Connection: close")
	}
	return a, nil
}

// statusText is the Status of a response ("206 Partial Content").
func statusText(code int, line []byte) string {
	switch code {
	case http.StatusOK:
		return "200 OK"
	case http.StatusPartialContent:
		return "206 Partial Content"
	}
	return string(line)
}
