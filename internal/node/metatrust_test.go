package node_test

import (
	"bytes"
	"fmt"
	"net/http"
	"testing"
	"time"

	"github.com/distcache/distcache/internal/chunk"
	"github.com/distcache/distcache/internal/nodeapi"
	"github.com/distcache/distcache/internal/testutil"
)

// A member back in the ring after a stop, with its disk, does not answer
// the metadata it cached before, although its --meta-ttl has not run out:
// a write through another member while it was away told the owner of that
// time, not it. (e2e/processfaults TestWriteBackThroughRingChurn saw a
// pod back after a scale-down answer a version gone from S3.)
func TestMemberBackInTheRingForgetsMetadataCachedBefore(t *testing.T) {
	c := &cluster{harness: newHarness(t, options{members: 2})}
	c.members = c.nc.Members()
	back, other := c.members[0], c.members[1]
	a := c.client(tenant("team-a"))
	key := ""
	for i := 0; key == ""; i++ {
		k := fmt.Sprintf("object-%d", i)
		id := nodeapi.MetaID(chunk.Object{Tenant: "team-a", Bucket: "bucket-a", Key: k})
		if c.nc.Ring().Candidates(id, 1)[0].Name == back.Name {
			key = k
		}
	}
	put := func(via *member, data []byte) {
		t.Helper()
		if resp := c.do(a, http.MethodPut, c.objectURL(via, "bucket-a", key, ""), data, nil); resp.status != http.StatusOK {
			t.Fatalf("put through %s: %d %s", via.Name, resp.status, resp.body)
		}
	}
	read := func(via *member, want []byte, when string) {
		t.Helper()
		if resp := c.read(a, via, "bucket-a", key); resp.status != http.StatusOK || !bytes.Equal(resp.body, want) {
			t.Fatalf("%s: read through %s: %d %q, want %q", when, via.Name, resp.status, resp.body, want)
		}
	}
	put(other, []byte("version 1"))
	read(other, []byte("version 1"), "before the stop") // the owner keeps its metadata

	c.nc.KillMember(back)
	c.nc.PublishWithout(false, back.Name)
	put(other, []byte("version 2, written while the owner was away"))
	c.clock.Advance(time.Second) // well within --meta-ttl
	testutil.Must(t, c.nc.RestartMember(back))
	c.nc.Publish(false)
	read(other, []byte("version 2, written while the owner was away"), "back in the ring")
	read(back, []byte("version 2, written while the owner was away"), "back in the ring")
}
