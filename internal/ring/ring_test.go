package ring

import (
	"bytes"
	"cmp"
	"encoding/binary"
	"fmt"
	"math"
	"math/rand/v2"
	"slices"
	"strings"
	"testing"

	"github.com/cespare/xxhash/v2"

	"github.com/distcache/distcache/internal/chunk"
)

// TestAddMemberMovesOnlyToIt scales N -> N+1: at most 1.1/(N+1) of the
// chunks move (and at least 0.9/(N+1): the new member takes its share), and
// every chunk that moves moves to the new member.
func TestAddMemberMovesOnlyToIt(t *testing.T) {
	for n := 3; n <= 16; n++ {
		t.Run(fmt.Sprintf("N=%d", n), func(t *testing.T) {
			before := owners(mustNew(t, specOf(1, members(n))))
			after := owners(mustNew(t, specOf(2, members(n+1))))
			added := member(n).Name
			moved := 0
			for i := range before {
				if before[i] == after[i] {
					continue
				}
				moved++
				if after[i] != added {
					t.Fatalf("chunk %v moved %s -> %s, not to the new member %s", testIDs()[i], before[i], after[i], added)
				}
			}
			frac, ideal := float64(moved)/numIDs, 1/float64(n+1)
			t.Logf("N=%d -> %d: moved %.4f of chunks (ideal 1/(N+1) = %.4f, ratio %.3f)", n, n+1, frac, ideal, frac/ideal)
			if frac > 1.1*ideal || frac < 0.9*ideal {
				t.Errorf("moved %.4f of chunks, want within 10%% of 1/(N+1) = %.4f", frac, ideal)
			}
		})
	}
}

// TestRemoveMemberMovesOnlyItsChunks removes one member: exactly the chunks
// it owned move, spread over the others.
func TestRemoveMemberMovesOnlyItsChunks(t *testing.T) {
	for n := 3; n <= 16; n++ {
		t.Run(fmt.Sprintf("N=%d", n), func(t *testing.T) {
			ms := members(n)
			removed := ms[n/2].Name
			before := owners(mustNew(t, specOf(1, ms)))
			after := owners(mustNew(t, specOf(2, slices.Delete(slices.Clone(ms), n/2, n/2+1))))
			moved := 0
			for i := range before {
				switch {
				case before[i] == removed:
					moved++
				case after[i] != before[i]:
					t.Fatalf("chunk %v moved %s -> %s though only %s was removed", testIDs()[i], before[i], after[i], removed)
				}
			}
			frac, ideal := float64(moved)/numIDs, 1/float64(n)
			t.Logf("N=%d -> %d: moved %.4f of chunks (ideal 1/N = %.4f)", n, n-1, frac, ideal)
			if frac > 1.1*ideal {
				t.Errorf("moved %.4f, want <= 1.1/N = %.4f", frac, 1.1*ideal)
			}
		})
	}
}

// TestEqualWeightsBalance: with equal weights no member holds more than 10%
// above (or below) the mean.
func TestEqualWeightsBalance(t *testing.T) {
	for n := 3; n <= 16; n++ {
		t.Run(fmt.Sprintf("N=%d", n), func(t *testing.T) {
			l := load(owners(mustNew(t, specOf(1, members(n)))))
			if len(l) != n {
				t.Fatalf("%d members own chunks, want %d", len(l), n)
			}
			mean := float64(numIDs) / float64(n)
			lo, hi := numIDs, 0
			for _, c := range l {
				lo, hi = min(lo, c), max(hi, c)
			}
			t.Logf("N=%d: max/mean %.3f, min/mean %.3f", n, float64(hi)/mean, float64(lo)/mean)
			if float64(hi)/mean > 1.10 || float64(lo)/mean < 0.90 {
				t.Errorf("load max/mean %.3f, min/mean %.3f; want within [0.90, 1.10]", float64(hi)/mean, float64(lo)/mean)
			}
		})
	}
}

// TestWeightedBalance: members hold chunks in proportion to their weights,
// within 10%.
func TestWeightedBalance(t *testing.T) {
	for _, weights := range [][]int{
		{100, 100, 200},
		{100, 200, 300, 400},
		{50, 100, 100, 100, 150},
		{1, 3},
	} {
		t.Run(fmt.Sprint(weights), func(t *testing.T) {
			ms := members(len(weights))
			total := 0
			for i, w := range weights {
				ms[i].Weight = w
				total += w
			}
			l := load(owners(mustNew(t, specOf(1, ms))))
			for i, m := range ms {
				want := float64(numIDs) * float64(weights[i]) / float64(total)
				got := float64(l[m.Name])
				t.Logf("%s weight %d: %d chunks (ideal %.0f, ratio %.3f)", m.Name, weights[i], l[m.Name], want, got/want)
				if got < 0.9*want || got > 1.1*want {
					t.Errorf("%s (weight %d) owns %.0f chunks, want %.0f +-10%%", m.Name, weights[i], got, want)
				}
			}
		})
	}
}

// TestMemberOrderDoesNotMatter: the same members in any order place every
// chunk, and order every candidate list, the same way.
func TestMemberOrderDoesNotMatter(t *testing.T) {
	ms := members(12)
	ms[3].State = StateDraining
	ms[5].Weight = 250
	ref := mustNew(t, specOf(1, ms))
	rng := rand.New(rand.NewPCG(1, 2))
	for shuffle := range 5 {
		shuffled := slices.Clone(ms)
		rng.Shuffle(len(shuffled), func(i, j int) { shuffled[i], shuffled[j] = shuffled[j], shuffled[i] })
		r := mustNew(t, specOf(1, shuffled))
		for _, id := range testIDs()[:20_000] {
			want, got := names(ref.Candidates(id, 0)), names(r.Candidates(id, 0))
			if !slices.Equal(got, want) {
				t.Fatalf("shuffle %d (%v): candidates of %v = %v, want %v", shuffle, names(shuffled), id, got, want)
			}
		}
	}
}

func names(ms []Member) []string {
	out := make([]string, len(ms))
	for i, m := range ms {
		out[i] = m.Name
	}
	return out
}

// TestDrainingMovesOnlyItsChunks: marking a member draining moves only the
// chunks it owned, and PreviousOwner sends their new owners to it.
func TestDrainingMovesOnlyItsChunks(t *testing.T) {
	const n = 6
	old := mustNew(t, specOf(1, members(n)))
	drained := members(n)
	drained[2].State = StateDraining
	spec := specOf(2, drained)
	spec.Previous = &PreviousRing{Epoch: 1, Members: members(n)}
	r := mustNew(t, spec)

	draining := drained[2].Name
	moved := 0
	for _, id := range testIDs() {
		before, after := old.Owner(id), r.Owner(id)
		prev, ok := r.PreviousOwner(id)
		if before.Name == after.Name {
			if ok {
				t.Fatalf("chunk %v stayed on %s, yet PreviousOwner = %s", id, after.Name, prev.Name)
			}
			continue
		}
		moved++
		if before.Name != draining {
			t.Fatalf("chunk %v moved %s -> %s though only %s is draining", id, before.Name, after.Name, draining)
		}
		if !ok || prev.Name != draining || prev.State != StateDraining {
			t.Fatalf("PreviousOwner(%v) = %+v, %v; want the draining %s", id, prev, ok, draining)
		}
		if slices.Contains(names(r.Candidates(id, 0)), draining) {
			t.Fatalf("draining %s is a candidate for %v", draining, id)
		}
	}
	if frac := float64(moved) / numIDs; frac < 0.9/n || frac > 1.1/n {
		t.Errorf("draining moved %.4f of chunks, want about 1/%d", frac, n)
	}
	m, ok := r.Member(draining)
	if !ok || m.State != StateDraining || m.Address != drained[2].Address {
		t.Errorf("Member(%q) = %+v, %v; want the draining member", draining, m, ok)
	}
}

// TestPreviousOwnerAfterScaling covers warm handoff after scale-up and after
// a member has left the membership altogether.
func TestPreviousOwnerAfterScaling(t *testing.T) {
	ids := testIDs()[:20_000]

	t.Run("scale up", func(t *testing.T) {
		old := mustNew(t, specOf(1, members(4)))
		spec := specOf(2, members(5))
		spec.Previous = &PreviousRing{Epoch: 1, Members: members(4)}
		r := mustNew(t, spec)
		handoffs := 0
		for _, id := range ids {
			prev, ok := r.PreviousOwner(id)
			before := old.Owner(id)
			if ok != (before.Name != r.Owner(id).Name) || ok && prev != before {
				t.Fatalf("PreviousOwner(%v) = %+v, %v; old owner %s, new %s", id, prev, ok, before.Name, r.Owner(id).Name)
			}
			if ok {
				handoffs++
			}
		}
		if handoffs == 0 {
			t.Fatal("no chunk has a previous owner after scaling 4 -> 5")
		}
	})

	t.Run("member gone", func(t *testing.T) {
		prevMembers := members(4)
		prevMembers[3].State = StateDraining
		old := mustNew(t, specOf(1, prevMembers))
		spec := specOf(2, members(3))
		// A member that was draining in the previous epoch owned nothing then.
		spec.Previous = &PreviousRing{Epoch: 1, Members: prevMembers}
		r := mustNew(t, spec)
		for _, id := range ids {
			if prev, ok := r.PreviousOwner(id); ok {
				t.Fatalf("PreviousOwner(%v) = %s, but %s and %s agree", id, prev.Name, old.Owner(id).Name, r.Owner(id).Name)
			}
		}
		// The previous epoch's members stay known by name.
		if m, ok := r.Member("cache-a-3"); !ok || m.State != StateDraining {
			t.Errorf("Member(cache-a-3) = %+v, %v; want it from the previous epoch", m, ok)
		}

		// Removed while active: its chunks' previous owner is its previous record.
		spec.Previous = &PreviousRing{Epoch: 1, Members: members(4)}
		r = mustNew(t, spec)
		found := false
		for _, id := range ids {
			if prev, ok := r.PreviousOwner(id); ok {
				found = true
				if prev != member(3) {
					t.Fatalf("PreviousOwner(%v) = %+v, want %+v", id, prev, member(3))
				}
			}
		}
		if !found {
			t.Fatal("no chunk has cache-a-3 as its previous owner")
		}
	})

	t.Run("no previous", func(t *testing.T) {
		r := mustNew(t, specOf(1, members(3)))
		if m, ok := r.PreviousOwner(ids[0]); ok {
			t.Errorf("PreviousOwner without a previous membership = %+v", m)
		}
		if _, ok := r.Member("cache-a-9"); ok {
			t.Error("Member found an unknown name")
		}
	})
}

func TestCandidates(t *testing.T) {
	for _, tc := range []struct {
		members, draining, n int
		want                 int // length
	}{
		{members: 1, n: 3, want: 1},
		{members: 3, n: 0, want: 3},
		{members: 3, n: -1, want: 3},
		{members: 3, n: 1, want: 1},
		{members: 3, n: 3, want: 3},
		{members: 3, n: 5, want: 3},
		{members: 5, draining: 2, n: 4, want: 3},
		{members: 16, n: 3, want: 3},
		{members: 20, n: 16, want: 16},
		{members: 20, n: 17, want: 17},
		{members: 40, n: 0, want: 40},
		{members: 64, draining: 4, n: 100, want: 60},
	} {
		t.Run(fmt.Sprintf("members=%d,draining=%d,n=%d", tc.members, tc.draining, tc.n), func(t *testing.T) {
			ms := members(tc.members)
			for i := range tc.draining {
				ms[i].State = StateDraining
			}
			r := mustNew(t, specOf(1, ms))
			for _, id := range testIDs()[:2000] {
				got := r.Candidates(id, tc.n)
				if len(got) != tc.want {
					t.Fatalf("len(Candidates(%v, %d)) = %d, want %d", id, tc.n, len(got), tc.want)
				}
				if got[0] != r.Owner(id) {
					t.Fatalf("Candidates(%v)[0] = %s, owner is %s", id, got[0].Name, r.Owner(id).Name)
				}
				seen := map[string]bool{}
				for _, m := range got {
					if seen[m.Name] || m.State != StateActive {
						t.Fatalf("Candidates(%v) = %v: duplicate or not active", id, names(got))
					}
					seen[m.Name] = true
				}
				// Any prefix is the same ordering: the fallbacks do not
				// depend on how many are asked for.
				if all := r.Candidates(id, 0); !slices.Equal(names(all[:len(got)]), names(got)) {
					t.Fatalf("Candidates(%v, %d) = %v, not a prefix of %v", id, tc.n, names(got), names(all))
				}
			}
		})
	}
}

func TestAppendCandidatesKeepsDst(t *testing.T) {
	r := mustNew(t, specOf(1, members(5)))
	id := testIDs()[0]
	dst := []Member{{Name: "keep"}}
	got := r.AppendCandidates(dst, id, 2)
	if len(got) != 3 || got[0].Name != "keep" || !slices.Equal(names(got[1:]), names(r.Candidates(id, 2))) {
		t.Errorf("AppendCandidates = %v", names(got))
	}
}

func TestPlacementDoesNotAllocate(t *testing.T) {
	r := mustNew(t, specOf(1, members(16)))
	id := testIDs()[1]
	dst := make([]Member, 0, 16)
	for _, tc := range []struct {
		name string
		f    func()
	}{
		{"Owner", func() { _ = r.Owner(id) }},
		{"AppendCandidates(3)", func() { dst = r.AppendCandidates(dst[:0], id, 3) }},
		{"AppendCandidates(16)", func() { dst = r.AppendCandidates(dst[:0], id, 16) }},
		{"PreviousOwner", func() { _, _ = r.PreviousOwner(id) }},
	} {
		if a := testing.AllocsPerRun(100, tc.f); a != 0 {
			t.Errorf("%s: %.1f allocations per call, want 0", tc.name, a)
		}
	}
}

// TestKeyEncodingUnambiguous: ids that plain concatenation would confuse
// have different keys and different hashes.
func TestKeyEncodingUnambiguous(t *testing.T) {
	obj := func(tenant, bucket, key string) chunk.Object {
		return chunk.Object{Tenant: tenant, Bucket: bucket, Key: key}
	}
	for _, tc := range []struct {
		name string
		a, b chunk.ID
	}{
		{"tenant/bucket boundary", chunk.ID{Object: obj("a", "bc", "k")}, chunk.ID{Object: obj("ab", "c", "k")}},
		{"bucket/key boundary", chunk.ID{Object: obj("t", "b", "ck")}, chunk.ID{Object: obj("t", "bc", "k")}},
		{"key/etag boundary", chunk.ID{Object: obj("t", "b", "k1"), ETag: "2"}, chunk.ID{Object: obj("t", "b", "k"), ETag: "12"}},
		{"empty fields shift", chunk.ID{Object: obj("", "x", "")}, chunk.ID{Object: obj("x", "", "")}},
		{"size/index swapped", chunk.ID{Object: obj("t", "b", "k"), Size: 1, Index: 2}, chunk.ID{Object: obj("t", "b", "k"), Size: 2, Index: 1}},
		{"length byte inside a string", chunk.ID{Object: obj("a\x01b", "", "")}, chunk.ID{Object: obj("a", "b", "")}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if bytes.Equal(KeyOf(tc.a), KeyOf(tc.b)) {
				t.Fatalf("KeyOf(%v) == KeyOf(%v) = %q", tc.a, tc.b, KeyOf(tc.a))
			}
			if keyHash(7, tc.a) == keyHash(7, tc.b) {
				t.Fatalf("%v and %v hash the same", tc.a, tc.b)
			}
		})
	}
}

// TestPlacementGolden pins the algorithm: nodes and gateways of different
// versions must agree on every placement, so any change to the encoding,
// the hash or the score shows up here (and needs a new algorithm name).
func TestPlacementGolden(t *testing.T) {
	id := chunk.ID{Object: chunk.Object{Tenant: "ab", Bucket: "c", Key: "k/1"}, ETag: "e", Size: 4 << 20, Index: 3}
	wantKey := []byte("\x02ab\x01c\x03k/1\x01e\x00\x00\x00\x00\x00\x40\x00\x00\x00\x00\x00\x00\x00\x00\x00\x03")
	if got := KeyOf(id); !bytes.Equal(got, wantKey) {
		t.Errorf("KeyOf = %q, want %q", got, wantKey)
	}

	if got, want := keyHash(0x5eed, id), uint64(0x28cf2075c8a1f77f); got != want {
		t.Errorf("keyHash = %#x, want %#x", got, want)
	}
	if got, want := memberHash(0x5eed, "cache-a-0"), uint64(0x4193c458f04587c5); got != want {
		t.Errorf("memberHash = %#x, want %#x", got, want)
	}

	r := mustNew(t, specOf(1, members(8)))
	var got []string
	for i := range 8 {
		id := chunk.ID{Object: chunk.Object{Tenant: "t", Bucket: "b", Key: fmt.Sprintf("k%d", i)}, ETag: "e", Size: 4 << 20}
		got = append(got, fmt.Sprint(names(r.Candidates(id, 3))))
	}
	want := []string{
		"[cache-a-1 cache-a-3 cache-a-6]",
		"[cache-a-7 cache-a-1 cache-a-3]",
		"[cache-a-3 cache-a-1 cache-a-0]",
		"[cache-a-4 cache-a-3 cache-a-5]",
		"[cache-a-7 cache-a-3 cache-a-1]",
		"[cache-a-2 cache-a-6 cache-a-3]",
		"[cache-a-2 cache-a-7 cache-a-4]",
		"[cache-a-2 cache-a-4 cache-a-3]",
	}
	if !slices.Equal(got, want) {
		t.Errorf("placements changed:\n got %q\nwant %q", got, want)
	}
}

// TestMatchesDocumentedFormula recomputes placements with a plain
// transcription of the formula in hash.go and docs/ring.md (every score,
// then a full sort) and compares.
func TestMatchesDocumentedFormula(t *testing.T) {
	const seed = 0xfeedface
	ms := members(9)
	for i := range ms {
		ms[i].Weight = 50 + 25*i
	}
	ms[4].State = StateDraining
	spec := specOf(3, ms)
	spec.Hash.Seed = seed
	r := mustNew(t, spec)

	str := func(s string) []byte { return append(binary.AppendUvarint(nil, uint64(len(s))), s...) }
	xxh := func(b []byte) uint64 { d := xxhash.NewWithSeed(seed); d.Write(b); return d.Sum64() }
	for _, id := range testIDs()[:5000] {
		key := slices.Concat(str(id.Tenant), str(id.Bucket), str(id.Key), str(id.ETag),
			binary.BigEndian.AppendUint64(nil, uint64(id.Size)), binary.BigEndian.AppendUint64(nil, uint64(id.Index)))
		type scored struct {
			name  string
			score float64
		}
		var all []scored
		for _, m := range ms {
			if m.State != StateActive {
				continue
			}
			h := fmix64(xxh(key) ^ xxh(str(m.Name)))
			u := (float64(h>>11) + 0.5) / math.Exp2(53)
			all = append(all, scored{m.Name, -float64(m.Weight) / math.Log(u)})
		}
		slices.SortFunc(all, func(a, b scored) int {
			if a.score != b.score {
				return cmp.Compare(b.score, a.score)
			}
			return strings.Compare(a.name, b.name)
		})
		var want []string
		for _, s := range all {
			want = append(want, s.name)
		}
		if got := names(r.Candidates(id, 0)); !slices.Equal(got, want) {
			t.Fatalf("Candidates(%v) = %v, formula gives %v", id, got, want)
		}
	}
}

// TestPreviousCandidates: the previous epoch's candidates are those of a
// ring of its members, with the current record of a member still in the
// current membership; none without a previous membership.
func TestPreviousCandidates(t *testing.T) {
	old := mustNew(t, specOf(1, members(5)))
	cur := members(4) // cache-a-4 left: restarting, or gone
	cur[1].Address = "moved:8443"
	spec := specOf(2, cur)
	spec.Previous = &PreviousRing{Epoch: 1, Members: members(5)}
	r := mustNew(t, spec)
	for _, id := range testIDs()[:5_000] {
		for _, n := range []int{1, 3, 0} {
			got, want := r.PreviousCandidates(id, n), old.Candidates(id, n)
			if !slices.Equal(names(got), names(want)) {
				t.Fatalf("PreviousCandidates(%v, %d) = %v, want %v", id, n, names(got), names(want))
			}
			for _, m := range got {
				if m.Name == cur[1].Name && m.Address != "moved:8443" {
					t.Fatalf("PreviousCandidates(%v, %d) gives %s's previous record %+v, want its current one", id, n, m.Name, m)
				}
			}
		}
	}
	if got := old.PreviousCandidates(testIDs()[0], 3); got != nil {
		t.Errorf("without a previous membership: %v, want none", got)
	}
}
