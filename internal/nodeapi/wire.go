package nodeapi

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/textproto"
	"strconv"
	"strings"
)

// The HTTP/1.1 framing of read connections (ProtoRead), shared by the
// node's request parser and the client's answer parser: both read the same
// lean subset of HTTP/1.1 with a few allocations per message.

// ErrLineTooLong is a start or header line longer than the reader's buffer.
var ErrLineTooLong = errors.New("line too long")

// maxHeaderLines bounds a header block on a read connection: the node and
// the client each send a handful.
const maxHeaderLines = 16

// ReadLine reads one CRLF- (or LF-) terminated line without its ending; the
// slice is valid until the next read.
func ReadLine(br *bufio.Reader) ([]byte, error) {
	line, err := br.ReadSlice('\n')
	if err == bufio.ErrBufferFull {
		return nil, ErrLineTooLong
	}
	if err != nil {
		if err == io.EOF && len(line) > 0 {
			err = io.ErrUnexpectedEOF
		}
		return nil, err
	}
	line = line[:len(line)-1]
	if n := len(line); n > 0 && line[n-1] == '\r' {
		line = line[:n-1]
	}
	return line, nil
}

// ReadHeader reads a header block up to its empty line into h, its names
// in canonical form (headerName). All values share one string. A line
// without a colon, a name with a space or tab, or more than maxHeaderLines
// lines is an error, as for http.ReadRequest and http.ReadResponse.
func ReadHeader(br *bufio.Reader, h http.Header) error {
	var (
		names  [maxHeaderLines]string
		ends   [maxHeaderLines]int
		n      int
		values = make([]byte, 0, 512)
	)
	for {
		line, err := ReadLine(br)
		if err != nil {
			return err
		}
		if len(line) == 0 {
			break
		}
		k, v, ok := bytes.Cut(line, []byte{':'})
		if !ok || len(k) == 0 || n == len(names) || bytes.ContainsAny(k, " \t") {
			return fmt.Errorf("malformed or too many header lines (%q)", line)
		}
		names[n] = headerName(k)
		values = append(values, bytes.TrimSpace(v)...)
		ends[n] = len(values)
		n++
	}
	all := string(values)
	vals := make([]string, n)
	start := 0
	for i := 0; i < n; i++ {
		vals[i] = all[start:ends[i]]
		start = ends[i]
		if old, ok := h[names[i]]; ok {
			h[names[i]] = append(old[:len(old):len(old)], vals[i])
			continue
		}
		h[names[i]] = vals[i : i+1 : i+1]
	}
	return nil
}

// headerName is the canonical form of a header name, without allocating
// for the names sent on read connections: by clients (the first group) and
// by the node (the second).
func headerName(k []byte) string {
	switch string(k) {
	case "Host":
		return "Host"
	case "Range":
		return "Range"
	case "User-Agent":
		return "User-Agent"
	case "Accept-Encoding":
		return "Accept-Encoding"
	case "X-Distcache-Tenant":
		return "X-Distcache-Tenant"
	case "X-Distcache-Hop":
		return "X-Distcache-Hop"
	case "X-Distcache-Local-Only":
		return "X-Distcache-Local-Only"

	case "Etag":
		return "Etag"
	case "Content-Type":
		return "Content-Type"
	case "Content-Range":
		return "Content-Range"
	case "Last-Modified":
		return "Last-Modified"
	case "X-Distcache-Cache":
		return "X-Distcache-Cache"
	case "X-Distcache-Chunk-Size":
		return "X-Distcache-Chunk-Size"
	case "X-Distcache-Ring-Epoch":
		return "X-Distcache-Ring-Epoch"
	case "X-Distcache-Object-Size":
		return "X-Distcache-Object-Size"
	case "X-Distcache-Content-Type":
		return "X-Distcache-Content-Type"
	case "X-Distcache-Error":
		return "X-Distcache-Error"

	case "Connection": // both ways
		return "Connection"
	case "Content-Length":
		return "Content-Length"
	}
	return textproto.CanonicalMIMEHeaderKey(string(k))
}

// HasToken reports whether a comma-separated header value lists token.
func HasToken(values []string, token string) bool {
	for _, v := range values {
		for t := range strings.SplitSeq(v, ",") {
			if strings.EqualFold(strings.TrimSpace(t), token) {
				return true
			}
		}
	}
	return false
}

// ContentLength is the length a message's Content-Length values give: -1
// when there is none; an error when there are several or the one is not a
// non-negative decimal integer.
func ContentLength(values []string) (int64, error) {
	switch {
	case len(values) == 0:
		return -1, nil
	case len(values) > 1:
		return -1, errors.New("several Content-Length headers")
	}
	n, err := strconv.ParseInt(values[0], 10, 64)
	if err != nil || n < 0 {
		return -1, fmt.Errorf("bad Content-Length %q", values[0])
	}
	return n, nil
}
