package node

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"maps"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/distcache/distcache/internal/metrics"
	"github.com/distcache/distcache/internal/nodeapi"
	"github.com/distcache/distcache/internal/ring"
	"github.com/distcache/distcache/internal/s3list"
	"github.com/distcache/distcache/internal/writeback"
)

// Listings of held keys: S3 does not have a write-back object until it is
// persisted, nor a transient one ever, so a listing that may cover held
// keys is S3's page merged with what the nodes hold (newest version of
// each key across all members; a held delete hides the key). Each node
// answers for its own journal:
//
//	GET /v1/held/{bucket}?prefix=P   the newest held version of each key under P (JSON)

// maxListBody bounds an S3 listing page read for merging (1,000 keys of
// 1 KiB each and their metadata fit many times over).
const maxListBody = 16 << 20

// listParams are the query parameters of ListObjects (V1) and
// ListObjectsV2; a query with any other is some other bucket operation.
var listParams = map[string]bool{
	"list-type": true, "prefix": true, "delimiter": true, "max-keys": true, "encoding-type": true,
	"marker": true, "continuation-token": true, "start-after": true, "fetch-owner": true,
}

// isListing reports whether a bucket GET is a ListObjects(V2).
func isListing(r *http.Request) bool {
	if r.Method != http.MethodGet {
		return false
	}
	q := r.URL.Query()
	for k := range q {
		if !listParams[k] {
			return false
		}
	}
	return !q.Has("list-type") || q.Get("list-type") == "2"
}

// listsHeld reports whether a listing of bucket under prefix may show held
// keys, and how many holders each held key has at the least (a listing
// fails when more members than that cannot say what they hold).
func (s *Server) listsHeld(c caller, bucket, prefix string) (minCopies int, ok bool) {
	minCopies = 3
	for _, p := range c.tenant.Policies {
		if p.Bucket == bucket && holds(p) && (strings.HasPrefix(p.Prefix, prefix) || strings.HasPrefix(prefix, p.Prefix)) {
			ok = true
			minCopies = min(minCopies, p.ReplicaCount())
		}
	}
	if !ok && s.cfg.Journal != nil && len(s.cfg.Journal.List(c.tenant.Name, bucket, prefix)) > 0 {
		return 1, true // a policy that is gone left held keys here
	}
	return minCopies, ok
}

// pageSize reads a listing's page size parameter (max-keys, max-uploads):
// S3's 1000 at most, and when absent.
func pageSize(q url.Values, param string) (int, *apiError) {
	v := q.Get(param)
	if v == "" {
		return 1000, nil
	}
	n, err := strconv.Atoi(v)
	if err != nil || n < 0 {
		return 0, newError(http.StatusBadRequest, "InvalidArgument", param+" must be a number from 0")
	}
	return min(n, 1000), nil
}

// listHeld answers a listing that may cover held keys: the held versions
// gathered from every member first (so a version persisted and dropped
// meanwhile is in S3's page), then S3's page, merged.
func (s *Server) listHeld(w http.ResponseWriter, r *http.Request, c caller, bucket string, minCopies int, start time.Time) {
	tenant := c.tenant.Name
	q := r.URL.Query()
	req := s3list.Request{Prefix: q.Get("prefix"), Delimiter: q.Get("delimiter")}
	var aerr *apiError
	if req.MaxKeys, aerr = pageSize(q, "max-keys"); aerr != nil {
		s.fail(w, opPassthrough, tenant, start, aerr)
		return
	}
	v2 := q.Get("list-type") == "2"
	token := q.Get("continuation-token")
	s3q := maps.Clone(q) // Set and Del leave q's values alone
	switch {
	case !v2:
		req.After = q.Get("marker")
	case token != "":
		if after, ok := s3list.ParseToken(token); ok {
			req.After = after
			s3q.Del("continuation-token")
			s3q.Set("start-after", after)
		} else {
			req.Foreign = true
		}
	default:
		req.After = q.Get("start-after")
	}
	held, err := s.gatherHeld(r.Context(), c, bucket, req.Prefix, minCopies)
	if err != nil {
		s.fail(w, opPassthrough, tenant, start, newError(http.StatusServiceUnavailable, CodeSlowDown, err.Error()))
		return
	}
	page, resp, err := s.listS3(r.Context(), c, bucket, s3q)
	if err != nil {
		s.fail(w, opPassthrough, tenant, start, asAPIError(err))
		return
	}
	if page == nil { // S3's error: the client gets it as is
		writeS3Answer(w, resp)
		s.observe(opPassthrough, tenant, metrics.ResultError, len(resp.body), start)
		return
	}
	next, err := s3list.Merge(r.Context(), page, req, held, func(ctx context.Context, prefix string, deleted []string) (bool, error) {
		return s.stillListed(ctx, c, bucket, prefix, deleted)
	})
	if err != nil {
		s.fail(w, opPassthrough, tenant, start, asAPIError(err))
		return
	}
	if v2 {
		page.ContinuationToken, page.StartAfter, page.NextContinuationToken = token, q.Get("start-after"), ""
		if page.IsTruncated {
			page.NextContinuationToken = s3list.Token(next)
		}
	} else if page.IsTruncated {
		page.NextMarker = next
	}
	s.writeListing(w, tenant, start, page)
}

// writeListing answers a listing merged with what the members hold.
func (s *Server) writeListing(w http.ResponseWriter, tenant string, start time.Time, page interface{ Marshal() ([]byte, error) }) {
	body, err := page.Marshal()
	if err != nil {
		s.fail(w, opPassthrough, tenant, start, newError(http.StatusInternalServerError, CodeInternal, "writing the listing: "+err.Error()))
		return
	}
	w.Header().Set("Content-Type", "application/xml")
	w.Header().Set("Content-Length", strconv.Itoa(len(body)))
	w.WriteHeader(http.StatusOK)
	n, _ := w.Write(body)
	s.observe(opPassthrough, tenant, metrics.ResultHeld, n, start)
}

// s3Answer is an S3 answer read whole.
type s3Answer struct {
	status int
	header http.Header
	body   []byte
}

func writeS3Answer(w http.ResponseWriter, a s3Answer) {
	for k, v := range a.header {
		if !responseHeadersNotPassed[k] {
			w.Header()[k] = v
		}
	}
	w.Header().Set("Content-Length", strconv.Itoa(len(a.body)))
	w.WriteHeader(a.status)
	w.Write(a.body)
}

// listS3 lists bucket in S3 with query q; page is nil when S3 answered
// with an error, which the answer carries.
func (s *Server) listS3(ctx context.Context, c caller, bucket string, q url.Values) (*s3list.Page, s3Answer, error) {
	a, ok, err := s.getS3Listing(ctx, c, bucket, q)
	if !ok || err != nil {
		return nil, a, err
	}
	page, err := s3list.Parse(a.body)
	if err != nil {
		return nil, a, fmt.Errorf("reading S3's listing: %w", err)
	}
	return page, a, nil
}

// getS3Listing asks S3 for a page of a bucket listing (query q) and reads
// it whole; ok is false when S3 answered with an error, which the answer
// carries.
func (s *Server) getS3Listing(ctx context.Context, c caller, bucket string, q url.Values) (a s3Answer, ok bool, err error) {
	resp, err := s.s3.Passthrough(ctx, c.creds, http.MethodGet, bucket, "", q.Encode(), http.Header{}, nil, 0)
	if err != nil {
		return s3Answer{}, false, err
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(io.LimitReader(resp.Body, maxListBody+1))
	if err != nil {
		return s3Answer{}, false, err
	}
	a = s3Answer{status: resp.StatusCode, header: resp.Header, body: body}
	if resp.StatusCode != http.StatusOK {
		return a, false, nil
	}
	if len(body) > maxListBody {
		return a, false, fmt.Errorf("S3's listing page is larger than %d bytes", maxListBody)
	}
	return a, true, nil
}

// stillListed reports whether S3 has keys under prefix besides deleted.
func (s *Server) stillListed(ctx context.Context, c caller, bucket, prefix string, deleted []string) (bool, error) {
	q := url.Values{"list-type": {"2"}, "prefix": {prefix}, "max-keys": {strconv.Itoa(len(deleted) + 1)}}
	page, a, err := s.listS3(ctx, c, bucket, q)
	if err != nil {
		return false, err
	}
	if page == nil {
		return false, fmt.Errorf("S3 answered %d listing %s", a.status, prefix)
	}
	gone := make(map[string]bool, len(deleted))
	for _, k := range deleted {
		gone[k] = true
	}
	for _, o := range page.Contents {
		if !gone[o.Key] {
			return true, nil
		}
	}
	return false, nil
}

// gatherHeld is the newest held version of every key of bucket under
// prefix across all members. Up to minCopies-1 members may fail to answer
// (each held key has another holder); more fail the listing, which must
// not leave out an acknowledged write.
func (s *Server) gatherHeld(ctx context.Context, c caller, bucket, prefix string, minCopies int) ([]s3list.Held, error) {
	newest := map[string]writeback.Entry{}
	add := func(es []writeback.Entry) {
		for _, e := range es {
			if old, ok := newest[e.Key]; !ok || e.Version > old.Version {
				newest[e.Key] = e
			}
		}
	}
	if s.cfg.Journal != nil {
		add(s.cfg.Journal.List(c.tenant.Name, bucket, prefix))
	}
	failed := askOthers(s, func(m ring.Member) ([]writeback.Entry, error) {
		return s.peers.listHeld(ctx, m, c.tenant.Name, bucket, prefix)
	}, add)
	if len(failed) >= minCopies {
		return nil, fmt.Errorf("cannot list held objects: %s", strings.Join(failed, "; "))
	}
	out := make([]s3list.Held, 0, len(newest))
	for _, e := range newest {
		out = append(out, s3list.Held{Deleted: e.Op == writeback.OpDelete, Object: s3list.Object{
			Key: e.Key, LastModified: e.LastModified.UTC().Format("2006-01-02T15:04:05.000Z"),
			ETag: e.ETag, Size: e.Size, StorageClass: "STANDARD",
		}})
	}
	return out, nil
}

// askOthers asks every other member of the ring at once and passes each
// answer to take, one at a time; it returns the failures ("member:
// error").
func askOthers[T any](s *Server, ask func(ring.Member) (T, error), take func(T)) (failed []string) {
	r := s.currentRing()
	if r == nil {
		return nil
	}
	var (
		mu sync.Mutex
		wg sync.WaitGroup
	)
	for _, m := range r.Members() {
		if m.Name == s.cfg.Self {
			continue
		}
		wg.Go(func() {
			v, err := ask(m)
			mu.Lock()
			defer mu.Unlock()
			if err != nil {
				failed = append(failed, m.Name+": "+err.Error())
				return
			}
			take(v)
		})
	}
	wg.Wait()
	return failed
}

// handleHeldList answers a peer's gatherHeld with this node's held
// versions, or with ?uploads its gatherHeldUploads with this node's held
// multipart uploads.
func (s *Server) handleHeldList(w http.ResponseWriter, r *http.Request) {
	start := time.Now()
	c, aerr := s.authorize(r, r.PathValue("bucket"))
	if aerr == nil && !c.peer {
		aerr = newError(http.StatusForbidden, CodeAccessDenied, "only cache nodes may list held copies")
	}
	if aerr != nil {
		s.fail(w, opPassthrough, "", start, aerr)
		return
	}
	var list any
	switch bucket, prefix := r.PathValue("bucket"), r.URL.Query().Get("prefix"); {
	case r.URL.Query().Has("uploads"):
		var ups []writeback.Upload
		if s.cfg.Uploads != nil {
			ups = s.cfg.Uploads.List(c.tenant.Name, bucket, prefix)
		}
		list = ups
	default:
		var es []writeback.Entry
		if s.cfg.Journal != nil {
			es = s.cfg.Journal.List(c.tenant.Name, bucket, prefix)
		}
		list = es
	}
	body, err := json.Marshal(list)
	if err != nil {
		s.fail(w, opPassthrough, c.tenant.Name, start, newError(http.StatusInternalServerError, CodeInternal, err.Error()))
		return
	}
	w.Header().Set("Content-Type", "application/json")
	w.Write(body)
	s.observe(opPassthrough, c.tenant.Name, metrics.ResultHeld, len(body), start)
}

// listHeld asks m for its held versions of bucket under prefix.
func (p *Peers) listHeld(ctx context.Context, m ring.Member, tenant, bucket, prefix string) ([]writeback.Entry, error) {
	var es []writeback.Entry
	return es, p.heldList(ctx, m, tenant, bucket, url.Values{"prefix": {prefix}}, &es)
}

// listHeldUploads asks m for its held multipart uploads into bucket under
// prefix.
func (p *Peers) listHeldUploads(ctx context.Context, m ring.Member, tenant, bucket, prefix string) ([]writeback.Upload, error) {
	var ups []writeback.Upload
	return ups, p.heldList(ctx, m, tenant, bucket, url.Values{"prefix": {prefix}, "uploads": {""}}, &ups)
}

// heldList asks m for a list of what it holds of bucket (handleHeldList)
// into out.
func (p *Peers) heldList(ctx context.Context, m ring.Member, tenant, bucket string, q url.Values, out any) error {
	resp, err := p.send(ctx, http.MethodGet, m, tenant, nodeapi.PathHeld+"/"+url.PathEscape(bucket), q, nil, nil)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return answerError(resp)
	}
	if err := json.NewDecoder(resp.Body).Decode(out); err != nil {
		return fmt.Errorf("member %s: reading its held list: %w", m.Name, err)
	}
	return nil
}
