package node

import (
	"bytes"
	"context"
	"io"
	"net/http"

	"github.com/distcache/distcache/internal/chunk"
	"github.com/distcache/distcache/internal/metrics"
	"github.com/distcache/distcache/internal/store"
	"github.com/distcache/distcache/internal/tenancy"
)

// Write policies (tenancy.Policy), per tenant, bucket and key prefix:
//
//   - ReadOnly: every write of the key is refused (403 AccessDenied naming
//     the policy) before anything reaches S3: PUT, DELETE, and the
//     pass-through writes (copies onto it, multipart uploads, DeleteObjects
//     naming it).
//   - NoCache: reads and writes go to S3 and nothing is kept: no metadata
//     (a HEAD per Stat), no chunk (each read from S3), nothing of a write;
//     HEAD answers carry nodeapi.HeaderPolicy so clients keep nothing either (the
//     gateway's page cache and metadata).

// policy is the write policy of the caller's object.
func (c caller) policy(bucket, key string) tenancy.Policy { return c.tenant.PolicyFor(bucket, key) }

// noCache reports whether o's policy is NoCache.
func (c caller) noCache(o chunk.Object) bool {
	return c.policy(o.Bucket, o.Key).Mode == tenancy.NoCache
}

// checkWritable refuses a write of any of keys that a ReadOnly policy covers.
func checkWritable(c caller, bucket string, keys ...string) *apiError {
	for _, k := range keys {
		if p := c.policy(bucket, k); p.Mode == tenancy.ReadOnly {
			return newError(http.StatusForbidden, CodeAccessDenied,
				"write refused: "+bucket+"/"+k+" is under the tenant's write policy "+p.String())
		}
	}
	return nil
}

// hasReadOnly reports whether the tenant has a ReadOnly policy in bucket
// (DeleteObjects bodies are read whole before they go on only then).
func hasReadOnly(c caller, bucket string) bool {
	for _, p := range c.tenant.Policies {
		if p.Bucket == bucket && p.Mode == tenancy.ReadOnly {
			return true
		}
	}
	return false
}

// checkPassthroughWrite refuses a pass-through operation that writes a
// ReadOnly key. A DeleteObjects body is read whole (at most maxDeleteBody)
// to see its keys; body is then what goes on to S3.
func checkPassthroughWrite(r *http.Request, c caller, bucket, key string, body io.Reader) (io.Reader, *apiError) {
	if r.Method == http.MethodGet || r.Method == http.MethodHead {
		return body, nil
	}
	if key != "" {
		return body, checkWritable(c, bucket, key)
	}
	if !isDeleteObjects(r) || !hasReadOnly(c, bucket) {
		return body, nil
	}
	data, keys, aerr := readDeleteObjects(body)
	if aerr != nil {
		return nil, aerr
	}
	return bytes.NewReader(data), checkWritable(c, bucket, keys...)
}

func isDeleteObjects(r *http.Request) bool {
	return r.Method == http.MethodPost && r.URL.Query().Has("delete")
}

// readDeleteObjects reads a DeleteObjects body whole (at most
// maxDeleteBody) and the keys it names.
func readDeleteObjects(body io.Reader) ([]byte, []string, *apiError) {
	data, err := io.ReadAll(io.LimitReader(body, maxDeleteBody+1))
	switch {
	case err != nil:
		return nil, nil, newError(http.StatusBadRequest, CodeBadRequest, "reading the DeleteObjects body: "+err.Error())
	case len(data) > maxDeleteBody:
		return nil, nil, newError(http.StatusBadRequest, CodeBadRequest, "DeleteObjects body too large")
	}
	keys, err := deleteObjectsKeys(data)
	if err != nil {
		return nil, nil, newError(http.StatusBadRequest, CodeBadRequest, "malformed DeleteObjects body: "+err.Error())
	}
	return data, keys, nil
}

// headNoCache is the metadata of a NoCache object: S3's, asked every time,
// kept nowhere.
func (s *Server) headNoCache(ctx context.Context, c caller, o chunk.Object) (chunk.Meta, error) {
	m, err := s.s3.Head(ctx, c.creds, o.Bucket, o.Key)
	if err != nil {
		return chunk.Meta{}, err
	}
	m.FetchedAt = s.cfg.Now()
	return m, nil
}

// readNoCache reads chunk idx of version m of a NoCache object from S3,
// pinned to its ETag, into memory nothing else keeps.
func (s *Server) readNoCache(ctx context.Context, c caller, o chunk.Object, m chunk.Meta, idx int64) ([]byte, string, error) {
	off, length, ok := chunk.Bounds(m.Size, s.cfg.ChunkSize, idx)
	if !ok {
		return nil, metrics.ResultError, newError(http.StatusRequestedRangeNotSatisfiable, CodeInvalidRange,
			"chunk index is outside the object")
	}
	v := store.NewValue(int(length))
	if err := s.s3.GetRangeInto(ctx, c.creds, o.Bucket, o.Key, m.ETag, off, v.Payload()); err != nil {
		return nil, metrics.ResultError, err
	}
	return v.Payload(), metrics.ResultMiss, nil
}
