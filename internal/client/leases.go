package client

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strconv"
	"time"

	"github.com/distcache/distcache/internal/nodeapi"
)

// nodeLease is the client's metadata lease from one node (see
// metacache.go and internal/nodeapi/leases.go). Fields are guarded by
// metaCache.mu.
type nodeLease struct {
	addr        string
	incarnation string
	seq         uint64    // every change up to this one is applied
	gen         uint64    // moves on when everything kept from the node is void
	until       time.Time // the lease: kept metadata is used only before
	used        time.Time // last kept or used, to stop polling idle nodes
	polling     bool
}

const (
	// pollIdle stops the polls of a node whose kept metadata went unused
	// this long; the next leased answer starts them again.
	pollIdle = time.Minute
	// pollTimeout bounds one poll; the node holds it well under a second.
	pollTimeout = 10 * time.Second
	// pollBackoff spaces polls that failed, doubling up to pollBackoffMax.
	pollBackoff    = 50 * time.Millisecond
	pollBackoffMax = 2 * time.Second
)

// newWatcherID names this client in the nodes' polls.
func newWatcherID() string {
	var b [12]byte
	_, _ = rand.Read(b[:])
	return hex.EncodeToString(b[:])
}

// keepMeta keeps a Stat answer of the node at addr, sent at sent, when the
// node leased it (v is its nodeapi.HeaderMetaLease), and starts polling that node when the client does not
// yet.
func (c *Client) keepMeta(bucket, key string, m Meta, addr, v string, sent time.Time) {
	if v == "" {
		return
	}
	l, err := nodeapi.ParseMetaLease(v)
	if err != nil {
		c.log.Debug("ignoring a malformed metadata lease", "node", addr, "err", err)
		return
	}
	if n := c.metas.keep(bucket, key, m, addr, l, sent); n != nil {
		go c.pollChanges(n)
	}
}

// pollChanges keeps the lease from one node: it polls for changes, drops
// the entries they name, and extends the lease, until the node's kept
// metadata goes unused for pollIdle or the client closes.
func (c *Client) pollChanges(n *nodeLease) {
	defer c.metas.polls.Done()
	backoff := pollBackoff
	for {
		c.metas.mu.Lock()
		if c.metas.closed || time.Since(n.used) > pollIdle {
			n.polling, n.until = false, time.Time{}
			n.gen++
			c.metas.mu.Unlock()
			return
		}
		since, incarnation := n.seq, n.incarnation
		c.metas.mu.Unlock()

		sent := time.Now()
		ans, err := c.poll(n.addr, since, incarnation)
		if err != nil {
			// The node may be gone (a write elsewhere cannot tell it then):
			// nothing it answered is used until a poll answers again, with
			// the changes since (or a reset, if it restarted).
			c.metas.mu.Lock()
			n.until = time.Time{}
			c.metas.mu.Unlock()
			c.metrics.leasePolls.WithLabelValues("error").Inc()
			c.log.Debug("metadata lease poll failed", "node", n.addr, "err", err)
			select {
			case <-c.pollsCtx.Done():
			case <-time.After(backoff):
			}
			backoff = min(2*backoff, pollBackoffMax)
			continue
		}
		backoff = pollBackoff
		result := "ok"
		c.metas.mu.Lock()
		if ans.Reset || ans.Incarnation != n.incarnation {
			n.gen++
			n.incarnation = ans.Incarnation
			result = "reset"
		}
		for _, o := range ans.Objects {
			delete(c.metas.m, metaKey(o.Bucket, o.Key))
		}
		// Only now, with the changes applied, does the lease grow.
		n.seq = ans.Seq
		n.until = sent.Add(time.Duration(ans.LeaseMillis) * time.Millisecond)
		c.metas.mu.Unlock()
		c.metrics.leasePolls.WithLabelValues(result).Inc()
	}
}

// poll asks the node at addr for the changes after since.
func (c *Client) poll(addr string, since uint64, incarnation string) (nodeapi.Invalidations, error) {
	ctx, cancel := context.WithTimeout(context.Background(), pollTimeout)
	defer cancel()
	stop := context.AfterFunc(c.pollsCtx, cancel)
	defer stop()
	q := url.Values{"watcher": {c.watcherID}, "since": {strconv.FormatUint(since, 10)}, "incarnation": {incarnation}}
	u := &url.URL{Scheme: "https", Host: addr, Path: nodeapi.PathInvalidations, RawQuery: q.Encode()}
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, u.String(), nil)
	if err != nil {
		return nodeapi.Invalidations{}, err
	}
	if c.cfg.Tenant != "" {
		req.Header.Set(headerTenant, c.cfg.Tenant)
	}
	resp, err := c.transport.RoundTrip(req)
	if err != nil {
		return nodeapi.Invalidations{}, err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		_, _ = io.Copy(io.Discard, io.LimitReader(resp.Body, 4<<10))
		return nodeapi.Invalidations{}, fmt.Errorf("node %s answered the poll with %s", addr, resp.Status)
	}
	var ans nodeapi.Invalidations
	if err := json.NewDecoder(io.LimitReader(resp.Body, 64<<20)).Decode(&ans); err != nil {
		return nodeapi.Invalidations{}, fmt.Errorf("node %s: malformed poll answer: %w", addr, err)
	}
	if ans.Incarnation == "" || ans.LeaseMillis <= 0 {
		return nodeapi.Invalidations{}, fmt.Errorf("node %s: poll answer without incarnation or lease", addr)
	}
	return ans, nil
}

// stopPolls ends the polls and waits for them (Close).
func (c *Client) stopPolls() {
	c.metas.mu.Lock()
	c.metas.closed = true
	c.metas.mu.Unlock()
	c.pollsCancel()
	c.metas.polls.Wait()
}
