package processfaults_test

import (
	"fmt"
	"math/rand/v2"
	"testing"
	"time"

	"github.com/distcache/distcache/internal/testutil/s3proxy"
)

// TestWriteBackThroughRingChurn: four nodes, WriteBack with two copies, S3
// slow for the nodes' writes so that most of each round's writes are held
// when the ring changes. Each round the writers put, overwrite and delete
// (and so does wtWorkload on write-through keys, through any node); then a
// node drawn at random goes (churnEvents: killed with SIGKILL or
// stopped with SIGTERM and left out of the ring, as the operator leaves
// out a pod that is not Ready; killed and restarted at once, still in the
// ring, with its disk or on an empty one; or drained, removed from the
// ring once it holds nothing and stopped, as a scale-down removes a pod),
// the writers go on against the others, which must read every key as last
// acknowledged, and the node comes back into the ring with its disk (a
// scale-up reuses the pod's volume), its copies now stale or superseded in
// part. Once S3 takes writes at full speed, MinIO must end with the last
// acknowledged operation of every key, byte-exact (a checker over the
// history), every node must read them so, and no node may hold anything
// dirty.
func TestWriteBackThroughRingChurn(t *testing.T) {
	e, proxy, c := newWBCluster(t, 4)
	// As AWS S3: MinIO ignores If-Match on DELETE, and S3 holding the
	// nodes' writes for 10 s stretches what the persister's look orders
	// alone there (docs/write-back.md) to seconds.
	proxy.ConditionalDeletes(s3proxy.HeadWith(e.s3))
	rng := newRand(t)
	h := newWBHistory()
	rounds := min(cycles(t), wbChurnRounds)
	retries := 0
	for round := range rounds {
		holdBackWriteBack(proxy, true)
		retries += wbWorkload(t, c, h, rng, 2*round)
		wtWorkload(t, c, h, rng, 2*round)
		victim := c.nodes[rng.IntN(len(c.nodes))]
		ev := churnEvents[rng.IntN(len(churnEvents))]
		what := fmt.Sprintf("round %d, %s %s", round, victim.name, ev.name)
		t.Log(what)
		switch {
		case ev.drain:
			c.publishDraining(t, victim)
			victim.waitHoldsNothing(t, what)
			c.publish(t, c.except(victim)...)
			ev.leave(victim, t)
		case ev.restartAtOnce:
			ev.leave(victim, t)
			if ev.emptyDisk {
				victim.dataDir = t.TempDir()
			}
			c.start(t)
		default:
			ev.leave(victim, t)
			c.publish(t, c.except(victim)...)
		}
		retries += wbWorkload(t, c, h, rng, 2*round+1)
		wtWorkload(t, c, h, rng, 2*round+1)
		for _, n := range c.nodes {
			if n.running() {
				h.checkReads(t, n, what)
			}
		}
		if !ev.restartAtOnce {
			c.start(t)
			c.publish(t, c.nodes...)
		}
		for _, n := range c.nodes {
			h.checkReads(t, n, what+", back in the ring")
		}
		if ev.emptyDisk {
			// The versions it held are on one node now: a second lost
			// disk before S3 has them would lose what two copies keep.
			proxy.ClearFaults()
			c.waitClean(t, what)
		}
	}
	proxy.ClearFaults()
	h.waitS3Matches(t, e, c, "after the churn", nil)
	c.waitClean(t, "after the churn")
	h.waitS3Matches(t, e, c, "after the churn, nothing dirty", nil)
	for _, n := range c.nodes {
		h.checkReads(t, n, "after the churn")
	}
	late := 0
	for _, n := range c.nodes {
		late += len(n.logs.lines("landed in S3 after it"))
	}
	t.Logf("%d rounds of a node going and coming back: %d keys, %d operations acknowledged (%d retries of 503), %d uploads that landed after a delete deleted again; "+
		"MinIO ends with the last acknowledged operation of every key, byte-exact", rounds, len(h.sortedKeys()), h.gen, retries, late)
}

// churnEvents are the ways a node goes in TestWriteBackThroughRingChurn.
var churnEvents = []struct {
	name          string
	leave         func(*node, *testing.T)
	restartAtOnce bool // back at once, never out of the ring
	drain         bool // drained and out of the ring before it leaves
	emptyDisk     bool // restarted on an empty data directory
}{
	{name: "killed (SIGKILL) and left out of the ring", leave: (*node).kill9},
	{name: "stopped (SIGTERM) and left out of the ring", leave: (*node).stop},
	{name: "killed (SIGKILL) and restarted at once in the ring", leave: (*node).kill9, restartAtOnce: true},
	{name: "killed (SIGKILL) and restarted at once in the ring on an empty disk (a pod rescheduled onto a fresh disk)",
		leave: (*node).kill9, restartAtOnce: true, emptyDisk: true},
	{name: "drained until it holds nothing, left out of the ring and stopped (SIGTERM)", leave: (*node).stop, drain: true},
}

// wtWorkload runs write-through operations on keys outside the WriteBack
// prefix (S3 has each when it is acknowledged), each sent to a running
// node drawn at random rather than the key's metadata owner: the reads
// through every node then check that a write through any node reaches
// the owner that answers the key's metadata, whatever the churn.
func wtWorkload(t *testing.T, c *cluster, h *wbHistory, rng *rand.Rand, round int) {
	t.Helper()
	var up []*node
	for _, n := range c.nodes {
		if n.running() {
			up = append(up, n)
		}
	}
	for range wtOpsRound {
		key := fmt.Sprintf("wt/k%02d", rng.IntN(wtKeys))
		prev := h.last(key)
		del := prev != nil && !prev.del && rng.IntN(4) == 0
		size := 0
		if !del {
			size = 1 + rng.IntN(2*chunkSz)
		}
		o := h.begin(key, del, size, round)
		n := up[rng.IntN(len(up))]
		var etag string
		var err error
		if del {
			err = n.del(key)
		} else {
			etag, err = n.put(key, o.body())
		}
		if err != nil {
			t.Fatalf("round %d: %s through %s not acknowledged: %v", round, o, n.name, err)
		}
		h.ack(o, etag)
	}
}

const (
	wtKeys     = 12 // keys of wtWorkload, wt/k00..
	wtOpsRound = 16 // its operations per round
)

// waitHoldsNothing waits until n keeps no held version: a draining member
// hands every one it keeps to the members that keep it now.
func (n *node) waitHoldsNothing(t *testing.T, what string) {
	t.Helper()
	deadline := time.Now().Add(wbPersistTimeout)
	for {
		held := n.metrics(t).Sum("distcache_writeback_objects")
		if held == 0 {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s: %s still holds %v versions %v after it was marked draining\n%s", what, n.name, held, wbPersistTimeout, n.logs.tail(16<<10))
		}
		time.Sleep(250 * time.Millisecond)
	}
}

// wbChurnRounds bounds TestWriteBackThroughRingChurn's rounds: each takes
// two workloads, a restart and up to two ring changes.
const wbChurnRounds = 6
