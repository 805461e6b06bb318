package nodeapi

import (
	"fmt"
	"strconv"
	"strings"
	"time"
)

// Metadata leases: how a client (the gateway) keeps object metadata between
// reads without weakening what a write through the cache promises. The
// node side is internal/metalease; the client side internal/client.
//
// A node that answers a HEAD as the object's metadata owner adds
// HeaderMetaLease: its incarnation, its change sequence number read before
// the metadata, and how long the metadata stays fresh (what remains of
// --meta-ttl). The client may keep the answer that long, while it holds a
// lease from that node, and only if it has applied no change numbered after
// the answer's. It holds a lease by polling PathInvalidations: each answer
// lists the changes for its tenant since the last poll and, once applied,
// grants Lease from when the poll was sent. The node acknowledges a write
// only after each client's poll has passed the change, or its lease ended.

// PathInvalidations is the long poll for metadata changes:
// GET /v1/invalidations?watcher=W&since=N&incarnation=I.
const PathInvalidations = "/v1/invalidations"

// HeaderMetaLease marks a metadata answer the client may keep.
const HeaderMetaLease = "X-Distcache-Meta-Lease"

// HeaderPolicy names an object's write policy on HEAD answers when it is
// not WriteThrough ("NoCache": the client keeps neither its metadata nor
// its pages).
const HeaderPolicy = "X-Distcache-Policy"

// Invalidations is the answer to a poll.
type Invalidations struct {
	// Incarnation names the node process; another one than the poll
	// named means everything kept from this node is void (Reset too).
	Incarnation string `json:"incarnation"`
	// Seq is the node's latest change; poll again with since=Seq.
	Seq uint64 `json:"seq"`
	// Reset: the changes since the poll's number are no longer known;
	// drop everything kept from this node.
	Reset bool `json:"reset,omitempty"`
	// LeaseMillis is how long, from when the poll was sent, what is kept
	// from this node may be used.
	LeaseMillis int64 `json:"leaseMillis"`
	// Objects changed since the poll's number, for the polling tenant.
	Objects []ObjectName `json:"objects,omitempty"`
}

// ObjectName is a bucket and key.
type ObjectName struct {
	Bucket string `json:"bucket"`
	Key    string `json:"key"`
}

// FreshForever is the freshness of an immutable cache's metadata: kept
// while the lease holds, however long.
const FreshForever = 100 * 365 * 24 * time.Hour

// MetaLease is the content of HeaderMetaLease.
type MetaLease struct {
	Incarnation string
	Seq         uint64
	Fresh       time.Duration // how long the metadata may be kept
}

// String formats the header value: "<incarnation> <seq> <fresh ms>".
func (l MetaLease) String() string {
	return l.Incarnation + " " + strconv.FormatUint(l.Seq, 10) + " " + strconv.FormatInt(l.Fresh.Milliseconds(), 10)
}

// ParseMetaLease reads a HeaderMetaLease value.
func ParseMetaLease(v string) (MetaLease, error) {
	f := strings.Fields(v)
	if len(f) != 3 || f[0] == "" {
		return MetaLease{}, fmt.Errorf("malformed %s %q", HeaderMetaLease, v)
	}
	seq, err := strconv.ParseUint(f[1], 10, 64)
	if err != nil {
		return MetaLease{}, fmt.Errorf("malformed %s %q", HeaderMetaLease, v)
	}
	ms, err := strconv.ParseInt(f[2], 10, 64)
	if err != nil || ms < 0 {
		return MetaLease{}, fmt.Errorf("malformed %s %q", HeaderMetaLease, v)
	}
	return MetaLease{Incarnation: f[0], Seq: seq, Fresh: time.Duration(ms) * time.Millisecond}, nil
}
