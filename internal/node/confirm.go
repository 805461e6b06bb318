package node

import (
	"context"
	"time"

	"github.com/distcache/distcache/internal/chunk"
	"github.com/distcache/distcache/internal/s3backend"
)

// confirmWrite asks S3, after a write-through has been answered, for the
// object's metadata: with the ETag written, S3's Last-Modified and content
// type replace what the upload's answer gave; with another ETag (written
// again meanwhile, through the cache or behind it), the cached metadata
// goes, so the next read asks S3. A failed HEAD leaves the upload's
// metadata, which revalidates after the TTL like any other.
func (s *Server) confirmWrite(ctx context.Context, cr s3backend.Credentials, o chunk.Object, etag string) {
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), time.Minute)
	go func() {
		defer cancel()
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
	}()
}
