package processfaults_test

import (
	"fmt"
	"testing"
)

// TestWriteBackThroughRingChurn: four nodes, WriteBack with two copies, S3
// slow for the nodes' writes so that most of each round's writes are held
// when the ring changes. Each round the writers put, overwrite and delete;
// then a node drawn at random is killed with SIGKILL and left out of the
// ring (as the operator leaves out a pod that is not Ready), the writers go
// on against the three others, which must read every key as last
// acknowledged, and the node comes back into the ring with its disk, its
// copies now stale or superseded in part. Once S3 takes writes at full
// speed, MinIO must end with the last acknowledged operation of every key,
// byte-exact (a checker over the history), every node must read them so,
// and no node may hold anything dirty.
func TestWriteBackThroughRingChurn(t *testing.T) {
	e, proxy, c := newWBCluster(t, 4)
	rng := newRand(t)
	h := newWBHistory()
	rounds := min(cycles(t), wbChurnRounds)
	retries := 0
	for round := range rounds {
		holdBackWriteBack(proxy, true)
		retries += wbWorkload(t, c, h, rng, 2*round)
		victim := c.nodes[rng.IntN(len(c.nodes))]
		victim.kill9(t)
		rest := c.except(victim)
		c.publish(t, rest...)
		retries += wbWorkload(t, c, h, rng, 2*round+1)
		for _, n := range rest {
			h.checkReads(t, n, fmt.Sprintf("round %d, %s killed and out of the ring", round, victim.name))
		}
		c.start(t)
		c.publish(t, c.nodes...)
		for _, n := range c.nodes {
			h.checkReads(t, n, fmt.Sprintf("round %d, %s back in the ring", round, victim.name))
		}
	}
	proxy.ClearFaults()
	h.waitS3Matches(t, e, c, "after the churn", nil)
	c.waitClean(t, "after the churn")
	h.waitS3Matches(t, e, c, "after the churn, nothing dirty", nil)
	t.Logf("%d rounds of a node killed, left out of the ring and brought back: %d keys, %d operations acknowledged (%d retries of 503); "+
		"MinIO ends with the last acknowledged operation of every key, byte-exact", rounds, len(h.sortedKeys()), h.gen, retries)
}

// wbChurnRounds bounds TestWriteBackThroughRingChurn's rounds: each takes
// two workloads, a restart and two ring changes.
const wbChurnRounds = 6
