// Package nodeapi holds what cache nodes and their clients must agree on:
// the node API's URLs and the framing of read connections.
package nodeapi

import (
	"net/url"
	"strings"

	"github.com/distcache/distcache/internal/chunk"
)

// ObjectPath is /v1/objects/{bucket}/{key}, escaped so that the node's
// router gives back exactly bucket and key: every segment is escaped; a
// "." or ".." segment is written %2E so it is not cleaned away, and the
// slash after an empty segment is written %2F so "a//b" and "/a" are not
// collapsed.
func ObjectPath(bucket, key string) string { return pathOf("/v1/objects/", bucket, key) }

// HeldPath is /v1/held/{bucket}/{key}, escaped as ObjectPath: the copies
// of WriteBack and Transient objects that nodes keep for each other.
func HeldPath(bucket, key string) string { return pathOf(PathHeld+"/", bucket, key) }

// PathHeld is the root of the held objects' API between nodes.
const PathHeld = "/v1/held"

func pathOf(prefix, bucket, key string) string {
	var b strings.Builder
	b.Grow(len(prefix) + 1 + len(bucket) + 3*len(key))
	b.WriteString(prefix)
	b.WriteString(url.PathEscape(bucket))
	b.WriteByte('/')
	prevEmpty := false
	for i, seg := range strings.Split(key, "/") {
		if i > 0 {
			if prevEmpty {
				b.WriteString("%2F")
			} else {
				b.WriteByte('/')
			}
		}
		switch seg {
		case ".":
			b.WriteString("%2E")
		case "..":
			b.WriteString("%2E%2E")
		default:
			b.WriteString(url.PathEscape(seg))
		}
		prevEmpty = seg == ""
	}
	return b.String()
}

// MetaID is where an object's metadata lives in the ring: the member that
// owns this id answers the object's HEADs, takes its writes and deletes and
// is the one place its metadata is cached, so nodes never disagree about
// which version is current.
func MetaID(o chunk.Object) chunk.ID { return chunk.ID{Object: o} }

// ProtoRead is the ALPN protocol a client offers for connections that
// carry only chunk reads (GET /v1/objects/{bucket}/{key}?chunk=N). It is
// HTTP/1.1 on the wire; a node that serves it (node.Server.ServeReads)
// answers those connections with a loop made for chunk reads instead of
// net/http's general server, and a node that does not negotiates
// "http/1.1" instead.
const ProtoRead = "distcache-read/1"
