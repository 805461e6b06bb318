package node_test

import (
	"bytes"
	"math/rand/v2"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/distcache/distcache/internal/chunk"
	"github.com/distcache/distcache/internal/metrics"
	"github.com/distcache/distcache/internal/ring"
	"github.com/distcache/distcache/internal/testutil"
)

// readResults are the results a chunk read can have.
var readResults = []string{metrics.ResultHitRAM, metrics.ResultHitDisk, metrics.ResultMiss, metrics.ResultRelayed}

// tally is one node's request and response-byte counters of chunk and
// object reads, by operation and result.
type tally map[string]float64 // "op/result" or "bytes op/result"

func (c *cluster) tally(m *member) tally {
	t := tally{}
	for _, op := range []string{"get_chunk", "get_object"} {
		for _, res := range append(readResults, metrics.ResultError) {
			want := map[string]string{"op": op, "result": res}
			t[op+"/"+res] = c.counterOn(m, "distcache_requests_total", want)
			t["bytes "+op+"/"+res] = c.counterOn(m, "distcache_response_bytes_total", want)
		}
	}
	return t
}

// since is what changed from before to t.
func (t tally) since(before tally) tally {
	d := tally{}
	for k, v := range t {
		if v != before[k] {
			d[k] = v - before[k]
		}
	}
	return d
}

// requests are the request counts (not bytes) in t.
func (t tally) requests() tally {
	r := tally{}
	for k, v := range t {
		if !strings.HasPrefix(k, "bytes ") {
			r[k] = v
		}
	}
	return r
}

// bytesOf sums response bytes over read operations for the results.
func (t tally) bytesOf(results ...string) float64 {
	var n float64
	for _, op := range []string{"get_chunk", "get_object"} {
		for _, res := range results {
			n += t["bytes "+op+"/"+res]
		}
	}
	return n
}

// readAndTally reads the object through via and returns what each member
// counted for that read: requests of its own and of the other members it
// asked, one per chunk it forwarded.
//
// A node counts a request after its last byte went out, so the client can
// have the body first: the tally is taken once the expected number of
// requests is in (each node counts a request's bytes before the request).
func (c *cluster) readAndTally(via *member, bucket, key string, want []byte, requests float64) []tally {
	c.t.Helper()
	before := make([]tally, len(c.members))
	for i, m := range c.members {
		before[i] = c.tally(m)
	}
	got := c.read(c.client(tenant("team-a")), via, bucket, key)
	if got.status != http.StatusOK || !bytes.Equal(got.body, want) {
		c.t.Fatalf("read via %s: status %d, %d bytes, want %d", via.Name, got.status, len(got.body), len(want))
	}
	deadline := time.Now().Add(30 * time.Second) // bounds the wait; nothing asserts on time
	for {
		d := make([]tally, len(c.members))
		var counted float64
		for i, m := range c.members {
			d[i] = c.tally(m).since(before[i])
			for _, n := range d[i].requests() {
				counted += n
			}
		}
		if counted >= requests || time.Now().After(deadline) {
			return d
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// chunkOwners maps each chunk index of the object to the member owning it.
func (c *cluster) chunkOwners(bucket, key string, size int) map[int64]*member {
	c.t.Helper()
	head := c.do(c.client(tenant("team-a")), http.MethodHead, c.objectURL(c.members[0], bucket, key, ""), nil, nil)
	rg := c.members[0].Ring.Load()
	owners := map[int64]*member{}
	for idx := int64(0); idx*testChunk < int64(size); idx++ {
		id := chunk.ID{Object: chunk.Object{Tenant: "team-a", Bucket: bucket, Key: key}, ETag: head.header.Get("ETag"), Size: testChunk, Index: idx}
		for _, m := range c.members {
			if m.Name == rg.Owner(id).Name {
				owners[idx] = m
			}
		}
	}
	return owners
}

// An object read through a node that does not own its chunks is answered
// by the owners, which count the hit or miss themselves. The node that
// forwarded counts those chunks as forwarded, so summing hit (or any
// non-forwarded) bytes over the cluster counts every byte exactly once.
func TestClusterObjectReadsCountEveryByteOnceAcrossNodes(t *testing.T) {
	c := newCluster(t, 3)
	r := rand.New(rand.NewPCG(51, 52))

	t.Run("all chunks forwarded", func(t *testing.T) {
		data := testutil.RandomBytes(r, testChunk/2)
		c.putDirect("bucket-a", "one.bin", data)
		owner := c.chunkOwners("bucket-a", "one.bin", len(data))[0]
		via, viaIdx := c.members[0], 0
		if via == owner {
			via, viaIdx = c.members[1], 1
		}
		n := float64(len(data))
		for _, want := range []string{metrics.ResultMiss, "hit"} { // cold, then warm
			d := c.readAndTally(via, "bucket-a", "one.bin", data, 2) // via's, and the owner's for the chunk
			if got := d[viaIdx]["get_object/forwarded"]; got != 1 {
				t.Errorf("%s read: %s counted %v get_object requests as forwarded, want 1 (all: %v)", want, via.Name, got, d[viaIdx])
			}
			if got := d[viaIdx]["bytes get_object/forwarded"]; got != n {
				t.Errorf("%s read: %s counted %v get_object bytes as forwarded, want %v (all: %v)", want, via.Name, got, n, d[viaIdx])
			}
			var hit, miss, nonForwarded float64
			for _, dm := range d {
				hit += dm.bytesOf(metrics.ResultHitRAM, metrics.ResultHitDisk)
				miss += dm.bytesOf(metrics.ResultMiss)
				nonForwarded += dm.bytesOf(metrics.ResultHitRAM, metrics.ResultHitDisk, metrics.ResultMiss)
			}
			if nonForwarded != n {
				t.Errorf("%s read: the cluster counted %v non-forwarded bytes for a %v-byte read, want each byte once (per node: %v)", want, nonForwarded, n, d)
			}
			if want == "hit" && hit != n {
				t.Errorf("warm read: the cluster counted %v hit bytes for a %v-byte read, want %v (per node: %v)", hit, n, n, d)
			}
			if want == metrics.ResultMiss && miss != n {
				t.Errorf("cold read: the cluster counted %v miss bytes for a %v-byte read, want %v (per node: %v)", miss, n, n, d)
			}
		}
	})

	t.Run("mixed local and forwarded chunks", func(t *testing.T) {
		data := testutil.RandomBytes(r, 9*testChunk+123)
		c.putDirect("bucket-a", "mixed.bin", data)
		owners := c.chunkOwners("bucket-a", "mixed.bin", len(data))
		via, viaIdx := c.members[0], 0
		local, forwarded, forwards := 0.0, 0.0, 0.0
		for idx, m := range owners {
			n := float64(min(testChunk, len(data)-int(idx)*testChunk))
			if m == via {
				local += n
			} else {
				forwarded += n
				forwards++
			}
		}
		if local == 0 || forwarded == 0 {
			t.Fatalf("%s owns %v of %d bytes: the object does not mix local and forwarded chunks", via.Name, local, len(data))
		}
		for _, want := range []string{metrics.ResultMiss, "hit"} {
			d := c.readAndTally(via, "bucket-a", "mixed.bin", data, 1+forwards)
			// The request is counted once, under forwarded: its other
			// chunks were counted by their owners.
			if got := d[viaIdx].requests(); len(got) != 1 || got["get_object/forwarded"] != 1 {
				t.Errorf("%s read: %s counted requests %v, want one get_object request, forwarded", want, via.Name, got)
			}
			// Bytes are counted by the source of each chunk.
			if got := d[viaIdx]["bytes get_object/forwarded"]; got != forwarded {
				t.Errorf("%s read: %s counted %v forwarded bytes, want %v", want, via.Name, got, forwarded)
			}
			if got := d[viaIdx].bytesOf(metrics.ResultHitRAM, metrics.ResultHitDisk, metrics.ResultMiss); got != local {
				t.Errorf("%s read: %s counted %v bytes of its own chunks, want %v (%v)", want, via.Name, got, local, d[viaIdx])
			}
			var hit, nonForwarded float64
			for _, dm := range d {
				hit += dm.bytesOf(metrics.ResultHitRAM, metrics.ResultHitDisk)
				nonForwarded += dm.bytesOf(metrics.ResultHitRAM, metrics.ResultHitDisk, metrics.ResultMiss)
			}
			if nonForwarded != float64(len(data)) {
				t.Errorf("%s read: the cluster counted %v non-forwarded bytes for a %d-byte read (per node: %v)", want, nonForwarded, len(data), d)
			}
			if want == "hit" && hit != float64(len(data)) {
				t.Errorf("warm read: the cluster counted %v hit bytes for a %d-byte read (per node: %v)", hit, len(data), d)
			}
			if want == metrics.ResultMiss && hit != 0 {
				t.Errorf("cold read: the cluster counted %v hit bytes, want 0 (per node: %v)", hit, d)
			}
		}
	})
}

// Every node reports the members of the ring it routes by, and follows a
// new epoch.
func TestClusterNodesReportRingMembers(t *testing.T) {
	c := newCluster(t, 3)
	check := func(wantActive, wantDraining float64) {
		t.Helper()
		for _, m := range c.members {
			a := c.counterOn(m, "distcache_ring_members", map[string]string{"state": "active"})
			d := c.counterOn(m, "distcache_ring_members", map[string]string{"state": "draining"})
			if a != wantActive || d != wantDraining {
				t.Errorf("%s reports %v active and %v draining members, want %v and %v", m.Name, a, d, wantActive, wantDraining)
			}
		}
	}
	check(3, 0)
	c.add()
	c.publish(true)
	check(4, 0)

	// cache-3 drains: still a member, owning nothing.
	spec := c.members[0].Ring.Load().Spec()
	spec.Epoch++
	spec.Members[3].State = ring.StateDraining
	r, err := ring.New(spec)
	testutil.Must(t, err)
	for _, m := range c.members {
		m.Ring.Store(r)
	}
	check(3, 1)
}
