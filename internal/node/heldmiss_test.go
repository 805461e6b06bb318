package node_test

import (
	"net/http"
	"testing"

	"github.com/distcache/distcache/internal/chunk"
	"github.com/distcache/distcache/internal/nodeapi"
	"github.com/distcache/distcache/internal/testutil/s3proxy"
)

// heldTenants keeps team-a's wb/ keys WriteBack, one copy each.
const heldTenants = `tenants:
  - name: team-a
    buckets: [bucket-a]
    policies:
      - {bucket: bucket-a, prefix: wb/, mode: WriteBack, replicas: 1}
  - name: team-b
    buckets: [bucket-b]
`

// A member that holds no version of a held key asks every member that may
// hold one at once, those it marked down a moment ago too, and answers the
// newest: the holder of the newest may be back already (a restarted pod),
// while a member that is up still holds an older version the ring's
// handoff has not yet taken from it. (e2e/gateway
// TestGatewaysReadTheirWritesThroughNodeChurn read a delete's 404, and a
// copy an older version's bytes, when those up were asked alone first.)
func TestHeldMetadataMissAsksMembersMarkedDownToo(t *testing.T) {
	c := &cluster{harness: newHarness(t, options{members: 3, tenantsYAML: heldTenants})}
	c.members = c.nc.Members()
	c.proxy.Inject(s3proxy.Rule{Method: http.MethodPut, PathPrefix: "/bucket-a/wb/", Fault: s3proxy.InternalError}) // nothing persists
	a := c.client(tenant("team-a"))
	const key = "wb/k"
	order := c.nc.Ring().Candidates(nodeapi.MetaID(chunk.Object{Tenant: "team-a", Bucket: "bucket-a", Key: key}), 3)
	reader, older, newer := c.named(order[0].Name), c.named(order[1].Name), c.named(order[2].Name)
	put := func(via *member, data string) {
		t.Helper()
		if resp := c.do(a, http.MethodPut, c.objectURL(via, "bucket-a", key, ""), []byte(data), nil); resp.status != http.StatusOK {
			t.Fatalf("put through %s: %d %s", via.Name, resp.status, resp.body)
		}
	}
	// The older version is held by one member, the newer by another: each
	// was the key's only member when it was written.
	c.nc.PublishWithout(false, reader.Name, newer.Name)
	put(older, "version 1")
	c.nc.PublishWithout(false, reader.Name, older.Name)
	put(newer, "version 2")

	// All three in the ring, the reader first in the key's order, the
	// older's holder next, the newer's holder only under the previous
	// membership; the reader marked the newer's holder down a moment ago
	// (a pod restarted with its disk).
	c.nc.Publish(true)
	reader.Node.Server().MarkDown(newer.Name)

	if resp := c.read(a, reader, "bucket-a", key); resp.status != http.StatusOK || string(resp.body) != "version 2" {
		t.Fatalf("read through the member holding no version: %d %q, want version 2", resp.status, resp.body)
	}
}
