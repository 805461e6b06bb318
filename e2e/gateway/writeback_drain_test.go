package gateway_test

import (
	"bytes"
	"context"
	"fmt"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/s3"

	"github.com/distcache/distcache/internal/testutil"
	"github.com/distcache/distcache/internal/testutil/s3proxy"
)

// drainTenants hold team-a's wb1/ on one node, wb/ on two, tmp/ (transient)
// on one.
const drainTenants = `tenants:
  - name: team-a
    buckets: [bucket-a, shared]
    policies:
      - {bucket: bucket-a, prefix: wb1/, mode: WriteBack, replicas: 1}
      - {bucket: bucket-a, prefix: wb/, mode: WriteBack, replicas: 2}
      - {bucket: bucket-a, prefix: tmp/, mode: Transient, replicas: 1}
  - name: team-b
    buckets: [bucket-b, shared]
`

// A member drained before a scale-down (the ring marks it draining, as the
// operator does for the pods above spec.replicas) hands every held version
// it keeps to the members that keep it now, single copies (replicas 1) and
// transient objects included, until it holds nothing; then it is removed
// and stopped, and nothing is lost: every write and delete reads as
// acknowledged, and S3 ends with them once it takes writes again.
func TestWriteBackDrainHandsHeldVersionsOver(t *testing.T) {
	e := newEnv(t, envOptions{tenants: drainTenants})
	r := testutil.NewRand(75)
	ctx := context.Background()
	e.cluster.PutDirect("bucket-a", "wb1/deleted", []byte("in S3 before, deleted through the cache"))
	e.cluster.Proxy.Inject(s3proxy.Rule{Method: "PUT", Fault: s3proxy.InternalError},
		s3proxy.Rule{Method: "DELETE", Fault: s3proxy.InternalError}, s3proxy.Rule{Method: "POST", Fault: s3proxy.InternalError})

	want := map[string][]byte{}
	for i := range 24 {
		key := fmt.Sprintf("wb1/object-%d", i)
		if i%2 == 1 {
			key = fmt.Sprintf("wb/object-%d", i)
		}
		want[key] = testutil.RandomBytes(r, 100+r.IntN(3*chunkSize))
		e.put("bucket-a", key, want[key])
	}
	transient := map[string][]byte{}
	for i := range 6 {
		key := fmt.Sprintf("tmp/spill-%d", i)
		transient[key] = testutil.RandomBytes(r, 1000+i)
		e.put("bucket-a", key, transient[key])
	}
	_, err := e.s3.DeleteObject(ctx, &s3.DeleteObjectInput{Bucket: aws.String("bucket-a"), Key: aws.String("wb1/deleted")})
	testutil.Must(t, err)

	// Drain the member holding the most.
	held := func(i int) float64 { return e.cluster.Counter(i, "distcache_writeback_objects", nil) }
	leaving := 0
	for i := range e.cluster.Members() {
		if held(i) > held(leaving) {
			leaving = i
		}
	}
	name := e.cluster.Member(leaving).Name
	if held(leaving) == 0 {
		t.Fatal("no member holds anything")
	}
	t.Logf("draining %s, which holds %v versions", name, held(leaving))
	e.cluster.PublishDraining(name)
	testutil.WaitFor(t, name+" holds nothing", func() bool { return held(leaving) == 0 })
	e.cluster.PublishWithout(false, name)
	e.cluster.StopMember(e.cluster.Member(leaving))

	check := func(when string, all map[string][]byte) {
		t.Helper()
		for key, b := range all {
			if got, _, err := e.get("bucket-a", key, ""); err != nil || !bytes.Equal(got, b) {
				t.Fatalf("%s: %s reads %d bytes (want %d): %v", when, key, len(got), len(b), err)
			}
		}
		if _, _, err := e.get("bucket-a", "wb1/deleted", ""); !isNoSuchKey(err) {
			t.Fatalf("%s: the deleted key reads as %v, want NoSuchKey", when, err)
		}
	}
	check("after the drain", want)
	check("after the drain", transient)
	if got := listAll(t, e.s3, "bucket-a", listing{prefix: "wb1/", pageSize: 1000}); len(got) != 12 {
		t.Fatalf("after the drain wb1/ lists %d keys, want 12: %v", len(got), got)
	}

	e.cluster.Proxy.ClearFaults()
	waitInMinIO(t, e, want, "wb1/deleted")
	check("after persistence", transient)
	for key := range transient {
		if inMinIO(t, e, key) != nil {
			t.Fatalf("transient %s reached MinIO", key)
		}
	}
}
