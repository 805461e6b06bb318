package client

import (
	"errors"
	"io"
	"net/http"
	"strings"
	"testing"
)

// FuzzNodeAnswer parses arbitrary node answers the way Stat, Put and the
// chunk reads do: metadata headers, the chunk size and error bodies. What is
// accepted as metadata has an ETag and a size >= 0; a chunk size is
// positive; an error answer always becomes an *Error with the status, a
// message and the retry class its status implies.
func FuzzNodeAnswer(f *testing.F) {
	f.Add(200, `"abc"`, "1048576", int64(-1), "4194304", "Mon, 02 Jan 2006 15:04:05 GMT", "")
	f.Add(200, "", "5", int64(5), "0", "", "")
	f.Add(200, "e", "-1", int64(10), "x", "garbage", "")
	f.Add(200, "e", "99999999999999999999", int64(0), "9223372036854775807", "", "")
	f.Add(503, "", "", int64(-1), "", "", `{"code":"SlowDown","message":"s3 is slow"}`)
	f.Add(404, "", "", int64(-1), "", "", `{"code":"","message":""}`)
	f.Add(500, "", "", int64(-1), "", "", "<html>proxy error</html>\n")
	f.Add(416, "", "", int64(-1), "", "", `{"code":1}`)
	f.Fuzz(func(t *testing.T, status int, etag, size string, contentLength int64, chunkSize, lastModified, body string) {
		h := http.Header{}
		for k, v := range map[string]string{"ETag": etag, headerSize: size, headerChunkSize: chunkSize, "Last-Modified": lastModified} {
			if v != "" {
				h.Set(k, v)
			}
		}
		resp := &http.Response{StatusCode: status, Header: h, ContentLength: contentLength, Body: io.NopCloser(strings.NewReader(body))}
		if m, err := metaFromHeader(resp); err == nil && (m.ETag == "" || m.Size < 0) {
			t.Fatalf("accepted metadata %+v", m)
		}
		c := &Client{}
		if err := c.checkChunkSize(opStat, "n:1", h); err == nil {
			if cs := c.chunkSize.Load(); chunkSize != "" && cs <= 0 {
				t.Fatalf("learnt chunk size %d from %q", cs, chunkSize)
			}
		}
		if status < 400 || status > 599 {
			return
		}
		e := answerError(opStat, "b", "k", "n:1", resp)
		var target *Error
		if !errors.As(error(e), &target) || e.Status != status || e.Message == "" && http.StatusText(status) != "" {
			t.Fatalf("answer %d %q became %+v", status, body, e)
		}
		if want := statusKind(status); want != nil && !errors.Is(e, want) {
			t.Fatalf("answer %d is not %v: %+v", status, want, e)
		}
		switch cls := classify(e); {
		case status < 500 && cls != done:
			t.Fatalf("answer %d (a 4xx every member would give) classified %v", status, cls)
		case status >= 500 && e.Code == "" && cls != nodeFailed:
			t.Fatalf("answer %d without a node error code (not the node API's) classified %v", status, cls)
		}
	})
}
