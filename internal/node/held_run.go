package node

import (
	"context"
	"sync"
	"time"

	"github.com/distcache/distcache/internal/ctxtime"
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
	p := &writeback.Persister{Journal: j, S3: s.heldS3, Owns: s.PersistsHeld, Persisted: s.HeldPersisted, Superseded: s.HeldSuperseded, Confirm: s.confirmHeld, Log: s.log,
		Workers: s.cfg.PersistUploads, Yield: s.cfg.PersistYield, MaxYield: s.cfg.PersistMaxYield,
		Observe: func(op writeback.Op, err error, took time.Duration) {
			if m := s.cfg.HeldMetrics; m != nil {
				result := "ok"
				if err != nil {
					result = "error"
				}
				m.Persisted.WithLabelValues(string(op), result).Inc()
				m.PersistDuration.Observe(took.Seconds())
			}
		},
		LateUpload: func(writeback.Entry, uint64) {
			if m := s.cfg.HeldMetrics; m != nil {
				m.LateUploads.Inc()
			}
		}}
	var wg sync.WaitGroup
	wg.Go(func() { p.Run(ctx) })
	wg.Go(func() { ctxtime.Every(ctx, heldExpiryInterval, s.expireHeld) })
	wg.Go(func() { s.keepHeldPlaced(ctx) })
	wg.Wait()
}

// expireHeld ends expired Transient objects (the copy goes, and what was
// cached of it) and multipart uploads into held keys abandoned for
// heldUploadLife; it runs every heldExpiryInterval.
func (s *Server) expireHeld() {
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

// heldExpiryInterval is how often expired Transient objects and abandoned
// uploads are looked for.
const heldExpiryInterval = 5 * time.Second

// heldUploadLife is how long a multipart upload into held keys may stay
// incomplete before its parts are removed (S3 keeps them until a lifecycle
// rule ends them; the cache's pinned space cannot wait that long).
const heldUploadLife = 24 * time.Hour

// newHeldS3 is the persister's S3: the node's backend, with each tenant's
// credentials (none once the tenant is gone: its versions wait).
func (s *Server) newHeldS3() *writeback.Backend {
	return &writeback.Backend{S3: s.s3, Log: s.log, PutIfAbsent: s.cfg.PersistPutIfAbsent, Credentials: func(tenant, _ string) (s3backend.Credentials, bool) {
		t, ok := s.tenants.Current().Tenant(tenant)
		if !ok {
			return s3backend.Credentials{}, false
		}
		return tenantCredentials(t), true
	}}
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
