// Package dnsfallback dials host names through their last good DNS answer
// when the resolver fails for a moment.
//
// Cache nodes reach each other, and gateways reach nodes, by the pods'
// DNS names. CI saw CoreDNS fail for a few seconds during a rolling
// restart: every new connection to a peer failed although the peer had
// not moved, and reads that had to ask it failed with it. A Dialer
// remembers each name's last answer and dials those addresses when a
// lookup times out or the server fails; a name that does not exist
// (NXDOMAIN) fails at once, as net.Dialer does, so a pod that is gone is
// not dialed at its old address.
package dnsfallback

import (
	"context"
	"errors"
	"net"
	"sync"
	"time"
)

// DefaultMaxAge is how long after a name last resolved its answer is used.
const DefaultMaxAge = 10 * time.Minute

// Dialer dials like Net, resolving host names itself. The zero value is
// not usable: Net must be set.
type Dialer struct {
	Net *net.Dialer
	// Lookup resolves a host name (default net.DefaultResolver.LookupHost).
	Lookup func(ctx context.Context, host string) ([]string, error)
	// MaxAge bounds how old a remembered answer may be (default
	// DefaultMaxAge).
	MaxAge time.Duration
	// OnStale, if set, is told of each dial through a remembered answer.
	OnStale func(host string, err error)
	// Now is the clock (default time.Now).
	Now func() time.Time

	mu   sync.Mutex
	last map[string]answer
}

type answer struct {
	addrs []string
	at    time.Time
}

// DialContext dials addr ("host:port"); a host name's addresses are
// tried in turn until one connects.
func (d *Dialer) DialContext(ctx context.Context, network, addr string) (net.Conn, error) {
	host, port, err := net.SplitHostPort(addr)
	if err != nil || net.ParseIP(host) != nil {
		return d.Net.DialContext(ctx, network, addr)
	}
	addrs, err := d.resolve(ctx, host)
	if err != nil {
		return nil, &net.OpError{Op: "dial", Net: network, Err: err}
	}
	var first error
	for _, a := range addrs {
		c, err := d.Net.DialContext(ctx, network, net.JoinHostPort(a, port))
		if err == nil {
			return c, nil
		}
		if first == nil {
			first = err
		}
		if ctx.Err() != nil {
			break
		}
	}
	return nil, first
}

// resolve looks host up, falling back to its last answer when the lookup
// failed for another reason than the name not existing.
func (d *Dialer) resolve(ctx context.Context, host string) ([]string, error) {
	lookup := d.Lookup
	if lookup == nil {
		lookup = net.DefaultResolver.LookupHost
	}
	addrs, err := lookup(ctx, host)
	now := d.now()
	d.mu.Lock()
	if err == nil && len(addrs) > 0 {
		if d.last == nil {
			d.last = map[string]answer{}
		}
		d.last[host] = answer{addrs: addrs, at: now}
		d.mu.Unlock()
		return addrs, nil
	}
	a, ok := d.last[host]
	d.mu.Unlock()
	if err == nil {
		err = &net.DNSError{Err: "no addresses", Name: host, IsNotFound: true}
	}
	var de *net.DNSError
	if !errors.As(err, &de) || de.IsNotFound || ctx.Err() != nil || !ok || now.Sub(a.at) > d.maxAge() {
		return nil, err
	}
	if d.OnStale != nil {
		d.OnStale(host, err)
	}
	return a.addrs, nil
}

func (d *Dialer) maxAge() time.Duration {
	if d.MaxAge > 0 {
		return d.MaxAge
	}
	return DefaultMaxAge
}

func (d *Dialer) now() time.Time {
	if d.Now != nil {
		return d.Now()
	}
	return time.Now()
}
