package node_test

import (
	"bytes"
	"fmt"
	"net/http"
	"testing"
	"time"

	"github.com/distcache/distcache/internal/chunk"
	"github.com/distcache/distcache/internal/node"
	"github.com/distcache/distcache/internal/nodeapi"
	"github.com/distcache/distcache/internal/ring"
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

// raceRingChange sets up a write racing a ring change: members old and
// writer were the only ones in the ring (epoch 1); member fresh joins
// (epoch 2) and becomes the owner of the returned key's metadata and of
// its one chunk, reads it once (caching "version 1"), and then the writer
// alone goes back to the previous ring, as a member that has not yet
// noticed the change.
func raceRingChange(t *testing.T) (c *cluster, key string, old, writer, fresh *member, epoch1 *ring.Ring) {
	c = &cluster{harness: newHarness(t, options{members: 3})}
	c.members = c.nc.Members()
	fresh = c.members[2]
	epoch1 = c.nc.PublishWithout(false, fresh.Name)
	a := c.client(tenant("team-a"))
	c.nc.PutDirect("bucket-a", "probe", []byte("version 1"))
	etag := c.do(a, http.MethodHead, c.objectURL(c.members[0], "bucket-a", "probe", ""), nil, nil).header.Get("ETag")
	epoch2 := c.nc.Publish(false)
	for i := 0; key == ""; i++ {
		o := chunk.Object{Tenant: "team-a", Bucket: "bucket-a", Key: fmt.Sprintf("object-%d", i)}
		if epoch2.Owner(nodeapi.MetaID(o)).Name == fresh.Name &&
			epoch2.Owner(chunk.ID{Object: o, ETag: etag, Size: testChunk}).Name == fresh.Name {
			key = o.Key
			old = c.named(epoch1.Owner(nodeapi.MetaID(o)).Name)
		}
	}
	writer = c.members[0]
	if writer == old {
		writer = c.members[1]
	}
	c.nc.PutDirect("bucket-a", key, []byte("version 1"))
	if resp := c.read(a, fresh, "bucket-a", key); resp.status != http.StatusOK || string(resp.body) != "version 1" {
		t.Fatalf("first read through the new owner: %d %q", resp.status, resp.body)
	}
	writer.Ring.Store(epoch1)
	return c, key, old, writer, fresh, epoch1
}

// A write by a member still on the previous ring tells the owner it knows;
// that member, on the new ring, passes it on to the owner there, which
// then no longer answers the version it cached.
func TestWriteOnThePreviousRingReachesTheNewOwner(t *testing.T) {
	c, key, old, writer, fresh, _ := raceRingChange(t)
	a := c.client(tenant("team-a"))
	if resp := c.do(a, http.MethodPut, c.objectURL(writer, "bucket-a", key, ""), []byte("version 2"), nil); resp.status != http.StatusOK {
		t.Fatalf("put through the member on the previous ring: %d %s", resp.status, resp.body)
	}
	if resp := c.read(a, fresh, "bucket-a", key); resp.status != http.StatusOK || string(resp.body) != "version 2" {
		t.Fatalf("read through the new owner after the write: %d %q, want version 2", resp.status, resp.body)
	}
	if n := c.counterOn(old, "distcache_peer_requests_total", map[string]string{"kind": "invalidate_passed_on", "result": "ok"}); n != 1 {
		t.Errorf("the old owner passed %v invalidations on, want 1", n)
	}
}

// When the old owner has not noticed the new ring either, nobody tells the
// new owner of the write: it answers what it cached until RingSettle after
// it noticed the ring has passed, then asks S3 again.
func TestMetadataCachedAsTheRingSettlesIsConfirmedAfter(t *testing.T) {
	c, key, old, writer, fresh, epoch1 := raceRingChange(t)
	old.Ring.Store(epoch1)
	a := c.client(tenant("team-a"))
	if resp := c.do(a, http.MethodPut, c.objectURL(writer, "bucket-a", key, ""), []byte("version 2"), nil); resp.status != http.StatusOK {
		t.Fatalf("put through the member on the previous ring: %d %s", resp.status, resp.body)
	}
	c.clock.Advance(node.DefaultRingSettle) // well within --meta-ttl
	if resp := c.read(a, fresh, "bucket-a", key); resp.status != http.StatusOK || string(resp.body) != "version 2" {
		t.Fatalf("read through the new owner once the ring settled: %d %q, want version 2", resp.status, resp.body)
	}
}

// named is the member called name.
func (c *cluster) named(name string) *member {
	c.t.Helper()
	for _, m := range c.members {
		if m.Name == name {
			return m
		}
	}
	c.t.Fatalf("no member %s", name)
	return nil
}

// A write whose object's metadata owner has just died waits until the
// leases that owner granted its gateways before it died have ended: the
// owner can no longer tell them of the write.
func TestWriteWaitsOutTheLeasesOfADeadMetadataOwner(t *testing.T) {
	c := &cluster{harness: newHarness(t, options{members: 2})}
	c.members = c.nc.Members()
	writer, owner := c.members[0], c.members[1]
	key := ""
	for i := 0; key == ""; i++ {
		k := fmt.Sprintf("object-%d", i)
		if c.nc.Ring().Owner(nodeapi.MetaID(chunk.Object{Tenant: "team-a", Bucket: "bucket-a", Key: k})).Name == owner.Name {
			key = k
		}
	}
	c.nc.KillMember(owner)
	a := c.client(tenant("team-a"))
	if resp := c.do(a, http.MethodPut, c.objectURL(writer, "bucket-a", key, ""), []byte("written while the owner is dead"), nil); resp.status != http.StatusOK {
		t.Fatalf("put with the metadata owner dead: %d %s", resp.status, resp.body)
	}
	if n := c.counterOn(writer, "distcache_metadata_lease_waits_total", map[string]string{"outcome": "owner_unreachable"}); n != 1 {
		t.Fatalf("writes that waited out a dead owner's leases: %v, want 1", n)
	}
}
