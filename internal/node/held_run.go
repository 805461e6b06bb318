package node

import (
	"context"
	"errors"
	"io"
	"strconv"
	"sync"
	"time"

	"github.com/distcache/distcache/internal/s3backend"
	"github.com/distcache/distcache/internal/tenancy"
	"github.com/distcache/distcache/internal/writeback"
)

// RunHeld runs what the node does in the background for held objects until
// ctx ends: it persists the WriteBack versions it is the first holder of
// (writeback.Persister), ends Transient objects at their expiry, and moves
// held versions to their holders when the ring changes (held_handoff.go).
func (s *Server) RunHeld(ctx context.Context) {
	j := s.cfg.Journal
	if j == nil {
		return
	}
	p := &writeback.Persister{Journal: j, S3: heldS3{s}, Owns: s.PersistsHeld, Persisted: s.HeldPersisted, Log: s.log,
		Observe: func(op writeback.Op, err error, took time.Duration) {
			if m := s.cfg.HeldMetrics; m != nil {
				result := "ok"
				if err != nil {
					result = "error"
				}
				m.Persisted.WithLabelValues(string(op), result).Inc()
				m.PersistDuration.Observe(took.Seconds())
			}
		}}
	var wg sync.WaitGroup
	wg.Go(func() { p.Run(ctx) })
	wg.Go(func() { s.expireHeld(ctx) })
	wg.Go(func() { s.keepHeldPlaced(ctx) })
	wg.Wait()
}

// expireHeld ends expired Transient objects every few seconds (the copy
// goes, and what was cached of it) and multipart uploads into held keys
// abandoned for heldUploadLife.
func (s *Server) expireHeld(ctx context.Context) {
	t := time.NewTicker(heldExpiryInterval)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		if u := s.cfg.Uploads; u != nil {
			if n := u.Sweep(s.cfg.Now().Add(-heldUploadLife)); n > 0 {
				s.log.Info("removed abandoned multipart uploads into held keys", "uploads", n)
			}
		}
		for _, e := range s.cfg.Journal.Expire() {
			if e.Op == writeback.OpPut {
				s.leases.Changed(e.Tenant, e.Bucket, e.Key)
				if err := s.store.DeleteObject(heldObject(e.Name)); err != nil {
					s.storeFailed("delete_object", err)
				}
			}
		}
	}
}

// heldExpiryInterval is how often expired Transient objects and abandoned
// uploads are looked for.
const heldExpiryInterval = 5 * time.Second

// heldUploadLife is how long a multipart upload into held keys may stay
// incomplete before its parts are removed (S3 keeps them until a lifecycle
// rule ends them; the cache's pinned space cannot wait that long).
const heldUploadLife = 24 * time.Hour

// heldS3 is the persister's S3: the node's backend, with each tenant's
// credentials.
type heldS3 struct{ s *Server }

func (h heldS3) creds(tenant string) (s3backend.Credentials, error) {
	t, ok := h.s.tenants.Current().Tenant(tenant)
	if !ok {
		return s3backend.Credentials{}, errors.New("tenant " + tenant + " is no longer configured")
	}
	return tenantCredentials(t), nil
}

func (h heldS3) Put(ctx context.Context, e writeback.Entry, body io.Reader) (string, error) {
	cr, err := h.creds(e.Tenant)
	if err != nil {
		return "", err
	}
	ctx = s3backend.WithMetadata(ctx, map[string]string{writeback.VersionMetadata: strconv.FormatUint(e.Version, 10)})
	if len(e.Parts) > 0 { // a held multipart upload: in the same parts, for the same ETag
		at, ok := body.(io.ReaderAt)
		if !ok {
			return "", errors.New("the body of " + e.String() + " is not a file")
		}
		return h.s.s3.PutParts(ctx, cr, e.Bucket, e.Key, at, e.Parts, e.ContentType)
	}
	m, err := h.s.s3.Put(ctx, cr, e.Bucket, e.Key, body, e.Size, e.ContentType)
	return m.ETag, err
}

func (h heldS3) Version(ctx context.Context, e writeback.Entry) (uint64, bool, error) {
	cr, err := h.creds(e.Tenant)
	if err != nil {
		return 0, false, err
	}
	md, err := h.s.s3.Metadata(ctx, cr, e.Bucket, e.Key)
	if errors.Is(err, s3backend.ErrNotFound) {
		return 0, false, nil
	}
	if err != nil {
		return 0, false, err
	}
	return writeback.ParseVersion(md), true, nil
}

func (h heldS3) Delete(ctx context.Context, e writeback.Entry) error {
	cr, err := h.creds(e.Tenant)
	if err != nil {
		return err
	}
	return h.s.s3.Delete(ctx, cr, e.Bucket, e.Key)
}

// tenantCredentials are the S3 credentials the node uses for t (zero: the
// backend's default).
func tenantCredentials(t *tenancy.Tenant) s3backend.Credentials {
	if t.Credentials == nil {
		return s3backend.Credentials{}
	}
	return s3backend.Credentials{AccessKeyID: t.Credentials.AccessKeyID, SecretAccessKey: t.Credentials.SecretAccessKey,
		SessionToken: t.Credentials.SessionToken}
}
