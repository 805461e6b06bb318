package node

import (
	"context"
	"strings"
	"time"

	"github.com/distcache/distcache/internal/chunk"
	"github.com/distcache/distcache/internal/s3backend"
)

// Timing of confirmWrite.
const (
	// confirmSettle is how long after a write-through has cached its
	// metadata the node looks for other changes of the object. An
	// invalidation drops the metadata first and numbers its change just
	// after (invalidate): one that dropped it before the write cached its
	// own has numbered its change well within this.
	confirmSettle = 50 * time.Millisecond
	// confirmSlowUpload: an upload that took this long is confirmed with
	// a HEAD whatever happened meanwhile: S3's Date on its answer may be a
	// second or more past the object's Last-Modified.
	confirmSlowUpload = time.Second
)

// confirmWrite makes sure, after a write-through has been answered, that
// the metadata it cached from S3's answer to the upload is S3's current
// version, asking S3 only when that is in doubt.
//
// It is in doubt when another change of the object was numbered since the
// write began (since): another write, delete or copy through this node, or
// another node's invalidation. S3 may then hold either version, so the node
// asks S3 with a HEAD: with the ETag written, S3's Last-Modified and content
// type replace what the upload's answer gave; with another ETag, the cached
// metadata goes, so the next read asks S3 (a failed HEAD leaves the upload's
// metadata, which revalidates after the TTL like any other). The object's
// only change being the write's own, no later change can be hidden behind
// it: the next one drops the metadata as it is numbered. Writes behind the
// cache's back are bounded by the TTL, as for any metadata.
//
// It asks S3 too, whatever happened meanwhile, after a multipart upload
// (dated by S3 at its start) or one that took confirmSlowUpload or longer:
// the answer's Date stands in for the object's Last-Modified, which S3
// sends no PUT answer, and is within a second of it only for a quick
// single PUT. Otherwise the upload's Last-Modified and content type stand
// until the metadata revalidates (an upload without a content type shows
// none meanwhile). A HEAD after every write doubled the S3 requests of
// small writes (B5 in docs/benchmarks.md).
func (s *Server) confirmWrite(ctx context.Context, cr s3backend.Credentials, o chunk.Object, etag string, since uint64, took time.Duration) {
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), time.Minute)
	if took >= confirmSlowUpload || strings.Contains(etag, "-") { // a multipart ETag: "md5-parts"
		go func() {
			defer cancel()
			s.confirmWithHead(ctx, cr, o, etag)
		}()
		return
	}
	time.AfterFunc(confirmSettle, func() {
		defer cancel()
		if n, known := s.leases.Changes(o.Tenant, o.Bucket, o.Key, since); known && n <= 1 {
			return // the write's own change only
		}
		s.confirmWithHead(ctx, cr, o, etag)
	})
}

// confirmWithHead asks S3 for the object's metadata and puts it in place of
// the upload's, or drops that when S3 holds another version.
func (s *Server) confirmWithHead(ctx context.Context, cr s3backend.Credentials, o chunk.Object, etag string) {
	m, err := s.s3.Head(ctx, cr, o.Bucket, o.Key)
	switch {
	case err != nil:
		s.log.Debug("write-through: confirming metadata failed; keeping the upload's", "object", o.String(), "err", err)
	case m.ETag != etag:
		s.log.Debug("write-through: S3 holds another version already; dropping its metadata", "object", o.String())
		if dropped, err := s.store.ReplaceMeta(o, etag, nil); err != nil {
			s.storeFailed("delete_meta", err)
		} else if dropped {
			s.leases.Changed(o.Tenant, o.Bucket, o.Key) // gateways keeping the upload's metadata drop it
		}
	default:
		m.FetchedAt = s.cfg.Now()
		if replaced, err := s.store.ReplaceMeta(o, etag, &m); err != nil {
			s.storeFailed("put_meta", err)
		} else if replaced {
			s.leases.Changed(o.Tenant, o.Bucket, o.Key) // S3's Last-Modified and type replace the upload's
		}
	}
}
