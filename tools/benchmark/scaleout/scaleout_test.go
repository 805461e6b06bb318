package scaleout

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/distcache/distcache/internal/testutil/benchtest"
)

// TestQuickRun runs the part in smoke mode: both growths really happen and
// the section reports what was measured.
func TestQuickRun(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	env := benchtest.Env(t, "b3")
	res, err := measure(ctx, env)
	if err != nil {
		t.Fatal(err)
	}
	for _, r := range []caseResult{res.handoff, res.cold} {
		name := map[bool]string{true: "with handoff", false: "without handoff"}[r.Handoff]
		if r.Failed != 0 || r.Wrong != 0 {
			t.Errorf("%s: %d reads failed, %d returned wrong bytes (first: %s)", name, r.Failed, r.Wrong, r.FirstError)
		}
		if r.Reads < 2*int64(res.cfg.objects) {
			t.Errorf("%s: %d reads, want at least the warming lap and the re-read", name, r.Reads)
		}
		if int64(r.Chunks) != int64(res.cfg.objects)*res.cfg.chunksPerObject() {
			t.Errorf("%s: %d chunks placed, want %d", name, r.Chunks, int64(res.cfg.objects)*res.cfg.chunksPerObject())
		}
		if r.Warm.GETs < int64(r.Chunks) {
			t.Errorf("%s: warming made %d S3 GETs for %d chunks", name, r.Warm.GETs, r.Chunks)
		}
		if r.Steady.GETs != 0 {
			t.Errorf("%s: the warm cache made %d S3 GETs before the change", name, r.Steady.GETs)
		}
		if r.Hits == 0 {
			t.Errorf("%s: no chunk hits on the nodes", name)
		}
		if r.Moved == 0 || r.Moved == r.Chunks || r.MovedToNew != r.Moved {
			t.Errorf("%s: %d of %d chunks changed owner, %d to the new node", name, r.Moved, r.Chunks, r.MovedToNew)
		}
		if len(r.Series) < 2 || r.BeforeMBps <= 0 || r.RereadMBps <= 0 {
			t.Errorf("%s: no throughput measured (%d buckets, %.1f MB/s before, %.1f during the re-read)", name, len(r.Series), r.BeforeMBps, r.RereadMBps)
		}
	}
	h, c := res.handoff, res.cold
	if h.Moved != c.Moved {
		t.Errorf("the same data placed differently: %d chunks moved with handoff, %d without", h.Moved, c.Moved)
	}
	// Without the previous ring the new node fetches every chunk it got from
	// S3; with it, from the previous owners.
	if c.Reread.GETs < int64(c.Moved) || c.Reread.GETBytes < c.Reread.GETs {
		t.Errorf("without handoff the re-read made %d S3 GETs (%d bytes) for %d moved chunks", c.Reread.GETs, c.Reread.GETBytes, c.Moved)
	}
	if c.HandedOff != 0 {
		t.Errorf("without the previous ring %v chunks were handed off", c.HandedOff)
	}
	if h.HandedOff == 0 || h.Reread.GETs >= c.Reread.GETs {
		t.Errorf("with handoff: %v chunks handed off, %d S3 GETs in the re-read (%d without)", h.HandedOff, h.Reread.GETs, c.Reread.GETs)
	}

	sec, err := render(res, env)
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"S3 GETs during the re-read", "img/" + throughputPNG, "img/" + s3GetsPNG, "Reading it", "BENCH_PARTS=b3"} {
		if !strings.Contains(sec.Markdown, want) {
			t.Errorf("section lacks %q", want)
		}
	}
	for _, png := range []string{throughputPNG, s3GetsPNG} {
		if fi, err := os.Stat(filepath.Join(env.ImgDir, png)); err != nil || fi.Size() == 0 {
			t.Errorf("plot %s: %v", png, err)
		}
	}
	t.Logf("%s\n%s", sec.Title, sec.Markdown)
}
