package ring

import (
	"cmp"
	"encoding/json"
	"slices"

	"github.com/distcache/distcache/internal/chunk"
)

// Ring is an immutable placement of chunks on members. Build it with New or
// Parse; it is safe for concurrent use.
type Ring struct {
	spec Spec
	seed uint64
	// cur holds the active members, prev the active members of the previous
	// epoch (nil without one); both sorted by name, so that neither the
	// placement nor its tie-breaking depends on the order of the document.
	cur, prev []node
	// byName and prevByName index spec.Members and spec.Previous.Members.
	byName, prevByName map[string]int
}

type node struct {
	member Member
	hash   uint64 // memberHash(seed, name)
	weight float64
}

// New validates spec (see Spec.Validate; it does not apply SetDefaults) and
// builds the ring. The ring keeps its own copy of spec.
func New(spec Spec) (*Ring, error) {
	if err := spec.Validate(); err != nil {
		return nil, err
	}
	spec = spec.Clone()
	r := &Ring{
		spec:   spec,
		seed:   spec.Hash.Seed,
		cur:    activeNodes(spec.Hash.Seed, spec.Members),
		byName: index(spec.Members),
	}
	if spec.Previous != nil {
		r.prev = activeNodes(spec.Hash.Seed, spec.Previous.Members)
		r.prevByName = index(spec.Previous.Members)
	}
	return r, nil
}

func activeNodes(seed uint64, ms []Member) []node {
	var ns []node
	for _, m := range ms {
		if m.State == StateActive {
			ns = append(ns, node{member: m, hash: memberHash(seed, m.Name), weight: float64(m.Weight)})
		}
	}
	slices.SortFunc(ns, func(a, b node) int { return cmp.Compare(a.member.Name, b.member.Name) })
	return ns
}

func index(ms []Member) map[string]int {
	idx := make(map[string]int, len(ms))
	for i, m := range ms {
		idx[m.Name] = i
	}
	return idx
}

// Spec returns a copy of the spec the ring was built from.
func (r *Ring) Spec() Spec { return r.spec.Clone() }

// MarshalJSON writes the ring's spec; Parse reads it back into an equal ring.
func (r *Ring) MarshalJSON() ([]byte, error) { return json.Marshal(r.spec) }

// Epoch is the ring's epoch.
func (r *Ring) Epoch() int64 { return r.spec.Epoch }

// Zone is the zone the ring covers.
func (r *Ring) Zone() string { return r.spec.Zone }

// Members returns a copy of the current members, active and draining, in
// document order.
func (r *Ring) Members() []Member { return cloneMembers(r.spec.Members) }

// Member looks a member up by name among the current members, then among
// the previous epoch's.
func (r *Ring) Member(name string) (Member, bool) {
	if i, ok := r.byName[name]; ok {
		return r.spec.Members[i], true
	}
	if i, ok := r.prevByName[name]; ok {
		return r.spec.Previous.Members[i], true
	}
	return Member{}, false
}

// Owner returns the active member that owns the chunk.
func (r *Ring) Owner(id chunk.ID) Member {
	return r.cur[best(r.cur, keyHash(r.seed, id))].member
}

// PreviousOwner returns the member that owned the chunk under the previous
// epoch's membership, when that differs from the current owner: the place
// to look before S3 after a membership change (warm handoff). If the member
// is still in the current membership (typically draining), its current
// record is returned, else the previous one. ok is false without a previous
// membership or when the owner did not change.
func (r *Ring) PreviousOwner(id chunk.ID) (m Member, ok bool) {
	if r.prev == nil {
		return Member{}, false
	}
	kh := keyHash(r.seed, id)
	p := &r.prev[best(r.prev, kh)].member
	if p.Name == r.cur[best(r.cur, kh)].member.Name {
		return Member{}, false
	}
	if i, ok := r.byName[p.Name]; ok {
		return r.spec.Members[i], true
	}
	return *p, true
}

// PreviousCandidates returns up to n distinct members in placement order
// under the previous epoch's membership (n <= 0: all of them; nil without
// a previous membership): where the chunk was placed before the last
// change. A member still in the current membership comes with its current
// record, as in PreviousOwner.
func (r *Ring) PreviousCandidates(id chunk.ID, n int) []Member {
	if r.prev == nil {
		return nil
	}
	k := n
	if k <= 0 || k > len(r.prev) {
		k = len(r.prev)
	}
	out := appendCandidates(make([]Member, 0, k), r.prev, keyHash(r.seed, id), k)
	for i, m := range out {
		if j, ok := r.byName[m.Name]; ok {
			out[i] = r.spec.Members[j]
		}
	}
	return out
}

// best returns the index of the highest-scoring node; ties go to the lower
// index (the name that sorts first).
func best(ns []node, kh uint64) int {
	bi, bs := 0, ns[0].score(kh)
	for i := 1; i < len(ns); i++ {
		if s := ns[i].score(kh); s > bs {
			bi, bs = i, s
		}
	}
	return bi
}

// Candidates returns up to n distinct active members in placement order:
// the owner first, then the members to fall back to when it is unreachable.
// n <= 0 means all active members.
func (r *Ring) Candidates(id chunk.ID, n int) []Member {
	return r.AppendCandidates(make([]Member, 0, r.candidateCount(n)), id, n)
}

func (r *Ring) candidateCount(n int) int {
	if n <= 0 || n > len(r.cur) {
		return len(r.cur)
	}
	return n
}

// smallN bounds the partial selection AppendCandidates does on the stack.
const smallN = 16

// AppendCandidates appends Candidates(id, n) to dst and returns the
// extended slice. It does not allocate when dst has room and n is at most
// 16 (and not <= 0 on a ring of more than 16 active members).
func (r *Ring) AppendCandidates(dst []Member, id chunk.ID, n int) []Member {
	return appendCandidates(dst, r.cur, keyHash(r.seed, id), r.candidateCount(n))
}

// appendCandidates appends the k best-scoring of ns for kh, best first
// (ties to the lower index), to dst.
func appendCandidates(dst []Member, ns []node, kh uint64, k int) []Member {
	if k == 1 {
		return append(dst, ns[best(ns, kh)].member)
	}
	if k <= smallN {
		// Partial selection: keep the k best, sorted, by insertion.
		var (
			idx [smallN]int32
			sc  [smallN]float64
			c   int
		)
		for i := range ns {
			s := ns[i].score(kh)
			if c == k {
				if !(s > sc[c-1]) {
					continue
				}
				c--
			}
			j := c
			for ; j > 0 && s > sc[j-1]; j-- {
				sc[j], idx[j] = sc[j-1], idx[j-1]
			}
			sc[j], idx[j] = s, int32(i)
			c++
		}
		for _, i := range idx[:c] {
			dst = append(dst, ns[i].member)
		}
		return dst
	}
	type scored struct {
		s float64
		i int
	}
	all := make([]scored, len(ns))
	for i := range ns {
		all[i] = scored{ns[i].score(kh), i}
	}
	slices.SortFunc(all, func(a, b scored) int {
		if c := cmp.Compare(b.s, a.s); c != 0 {
			return c
		}
		return a.i - b.i
	})
	for _, a := range all[:k] {
		dst = append(dst, ns[a.i].member)
	}
	return dst
}
