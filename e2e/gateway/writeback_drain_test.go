package gateway_test

import (
	"bytes"
	"context"
	"fmt"
	"net/http"
	"slices"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/s3"

	"github.com/distcache/distcache/internal/chunk"
	"github.com/distcache/distcache/internal/nodeapi"
	"github.com/distcache/distcache/internal/pki"
	"github.com/distcache/distcache/internal/ring"
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

// A node that has just become a held key's metadata owner, before any
// holder has handed the key to it (here: the other members have not even
// seen the ring that adds it, so none will), answers the key's metadata
// from the holders' journals, not from S3, which does not have it: its
// HEAD is the acknowledged version, never a 404; nor S3's old version of a
// key whose delete is held.
func TestNewMetadataOwnerFindsHeldVersionsOnTheHolders(t *testing.T) {
	e := newEnv(t, envOptions{tenants: drainTenants})
	// Deleted through the cache while S3 still has them: gone, whatever S3 says.
	deleted := map[string]bool{}
	for i := range 12 {
		key := fmt.Sprintf("wb/deleted-%d", i)
		e.cluster.PutDirect("bucket-a", key, []byte("in S3"))
		deleted[key] = true
	}
	e.cluster.Proxy.Inject(s3proxy.Rule{Method: "PUT", Fault: s3proxy.InternalError},
		s3proxy.Rule{Method: "POST", Fault: s3proxy.InternalError}, s3proxy.Rule{Method: "DELETE", Fault: s3proxy.InternalError})
	etags := map[string]string{}
	for i := range 24 {
		key := fmt.Sprintf("wb/owned-%d", i)
		out := e.put("bucket-a", key, testutil.SeededBytes(uint64(i), 100+i))
		etags[key] = *out.ETag
	}
	for key := range deleted {
		_, err := e.s3.DeleteObject(context.Background(), &s3.DeleteObjectInput{Bucket: aws.String("bucket-a"), Key: aws.String(key)})
		testutil.Must(t, err)
		etags[key] = ""
	}

	// One more member, whose ring (and only its) names it.
	old := e.cluster.Member(0).Ring.Load()
	newcomer := e.cluster.Add()
	members := old.Members()
	members = append(members, ring.Member{Name: newcomer.Name, Address: newcomer.Addr, Ordinal: len(members), Weight: 100, State: ring.StateActive})
	r, err := ring.New(ring.Spec{Epoch: old.Epoch() + 1, Zone: old.Zone(), Members: members,
		Hash: ring.HashParams{Algorithm: ring.AlgorithmRendezvousXXHash64}})
	testutil.Must(t, err)
	newcomer.Ring.Store(r)

	cl := e.cluster.HTTPClient(pki.Identity{Kind: pki.KindTenant, Name: "team-a"})
	owned, ownedDeleted := 0, 0
	for key, etag := range etags {
		if r.Owner(nodeapi.MetaID(chunk.Object{Tenant: "team-a", Bucket: "bucket-a", Key: key})).Name != newcomer.Name {
			continue
		}
		owned++
		resp, err := cl.Head("https://" + newcomer.Addr + nodeapi.ObjectPath("bucket-a", key))
		testutil.Must(t, err)
		resp.Body.Close()
		if deleted[key] {
			ownedDeleted++
			if resp.StatusCode != http.StatusNotFound {
				t.Errorf("%s, deleted through the cache, through its new metadata owner: HTTP %d, want 404", key, resp.StatusCode)
			}
			continue
		}
		if resp.StatusCode != http.StatusOK || resp.Header.Get("ETag") != etag || resp.Header.Get("X-Distcache-Held") == "" {
			t.Errorf("%s through its new metadata owner: HTTP %d, ETag %s, held by %q; want 200, %s, held",
				key, resp.StatusCode, resp.Header.Get("ETag"), resp.Header.Get("X-Distcache-Held"), etag)
		}
	}
	if owned == ownedDeleted || ownedDeleted == 0 {
		t.Fatalf("the new member owns %d written and %d deleted keys: want some of each", owned-ownedDeleted, ownedDeleted)
	}
	t.Logf("checked %d of %d keys", owned, len(etags))
}

// A node that failed to reach a member a moment ago (marked down: a pod of
// a rolling restart, Ready again with its disk) still asks it for a held
// key's version before it answers from S3 when no other member holds one:
// here the new metadata owner of keys held by one member alone
// (replicas 1), which it marked down while that member's address was
// wrong. S3 does not have the keys: its 404 would be a lost write.
func TestNewMetadataOwnerAsksAHolderMarkedDown(t *testing.T) {
	e := newEnv(t, envOptions{tenants: drainTenants})
	e.cluster.Proxy.Inject(s3proxy.Rule{Method: "PUT", Fault: s3proxy.InternalError},
		s3proxy.Rule{Method: "POST", Fault: s3proxy.InternalError})
	old := e.cluster.Member(0).Ring.Load()
	newcomer := e.cluster.Add()
	ringWith := func(epoch int64, addr func(ring.Member) string) *ring.Ring {
		members := old.Members()
		for i := range members {
			members[i].Address = addr(members[i])
		}
		members = append(members, ring.Member{Name: newcomer.Name, Address: newcomer.Addr, Ordinal: len(members), Weight: 100, State: ring.StateActive})
		r, err := ring.New(ring.Spec{Epoch: epoch, Zone: old.Zone(), Members: members, Hash: ring.HashParams{Algorithm: ring.AlgorithmRendezvousXXHash64}})
		testutil.Must(t, err)
		return r
	}
	real := ringWith(old.Epoch()+2, func(m ring.Member) string { return m.Address })
	meta := func(r *ring.Ring, key string) string {
		return r.Owner(nodeapi.MetaID(chunk.Object{Tenant: "team-a", Bucket: "bucket-a", Key: key})).Name
	}
	// wb1/ keys the newcomer will own, each held by its old owner alone.
	byHolder := map[string]map[string]string{}
	for i := 0; len(byHolder) == 0 || i < 64; i++ {
		key := fmt.Sprintf("wb1/single-%d", i)
		if meta(real, key) != newcomer.Name {
			continue
		}
		out := e.put("bucket-a", key, testutil.SeededBytes(uint64(i), 200+i))
		h := meta(old, key)
		if byHolder[h] == nil {
			byHolder[h] = map[string]string{}
		}
		byHolder[h][key] = *out.ETag
	}
	var holder string
	for h := range byHolder {
		if holder == "" || len(byHolder[h]) > len(byHolder[holder]) {
			holder = h
		}
	}

	// The newcomer marks the holder down: its first ring gives it an
	// address nothing listens on, and a HEAD of a key the holder owns
	// there fails over to the newcomer itself.
	newcomer.Ring.Store(ringWith(old.Epoch()+1, func(m ring.Member) string {
		if m.Name == holder {
			return "127.0.0.1:1"
		}
		return m.Address
	}))
	cl := e.cluster.HTTPClient(pki.Identity{Kind: pki.KindTenant, Name: "team-a"})
	head := func(key string) *http.Response {
		t.Helper()
		resp, err := cl.Head("https://" + newcomer.Addr + nodeapi.ObjectPath("bucket-a", key))
		testutil.Must(t, err)
		resp.Body.Close()
		return resp
	}
	for i := 0; ; i++ {
		key := fmt.Sprintf("plain/probe-%d", i)
		if meta(newcomer.Ring.Load(), key) == holder {
			head(key)
			break
		}
	}
	if n := e.cluster.Counter(len(e.cluster.Members())-1, "distcache_peer_requests_total", map[string]string{"kind": "meta", "result": "unreachable"}); n == 0 {
		t.Fatal("the newcomer did not fail to reach the holder: nothing is marked down")
	}
	newcomer.Ring.Store(real)
	for key, etag := range byHolder[holder] {
		if resp := head(key); resp.StatusCode != http.StatusOK || resp.Header.Get("ETag") != etag {
			t.Errorf("%s, held by %s alone, through its new metadata owner: HTTP %d, ETag %s; want 200, %s",
				key, holder, resp.StatusCode, resp.Header.Get("ETag"), etag)
		}
	}
	t.Logf("%d keys held by %s alone, read through the newcomer", len(byHolder[holder]), holder)
}

// BenchmarkMetadataMiss is what a metadata miss costs on its owner: a key
// S3 has and the cache has not seen, HEAD on the node that owns its
// metadata. Under a WriteBack prefix the owner first asks the members that
// may hold a version of it (none does), then S3; under an ordinary one it
// asks S3 only. S3 is MinIO on this machine, so the difference is the
// asking, against a HEAD of about a millisecond (S3 in a region: tens).
//
//	go test -run '^$' -bench MetadataMiss ./e2e/gateway/
func BenchmarkMetadataMiss(b *testing.B) {
	e := newEnv(b, envOptions{tenants: drainTenants})
	cl := e.cluster.HTTPClient(pki.Identity{Kind: pki.KindTenant, Name: "team-a"})
	r := e.cluster.Member(0).Ring.Load()
	for _, prefix := range []string{"plain/", "wb/"} {
		b.Run(prefix, func(b *testing.B) {
			i := 0
			for b.Loop() {
				b.StopTimer()
				key := fmt.Sprintf("%smiss-%d", prefix, i)
				i++
				e.cluster.PutDirect("bucket-a", key, []byte("in S3"))
				owner := r.Owner(nodeapi.MetaID(chunk.Object{Tenant: "team-a", Bucket: "bucket-a", Key: key}))
				b.StartTimer()
				resp, err := cl.Head("https://" + owner.Address + nodeapi.ObjectPath("bucket-a", key))
				if err != nil {
					b.Fatal(err)
				}
				resp.Body.Close()
				if resp.StatusCode != http.StatusOK {
					b.Fatalf("%s: HTTP %d", key, resp.StatusCode)
				}
			}
		})
	}
}

// A key under a WriteBack prefix that S3 does not have is not found once
// enough of the members that may hold a version of it said they hold none
// that one of its copies would have answered; while as many as the policy
// keeps copies cannot be asked (the holders of a rolling restart, or a
// moment of failing DNS), the answer is 503 SlowDown, which clients retry,
// not S3's 404: they may hold an acknowledged write. One of two holders
// unreachable leaves S3's answer standing, so a member killed for good
// does not make every absent key fail. A key S3 has is served either way.
func TestHeldKeyMissWithItsHoldersUnaskedIsRetried(t *testing.T) {
	e := newEnv(t, envOptions{tenants: drainTenants})
	self := e.cluster.Member(0)
	real := self.Ring.Load()
	defer self.Ring.Store(real)
	candidates := func(key string) []ring.Member {
		return real.Candidates(nodeapi.MetaID(chunk.Object{Tenant: "team-a", Bucket: "bucket-a", Key: key}), 0)
	}
	i := 0
	keyOwnedBySelf := func(prefix string) string {
		for ; ; i++ {
			if key := fmt.Sprintf("%s%d", prefix, i); candidates(key)[0].Name == self.Name {
				i++
				return key
			}
		}
	}
	// unreachable gives the node a ring where members have addresses
	// nothing listens on.
	unreachable := func(names ...string) {
		t.Helper()
		members := real.Members()
		for i := range members {
			if slices.Contains(names, members[i].Name) {
				members[i].Address = fmt.Sprintf("127.0.0.1:%d", i+1)
			}
		}
		r, err := ring.New(ring.Spec{Epoch: real.Epoch() + 1, Zone: real.Zone(), Members: members, Hash: ring.HashParams{Algorithm: ring.AlgorithmRendezvousXXHash64}})
		testutil.Must(t, err)
		self.Ring.Store(r)
	}
	cl := e.cluster.HTTPClient(pki.Identity{Kind: pki.KindTenant, Name: "team-a"})
	head := func(key string, want int, when string) {
		t.Helper()
		resp, err := cl.Head("https://" + self.Addr + nodeapi.ObjectPath("bucket-a", key))
		testutil.Must(t, err)
		resp.Body.Close()
		if resp.StatusCode != want {
			t.Errorf("HEAD %s, %s: HTTP %d, want %d", key, when, resp.StatusCode, want)
		}
	}
	inS3 := keyOwnedBySelf("wb/in-s3-")
	e.cluster.PutDirect("bucket-a", inS3, []byte("in S3"))
	head(keyOwnedBySelf("wb/absent-"), http.StatusNotFound, "every member asked")

	// Two copies: one holder unreachable, the other answers for its copy.
	absent := keyOwnedBySelf("wb/absent-")
	unreachable(candidates(absent)[1].Name)
	head(absent, http.StatusNotFound, "one of two holders unreachable")
	absent = keyOwnedBySelf("wb/absent-")
	unreachable(candidates(absent)[1].Name, candidates(absent)[2].Name)
	head(absent, http.StatusServiceUnavailable, "every other holder unreachable")
	head(inS3, http.StatusOK, "in S3, every other holder unreachable")

	// One copy: its one other possible holder unreachable.
	single := keyOwnedBySelf("wb1/absent-")
	unreachable(candidates(single)[1].Name)
	head(single, http.StatusServiceUnavailable, "one copy, its other possible holder unreachable")

	// A rolling restart: one member out of the ring (restarting, with its
	// disk), only in the previous epoch's membership, and the one other
	// current member unreachable too. Both may hold the copies.
	restarting := keyOwnedBySelf("wb/absent-")
	out, other := candidates(restarting)[2].Name, candidates(restarting)[1].Name
	var current, previous []ring.Member
	for i, m := range real.Members() {
		if m.Name == out || m.Name == other {
			m.Address = fmt.Sprintf("127.0.0.1:%d", i+1)
		}
		previous = append(previous, m)
		if m.Name != out {
			current = append(current, m)
		}
	}
	r, err := ring.New(ring.Spec{Epoch: real.Epoch() + 2, Zone: real.Zone(), Members: current,
		Previous: &ring.PreviousRing{Epoch: real.Epoch() + 1, Members: previous}, Hash: ring.HashParams{Algorithm: ring.AlgorithmRendezvousXXHash64}})
	testutil.Must(t, err)
	self.Ring.Store(r)
	head(restarting, http.StatusServiceUnavailable, "a member restarting (out of the ring) and the other unreachable")
	head(inS3, http.StatusOK, "in S3, a member restarting and the other unreachable")
}
