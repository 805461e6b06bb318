package gateway

import "io"

// holdBack delivers a request body one byte late: the last byte is handed
// out only after the underlying reader returned io.EOF. sigv4 checks a
// body's signature, content SHA-256 and declared checksums when it reaches
// the end, and reports a mismatch in place of io.EOF; by then every byte
// has been read. Go's HTTP client, copying exactly Content-Length bytes
// upstream, would have sent all of them and only noticed the error on its
// final read, so the cache node (or S3) would have received a complete,
// plausible body. Holding the last byte back until the end is verified
// makes a failed verification a short body upstream, which no server
// commits.
type holdBack struct {
	r          io.Reader
	buf        []byte
	start, end int
	err        error
}

func newHoldBack(r io.Reader) *holdBack {
	return &holdBack{r: r, buf: make([]byte, 32<<10)}
}

func (h *holdBack) Read(p []byte) (int, error) {
	if len(p) == 0 {
		return 0, nil
	}
	for {
		switch {
		case h.err == io.EOF:
			n := copy(p, h.buf[h.start:h.end])
			h.start += n
			if h.start == h.end {
				return n, io.EOF
			}
			return n, nil
		case h.err != nil:
			return 0, h.err // the held byte is never released
		case h.end-h.start > 1:
			n := copy(p, h.buf[h.start:h.end-1])
			h.start += n
			return n, nil
		}
		// At most one byte buffered: keep it and read more.
		h.end = copy(h.buf, h.buf[h.start:h.end])
		h.start = 0
		n, err := h.r.Read(h.buf[h.end:])
		h.end += n
		h.err = err
	}
}

// countingReader counts the bytes read through it.
type countingReader struct {
	r io.Reader
	n int64
}

func (c *countingReader) Read(p []byte) (int, error) {
	n, err := c.r.Read(p)
	c.n += int64(n)
	return n, err
}
