package node

import (
	"context"
	"crypto/tls"
	"log/slog"
	"net"
	"net/http"
	"strconv"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/distcache/distcache/internal/chunk"
	"github.com/distcache/distcache/internal/metrics"
	"github.com/distcache/distcache/internal/ring"
	"github.com/distcache/distcache/internal/tenancy"
	"github.com/distcache/distcache/internal/testutil"
)

// An owner that lets a relayed read time out is skipped for DownFor from
// when it failed, as one that refuses connections is. It was marked down
// from when the read started, so with a peer timeout longer than DownFor
// the mark had ended before it was made, and every read waited out the
// timeout again.
func TestOwnerThatTimesOutIsSkippedForDownFor(t *testing.T) {
	const timeout, downFor = 2 * time.Second, time.Second
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	testutil.Must(t, err)
	defer ln.Close()
	go func() { // accepts, never answers
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			defer c.Close()
		}
	}()
	r, err := ring.New(ring.Spec{Epoch: 1, Hash: ring.HashParams{Algorithm: ring.AlgorithmRendezvousXXHash64}, Members: []ring.Member{
		{Name: "self", Address: "127.0.0.1:1", Weight: 1, State: ring.StateActive},
		{Name: "hung", Address: ln.Addr().String(), Weight: 1, State: ring.StateActive},
	}})
	testutil.Must(t, err)
	var id chunk.ID
	for i := 0; ; i++ { // a chunk "hung" owns
		id = chunk.ID{Object: chunk.Object{Tenant: "t", Bucket: "b", Key: "k" + strconv.Itoa(i)}, ETag: `"e"`, Size: 1 << 20}
		if r.Owner(id).Name == "hung" {
			break
		}
	}
	peers := &Peers{Client: &http.Client{Transport: &http.Transport{TLSClientConfig: &tls.Config{}}}, Timeout: timeout, DownFor: downFor}
	peers.down.For = downFor
	s := &Server{cfg: Config{Self: "self", Candidates: 2}, peers: peers, log: slog.New(slog.DiscardHandler),
		metrics: metrics.NewNode(prometheus.NewRegistry())}
	c := caller{tenant: &tenancy.Tenant{Name: "t"}}
	if _, ok, err := s.fromOwners(context.Background(), r, c, id, 1<<20); ok || err != nil {
		t.Fatalf("a hung owner answered: %v %v", ok, err)
	}
	if !peers.down.Down("hung", time.Now()) {
		t.Fatalf("the owner that timed out after %s is not down (DownFor %s)", timeout, downFor)
	}
}
