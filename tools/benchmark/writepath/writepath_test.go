package writepath

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/distcache/distcache/internal/testutil/benchtest"
)

// TestQuickRun runs the part in smoke mode: real MinIO behind the link,
// three nodes and a gateway. It checks the harness, not speed nor the
// cache's behaviour (the section judges that): every cell made PUTs that
// S3 acknowledged and holds (each cell compares every object with what
// was PUT), the PUTs through the gateway reached S3 and were timed at
// each hop, the GETs straight to S3 reached it, and the section carries
// the tables and the goals.
func TestQuickRun(t *testing.T) {
	for _, k := range []string{"BENCH_PROFILE_DIR", "BENCH_B5_ROWS", "BENCH_B5_SECONDS", "BENCH_B5_ROUNDS", "BENCH_B5_NODES"} {
		t.Setenv(k, "")
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	env := benchtest.Env(t, "b5")
	rep, sec, err := run(ctx, env)
	if err != nil {
		t.Fatal(err)
	}
	for _, row := range rep.cfg.rows {
		for _, col := range rep.columns {
			s := rep.cell(row, col.id)
			name := row.id + "/" + col.id
			switch {
			case s == nil || s.ops == 0:
				t.Errorf("%s: nothing measured", name)
				continue
			case s.lat.Count() != int(s.ops) || s.lat.Quantile(0.5) <= 0 || s.sum <= 0:
				t.Errorf("%s: %d latencies for %d operations", name, s.lat.Count(), s.ops)
			case col.replicas > 0:
				// Held: answered before S3 has it (checked in MinIO after
				// the cell, byte for byte), so nothing below applies.
				if s.catchUp <= 0 {
					t.Errorf("%s: no time measured for S3 to catch up", name)
				}
				continue
			case s.s3.Others < s.ops:
				t.Errorf("%s: %d PUT requests reached S3 for %d PUTs", name, s.s3.Others, s.ops)
			case s.cpu <= 0:
				t.Errorf("%s: no CPU time counted", name)
			}
			// The link delays every request: nothing written to S3 is faster.
			if !row.getAfter && s.lat.Quantile(0) < rep.cfg.link.Latency {
				t.Errorf("%s: a PUT took %v, less than the link's %v", name, s.lat.Quantile(0), rep.cfg.link.Latency)
			}
			if h := s.hops; col.gateway && !row.getAfter && (h.gateway.n < uint64(s.ops) || h.node.n < h.gateway.n || h.upload.n < h.node.n) {
				t.Errorf("%s: %d PUTs, and the gateway, the nodes and their S3 uploads observed %d, %d and %d", name, s.ops,
					h.gateway.n, h.node.n, h.upload.n)
			}
			if row.getAfter && !col.gateway && s.s3.GETs < s.ops {
				t.Errorf("%s: %d S3 GETs for %d GETs straight to S3", name, s.s3.GETs, s.ops)
			}
		}
	}
	if sec.Title != "B5 — write-through" {
		t.Errorf("title %q", sec.Title)
	}
	for _, want := range []string{"| write | S3 directly | through the gateway | gateway / S3 |", "GET right after a 10 KiB PUT",
		"upload to S3", "**Goals**", "make bench BENCH_PARTS=b5",
		"### Write-back", "write-back, 2 replicas", "(issue #27, write-back)"} {
		if !strings.Contains(sec.Markdown, want) {
			t.Errorf("the section lacks %q", want)
		}
	}
	if t.Failed() || testing.Verbose() {
		t.Logf("section:\n%s", sec.Markdown)
	}
}
