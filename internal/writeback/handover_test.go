package writeback

import (
	"bytes"
	"math/rand/v2"
	"testing"

	"github.com/distcache/distcache/internal/testutil"
)

// A version handed to other holders (HandOver) and then copied back, as a
// ring that gives the key back to this node does, is kept: written,
// readable, dirty, and there after reopening, for a body in the log and a
// body in a file of its own. Before HandOver the node dropped it (Drop),
// took the copy back for a late one and let it go while its sender,
// answered that it was held, dropped its own: the acknowledged write was
// gone everywhere (e2e/processfaults TestWriteBackThroughRingChurn).
func TestVersionHandedBackIsKept(t *testing.T) {
	dir := t.TempDir()
	j, err := Open(dir, 1<<30)
	testutil.Must(t, err)
	r := rand.New(rand.NewPCG(5, 6))
	bodies := map[string][]byte{"small": testutil.RandomBytes(r, 10<<10), "large": testutil.RandomBytes(r, 3<<20)}
	held := map[string]Entry{}
	for key, body := range bodies {
		e := put(t, j, key, body)
		testutil.Must(t, j.HandOver(e))
		if _, ok := j.Get(e.Name); ok {
			t.Fatalf("%s: still held after HandOver", key)
		}
		back, err := j.Write(e, bytes.NewReader(body))
		testutil.Must(t, err)
		if back.Version != e.Version {
			t.Fatalf("%s: the copy handed back was taken for a late one (the journal answers %+v)", key, back)
		}
		held[key] = e
	}
	check := func(when string) {
		t.Helper()
		for key, e := range held {
			got, ok := j.Get(e.Name)
			if !ok || got.Version != e.Version {
				t.Fatalf("%s, %s: the journal holds %+v (ok %v); want the version handed back", when, key, got, ok)
			}
			if b := readBody(t, j, got); !bytes.Equal(b, bodies[key]) {
				t.Fatalf("%s, %s: body of %d bytes, want the %d handed back", when, key, len(b), len(bodies[key]))
			}
		}
		if s := j.Stats(); s.Dirty != len(held) {
			t.Fatalf("%s: %d versions to persist, want %d", when, s.Dirty, len(held))
		}
	}
	check("handed back")
	testutil.Must(t, j.Close())
	j, err = Open(dir, 1<<30)
	testutil.Must(t, err)
	defer j.Close()
	check("after reopening")
}
