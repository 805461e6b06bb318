package node

import (
	"context"
	"net/http"
	"time"

	"github.com/distcache/distcache/internal/metrics"
	"github.com/distcache/distcache/internal/ring"
	"github.com/distcache/distcache/internal/s3list"
	"github.com/distcache/distcache/internal/writeback"
)

// isUploadsListing reports whether a bucket request is a
// ListMultipartUploads.
func isUploadsListing(r *http.Request) bool {
	return r.Method == http.MethodGet && r.URL.Query().Has("uploads")
}

// listHeldUploads answers a ListMultipartUploads that may cover held keys:
// S3's page with the multipart uploads into held keys under way on the
// members merged in (S3 never has those: they become held versions when
// completed). A member that cannot be asked is left out: its uploads are
// its own, not copied, and go with it (docs/write-back.md).
func (s *Server) listHeldUploads(w http.ResponseWriter, r *http.Request, c caller, bucket string, start time.Time) {
	tenant := c.tenant.Name
	q := r.URL.Query()
	req := s3list.UploadsRequest{Prefix: q.Get("prefix"), Delimiter: q.Get("delimiter"),
		KeyMarker: q.Get("key-marker"), UploadIDMarker: q.Get("upload-id-marker")}
	var aerr *apiError
	if req.MaxUploads, aerr = pageSize(q, "max-uploads"); aerr != nil {
		s.fail(w, opPassthrough, tenant, start, aerr)
		return
	}
	held := s.gatherHeldUploads(r.Context(), c, bucket, req.Prefix)
	a, ok, err := s.getS3Listing(r.Context(), c, bucket, req.S3Query(q))
	if err != nil {
		s.fail(w, opPassthrough, tenant, start, asAPIError(err))
		return
	}
	if !ok { // S3's error: the client gets it as is
		writeS3Answer(w, a)
		s.observe(opPassthrough, tenant, metrics.ResultError, len(a.body), start)
		return
	}
	page, err := s3list.ParseUploads(a.body)
	if err != nil {
		s.fail(w, opPassthrough, tenant, start, newError(http.StatusBadGateway, CodeInternal, "reading S3's uploads listing: "+err.Error()))
		return
	}
	s3list.MergeUploads(page, req, held)
	page.KeyMarker, page.UploadIDMarker, page.MaxUploads = req.KeyMarker, req.UploadIDMarker, req.MaxUploads
	s.writeListing(w, tenant, start, page)
}

// gatherHeldUploads is the held multipart uploads into bucket under prefix
// on this node and every member that answers.
func (s *Server) gatherHeldUploads(ctx context.Context, c caller, bucket, prefix string) []s3list.Upload {
	var all []writeback.Upload
	if s.cfg.Uploads != nil {
		all = s.cfg.Uploads.List(c.tenant.Name, bucket, prefix)
	}
	failed := askOthers(s, func(m ring.Member) ([]writeback.Upload, error) {
		return s.peers.listHeldUploads(ctx, m, c.tenant.Name, bucket, prefix)
	}, func(ups []writeback.Upload) { all = append(all, ups...) })
	if len(failed) > 0 {
		s.log.Warn("members' held uploads are left out of a listing", "bucket", bucket, "failed", failed)
	}
	out := make([]s3list.Upload, 0, len(all))
	for _, up := range all {
		out = append(out, s3list.Upload{Key: up.Name.Key, UploadID: up.ID, StorageClass: "STANDARD",
			Initiated: up.Created.UTC().Format("2006-01-02T15:04:05.000Z")})
	}
	return out
}
