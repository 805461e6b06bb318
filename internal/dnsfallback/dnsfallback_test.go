package dnsfallback

import (
	"context"
	"errors"
	"net"
	"testing"
	"time"
)

// resolver answers lookups as the test sets it: addresses, or an error.
type resolver struct {
	addrs []string
	err   error
	calls int
}

func (r *resolver) lookup(_ context.Context, _ string) ([]string, error) {
	r.calls++
	return r.addrs, r.err
}

func listen(t *testing.T) (port string) {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ln.Close() })
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			c.Close()
		}
	}()
	_, port, _ = net.SplitHostPort(ln.Addr().String())
	return port
}

func TestDialsTheLastAnswerWhileTheResolverFails(t *testing.T) {
	port := listen(t)
	now := time.Unix(1000, 0)
	r := &resolver{addrs: []string{"127.0.0.1"}}
	var stale []string
	d := &Dialer{Net: &net.Dialer{Timeout: 2 * time.Second}, Lookup: r.lookup, MaxAge: time.Minute,
		Now: func() time.Time { return now }, OnStale: func(host string, _ error) { stale = append(stale, host) }}
	dial := func() error {
		c, err := d.DialContext(context.Background(), "tcp", net.JoinHostPort("peer.example", port))
		if err == nil {
			c.Close()
		}
		return err
	}
	if err := dial(); err != nil {
		t.Fatalf("resolving: %v", err)
	}

	// CoreDNS failing: a timeout, then a server failure.
	for _, failure := range []*net.DNSError{
		{Err: "i/o timeout", Name: "peer.example", IsTimeout: true, IsTemporary: true},
		{Err: "server misbehaving", Name: "peer.example", IsTemporary: true},
	} {
		r.addrs, r.err = nil, failure
		if err := dial(); err != nil {
			t.Errorf("resolver failing (%v): %v; want the last answer dialed", failure, err)
		}
	}
	if len(stale) != 2 {
		t.Errorf("OnStale told of %d dials, want 2", len(stale))
	}

	// A name that no longer exists is not dialed at its old address.
	r.err = &net.DNSError{Err: "no such host", Name: "peer.example", IsNotFound: true}
	var de *net.DNSError
	if err := dial(); !errors.As(err, &de) || !de.IsNotFound {
		t.Errorf("NXDOMAIN: %v; want the DNS error", err)
	}

	// Too old an answer is not used.
	r.err = &net.DNSError{Err: "server misbehaving", Name: "peer.example", IsTemporary: true}
	now = now.Add(2 * time.Minute)
	if err := dial(); !errors.As(err, &de) || !de.IsTemporary {
		t.Errorf("an answer older than MaxAge: %v; want the DNS error", err)
	}
}

func TestNameNeverResolvedFails(t *testing.T) {
	r := &resolver{err: &net.DNSError{Err: "server misbehaving", Name: "peer.example", IsTemporary: true}}
	d := &Dialer{Net: &net.Dialer{}, Lookup: r.lookup}
	if c, err := d.DialContext(context.Background(), "tcp", "peer.example:443"); err == nil {
		c.Close()
		t.Fatal("dialed a name that never resolved")
	}
}

func TestTriesEachAddressAndSkipsLookupForIPs(t *testing.T) {
	port := listen(t)
	// 127.0.0.2 is not listened on: refused, then the next address.
	r := &resolver{addrs: []string{"127.0.0.2", "127.0.0.1"}}
	d := &Dialer{Net: &net.Dialer{Timeout: 2 * time.Second}, Lookup: r.lookup}
	c, err := d.DialContext(context.Background(), "tcp", net.JoinHostPort("peer.example", port))
	if err != nil {
		t.Fatalf("two addresses, the second listening: %v", err)
	}
	c.Close()
	calls := r.calls
	if c, err = d.DialContext(context.Background(), "tcp", net.JoinHostPort("127.0.0.1", port)); err != nil {
		t.Fatal(err)
	}
	c.Close()
	if r.calls != calls {
		t.Error("an IP address was looked up")
	}
}
