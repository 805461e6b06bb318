package nodecluster

import (
	"errors"
	"slices"

	"github.com/distcache/distcache/internal/ring"
	"github.com/distcache/distcache/internal/testutil"
)

// Publish gives every live member a new ring epoch holding all members that
// are alive; withPrevious carries the membership of the epoch before, for
// warm handoff.
func (c *Cluster) Publish(withPrevious bool) *ring.Ring {
	c.T.Helper()
	r, err := c.PublishRing(withPrevious)
	testutil.Must(c.T, err)
	return r
}

// PublishRing is Publish returning its error.
func (c *Cluster) PublishRing(withPrevious bool) (*ring.Ring, error) {
	return c.publish(withPrevious, func(m *Member) bool { return !m.Dead() })
}

// PublishWithout is Publish leaving out the named members as well as dead
// ones.
func (c *Cluster) PublishWithout(withPrevious bool, names ...string) *ring.Ring {
	c.T.Helper()
	r, err := c.publish(withPrevious, func(m *Member) bool {
		for _, n := range names {
			if m.Name == n {
				return false
			}
		}
		return !m.Dead()
	})
	testutil.Must(c.T, err)
	return r
}

// PublishDraining is Publish with the named members draining: in the ring,
// running, owning nothing (as the operator publishes the pods above
// spec.replicas before a scale-down).
func (c *Cluster) PublishDraining(names ...string) *ring.Ring {
	c.T.Helper()
	r, err := c.publishStates(false, func(m *Member) bool { return !m.Dead() }, func(m *Member) ring.State {
		if slices.Contains(names, m.Name) {
			return ring.StateDraining
		}
		return ring.StateActive
	})
	testutil.Must(c.T, err)
	return r
}

func (c *Cluster) publish(withPrevious bool, include func(*Member) bool) (*ring.Ring, error) {
	return c.publishStates(withPrevious, include, func(*Member) ring.State { return ring.StateActive })
}

func (c *Cluster) publishStates(withPrevious bool, include func(*Member) bool, state func(*Member) ring.State) (*ring.Ring, error) {
	if c.Opts.Alone {
		return nil, errors.New("nodecluster: the nodes run alone (Options.Alone): there is no ring to publish")
	}
	members := c.Members()
	c.mu.Lock()
	c.epoch++
	epoch := c.epoch
	c.mu.Unlock()
	// One ring per zone, each naming its zone; a zone left without a
	// member keeps the ring it had.
	rings := map[string]*ring.Ring{}
	var first *ring.Ring
	for _, zone := range c.zones(members) {
		spec := ring.Spec{Epoch: epoch, Zone: zone, Hash: ring.HashParams{Algorithm: ring.AlgorithmRendezvousXXHash64}}
		var prev *ring.Ring
		for i, m := range members {
			if m.Zone != zone {
				continue
			}
			if prev == nil {
				prev = m.Ring.Load()
			}
			if include(m) {
				spec.Members = append(spec.Members, ring.Member{Name: m.Name, Address: m.Addr, Ordinal: i, Weight: 100, State: state(m)})
			}
		}
		if len(spec.Members) == 0 {
			continue
		}
		if withPrevious && prev != nil {
			spec.Previous = &ring.PreviousRing{Epoch: prev.Epoch(), Members: prev.Members()}
		}
		r, err := ring.New(spec)
		if err != nil {
			return nil, err
		}
		rings[zone] = r
		if first == nil {
			first = r
		}
	}
	for _, m := range members {
		for zone, r := range rings {
			if zone == m.Zone {
				m.Ring.Store(r)
			} else {
				m.Zones.Holder(zone).Store(r)
			}
		}
	}
	return first, nil
}

// zones are the zones of members, in the order their first member was
// added.
func (c *Cluster) zones(members []*Member) []string {
	var out []string
	for _, m := range members {
		if !slices.Contains(out, m.Zone) {
			out = append(out, m.Zone)
		}
	}
	return out
}

// Ring is the ring the cluster published last.
func (c *Cluster) Ring() *ring.Ring { return c.ZoneRing(c.Member(0).Zone) }
