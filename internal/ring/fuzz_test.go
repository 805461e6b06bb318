package ring

import (
	"encoding/json"
	"os"
	"reflect"
	"slices"
	"strings"
	"testing"

	"github.com/distcache/distcache/internal/chunk"
	"github.com/distcache/distcache/internal/testutil"
)

// FuzzParse reads arbitrary ring documents. A document Parse accepts must
// survive a round trip (Marshal, Parse: an equal spec and the same
// placement), place every chunk on an active member, list distinct
// candidates owner first, and place independently of the members' order.
func FuzzParse(f *testing.F) {
	if doc, err := os.ReadFile("../../docs/ring.md"); err == nil {
		if _, rest, ok := strings.Cut(string(doc), "```json\n"); ok {
			example, _, _ := strings.Cut(rest, "```")
			f.Add([]byte(example), "tenant", "bucket/key", int64(3))
		}
	}
	for _, s := range []string{
		`{"epoch":1,"hash":{"algorithm":"rendezvous-xxhash64","seed":7},"members":[{"name":"a","address":"a:1"}]}`,
		`{"epoch":2,"hash":{"algorithm":"rendezvous-xxhash64"},"members":[{"name":"a","address":"a:1","weight":1},{"name":"b","address":"B:1","weight":9223372036854775807}],"previous":{"epoch":1,"members":[{"name":"a","address":"a:1"}]}}`,
		`{"epoch":1,"hash":{"algorithm":"rendezvous-xxhash64"},"members":[{"name":"a","address":"a:1","weight":0}]}`,
		`{"epoch":1,"hash":{"algorithm":"rendezvous-xxhash64"},"members":[{"name":"a","address":"[::1]:8443","state":"draining"},{"name":"b.c","address":"b:65535"}]}`,
		`{"EPOCH":1,"Hash":{"Algorithm":"rendezvous-xxhash64"},"Members":[{"NAME":"a","address":"a:1"}]} `,
		`{"epoch":1,"hash":{"algorithm":"rendezvous-xxhash64"},"members":[{"name":"a","address":"a:1"}]}{}`,
		`{"epoch":1,"epoch":-1,"hash":{"algorithm":"rendezvous-xxhash64"},"members":[{"name":"a","address":"a:1"},{"name":"a","address":"a:2"}]}`,
		`{"epoch":1e3,"members":null,"previous":null}`,
		`[]`, ``, `null`,
	} {
		f.Add([]byte(s), "t", "k", int64(0))
	}
	f.Fuzz(func(t *testing.T, doc []byte, tenant, key string, index int64) {
		r, err := Parse(doc)
		if err != nil {
			if r != nil {
				t.Fatal("a ring and an error")
			}
			return
		}
		spec := r.Spec()
		if err := spec.Validate(); err != nil {
			t.Fatalf("Parse accepted an invalid spec: %v", err)
		}
		out, err := json.Marshal(r)
		testutil.Must(t, err)
		back, err := Parse(out)
		if err != nil {
			t.Fatalf("Parse refuses what the ring marshals: %v\n%s", err, out)
		}
		if !reflect.DeepEqual(back.Spec(), spec) {
			t.Fatalf("round trip changed the spec:\n%+v\n%+v", spec, back.Spec())
		}
		reversed := spec.Clone()
		slices.Reverse(reversed.Members)
		if reversed.Previous != nil {
			slices.Reverse(reversed.Previous.Members)
		}
		shuffled, err := New(reversed)
		if err != nil {
			t.Fatalf("the same members in another order are refused: %v", err)
		}
		active := 0
		for _, m := range spec.Members {
			if m.State == StateActive {
				active++
			}
		}
		for i := range int64(4) {
			id := chunk.ID{Object: chunk.Object{Tenant: tenant, Bucket: "b", Key: key}, ETag: "e", Size: 1 << 22, Index: index + i}
			owner := r.Owner(id)
			if owner.State != StateActive {
				t.Fatalf("owner %+v is not active", owner)
			}
			if back.Owner(id) != owner || shuffled.Owner(id) != owner {
				t.Fatalf("placement of %v differs after a round trip or a reorder", id)
			}
			cands := r.Candidates(id, 0)
			if len(cands) != active || cands[0] != owner {
				t.Fatalf("candidates %v: want %d active members, owner %s first", cands, active, owner.Name)
			}
			seen := map[string]bool{}
			for _, c := range cands {
				if seen[c.Name] || c.State != StateActive {
					t.Fatalf("candidates %v repeat a member or list a draining one", cands)
				}
				seen[c.Name] = true
			}
			if k := min(3, active); !slices.Equal(r.Candidates(id, k), cands[:k]) {
				t.Fatalf("the first %d candidates are not a prefix of all of them", k)
			}
			if p, ok := r.PreviousOwner(id); ok {
				if p.Name == owner.Name {
					t.Fatalf("previous owner %s is the owner", p.Name)
				}
				if _, known := r.Member(p.Name); !known {
					t.Fatalf("previous owner %s is unknown", p.Name)
				}
			}
		}
	})
}
