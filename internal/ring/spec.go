// Package ring places chunks on the cache nodes of one zone.
//
// The operator publishes the membership of each zone as a JSON document (a
// Spec: an epoch, the members and the hashing parameters) in a ConfigMap;
// cache nodes read it from the mounted file (LoadFile, WatchFile) and serve
// it at /v1/ring, and gateways fetch it from any node. The format is
// documented with a full example in docs/ring.md.
//
// A *Ring is an immutable value built whole from a Spec: nothing mutates it
// after New returns, so it is safe for concurrent use, and callers replace
// it as a whole through a Holder (an atomic pointer with a change
// notification).
//
// Placement is weighted rendezvous hashing (highest random weight) over the
// active members: every member scores every chunk, the highest score owns it
// and the next ones are the fallbacks (Candidates). Adding a member moves
// exactly the chunks the new member wins and nothing else; removing or
// draining one moves only that member's chunks. Draining members own nothing
// new but stay known (Member) and are returned by PreviousOwner for the
// chunks they owned, so a new owner can fetch them from the old one instead
// of from S3 (warm handoff).
package ring

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"strconv"
	"strings"
)

// State is a member's placement state.
type State string

const (
	// StateActive members own chunks.
	StateActive State = "active"
	// StateDraining members own no chunks but are still running: they are
	// the previous owners of their chunks while those move elsewhere.
	StateDraining State = "draining"
)

// AlgorithmRendezvousXXHash64 is the only placement algorithm: weighted
// rendezvous hashing with xxHash64 (see docs/ring.md for the exact
// definition).
const AlgorithmRendezvousXXHash64 = "rendezvous-xxhash64"

// DefaultWeight is the weight SetDefaults gives a member without one.
const DefaultWeight = 100

// Member is one cache node of the zone.
type Member struct {
	// Name is the stable StatefulSet pod name (e.g. "cache-a-0"): a DNS-1123
	// subdomain. Placement depends on the name only, never on the address.
	Name string `json:"name"`
	// Address is the host:port of the node's mTLS API.
	Address string `json:"address"`
	// Ordinal is the StatefulSet ordinal (informational; not used for
	// placement).
	Ordinal int `json:"ordinal"`
	// Weight is the member's relative share of the chunks; > 0.
	Weight int `json:"weight"`
	// State is StateActive or StateDraining.
	State State `json:"state"`
}

// HashParams are the placement parameters. Changing either moves nearly
// every chunk.
type HashParams struct {
	// Algorithm must be AlgorithmRendezvousXXHash64.
	Algorithm string `json:"algorithm"`
	// Seed seeds every hash.
	Seed uint64 `json:"seed"`
}

// PreviousRing is the membership of the epoch before, kept in the document
// so that a node that restarted still knows where chunks used to live.
type PreviousRing struct {
	Epoch   int64    `json:"epoch"`
	Members []Member `json:"members"`
}

// Spec is the ring document the operator publishes.
type Spec struct {
	// Epoch increases with every membership change.
	Epoch int64 `json:"epoch"`
	// Zone is the availability zone the ring covers (informational).
	Zone    string     `json:"zone,omitempty"`
	Hash    HashParams `json:"hash"`
	Members []Member   `json:"members"`
	// Previous is the membership of the previous epoch, if any.
	Previous *PreviousRing `json:"previous,omitempty"`
}

// SetDefaults fills what a hand-written spec may leave out: a member weight
// of 0 becomes DefaultWeight and an empty state becomes StateActive, in
// Members and in Previous.Members. Nothing else has a default; in
// particular the hash algorithm must be named. Parse applies SetDefaults
// (after refusing an explicit "weight": 0); New does not, so a Spec built in
// code with a zero weight is an error unless the caller asked for defaults.
func (s *Spec) SetDefaults() {
	defaultMembers(s.Members)
	if s.Previous != nil {
		defaultMembers(s.Previous.Members)
	}
}

func defaultMembers(ms []Member) {
	for i := range ms {
		if ms[i].Weight == 0 {
			ms[i].Weight = DefaultWeight
		}
		if ms[i].State == "" {
			ms[i].State = StateActive
		}
	}
}

// Validate checks the spec. Every problem is reported, each naming its field
// as a JSON path (e.g. "members[2].weight").
func (s Spec) Validate() error {
	var errs []error
	add := func(field, format string, args ...any) {
		errs = append(errs, fmt.Errorf("%s: %s", field, fmt.Sprintf(format, args...)))
	}
	if s.Epoch < 0 {
		add("epoch", "must be >= 0, got %d", s.Epoch)
	}
	if s.Hash.Algorithm != AlgorithmRendezvousXXHash64 {
		add("hash.algorithm", "unknown algorithm %q (want %q)", s.Hash.Algorithm, AlgorithmRendezvousXXHash64)
	}
	validateMembers("members", s.Members, add)
	if p := s.Previous; p != nil {
		if p.Epoch < 0 || p.Epoch >= s.Epoch {
			add("previous.epoch", "must be >= 0 and lower than epoch %d, got %d", s.Epoch, p.Epoch)
		}
		validateMembers("previous.members", p.Members, add)
	}
	if len(errs) == 0 {
		return nil
	}
	return &ValidationError{Errs: errs}
}

func validateMembers(path string, ms []Member, add func(field, format string, args ...any)) {
	names := make(map[string]int, len(ms))
	addrs := make(map[string]int, len(ms))
	active := 0
	for i, m := range ms {
		f := func(name string) string { return fmt.Sprintf("%s[%d].%s", path, i, name) }
		if err := checkName(m.Name); err != nil {
			add(f("name"), "%v", err)
		} else if j, dup := names[m.Name]; dup {
			add(f("name"), "duplicate %q (also %s[%d])", m.Name, path, j)
		} else {
			names[m.Name] = i
		}
		if err := checkAddress(m.Address); err != nil {
			add(f("address"), "%v", err)
		} else if j, dup := addrs[strings.ToLower(m.Address)]; dup {
			add(f("address"), "duplicate %q (also %s[%d])", m.Address, path, j)
		} else {
			addrs[strings.ToLower(m.Address)] = i
		}
		if m.Ordinal < 0 {
			add(f("ordinal"), "must be >= 0, got %d", m.Ordinal)
		}
		if m.Weight <= 0 {
			add(f("weight"), "must be > 0, got %d", m.Weight)
		}
		switch m.State {
		case StateActive:
			active++
		case StateDraining:
		default:
			add(f("state"), "unknown state %q (want %q or %q)", m.State, StateActive, StateDraining)
		}
	}
	if active == 0 {
		add(path, "at least one member must be %q", StateActive)
	}
}

// checkName accepts a DNS-1123 subdomain, which every pod name is.
func checkName(name string) error {
	if name == "" {
		return errors.New("must not be empty")
	}
	if len(name) > 253 {
		return fmt.Errorf("%q is longer than 253 characters", name[:32]+"...")
	}
	for _, label := range strings.Split(name, ".") {
		if label == "" || len(label) > 63 || label[0] == '-' || label[len(label)-1] == '-' {
			return fmt.Errorf("%q is not a DNS-1123 subdomain (a pod name)", name)
		}
		for i := 0; i < len(label); i++ {
			c := label[i]
			if !(c >= 'a' && c <= 'z' || c >= '0' && c <= '9' || c == '-') {
				return fmt.Errorf("%q is not a DNS-1123 subdomain (a pod name)", name)
			}
		}
	}
	return nil
}

func checkAddress(addr string) error {
	host, port, err := net.SplitHostPort(addr)
	if err != nil {
		return fmt.Errorf("%q is not host:port", addr)
	}
	if host == "" {
		return fmt.Errorf("%q has no host", addr)
	}
	if p, err := strconv.ParseUint(port, 10, 16); err != nil || p == 0 {
		return fmt.Errorf("%q has no valid port", addr)
	}
	return nil
}

// ValidationError lists every problem found in a Spec.
type ValidationError struct {
	Errs []error
}

func (e *ValidationError) Error() string {
	var b strings.Builder
	b.WriteString("ring: invalid spec: ")
	for i, err := range e.Errs {
		if i > 0 {
			b.WriteString("; ")
		}
		b.WriteString(err.Error())
	}
	return b.String()
}

func (e *ValidationError) Unwrap() []error { return e.Errs }

// The wire types tell an absent weight (defaulted) from an explicit 0
// (refused: a member meant to receive nothing must be draining).
type (
	wireMember struct {
		Name    string `json:"name"`
		Address string `json:"address"`
		Ordinal int    `json:"ordinal"`
		Weight  *int   `json:"weight"`
		State   State  `json:"state"`
	}
	wirePrevious struct {
		Epoch   int64        `json:"epoch"`
		Members []wireMember `json:"members"`
	}
	wireSpec struct {
		Epoch    int64         `json:"epoch"`
		Zone     string        `json:"zone"`
		Hash     HashParams    `json:"hash"`
		Members  []wireMember  `json:"members"`
		Previous *wirePrevious `json:"previous"`
	}
)

// Parse reads a ring document strictly: unknown fields, trailing data and an
// explicit "weight": 0 are errors. It then applies SetDefaults (an absent
// weight is DefaultWeight, an absent state is active) and builds the ring
// with New, which validates it.
func Parse(data []byte) (*Ring, error) {
	spec, err := parseSpec(data)
	if err != nil {
		return nil, err
	}
	return New(spec)
}

func parseSpec(data []byte) (Spec, error) {
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.DisallowUnknownFields()
	var w wireSpec
	if err := dec.Decode(&w); err != nil {
		return Spec{}, fmt.Errorf("ring: parse: %w", err)
	}
	if _, err := dec.Token(); err != io.EOF {
		return Spec{}, errors.New("ring: parse: trailing data after the ring document")
	}
	var errs []error
	spec := Spec{Epoch: w.Epoch, Zone: w.Zone, Hash: w.Hash, Members: fromWire("members", w.Members, &errs)}
	if w.Previous != nil {
		spec.Previous = &PreviousRing{Epoch: w.Previous.Epoch, Members: fromWire("previous.members", w.Previous.Members, &errs)}
	}
	if len(errs) > 0 {
		return Spec{}, &ValidationError{Errs: errs}
	}
	spec.SetDefaults()
	return spec, nil
}

func fromWire(path string, ws []wireMember, errs *[]error) []Member {
	if ws == nil {
		return nil
	}
	ms := make([]Member, len(ws))
	for i, w := range ws {
		ms[i] = Member{Name: w.Name, Address: w.Address, Ordinal: w.Ordinal, State: w.State}
		if w.Weight != nil {
			if *w.Weight == 0 {
				*errs = append(*errs, fmt.Errorf("%s[%d].weight: must be > 0, got 0 (omit it for %d; use state %q to give a member nothing)", path, i, DefaultWeight, StateDraining))
			}
			ms[i].Weight = *w.Weight
		}
	}
	return ms
}

// States is each member's state by name.
func (s Spec) States() map[string]State {
	out := make(map[string]State, len(s.Members))
	for _, m := range s.Members {
		out[m.Name] = m.State
	}
	return out
}

// Clone returns a deep copy of s.
func (s Spec) Clone() Spec {
	s.Members = cloneMembers(s.Members)
	if s.Previous != nil {
		p := *s.Previous
		p.Members = cloneMembers(p.Members)
		s.Previous = &p
	}
	return s
}

func cloneMembers(ms []Member) []Member {
	if ms == nil {
		return nil
	}
	return append([]Member(nil), ms...)
}
