package gateway_test

import (
	"bytes"
	"context"
	"fmt"
	"net/http"
	"os"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/s3"

	"github.com/distcache/distcache/internal/testutil"
	"github.com/distcache/distcache/internal/testutil/nodecluster"
	"github.com/distcache/distcache/internal/testutil/s3proxy"
)

// Two gateways in front of four nodes while the nodes churn: each round a
// member drawn at random is restarted with its disk, or is out of the ring
// for a while (dead, then back with its disk), or is drained, removed and
// brought back (a scale-down, then a scale-up reusing its volume). Around
// it, write-through and WriteBack (two copies, S3 slow to take them) keys
// are written, copied onto, overwritten and deleted through one gateway
// and read at once through the other, which must answer the last
// acknowledged operation (the gateways keep metadata on leases and pages
// in RAM); every key is read through both after each change of the ring,
// and MinIO ends with the last acknowledged operation of every key.
func TestGatewaysReadTheirWritesThroughNodeChurn(t *testing.T) {
	e := newEnv(t, envOptions{nodes: 4, pageCache: 16 << 20, tenants: drainTenants})
	other := gatewayOn(t, e.cluster, envOptions{pageCache: 16 << 20})
	gateways := []*env{e, other}
	c := e.cluster
	// As AWS S3 (MinIO ignores If-Match on DELETE): a holder's delete,
	// held 2 s below, must not remove a newer version landed meanwhile.
	c.Proxy.ConditionalDeletes(s3proxy.HeadWith(c.Direct))
	// As S3: a node stopped while the proxy holds its upload back does not
	// take the upload with it (it lands late).
	c.Proxy.KeepAbandonedWrites()
	for _, m := range []string{http.MethodPut, http.MethodPost, http.MethodDelete} {
		c.Proxy.Inject(s3proxy.Rule{Method: m, PathPrefix: "/bucket-a/wb/", Fault: s3proxy.Spike(2 * time.Second)})
	}
	seed := uint64(time.Now().UnixNano())
	if v := os.Getenv("DISTCACHE_CHURN_SEED"); v != "" {
		var err error
		seed, err = strconv.ParseUint(v, 10, 64)
		testutil.Must(t, err)
	}
	t.Logf("seed %d (replay with DISTCACHE_CHURN_SEED=%d)", seed, seed)
	rng := testutil.NewRand(seed)
	last := map[string][]byte{} // nil: deleted
	var puts, copies, deletes int
	check := func(g *env, key, what string) {
		t.Helper()
		got, err := retrySlowDown(func() ([]byte, error) {
			b, _, err := g.get("bucket-a", key, "")
			return b, err
		})
		want, written := last[key]
		switch {
		case !written:
		case want == nil && !isNoSuchKey(err):
			t.Fatalf("%s: %s reads %d bytes (%v), want NoSuchKey (deleted)", what, key, len(got), err)
		case want != nil && (err != nil || !bytes.Equal(got, want)):
			t.Fatalf("%s: %s reads %d bytes (%v), want the %d bytes last written", what, key, len(got), err, len(want))
		}
	}
	workload := func(round int) {
		t.Helper()
		for i := range 24 {
			key := fmt.Sprintf("wt/k%d", rng.IntN(6))
			if rng.IntN(2) == 0 {
				key = fmt.Sprintf("wb/k%d", rng.IntN(6))
			}
			from := rng.IntN(2)
			w := gateways[from]
			src := fmt.Sprintf("wt/k%d", rng.IntN(6))
			if rng.IntN(2) == 0 {
				src = fmt.Sprintf("wb/k%d", rng.IntN(6))
			}
			if b := last[src]; b != nil && src != key && rng.IntN(5) == 0 {
				_, err := retrySlowDown(func() ([]byte, error) {
					_, err := w.s3.CopyObject(context.Background(), &s3.CopyObjectInput{Bucket: aws.String("bucket-a"), Key: aws.String(key),
						CopySource: aws.String("bucket-a/" + src)})
					return nil, err
				})
				testutil.Must(t, err)
				last[key] = b
				copies++
			} else if prev, ok := last[key]; ok && prev != nil && rng.IntN(4) == 0 {
				_, err := retrySlowDown(func() ([]byte, error) {
					_, err := w.s3.DeleteObject(context.Background(), &s3.DeleteObjectInput{Bucket: aws.String("bucket-a"), Key: aws.String(key)})
					return nil, err
				})
				testutil.Must(t, err)
				last[key] = nil
				deletes++
			} else {
				data := testutil.RandomBytes(rng, 1+rng.IntN(5*chunkSize/2))
				_, err := retrySlowDown(func() ([]byte, error) {
					_, err := w.s3.PutObject(context.Background(), &s3.PutObjectInput{Bucket: aws.String("bucket-a"), Key: aws.String(key), Body: bytes.NewReader(data)})
					return nil, err
				})
				testutil.Must(t, err)
				last[key] = data
				puts++
			}
			check(gateways[1-from], key, fmt.Sprintf("round %d, operation %d, read through the other gateway", round, i))
		}
	}
	checkAll := func(what string) {
		t.Helper()
		for key := range last {
			for _, g := range gateways {
				check(g, key, what)
			}
		}
	}
	for round := range 6 {
		workload(2 * round)
		members := c.Members()
		victim := members[rng.IntN(len(members))]
		// Time passes while a member stops, starts and the ring changes
		// (well within --meta-ttl); the nodes run on the cluster's clock.
		c.Clock.Advance(time.Second)
		var what string
		switch rng.IntN(3) {
		case 0:
			what = fmt.Sprintf("round %d, %s restarted", round, victim.Name)
			testutil.Must(t, c.RestartMember(victim))
			c.Publish(true)
		case 1:
			what = fmt.Sprintf("round %d, %s out of the ring, then back", round, victim.Name)
			c.KillMember(victim)
			c.Publish(true)
		default:
			what = fmt.Sprintf("round %d, %s drained, removed, then back", round, victim.Name)
			c.PublishDraining(victim.Name)
			i := memberIndex(c, victim)
			testutil.WaitFor(t, victim.Name+" holds nothing", func() bool {
				return c.Counter(i, "distcache_writeback_objects", nil) == 0
			})
			c.PublishWithout(false, victim.Name)
			c.StopMember(victim)
		}
		t.Log(what)
		checkAll(what)
		workload(2*round + 1)
		if victim.Dead() {
			c.Clock.Advance(time.Second)
			testutil.Must(t, c.RestartMember(victim))
			c.Publish(true)
		}
		checkAll(what + ", back in the ring")
	}
	c.Proxy.ClearFaults()
	// The persisters back off up to 30 s while S3 is slow or refuses.
	deadline := time.Now().Add(2 * time.Minute)
	for {
		var bad []string
		for key, want := range last {
			if got := inMinIO(t, e, key); !bytes.Equal(got, want) {
				bad = append(bad, fmt.Sprintf("%s: MinIO holds %d bytes (nil: %v), want %d (deleted: %v)", key, len(got), got == nil, len(want), want == nil))
			}
		}
		if len(bad) == 0 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("MinIO does not end with the last acknowledged operation of %d keys:\n%s", len(bad), strings.Join(bad, "\n"))
		}
		time.Sleep(200 * time.Millisecond)
	}
	t.Logf("%d puts, %d copies and %d deletes through the gateways, each read at once through the other; MinIO ends with the last of each key", puts, copies, deletes)
}

// retrySlowDown calls f again while it fails with 503 (SlowDown: a holder
// that was just restarted may not answer yet), for up to a minute.
func retrySlowDown(f func() ([]byte, error)) ([]byte, error) {
	deadline := time.Now().Add(time.Minute)
	for {
		b, err := f()
		if err == nil || httpStatus(err) != http.StatusServiceUnavailable || time.Now().After(deadline) {
			return b, err
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// memberIndex is m's index among c's members.
func memberIndex(c *nodecluster.Cluster, m *nodecluster.Member) int {
	for i, x := range c.Members() {
		if x == m {
			return i
		}
	}
	panic("not a member: " + m.Name)
}
