package client

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strconv"
	"sync"
	"time"

	"github.com/distcache/distcache/internal/chunk"
	"github.com/distcache/distcache/internal/nodeapi"
)

// Meta describes one version of an object.
type Meta struct {
	Size         int64
	ETag         string // as S3 reports it, quotes included
	ContentType  string
	LastModified time.Time
	// Headers are the other headers S3 keeps with the version (user
	// metadata, Cache-Control, ...); nil for most objects.
	Headers chunk.Headers
	// NoCache: the object's write policy is NoCache (the node said so):
	// the client keeps none of its pages.
	NoCache bool
}

// Stat returns the object's metadata (HEAD /v1/objects/...). Pass it to
// ReadAt to read that version.
func (c *Client) Stat(ctx context.Context, bucket, key string) (Meta, error) {
	if err := checkObjectName(opStat, bucket, key); err != nil {
		return Meta{}, err
	}
	if m, ok := c.metas.get(bucket, key); ok {
		c.metrics.metaHit.Inc()
		return m, nil
	}
	c.metrics.metaMiss.Inc()
	var (
		m        Meta
		answered string // the node that answered
		lease    string // its nodeapi.HeaderMetaLease
		sent     time.Time
	)
	err := c.try(ctx, opStat, bucket, key, c.metaID(bucket, key), nil, func(ctx context.Context, addr string) error {
		sent = c.cfg.Now()
		req, err := c.newRequest(ctx, http.MethodHead, addr, bucket, key, "")
		if err != nil {
			return &finalError{err}
		}
		resp, err := c.rt.RoundTrip(req) // as getChunk: no redirects to follow
		if err != nil {
			return err
		}
		defer resp.Body.Close()
		if err := c.checkAnswer(opStat, bucket, key, addr, resp, http.StatusOK); err != nil {
			return err
		}
		if err := c.checkChunkSize(opStat, addr, resp.Header); err != nil {
			return err
		}
		m, err = metaFromHeader(resp)
		answered, lease = addr, resp.Header.Get(nodeapi.HeaderMetaLease)
		return err
	})
	if err == nil {
		c.keepMeta(bucket, key, m, answered, lease, sent)
	}
	return m, err
}

// policyNoCache is the nodeapi.HeaderPolicy value of NoCache objects.
const policyNoCache = "NoCache"

func metaFromHeader(resp *http.Response) (Meta, error) {
	h := resp.Header
	m := Meta{ETag: h.Get("ETag"), ContentType: h.Get(headerType), Size: resp.ContentLength,
		NoCache: h.Get(nodeapi.HeaderPolicy) == policyNoCache, Headers: nodeapi.Stored(h)}
	if v := h.Get(headerSize); v != "" {
		n, err := strconv.ParseInt(v, 10, 64)
		if err != nil {
			return Meta{}, fmt.Errorf("bad %s %q", headerSize, v)
		}
		m.Size = n
	}
	if m.ETag == "" || m.Size < 0 {
		return Meta{}, errors.New("metadata answer without ETag or size")
	}
	if m.ContentType == "" {
		m.ContentType = h.Get("Content-Type")
	}
	if v := h.Get("Last-Modified"); v != "" {
		if t, err := http.ParseTime(v); err == nil {
			m.LastModified = t
		}
	}
	return m, nil
}

// Put writes the object through the cache: the node answers once S3 has
// it, and caches its chunks. size is the body's length, or -1 when unknown.
// If a member fails, the upload is retried on the next one when nothing
// was sent yet or body is an io.Seeker (it is rewound).
func (c *Client) Put(ctx context.Context, bucket, key string, body io.Reader, size int64, contentType string) (Meta, error) {
	if err := checkObjectName(opPut, bucket, key); err != nil {
		return Meta{}, err
	}
	if body == nil {
		body = http.NoBody
	}
	c.metas.forget(bucket, key)
	defer c.metas.forget(bucket, key) // a Stat during the upload may have kept the old version
	seeker, _ := body.(io.Seeker)
	start := int64(0)
	if seeker != nil {
		var err error
		if start, err = seeker.Seek(0, io.SeekCurrent); err != nil {
			seeker = nil
		}
	}
	var (
		m       Meta
		prev    *attemptBody
		lastErr error
	)
	sent := func() int64 { return prev.read() } // the attempt that succeeded is the last
	err := c.try(ctx, opPut, bucket, key, c.metaID(bucket, key), sent, func(ctx context.Context, addr string) error {
		if prev != nil {
			// The transport may still be reading the last attempt's body:
			// wait until it has closed it before touching the reader.
			select {
			case <-prev.done:
			case <-ctx.Done():
				return ctx.Err()
			}
			if prev.read() > 0 {
				if seeker == nil {
					return &finalError{&Error{Op: opPut, Bucket: bucket, Key: key, Kind: ErrUnavailable,
						Message: "a cache node failed during the upload and the body cannot be rewound", Err: lastErr}}
				}
				if _, err := seeker.Seek(start, io.SeekStart); err != nil {
					return &finalError{fmt.Errorf("client: rewinding the body: %w", err)}
				}
			}
		}
		prev = newAttemptBody(body)
		var err error
		m, err = c.putOnce(ctx, addr, bucket, key, prev, size, contentType)
		lastErr = err
		return err
	})
	return m, err
}

func (c *Client) putOnce(ctx context.Context, addr, bucket, key string, body *attemptBody, size int64, contentType string) (Meta, error) {
	req, err := c.newRequest(ctx, http.MethodPut, addr, bucket, key, "")
	if err != nil {
		_ = body.Close()
		return Meta{}, &finalError{err}
	}
	switch {
	case size == 0:
		_ = body.Close()
		req.Body, req.ContentLength = http.NoBody, 0
	case size > 0:
		req.Body, req.ContentLength = body, size
	default:
		req.Body, req.ContentLength = body, -1
	}
	if contentType != "" {
		req.Header.Set("Content-Type", contentType)
	}
	if sum := payloadSHA256(ctx); sum != "" {
		req.Header.Set(nodeapi.HeaderContentSHA256, sum)
	}
	nodeapi.SetStored(req.Header, storedHeaders(ctx))
	resp, err := c.http.Do(req)
	if bodyErr := body.bodyError(); bodyErr != nil {
		// The upload's own body failed (e.g. a checksum mismatch while
		// reading it): not the node's fault, and no other node would do better.
		if err == nil {
			resp.Body.Close()
		}
		return Meta{}, &finalError{fmt.Errorf("client: reading the body to upload: %w", bodyErr)}
	}
	if err != nil {
		return Meta{}, err
	}
	defer resp.Body.Close()
	if err := c.checkAnswer(opPut, bucket, key, addr, resp, http.StatusOK); err != nil {
		return Meta{}, err
	}
	var mr nodeapi.MetaResponse
	if err := json.NewDecoder(io.LimitReader(resp.Body, 1<<20)).Decode(&mr); err != nil {
		return Meta{}, fmt.Errorf("decoding the put answer: %w", err)
	}
	if mr.ChunkSize > 0 {
		if err := c.learnChunkSize(opPut, addr, mr.ChunkSize); err != nil {
			return Meta{}, err
		}
	}
	return Meta{Size: mr.Size, ETag: mr.ETag, ContentType: mr.ContentType, LastModified: mr.LastModified, Headers: mr.Headers}, nil
}

type payloadKey struct{}

// WithPayloadSHA256 declares the SHA-256 (64 hex digits) of the body that a
// Put made with the returned context uploads, as the body's writer signed
// it (an S3 client's x-amz-content-sha256, which the gateway verifies).
// The node then signs its PUT to S3 with it instead of hashing the body
// first, so the body goes on to S3 as it arrives; S3 refuses a body that
// does not match it.
func WithPayloadSHA256(ctx context.Context, sum string) context.Context {
	return context.WithValue(ctx, payloadKey{}, sum)
}

func payloadSHA256(ctx context.Context) string {
	s, _ := ctx.Value(payloadKey{}).(string)
	return s
}

type storedKey struct{}

// WithStoredHeaders declares the headers S3 is to store with the object
// that a Put made with the returned context uploads (user metadata,
// Cache-Control, ...): the node sends them to S3, or keeps them with a
// held version, and answers them with the object's metadata.
func WithStoredHeaders(ctx context.Context, h chunk.Headers) context.Context {
	if len(h) == 0 {
		return ctx
	}
	return context.WithValue(ctx, storedKey{}, h)
}

func storedHeaders(ctx context.Context) chunk.Headers {
	h, _ := ctx.Value(storedKey{}).(chunk.Headers)
	return h
}

// attemptBody is the caller's body as one upload attempt sees it. It counts
// what was read and, once the transport closes it, reads nothing more and
// signals done: only then may another attempt use the caller's reader. It
// never closes the caller's reader.
type attemptBody struct {
	mu      sync.Mutex
	r       io.Reader
	n       int64
	closed  bool
	done    chan struct{}
	readErr error // the caller's body failed (not the node)
}

func newAttemptBody(r io.Reader) *attemptBody { return &attemptBody{r: r, done: make(chan struct{})} }

func (b *attemptBody) Read(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.closed {
		return 0, errors.New("client: upload attempt abandoned")
	}
	n, err := b.r.Read(p)
	b.n += int64(n)
	if err != nil && err != io.EOF {
		b.readErr = err
	}
	return n, err
}

// bodyError is the error reading the caller's body returned, if any.
func (b *attemptBody) bodyError() error {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.readErr
}

func (b *attemptBody) Close() error {
	b.mu.Lock()
	defer b.mu.Unlock()
	if !b.closed {
		b.closed = true
		close(b.done)
	}
	return nil
}

func (b *attemptBody) read() int64 {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.n
}

// Delete deletes the object in S3, then the node drops what it cached.
func (c *Client) Delete(ctx context.Context, bucket, key string) error {
	if err := checkObjectName(opDelete, bucket, key); err != nil {
		return err
	}
	c.metas.forget(bucket, key)
	defer c.metas.forget(bucket, key)
	return c.try(ctx, opDelete, bucket, key, c.metaID(bucket, key), nil, func(ctx context.Context, addr string) error {
		req, err := c.newRequest(ctx, http.MethodDelete, addr, bucket, key, "")
		if err != nil {
			return &finalError{err}
		}
		resp, err := c.http.Do(req)
		if err != nil {
			return err
		}
		defer resp.Body.Close()
		return c.checkAnswer(opDelete, bucket, key, addr, resp, http.StatusNoContent, http.StatusOK)
	})
}
