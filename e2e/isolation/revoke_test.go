package isolation_test

import (
	"bytes"
	"fmt"
	"io"
	"net/http"
	"os"
	"testing"
	"time"

	"github.com/distcache/distcache/internal/nodeapi"
	"github.com/distcache/distcache/internal/pki"
	"github.com/distcache/distcache/internal/testutil"
)

// probe is one read team-a made while its tenant was being deleted.
type probe struct {
	door       string
	start, end time.Time
	status     int
	leakedA    int
}

// TestDeletedTenant deletes team-a from the tenants file (what the operator
// does when its CacheTenant is deleted) while team-a reads its own, cached
// object in a loop through every node and its gateway. Once the nodes have
// loaded the new file, no request of team-a's succeeds, and the chunks it
// had cached (still on disk and in RAM) are served to no one: not team-a,
// not team-b, not a peer acting for team-a.
func TestDeletedTenant(t *testing.T) {
	e := newEnv(t)
	c := e.c
	hcA := c.HTTPClient(pki.Identity{Kind: pki.KindTenant, Name: tenantA})
	own := repeatTo(e.markerA, chunkSize+77)
	etag := e.etags["bucket-a/own.bin"]
	for i := range c.Members() {
		if got := e.getVia(hcA, i, "bucket-a", "own.bin"); !bytes.Equal(got, own) {
			t.Fatalf("team-a reading its own object through node %d: %d bytes", i, len(got))
		}
	}
	ownIDs := e.chunkIDs(tenantA, "bucket-a", "own.bin", etag, len(own))
	held := func() bool {
		for _, id := range ownIDs {
			ok := false
			for _, m := range c.Members() {
				ok = ok || m.Holds(id)
			}
			if !ok {
				return false
			}
		}
		return true
	}
	if !held() {
		t.Fatal("team-a's object is not cached: the test would prove nothing")
	}

	// team-a reads in a loop: a pinned chunk read (answered from the
	// store without metadata), a whole-object read, and its gateway.
	probes := make(chan probe, 1<<16)
	stop := make(chan struct{})
	done := make(chan struct{})
	go func() {
		defer close(done)
		for i := 0; ; i++ {
			select {
			case <-stop:
				return
			default:
			}
			var p probe
			var body []byte
			p.start = time.Now()
			switch n := i % 4; n {
			case 3:
				p.door = "gateway"
				a := e.s3Do(e.gwA, gatewayCredsA, s3Req{method: "GET", path: "/bucket-a/own.bin"})
				p.status, body = a.status, a.body
			default:
				node := c.Member(n)
				u := node.URL() + nodeapi.ObjectPath("bucket-a", "own.bin")
				p.door = fmt.Sprintf("node %d, object", n)
				if (i/4)%2 == 0 {
					u += "?chunk=0&etag=" + urlQ(etag)
					p.door = fmt.Sprintf("node %d, pinned chunk", n)
				}
				resp, err := hcA.Get(u)
				if err == nil {
					body, _ = io.ReadAll(resp.Body)
					resp.Body.Close()
					p.status = resp.StatusCode
				}
			}
			p.end = time.Now()
			p.leakedA = leaked(body, e.markerA)
			probes <- p
		}
	}()
	var seen []probe
	collect := func(until func() bool) {
		for !until() {
			seen = append(seen, <-probes)
		}
	}
	okBefore := 0
	collect(func() bool {
		if n := len(seen); n > 0 && seen[n-1].status == http.StatusOK {
			okBefore++
		}
		return okBefore >= 20
	})

	before, _ := c.Tenants.Reloads()
	removed := time.Now()
	tmp := e.tenants + ".tmp"
	testutil.Must(t, os.WriteFile(tmp, []byte(tenantsFile(e.credsA, e.credsB, false)), 0o600))
	testutil.Must(t, os.Rename(tmp, e.tenants))
	testutil.WaitFor(t, "the nodes to reload the tenants file", func() bool {
		ok, _ := c.Tenants.Reloads()
		return ok > before
	})
	reloaded := time.Now()
	after := 0
	collect(func() bool {
		if seen[len(seen)-1].start.After(reloaded) {
			after++
		}
		return after >= 40
	})
	close(stop)
	<-done
	close(probes)
	for p := range probes {
		seen = append(seen, p)
	}

	var firstRefusal time.Time
	var lastSuccess time.Time
	for _, p := range seen {
		if p.status == http.StatusForbidden && firstRefusal.IsZero() {
			firstRefusal = p.end
		}
		if p.status == http.StatusOK && p.end.After(lastSuccess) {
			lastSuccess = p.end
		}
		if p.start.After(reloaded) {
			if p.status != http.StatusForbidden {
				t.Errorf("%s: a read started %v after the reload answered %d, want 403", p.door, p.start.Sub(reloaded), p.status)
			}
			if p.leakedA > 0 {
				t.Errorf("%s: %d bytes of team-a's data after the reload", p.door, p.leakedA)
			}
		}
	}
	if firstRefusal.IsZero() {
		t.Fatal("team-a was never refused")
	}
	t.Logf("%d reads by team-a; tenants file replaced at 0; reload seen by the nodes after %v; first refusal after %v; "+
		"last success ended after %v (started before the reload)", len(seen), reloaded.Sub(removed).Round(time.Millisecond),
		firstRefusal.Sub(removed).Round(time.Millisecond), lastSuccess.Sub(removed).Round(time.Millisecond))

	// Every door, once more, now that team-a is gone.
	hcB := c.HTTPClient(pki.Identity{Kind: pki.KindTenant, Name: tenantB})
	hcPeer := c.HTTPClient(pki.Identity{Kind: pki.KindPeer, Name: "gateway-a"})
	get := func(hc *http.Client, method, u string, header http.Header) (int, []byte) {
		req, err := http.NewRequest(method, u, nil)
		testutil.Must(t, err)
		for k, v := range header {
			req.Header[k] = v
		}
		resp, err := hc.Do(req)
		testutil.Must(t, err)
		defer resp.Body.Close()
		body, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, body
	}
	for i, m := range c.Members() {
		base := m.URL()
		for _, x := range []struct {
			name, method, path string
			hc                 *http.Client
			header             http.Header
		}{
			{"team-a: pinned chunk (a store hit before)", "GET", nodeapi.ObjectPath("bucket-a", "own.bin") + "?chunk=0&etag=" + urlQ(etag), hcA, nil},
			{"team-a: whole object", "GET", nodeapi.ObjectPath("bucket-a", "own.bin"), hcA, nil},
			{"team-a: HEAD", "HEAD", nodeapi.ObjectPath("bucket-a", "own.bin"), hcA, nil},
			{"team-a: metadata", "GET", "/v1/meta/bucket-a/own.bin", hcA, nil},
			{"team-a: list (pass-through)", "GET", "/v1/s3/bucket-a?list-type=2", hcA, nil},
			{"team-b: team-a's bucket", "GET", nodeapi.ObjectPath("bucket-a", "own.bin") + "?chunk=0&etag=" + urlQ(etag), hcB, nil},
			{"team-b: naming team-a", "GET", nodeapi.ObjectPath("bucket-a", "own.bin"), hcB, h("X-Distcache-Tenant", tenantA)},
			{"peer acting for team-a", "GET", nodeapi.ObjectPath("bucket-a", "own.bin") + "?chunk=0&etag=" + urlQ(etag), hcPeer,
				h("X-Distcache-Tenant", tenantA)},
			{"peer acting for team-b in team-a's bucket", "GET", nodeapi.ObjectPath("bucket-a", "own.bin") + "?chunk=0&etag=" + urlQ(etag), hcPeer,
				h("X-Distcache-Tenant", tenantB)},
		} {
			t.Run(fmt.Sprintf("after deletion/node %d/%s", i, x.name), func(t *testing.T) {
				status, body := get(x.hc, x.method, base+x.path, x.header)
				if status != http.StatusForbidden {
					t.Errorf("answer %d %q, want 403", status, trunc(body))
				}
				if n := leaked(body, e.markerA); n > 0 {
					t.Errorf("%d bytes of team-a's data", n)
				}
			})
		}
	}
	t.Run("after deletion/team-a's gateway", func(t *testing.T) {
		a := e.s3Do(e.gwA, gatewayCredsA, s3Req{method: "GET", path: "/bucket-a/own.bin"})
		if a.status != http.StatusForbidden || leaked(a.body, e.markerA) > 0 {
			t.Errorf("answer %v %q, want 403 and no byte of team-a's data", a, trunc(a.body))
		}
	})
	t.Run("after deletion/the chunks are still on the nodes (refused, not evicted)", func(t *testing.T) {
		if !held() {
			t.Error("team-a's chunks are gone: the refusals above may only show an empty cache")
		}
	})
}
