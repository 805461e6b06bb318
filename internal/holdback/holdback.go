// Package holdback passes a body on one byte late, so that a failure
// found at its end keeps the whole of it from whoever copies a known
// length of it upstream.
package holdback

import "io"

// Reader delivers a body one byte late: the last byte is handed out only
// after the underlying reader returned io.EOF. A reader that checks a
// body (sigv4's signature, content SHA-256 and declared checksums; a
// declared SHA-256 in s3backend) finds out at the end and reports a
// mismatch in place of io.EOF; by then every byte has been read. Go's HTTP
// client, copying exactly Content-Length bytes upstream, would have sent
// all of them and only noticed the error on its final read, so the cache
// node (or S3) would have received a complete, plausible body. Holding the
// last byte back until the end is verified makes a failed verification a
// short body upstream, which no server commits.
//
// It reads straight into the caller's slice and keeps only the byte it
// holds: a buffer of its own put every byte of a large PUT through one
// more copy.
type Reader struct {
	r    io.Reader
	held byte
	has  bool  // held is a byte not handed out yet
	err  error // from r; io.EOF once the end is seen
}

// New returns a Reader passing r on one byte late.
func New(r io.Reader) *Reader { return &Reader{r: r} }

func (h *Reader) Read(p []byte) (int, error) {
	for len(p) > 0 {
		switch {
		case h.err == io.EOF:
			if !h.has {
				return 0, io.EOF
			}
			p[0], h.has = h.held, false
			return 1, io.EOF
		case h.err != nil:
			return 0, h.err // the held byte is never released
		}
		n := 0
		if h.has {
			if len(p) == 1 { // room for the held byte only: first see whether another follows
				var next [1]byte
				m, err := h.r.Read(next[:])
				h.err = err
				if m == 0 {
					continue
				}
				p[0], h.held = h.held, next[0]
				return 1, nil
			}
			p[0], h.has, n = h.held, false, 1
		}
		m, err := h.r.Read(p[n:])
		n += m
		h.err = err
		if n > 0 { // keep the last byte read until the end is seen
			n--
			h.held, h.has = p[n], true
		}
		if n > 0 {
			return n, nil
		}
	}
	return 0, nil
}
