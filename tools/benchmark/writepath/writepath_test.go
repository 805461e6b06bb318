package writepath

import (
	"context"
	"fmt"
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
// the tables and the goals. The ClickHouse row (chdb, skipped in -short
// mode) inserted the table in every column, each write to S3 reaching it,
// and every ClickHouse process read the same rows back.
func TestQuickRun(t *testing.T) {
	for _, k := range []string{"BENCH_PROFILE_DIR", "BENCH_B5_ROWS", "BENCH_B5_SECONDS", "BENCH_B5_ROUNDS", "BENCH_B5_NODES",
		"BENCH_B5_CH_ROWS", "BENCH_B5_CH_BATCHES"} {
		t.Setenv(k, "")
	}
	if testing.Short() {
		t.Setenv("BENCH_B5_ROWS", "small1,small16,big,getafter") // no chdb
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	env := benchtest.Env(t, "b5")
	rep, err := measure(ctx, env)
	if err != nil {
		t.Fatal(err)
	}
	sec := rep.section()
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
	if !testing.Short() {
		checkClickHouse(t, rep, sec.Markdown)
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

// checkClickHouse checks the ClickHouse row of a quick run.
func checkClickHouse(t *testing.T, rep *report, section string) {
	t.Helper()
	ch := rep.cfg.ch
	if ch == nil {
		t.Fatal("the quick run has no ClickHouse row")
	}
	if want := fmt.Sprintf("%d rows, hash sum ", ch.rows); !strings.HasPrefix(rep.chAnswer, want) {
		t.Errorf("ClickHouse read %q, want %q...", rep.chAnswer, want)
	}
	for _, col := range rep.columns {
		s := rep.ch[col.id]
		name := "clickhouse/" + col.id
		if s == nil || len(s.rounds) != rep.cfg.rounds || s.inserts.Count() != ch.batches*rep.cfg.rounds {
			t.Errorf("%s: not every INSERT measured: %+v", name, s)
			continue
		}
		writes := s.events["S3PutObject"] + s.events["S3CreateMultipartUpload"] + s.events["S3UploadPart"] + s.events["S3CompleteMultipartUpload"]
		if writes < int64(ch.batches) || s.events["InsertedRows"] != int64(ch.rows*rep.cfg.rounds) || s.cpuCH <= 0 {
			t.Errorf("%s: ClickHouse counted %d S3 writes and %d rows inserted, %v CPU, for %d INSERTs of %d rows", name, writes,
				s.events["InsertedRows"], s.cpuCH, ch.batches, ch.rows)
		}
		switch {
		case col.replicas > 0:
			// Held: answered before S3 has them; S3 has every write by
			// the time it caught up.
			// (Overwrites of one key may reach S3 as one write.)
			if len(s.catchUp) != rep.cfg.rounds || s.catchUp[0] <= 0 || s.s3Caught.Others == 0 {
				t.Errorf("%s: caught up after %v with %d writes in S3, for ClickHouse's %d", name, s.catchUp, s.s3Caught.Others, writes)
			}
		default:
			// Written through: every write reached S3 during the INSERT,
			// and none is faster than the link.
			if s.s3.Others < writes {
				t.Errorf("%s: %d writes reached S3 during the INSERTs, ClickHouse made %d", name, s.s3.Others, writes)
			}
			if s.inserts.Quantile(0) < rep.cfg.link.Latency {
				t.Errorf("%s: an INSERT took %v, less than the link's %v", name, s.inserts.Quantile(0), rep.cfg.link.Latency)
			}
		}
		if col.gateway {
			var served uint64
			for _, op := range []string{"PutObject", "CreateMultipartUpload", "UploadPart", "CompleteMultipartUpload"} {
				served += s.ops[op].n
			}
			if served != uint64(writes) {
				t.Errorf("%s: the gateway served %d writes, ClickHouse made %d", name, served, writes)
			}
		}
	}
	// The floor: every INSERT measured, none of them asking S3.
	if s := rep.ch[chLocal.id]; s == nil || s.inserts.Count() != ch.batches*rep.cfg.rounds ||
		s.events["InsertedRows"] != int64(ch.rows*rep.cfg.rounds) || s.events["S3PutObject"]+s.events["S3HeadObject"] != 0 {
		t.Errorf("clickhouse/local: the INSERTs on ClickHouse's local disk were not all measured, or asked S3: %+v", s)
	}
	for _, want := range []string{"### ClickHouse INSERT of B2's table in batches", "ClickHouse insert at least 5x faster than S3 directly: **",
		"On ClickHouse's own local disk, with no S3 at all,",
		rep.chAnswer} {
		if !strings.Contains(section, want) {
			t.Errorf("the section lacks %q", want)
		}
	}
}
