package hitratio

import (
	"context"
	"image/png"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/distcache/distcache/internal/store"
	"github.com/distcache/distcache/internal/testutil/benchtest"
)

// TestRunQuick runs the part in smoke mode: every trace against the real
// store with both policies and through the simulators, and checks that the
// numbers are real measurements and behave as they must.
func TestRunQuick(t *testing.T) {
	env := benchtest.Env(t, "b4")
	m, err := measure(context.Background(), env)
	if err != nil {
		t.Fatal(err)
	}
	for i, sp := range m.specs {
		for _, c := range m.cells[i] {
			name := sp.name + " " + mib(c.disk)
			for _, pol := range storePolicies {
				r := c.store[pol]
				// Counted reads are the trace's, hits a real share of
				// them (every hit was compared byte for byte).
				if r.reqs != int64(len(m.traces[i].reqs)-m.traces[i].warmup) || r.hits == 0 || r.hits == r.reqs {
					t.Errorf("%s %s: %d of %d reads hit", name, pol, r.hits, r.reqs)
				}
				if r.ramHits == 0 || r.ramHits > r.hits {
					t.Errorf("%s %s: %d RAM hits of %d hits", name, pol, r.ramHits, r.hits)
				}
				if r.evictions == 0 || r.meanLive <= 0 || r.meanLive > float64(r.liveTarget) {
					t.Errorf("%s %s: %d evictions, mean live %.0f of %d", name, pol, r.evictions, r.meanLive, r.liveTarget)
				}
			}
			// The store is the policy it says it is: it matches its
			// simulator at the live target, up to evictions the usage
			// gate may add on a slow disk.
			for pol, sim := range map[store.Eviction]string{store.EvictS3FIFO: "S3-FIFO", store.EvictLRU: "LRU"} {
				if d := c.store[pol].byteRatio() - c.sim[sim].byteRatio(); d < -0.1 || d > 0.02 {
					t.Errorf("%s: store %s byte hit ratio %.3f, simulated %.3f", name, pol, c.store[pol].byteRatio(), c.sim[sim].byteRatio())
				}
			}
			for _, p := range simPolicies {
				if r := c.sim[p]; r.hits == 0 || r.hitBytes > r.bytes {
					t.Errorf("%s: simulated %s: %+v", name, p, r)
				}
			}
		}
		// Scans flush LRU, not S3-FIFO.
		if sp.scanEvery > 0 {
			for _, c := range m.cells[i] {
				if a, l := c.store[store.EvictS3FIFO].byteRatio(), c.store[store.EvictLRU].byteRatio(); a <= l {
					t.Errorf("mixed trace at %s: S3-FIFO %.3f <= LRU %.3f", mib(c.disk), a, l)
				}
			}
		}
		// A larger LRU never holds less (LRU is a stack algorithm).
		for j := 1; j < len(m.cells[i]); j++ {
			if m.cells[i][j].sim["LRU"].hits < m.cells[i][j-1].sim["LRU"].hits {
				t.Errorf("%s: simulated LRU hits fell from %s to %s", sp.name, mib(m.cells[i][j-1].disk), mib(m.cells[i][j].disk))
			}
		}
	}

	sec, err := m.report(env)
	if err != nil {
		t.Fatal(err)
	}
	if !strings.HasPrefix(sec.Title, "B4") || !strings.Contains(sec.Markdown, "make bench BENCH_PARTS=b4") || !strings.Contains(sec.Markdown, "| zipf-0.8 |") {
		t.Errorf("section:\n%s", sec.Markdown)
	}
	for _, sp := range m.specs {
		img := "b4-" + sp.name + ".png"
		if !strings.Contains(sec.Markdown, "(img/"+img+")") {
			t.Errorf("section does not show %s", img)
		}
		f, err := os.Open(filepath.Join(env.ImgDir, img))
		if err != nil {
			t.Fatal(err)
		}
		_, err = png.Decode(f)
		f.Close()
		if err != nil {
			t.Errorf("%s: %v", img, err)
		}
	}
	t.Logf("\n%s", sec.Markdown)
}

// TestSimulatorsAgreeOnTinyCases pins the simulators to hand-checked
// behaviour, so the candidates table compares what it claims to.
func TestSimulatorsAgreeOnTinyCases(t *testing.T) {
	// Capacity 10 chunks of size 1: chunks 0 and 1 read three times each,
	// a scan of 20 chunks read once, then 0 and 1 again.
	reqs := []int32{0, 1, 0, 1, 0, 1}
	for k := range int32(20) {
		reqs = append(reqs, 2+k)
	}
	reqs = append(reqs, 0, 1)
	tr := &trace{reqs: reqs, chunks: make([]chunkRef, 22)}
	for i := range tr.chunks {
		tr.chunks[i].size = 1
	}
	for _, tc := range []struct {
		c        cache
		wantHits int64
	}{
		{newLRU(22, 10), 4},            // the scan flushes 0 and 1
		{newClock(22, 10), 6},          // 0 and 1 are passed over while their counts last
		{newS3FIFO(22, 10, 0.1, 1), 6}, // 0 and 1 move to main; the scan cycles through small
		{newSLRU(22, 10, 0.8), 6},      // 0 and 1 are protected
	} {
		if got := simulate(tr, tc.c).hits; got != tc.wantHits {
			t.Errorf("%T: %d hits, want %d", tc.c, got, tc.wantHits)
		}
	}
}
