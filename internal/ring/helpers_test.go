package ring

import (
	"fmt"
	"sync"
	"testing"

	"github.com/distcache/distcache/internal/chunk"
	"github.com/distcache/distcache/internal/testutil"
)

// numIDs is how many chunk ids the distribution tests place.
const numIDs = 100_000

func member(i int) Member {
	return Member{
		Name:    fmt.Sprintf("cache-a-%d", i),
		Address: fmt.Sprintf("cache-a-%d.cache-a.distcache.svc:8443", i),
		Ordinal: i,
		Weight:  DefaultWeight,
		State:   StateActive,
	}
}

// members returns n active members cache-a-0 .. cache-a-<n-1> of equal weight.
func members(n int) []Member {
	ms := make([]Member, n)
	for i := range ms {
		ms[i] = member(i)
	}
	return ms
}

func specOf(epoch int64, ms []Member) Spec {
	return Spec{
		Epoch:   epoch,
		Zone:    "eu-west-1a",
		Hash:    HashParams{Algorithm: AlgorithmRendezvousXXHash64, Seed: 0x5eed},
		Members: ms,
	}
}

func mustNew(t testing.TB, spec Spec) *Ring {
	t.Helper()
	r, err := New(spec)
	testutil.Must(t, err)
	return r
}

// testIDs are numIDs chunk ids shaped like ClickHouse's: 64-chunk objects of
// three tenants, with content-hash ETags.
var testIDs = sync.OnceValue(func() []chunk.ID {
	tenants := []string{"clickhouse-prod", "analytics", "ch"}
	ids := make([]chunk.ID, numIDs)
	for i := range ids {
		obj := i / 64
		ids[i] = chunk.ID{
			Object: chunk.Object{
				Tenant: tenants[obj%len(tenants)],
				Bucket: "ch-data",
				Key:    fmt.Sprintf("store/%03x/%08x-%04x/data.bin", obj%4096, obj*2654435761, obj%997),
			},
			ETag:  fmt.Sprintf("%032x", uint64(obj)*0x9e3779b97f4a7c15),
			Size:  4 << 20,
			Index: int64(i % 64),
		}
	}
	return ids
})

// owners returns the owner's name of every test id.
func owners(r *Ring) []string {
	ids := testIDs()
	out := make([]string, len(ids))
	for i, id := range ids {
		out[i] = r.Owner(id).Name
	}
	return out
}

// load counts the test ids each member owns.
func load(owned []string) map[string]int {
	l := map[string]int{}
	for _, name := range owned {
		l[name]++
	}
	return l
}
