package gateway_test

import (
	"context"
	"fmt"
	"net/http"
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
