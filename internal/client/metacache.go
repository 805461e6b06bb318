package client

import (
	"strconv"
	"sync"
	"time"

	"github.com/distcache/distcache/internal/nodeapi"
)

// metaCache keeps Stat answers so that a read of a known object needs no
// round trip before its chunks (a GetObject through the gateway is a Stat
// and the chunk reads; with the page cache the chunks need none either).
//
// Answers are kept when the metadata owner marks them with
// nodeapi.HeaderMetaLease: for what remains of the node's --meta-ttl
// (counted from when the Stat was sent, so never longer than the node keeps
// it; an immutable cache's stay fresh), and used only while the client
// holds a lease from that node (leases.go): each poll brings the changes
// writes made through any gateway or node, and a write is acknowledged
// only after they reached this client or its lease ended. An object
// overwritten behind the cache's back is thus served stale for at most
// --meta-ttl, as by the nodes.
//
// This client's own Put and Delete, and a read that finds the version gone
// (ErrChanged), drop the entry; so does a newer ring (the owner may have
// moved).
type metaCache struct {
	mu    sync.Mutex
	m     map[string]metaEntry
	nodes map[string]*nodeLease // by address, of nodes answers were kept from
	// polls are the goroutines keeping the leases (pollChanges); none
	// starts once closed.
	polls  sync.WaitGroup
	closed bool
	// now measures entries' freshness (Config.Now); leases use real time.
	now func() time.Time
}

type metaEntry struct {
	meta  Meta
	node  *nodeLease // the lease the entry depends on
	gen   uint64     // node.gen when kept
	until time.Time  // end of the node's freshness, by metaCache.now
}

// maxMetas bounds the cache: past it, it is cleared (the next Stat of each
// object asks a node again).
const maxMetas = 1 << 16

func metaKey(bucket, key string) string {
	return strconv.Itoa(len(bucket)) + ":" + bucket + key
}

// get returns the kept metadata when it may still be used.
func (mc *metaCache) get(bucket, key string) (Meta, bool) {
	mc.mu.Lock()
	defer mc.mu.Unlock()
	e, ok := mc.m[metaKey(bucket, key)]
	if !ok {
		return Meta{}, false
	}
	now := time.Now()
	if e.gen != e.node.gen || !now.Before(e.node.until) || !mc.now().Before(e.until) {
		return Meta{}, false
	}
	e.node.used = now
	return e.meta, true
}

func (mc *metaCache) store(bucket, key string, e metaEntry) {
	if mc.m == nil || len(mc.m) >= maxMetas {
		mc.m = map[string]metaEntry{}
	}
	mc.m[metaKey(bucket, key)] = e
}

// keep keeps an answer the node at addr leased, sent at sent, if the
// client has applied no change of that node numbered after the answer's.
// It returns the node's lease when the client does not poll that node yet:
// the caller starts its poll (counted in polls already); nothing is kept
// until its first answer.
func (mc *metaCache) keep(bucket, key string, m Meta, addr string, l nodeapi.MetaLease, sent time.Time) (start *nodeLease) {
	mc.mu.Lock()
	defer mc.mu.Unlock()
	n := mc.nodes[addr]
	if n == nil {
		if mc.nodes == nil {
			mc.nodes = map[string]*nodeLease{}
		}
		n = &nodeLease{addr: addr}
		mc.nodes[addr] = n
	}
	n.used = time.Now()
	if !n.polling {
		if mc.closed {
			return nil
		}
		n.polling = true
		mc.polls.Add(1)
		return n
	}
	if n.incarnation == l.Incarnation && n.seq <= l.Seq {
		mc.store(bucket, key, metaEntry{meta: m, node: n, gen: n.gen, until: sent.Add(l.Fresh)})
	}
	return nil
}

func (mc *metaCache) forget(bucket, key string) {
	mc.mu.Lock()
	defer mc.mu.Unlock()
	delete(mc.m, metaKey(bucket, key))
}

// forgetLeased drops every entry kept on a lease (a newer ring may have
// another metadata owner, whose changes this client does not poll for).
func (mc *metaCache) forgetLeased() {
	mc.mu.Lock()
	defer mc.mu.Unlock()
	for _, n := range mc.nodes {
		n.gen++
	}
}

// Forget drops what the client keeps of the object's metadata (of every
// object when key is empty): the gateway calls it for writes it passes to
// S3 without the client (multipart uploads, copies, batch deletes).
func (c *Client) Forget(bucket, key string) {
	if key == "" {
		c.metas.mu.Lock()
		clear(c.metas.m)
		c.metas.mu.Unlock()
		return
	}
	c.metas.forget(bucket, key)
}
