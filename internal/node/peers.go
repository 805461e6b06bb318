package node

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/distcache/distcache/internal/chunk"
	"github.com/distcache/distcache/internal/failover"
	"github.com/distcache/distcache/internal/nodeapi"
	"github.com/distcache/distcache/internal/ring"
	"github.com/distcache/distcache/internal/s3backend"
)

// Headers of node-to-node requests.
const (
	// HeaderHop marks a request another node sent: it is answered from this
	// node's store or S3 and never relayed again (no loops).
	HeaderHop = "X-Distcache-Hop"
	// HeaderLocalOnly asks for the chunk only if this node has it (warm
	// handoff probes): a miss is 404 NotCached, never an S3 fetch.
	HeaderLocalOnly = "X-Distcache-Local-Only"
)

// CodeNotCached answers a local-only probe that missed.
const CodeNotCached = "NotCached"

// errNotCached is a local-only probe's miss.
var errNotCached = errors.New("not cached on that node")

// Peers is how a node reaches the other members of its ring.
type Peers struct {
	// Client carries this node's peer certificate.
	Client *http.Client
	// Timeout bounds one peer request (default 10s).
	Timeout time.Duration
	// DownFor is how long a member that failed is skipped (default 5s), so
	// a dead member costs one failed connection, not one per request.
	DownFor time.Duration

	// down holds the members that failed a moment ago, by name (by
	// zone/name for other zones' members); New sets its For to DownFor.
	down failover.Set
}

// memberName keys ring members in Peers.down.
func memberName(m ring.Member) string { return m.Name }

// get fetches a whole chunk of version id.ETag from member, acting for the
// caller's tenant. The member checks that tenant's bucket list itself.
//
// The object size travels along so the member need not HEAD the object to
// find the chunk's bounds.
func (p *Peers) get(ctx context.Context, m ring.Member, tenant string, id chunk.ID, objectSize int64, localOnly bool) ([]byte, error) {
	q := url.Values{"chunk": {strconv.FormatInt(id.Index, 10)}, "etag": {id.ETag}, "size": {strconv.FormatInt(objectSize, 10)}}
	resp, err := p.send(ctx, http.MethodGet, m, tenant, nodeapi.ObjectPath(id.Bucket, id.Key), q, nil, func(req *http.Request) {
		if localOnly {
			req.Header.Set(HeaderLocalOnly, "1")
		}
	})
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	switch {
	case resp.StatusCode == http.StatusOK:
	case resp.Header.Get("X-Distcache-Error") == CodeNotCached:
		return nil, errNotCached
	case resp.StatusCode == http.StatusPreconditionFailed:
		return nil, s3backend.ErrPreconditionFailed
	case resp.StatusCode == http.StatusServiceUnavailable && resp.Header.Get("X-Distcache-Error") == CodeSlowDown:
		var e apiError
		_ = json.NewDecoder(io.LimitReader(resp.Body, 4<<10)).Decode(&e)
		return nil, newError(http.StatusServiceUnavailable, CodeSlowDown, "owner "+m.Name+": "+e.Message)
	default:
		return nil, codedAnswerError(resp)
	}
	if resp.ContentLength < 0 || resp.ContentLength > id.Size {
		return nil, fmt.Errorf("peer %s sent a chunk of %d bytes", m.Name, resp.ContentLength)
	}
	data := make([]byte, resp.ContentLength)
	if _, err := io.ReadFull(resp.Body, data); err != nil {
		return nil, err
	}
	return data, nil
}

// request builds a node-to-node request to m for tenant's path (with query q
// when not nil), marked as a hop and bounded by p.Timeout: the caller calls
// cancel once done with the answer.
func (p *Peers) request(ctx context.Context, method string, m ring.Member, tenant, path string, q url.Values, body io.Reader) (*http.Request, context.CancelFunc, error) {
	ctx, cancel := context.WithTimeout(ctx, p.Timeout)
	u := "https://" + m.Address + path
	if q != nil {
		u += "?" + q.Encode()
	}
	req, err := http.NewRequestWithContext(ctx, method, u, body)
	if err != nil {
		cancel()
		return nil, nil, err
	}
	req.Header.Set(HeaderTenant, tenant)
	req.Header.Set(HeaderHop, "1")
	return req, cancel, nil
}

// send sends a node-to-node request (see request) once edit, when not nil,
// has set what else the request needs. Closing the answer's body ends the
// request's timeout too.
func (p *Peers) send(ctx context.Context, method string, m ring.Member, tenant, path string, q url.Values, body io.Reader, edit func(*http.Request)) (*http.Response, error) {
	req, cancel, err := p.request(ctx, method, m, tenant, path, q, body)
	if err != nil {
		return nil, err
	}
	if edit != nil {
		edit(req)
	}
	resp, err := p.Client.Do(req)
	if err != nil {
		cancel()
		return nil, err
	}
	resp.Body = cancelOnClose{ReadCloser: resp.Body, cancel: cancel}
	return resp, nil
}

// cancelOnClose is an answer's body that ends its request's context once
// closed.
type cancelOnClose struct {
	io.ReadCloser
	cancel context.CancelFunc
}

func (b cancelOnClose) Close() error {
	err := b.ReadCloser.Close()
	b.cancel()
	return err
}

// sendNoContent is send for requests answered 204 No Content; it returns
// the answer's headers (nil on an error).
func (p *Peers) sendNoContent(ctx context.Context, method string, m ring.Member, tenant, path string, q url.Values, body io.Reader, edit func(*http.Request)) (http.Header, error) {
	resp, err := p.send(ctx, method, m, tenant, path, q, body, edit)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusNoContent {
		return nil, codedAnswerError(resp)
	}
	return resp.Header, nil
}

// peerError is a peer's HTTP error answer. 4xx answers are the request's
// fault (the same would happen anywhere) and do not mark the peer down.
type peerError struct {
	status int
	code   string // the peer's X-Distcache-Error
	msg    string
}

func (e *peerError) Error() string { return fmt.Sprintf("peer answered %d: %s", e.status, e.msg) }

// answerError is a peer's answer that its request did not expect, with the
// start of the answer's body as the message.
func answerError(resp *http.Response) *peerError {
	msg, _ := io.ReadAll(io.LimitReader(resp.Body, 512))
	return &peerError{status: resp.StatusCode, msg: string(msg)}
}

// codedAnswerError is answerError with the peer's error code too.
func codedAnswerError(resp *http.Response) *peerError {
	e := answerError(resp)
	e.code = resp.Header.Get("X-Distcache-Error")
	return e
}

func isSlowDown(err error) bool {
	var ae *apiError
	return errors.As(err, &ae) && ae.Code == CodeSlowDown
}

// A 5xx carrying a node error code is healthy too: the peer answered, its S3
// failed. Marking it down would stop this node from reaching the chunks the
// peer holds (hits) for as long as it stays marked, just when S3 cannot
// stand in for them.
func peerIsHealthy(err error) bool {
	var pe *peerError
	return errors.Is(err, errNotCached) || errors.Is(err, s3backend.ErrPreconditionFailed) ||
		(errors.As(err, &pe) && (pe.status < 500 || pe.code != ""))
}

// peerRelay is the kind label of fromOwners' requests: "forward", the value
// dashboards and alerts know.
const peerRelay = "forward"

// fromOwners asks the chunk's owner, then the next candidates, for a chunk
// this node does not own. ok=false means no member could answer (all down):
// the caller then reads S3 itself, so a dead member never fails a read.
func (s *Server) fromOwners(ctx context.Context, r *ring.Ring, c caller, id chunk.ID, objectSize int64) (data []byte, ok bool, err error) {
	failover.Try(&s.peers.down, r.Candidates(id, s.cfg.Candidates), memberName, func(m ring.Member, down bool) failover.Verdict {
		if m.Name == s.cfg.Self {
			return failover.Stop // we are a candidate: read it ourselves
		}
		if down {
			s.metrics.PeerRequests.WithLabelValues(peerRelay, "skipped_down").Inc()
			return failover.Skip
		}
		got, gerr := s.peers.get(ctx, m, c.tenant.Name, id, objectSize, false)
		switch {
		case gerr == nil:
			s.metrics.PeerRequests.WithLabelValues(peerRelay, "ok").Inc()
			data, ok = got, true
			return failover.Done
		case errors.Is(gerr, s3backend.ErrPreconditionFailed):
			s.metrics.PeerRequests.WithLabelValues(peerRelay, "changed").Inc()
			ok, err = true, gerr
			return failover.Stop
		case isSlowDown(gerr):
			// The owner is up and S3 told it to slow down: asking S3
			// again from here (or from the next candidate) would
			// multiply the load S3 just refused.
			s.metrics.PeerRequests.WithLabelValues(peerRelay, "error").Inc()
			ok, err = true, gerr
			return failover.Stop
		case peerIsHealthy(gerr):
			// The owner answered with an error about the request itself;
			// asking others would give the same answer.
			s.metrics.PeerRequests.WithLabelValues(peerRelay, "error").Inc()
			return failover.Stop
		}
		s.log.Warn("peer unreachable; trying the next candidate", "peer", m.Name, "err", gerr)
		s.metrics.PeerRequests.WithLabelValues(peerRelay, "unreachable").Inc()
		return failover.Failed
	})
	return data, ok, err
}

// fromPrevious is the warm handoff: after a ring change, the new owner asks
// the chunk's owner of the previous epoch before going to S3.
func (s *Server) fromPrevious(ctx context.Context, r *ring.Ring, c caller, id chunk.ID, objectSize int64) ([]byte, bool) {
	prev, ok := r.PreviousOwner(id)
	if !ok || prev.Name == s.cfg.Self || s.peers.down.Down(prev.Name, time.Now()) {
		return nil, false
	}
	data, err := s.peers.get(ctx, prev, c.tenant.Name, id, objectSize, true)
	switch {
	case err == nil:
		s.metrics.PeerRequests.WithLabelValues("handoff", "ok").Inc()
		return data, true
	case errors.Is(err, errNotCached):
		s.metrics.PeerRequests.WithLabelValues("handoff", "miss").Inc()
	case peerIsHealthy(err):
		s.metrics.PeerRequests.WithLabelValues("handoff", "error").Inc()
	default:
		s.peers.down.MarkDown(prev.Name)
		s.metrics.PeerRequests.WithLabelValues("handoff", "unreachable").Inc()
	}
	return nil, false
}

// put hands a chunk this node received in a write-through to the member that
// serves it, so the first read after a write is a hit there too.
// released reports whether the transport is done with data: the owner
// has the chunk and every body over data was closed.
func (p *Peers) put(ctx context.Context, m ring.Member, tenant string, id chunk.ID, data []byte) (released bool, err error) {
	q := url.Values{"chunk": {strconv.FormatInt(id.Index, 10)}, "etag": {id.ETag}}
	var bodies openBodies
	_, err = p.sendNoContent(ctx, http.MethodPost, m, tenant, nodeapi.ObjectPath(id.Bucket, id.Key), q, bytes.NewReader(data), func(req *http.Request) {
		req.Body = bodies.over(data)
		req.GetBody = func() (io.ReadCloser, error) { return bodies.over(data), nil }
	})
	return err == nil && bodies.n.Load() == 0, err
}

// openBodies counts the request bodies over one buffer that the HTTP
// transport has not closed: until it closes them it may still read them
// (a transport's write loop can outlive the answer).
type openBodies struct{ n atomic.Int32 }

func (o *openBodies) over(data []byte) io.ReadCloser {
	o.n.Add(1)
	return &countedBody{Reader: bytes.NewReader(data), open: o}
}

type countedBody struct {
	*bytes.Reader
	open   *openBodies
	closed atomic.Bool
}

func (b *countedBody) Close() error {
	if !b.closed.Swap(true) {
		b.open.n.Add(-1)
	}
	return nil
}

// handOut sends written chunks this node does not serve to their owners, a
// few at a time, and returns when they have them (or failed): the write is
// answered after, so the first read after it is a hit wherever it lands. A
// failure only costs the owner one S3 read later. released[i] reports that
// nothing reads chunks[i] any more (see Peers.put).
func (s *Server) handOut(ctx context.Context, r *ring.Ring, c caller, ids []chunk.ID, chunks [][]byte) (released []bool) {
	ctx = context.WithoutCancel(ctx)
	released = make([]bool, len(ids))
	sem := make(chan struct{}, 4)
	var wg sync.WaitGroup
	for i, id := range ids {
		owner := r.Owner(id)
		if s.peers.down.Down(owner.Name, time.Now()) {
			if s.shouldStore(r, id) { // standing in for the owner
				if err := s.store.PutChunk(id, chunks[i]); err != nil { // a copy
					s.storeFailed("put_chunk", err)
				}
			}
			released[i] = true
			continue
		}
		sem <- struct{}{}
		wg.Add(1)
		go func() {
			defer func() { <-sem; wg.Done() }()
			result := "ok"
			ok, err := s.peers.put(ctx, owner, c.tenant.Name, id, chunks[i])
			if err != nil {
				result = "error"
				s.log.Debug("handing a written chunk to its owner failed", "peer", owner.Name, "err", err)
			}
			released[i] = ok
			s.metrics.PeerRequests.WithLabelValues("handout", result).Inc()
		}()
	}
	wg.Wait()
	return released
}

// HeaderRevalidate asks the metadata owner to confirm metadata with S3 now.
const HeaderRevalidate = "X-Distcache-Revalidate"

// head asks an object's metadata owner for its metadata. Answers about the
// object (not found, access denied, S3 unavailable) come back as the errors
// the owner saw; only transport failures are errUnreachable-like errors.
func (p *Peers) head(ctx context.Context, m ring.Member, tenant string, o chunk.Object, revalidate bool) (chunk.Meta, error) {
	resp, err := p.send(ctx, http.MethodHead, m, tenant, nodeapi.ObjectPath(o.Bucket, o.Key), nil, nil, func(req *http.Request) {
		if revalidate {
			req.Header.Set(HeaderRevalidate, "1")
		}
	})
	if err != nil {
		return chunk.Meta{}, err
	}
	resp.Body.Close()
	h := resp.Header
	switch resp.StatusCode {
	case http.StatusOK:
	case http.StatusNotFound:
		return chunk.Meta{}, fmt.Errorf("%w (metadata owner %s)", s3backend.ErrNotFound, m.Name)
	case http.StatusForbidden:
		return chunk.Meta{}, fmt.Errorf("%w (metadata owner %s)", s3backend.ErrAccessDenied, m.Name)
	case http.StatusServiceUnavailable:
		return chunk.Meta{}, fmt.Errorf("%w (metadata owner %s)", s3backend.ErrUnavailable, m.Name)
	default:
		return chunk.Meta{}, &peerError{status: resp.StatusCode, code: h.Get("X-Distcache-Error"), msg: h.Get("X-Distcache-Error")}
	}
	size, err := strconv.ParseInt(h.Get(HeaderObjectSize), 10, 64)
	if err != nil {
		return chunk.Meta{}, fmt.Errorf("metadata owner %s sent no object size", m.Name)
	}
	meta := chunk.Meta{Size: size, ETag: h.Get("ETag"), ContentType: h.Get("X-Distcache-Content-Type"), FetchedAt: time.Now(),
		Held: h.Get(HeaderHeld), Headers: nodeapi.Stored(h)}
	if lm, err := http.ParseTime(h.Get("Last-Modified")); err == nil {
		meta.LastModified = lm
	}
	return meta, nil
}

// invalidate tells a member to drop what it cached of o, on behalf of
// member from, which chose m by its ring of epoch (see takeInvalidation).
func (p *Peers) invalidate(ctx context.Context, m ring.Member, tenant string, o chunk.Object, from string, epoch int64) error {
	q := url.Values{"invalidate": {"1"}, "from": {from}, "epoch": {strconv.FormatInt(epoch, 10)}}
	resp, err := p.send(ctx, http.MethodPost, m, tenant, nodeapi.ObjectPath(o.Bucket, o.Key), q, http.NoBody, nil)
	if err != nil {
		return err
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusNoContent {
		return &peerError{status: resp.StatusCode, msg: resp.Header.Get("X-Distcache-Error")}
	}
	return nil
}

// metaOwner is the member that owns o's metadata, when that is another
// member this node can try; ok=false means this node answers itself.
func (s *Server) metaOwner(c caller, o chunk.Object) (ring.Member, bool) {
	r := s.currentRing()
	if r == nil || c.hop {
		return ring.Member{}, false
	}
	owner := r.Owner(nodeapi.MetaID(o))
	if owner.Name == s.cfg.Self || s.peers.down.Down(owner.Name, time.Now()) {
		return ring.Member{}, false
	}
	return owner, true
}

// metaOwnersToTell are the members a write of o must tell (invalidateAt),
// whether or not they failed a moment ago: o's metadata owner, when that
// is another member, and its owner under the ring's previous membership,
// when that is yet another member of the ring in force (gateways that
// have not heard of the new ring may still keep what it answered for o,
// on the leases it grants). A member marked down is tried all the same:
// one back since (a pod restarted with its address) would otherwise go on
// answering, and leasing, the old version.
func (s *Server) metaOwnersToTell(r *ring.Ring, c caller, o chunk.Object) []ring.Member {
	if r == nil || c.hop {
		return nil
	}
	var out []ring.Member
	id := nodeapi.MetaID(o)
	owner := r.Owner(id)
	if owner.Name != s.cfg.Self {
		out = append(out, owner)
	}
	if prev, ok := r.PreviousOwner(id); ok && prev.Name != s.cfg.Self {
		if _, inRing := r.Member(prev.Name); inRing { // one gone from the ring: its leases end with its polls
			out = append(out, prev)
		}
	}
	return out
}

// remoteMeta asks the metadata owner. ok=false: the owner is unreachable
// and the caller resolves metadata itself.
func (s *Server) remoteMeta(ctx context.Context, c caller, o chunk.Object, force bool) (chunk.Meta, bool, error) {
	owner, ok := s.metaOwner(c, o)
	if !ok {
		return chunk.Meta{}, false, nil
	}
	m, err := s.peers.head(ctx, owner, c.tenant.Name, o, force)
	var pe *peerError
	switch {
	case err == nil:
		s.metrics.PeerRequests.WithLabelValues("meta", "ok").Inc()
		return m, true, nil
	case errors.Is(err, s3backend.ErrNotFound), errors.Is(err, s3backend.ErrAccessDenied),
		errors.Is(err, s3backend.ErrUnavailable), errors.As(err, &pe):
		s.metrics.PeerRequests.WithLabelValues("meta", "error").Inc()
		return m, true, err
	default:
		s.peers.down.MarkDown(owner.Name)
		s.metrics.PeerRequests.WithLabelValues("meta", "unreachable").Inc()
		return m, false, nil
	}
}
