package client_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"net/http"
	"reflect"
	"testing"
	"time"

	"github.com/distcache/distcache/internal/chunk"
	"github.com/distcache/distcache/internal/client"
	"github.com/distcache/distcache/internal/nodeapi"
	"github.com/distcache/distcache/internal/pki"
	"github.com/distcache/distcache/internal/testutil"
	"github.com/distcache/distcache/internal/testutil/nodecluster"
)

// leasedClient is a client that ages kept metadata with the nodes' clock.
func leasedClient(t *testing.T, c *nodecluster.Cluster) *client.Client {
	cl, _ := newClient(t, c, c.TenantTLS("team-a"), func(cfg *client.Config) { cfg.Now = c.Clock.Now })
	return cl
}

// statKept Stats until an answer comes from what cl keeps (no metadata
// request to any node), and returns it: the first Stat of an object starts
// the poll of its owner, and answers are kept once the poll answered.
func statKept(t *testing.T, c *nodecluster.Cluster, cl *client.Client, bucket, key string) client.Meta {
	t.Helper()
	deadline := time.Now().Add(20 * time.Second)
	for {
		before := statRequests(c)
		m, err := cl.Stat(context.Background(), bucket, key)
		testutil.Must(t, err)
		if statRequests(c) == before {
			return m
		}
		if time.Now().After(deadline) {
			t.Fatalf("Stat of %s/%s still asks a node after 20s: metadata is never kept", bucket, key)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// A mutable cache's metadata is kept by the client between reads (no
// round trip for a Stat), yet a write or delete through another client,
// or straight to a node that is not the metadata owner, is seen by the
// next Stat after it is acknowledged.
func TestLeasedMetadataIsKeptUntilAWriteAnywhere(t *testing.T) {
	ctx := context.Background()
	r := rand.New(rand.NewPCG(41, 42))
	c := nodecluster.Start(t, 3)
	writer, reader := leasedClient(t, c), leasedClient(t, c)
	const key = "leased.bin"
	c.PutDirect("bucket-a", key, testutil.RandomBytes(r, 2*cs))

	m := statKept(t, c, reader, "bucket-a", key)
	before := statRequests(c)
	for range 20 {
		got, err := reader.Stat(ctx, "bucket-a", key)
		testutil.Must(t, err)
		if !reflect.DeepEqual(got, m) {
			t.Fatalf("kept metadata %+v, want %+v", got, m)
		}
	}
	if n := statRequests(c) - before; n != 0 {
		t.Fatalf("20 Stats of kept metadata made %v metadata requests, want 0", n)
	}

	for i := range 5 {
		data := testutil.RandomBytes(r, cs+i)
		put, err := writer.Put(ctx, "bucket-a", key, bytes.NewReader(data), int64(len(data)), "")
		testutil.Must(t, err)
		got, err := reader.Stat(ctx, "bucket-a", key)
		testutil.Must(t, err)
		if got.ETag != put.ETag || got.Size != int64(len(data)) {
			t.Fatalf("write %d: the other client's Stat right after it answered %s (%d bytes), want %s (%d bytes)",
				i, got.ETag, got.Size, put.ETag, len(data))
		}
		p := make([]byte, len(data))
		if _, err := reader.ReadAt(ctx, "bucket-a", key, got, p, 0); err != nil || !bytes.Equal(p, data) {
			t.Fatalf("write %d: read after it: %v, or other bytes", i, err)
		}
		statKept(t, c, reader, "bucket-a", key)
	}

	// A write that lands on a node other than the metadata owner (a client
	// with another ring, a node API user) invalidates at the owner, whose
	// clients learn of it before the write is answered.
	owner := c.Ring().Owner(nodeapi.MetaID(chunk.Object{Tenant: "team-a", Bucket: "bucket-a", Key: key})).Name
	var other *nodecluster.Member
	for _, mb := range c.Members() {
		if mb.Name != owner {
			other = mb
		}
	}
	data := testutil.RandomBytes(r, 3*cs)
	req, err := http.NewRequest(http.MethodPut, other.URL()+nodeapi.ObjectPath("bucket-a", key), bytes.NewReader(data))
	testutil.Must(t, err)
	resp, err := c.HTTPClient(pki.Identity{Kind: pki.KindTenant, Name: "team-a"}).Do(req)
	testutil.Must(t, err)
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("PUT at %s (not the owner %s): %s", other.Name, owner, resp.Status)
	}
	if got, err := reader.Stat(ctx, "bucket-a", key); err != nil || got.Size != int64(len(data)) {
		t.Fatalf("Stat after a write at a non-owner node: %+v, %v; want %d bytes", got, err, len(data))
	}

	statKept(t, c, reader, "bucket-a", key)
	testutil.Must(t, writer.Delete(ctx, "bucket-a", key))
	if _, err := reader.Stat(ctx, "bucket-a", key); !errors.Is(err, client.ErrNotFound) {
		t.Fatalf("Stat after the other client's Delete: %v, want ErrNotFound", err)
	}
}

// An object overwritten behind the cache's back is served stale by
// clients that keep its metadata for at most the nodes' metadata TTL, as
// by the nodes themselves.
func TestLeasedMetadataOfAnObjectChangedBehindTheCacheLastsTheTTL(t *testing.T) {
	ctx := context.Background()
	r := rand.New(rand.NewPCG(43, 44))
	c := nodecluster.StartWith(t, 2, nodecluster.Options{MetaTTL: time.Minute})
	a, b := leasedClient(t, c), leasedClient(t, c)
	const key = "behind.bin"
	c.PutDirect("bucket-a", key, testutil.RandomBytes(r, cs))
	m1 := statKept(t, c, a, "bucket-a", key)
	statKept(t, c, b, "bucket-a", key)
	etag2 := c.PutDirect("bucket-a", key, testutil.RandomBytes(r, cs))

	c.Clock.Advance(30 * time.Second) // within the TTL: either version, never an error
	for _, cl := range []*client.Client{a, b} {
		got, err := cl.Stat(ctx, "bucket-a", key)
		testutil.Must(t, err)
		if got.ETag != m1.ETag && got.ETag != etag2 {
			t.Fatalf("within the TTL: ETag %s, neither version", got.ETag)
		}
	}
	c.Clock.Advance(31 * time.Second) // past the TTL since the nodes fetched it
	for i, cl := range []*client.Client{a, b} {
		got, err := cl.Stat(ctx, "bucket-a", key)
		testutil.Must(t, err)
		if got.ETag != etag2 {
			t.Fatalf("client %d past the TTL: ETag %s, want the new version %s", i, got.ETag, etag2)
		}
	}
}

// A client that stops polling without a word (killed, partitioned) holds
// the next write for the rest of its lease, no longer; the node counts it.
func TestASilentClientHoldsWritesForItsLeaseAtMost(t *testing.T) {
	ctx := context.Background()
	r := rand.New(rand.NewPCG(45, 46))
	c := nodecluster.Start(t, 1)
	writer, silent := leasedClient(t, c), leasedClient(t, c)
	const key = "silent.bin"
	c.PutDirect("bucket-a", key, testutil.RandomBytes(r, cs))
	statKept(t, c, silent, "bucket-a", key)
	testutil.Must(t, silent.Close()) // its polls stop; the node still counts its lease

	data := testutil.RandomBytes(r, cs)
	if _, err := writer.Put(ctx, "bucket-a", key, bytes.NewReader(data), int64(len(data)), ""); err != nil {
		t.Fatalf("a write with a silent client holding a lease: %v", err)
	}
	if n := c.Sum("distcache_metadata_lease_waits_total", map[string]string{"outcome": "lapsed"}); n != 1 {
		t.Fatalf("writes that waited out a lease: %v, want 1", n)
	}
}

// Metadata kept on a node's lease is not used once a poll of that node
// fails (it was killed: a write elsewhere could no longer reach it), even
// though the lease has not run out.
func TestKeptMetadataOfANodeThatStopsAnsweringIsNotUsed(t *testing.T) {
	ctx := context.Background()
	c := nodecluster.StartWith(t, 2, nodecluster.Options{MetaLease: time.Hour})
	reader := leasedClient(t, c)
	key := ""
	for i := 0; key == ""; i++ {
		k := fmt.Sprintf("dies-%d", i)
		if c.Ring().Owner(nodeapi.MetaID(chunk.Object{Tenant: "team-a", Bucket: "bucket-a", Key: k})).Name == c.Member(1).Name {
			key = k
		}
	}
	c.PutDirect("bucket-a", key, []byte("kept"))
	statKept(t, c, reader, "bucket-a", key)
	c.Kill(1)
	deadline := time.Now().Add(20 * time.Second)
	for {
		before := statRequests(c)
		if _, err := reader.Stat(ctx, "bucket-a", key); err != nil {
			t.Fatalf("stat with the owner killed: %v", err)
		}
		if statRequests(c) > before {
			return // asked the other node
		}
		if time.Now().After(deadline) {
			t.Fatal("20 s after its owner was killed, the object's metadata is still answered from what the client kept on the owner's lease")
		}
		time.Sleep(10 * time.Millisecond)
	}
}
