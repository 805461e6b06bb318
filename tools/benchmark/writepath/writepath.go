// Package writepath is part B5 of `make bench`, its write-through part:
// PUTs with the same aws-sdk-go-v2 client (path-style, SigV4) straight to
// S3 and through the gateway, side by side, and a GET right after each
// small PUT. S3 is MinIO behind B2's link (toxiproxy: 30 ms added to every
// request, tools/benchmark/clickhouse.Link); the cache nodes write through
// to it and read it through the same link, and the gateway, in its default
// configuration, is in front of them on plain HTTP loopback, as S3
// clients next to compute reach it.
//
// The nodes and the gateway run in this process (benchcache, which
// assembles them with internal/embed as the binary does), so a profile of
// a cell shows them; MinIO is a child process whose CPU is read from
// /proc. Rounds run the whole table again, the two columns of a
// row back to back, and every round's PUTs are pooled.
//
// Knobs for profiling work (each one set is named in the section):
//
//	BENCH_PROFILE_DIR=dir      CPU and block profiles of every gateway cell (of the clickhouse row: its INSERTs)
//	BENCH_B5_ROWS=small1,big   only these rows (small1, small16, big, getafter, clickhouse)
//	BENCH_B5_SECONDS=5         measuring time per cell and round
//	BENCH_B5_ROUNDS=2          rounds
//	BENCH_B5_NODES=1           cache nodes
//	BENCH_B5_CH_ROWS=100000    rows ClickHouse inserts (clickhouse row)
//	BENCH_B5_CH_BATCHES=10     in this many INSERTs
//	BENCH_B5_PUT_IF_ABSENT=0   the nodes' persisters HEAD every key first (--writeback-put-if-absent=false)
//
// The clickhouse row (clickhouse.go) is ClickHouse's engine (chdb, as B2
// runs it) inserting B2's table in batches on each column's endpoint.
package writepath

import (
	"context"
	"fmt"
	"os"
	"slices"
	"time"

	"github.com/distcache/distcache/tools/benchmark/benchkit"
	"github.com/distcache/distcache/tools/benchmark/clickhouse"
)

// config sizes a run.
type config struct {
	rows      []row
	ch        *chConfig // the ClickHouse row; nil: not measured
	nodes     int
	chunkSize int64
	cell      time.Duration // per cell and round
	settle    time.Duration // after a row's objects are removed
	rounds    int
	link      clickhouse.LinkConfig
	verifyAll bool // compare every object S3 holds after a cell with what was PUT (else one per client)
	// putIfAbsent is the nodes' --writeback-put-if-absent: on, as
	// `cachenode serve` has it for AWS S3, which the link stands in for.
	putIfAbsent bool
	profileDir  string
	knobs       benchkit.Knobs // the BENCH_* variables that changed the defaults
}

// row is one line of the table: a PUT size and a number of clients each
// PUTting one object at a time; getAfter rows GET every key right after
// its PUT and report the GETs.
type row struct {
	id       string
	size     int64
	clients  int
	getAfter bool
}

func (r row) name() string {
	if r.getAfter {
		return "GET right after a " + benchkit.Size(r.size) + " PUT"
	}
	return fmt.Sprintf("%s PUT, %d client%s", benchkit.Size(r.size), r.clients, plural(r.clients))
}

func defaultConfig(quick bool) config {
	if quick {
		// The big row still goes above S3's 5 MiB minimum part and the
		// chunk size, so multipart uploads and several chunks are exercised.
		return config{
			rows: []row{{id: "small1", size: 10 << 10, clients: 1}, {id: "small16", size: 10 << 10, clients: 4},
				{id: "big", size: 6<<20 + 123, clients: 2}, {id: "getafter", size: 10 << 10, clients: 1, getAfter: true}},
			ch:    &chConfig{rows: 3000, batches: 3},
			nodes: 3, chunkSize: 1 << 20, cell: 300 * time.Millisecond, rounds: 1,
			link: clickhouse.LinkConfig{Latency: 5 * time.Millisecond}, verifyAll: true, putIfAbsent: true,
		}
	}
	return config{
		rows: []row{{id: "small1", size: 10 << 10, clients: 1}, {id: "small16", size: 10 << 10, clients: 16},
			{id: "big", size: 16 << 20, clients: 4}, {id: "getafter", size: 10 << 10, clients: 1, getAfter: true}},
		ch:    &chConfig{rows: 200_000, batches: 20},
		nodes: 3, chunkSize: 4 << 20, cell: 8 * time.Second, settle: 3 * time.Second, rounds: 3, link: clickhouse.DefaultLink,
		putIfAbsent: true,
	}
}

// applyKnobs reads the BENCH_* variables.
func (c *config) applyKnobs() (err error) {
	if c.profileDir, err = c.knobs.ProfileDir(); err != nil {
		return err
	}
	if want := c.knobs.List("BENCH_B5_ROWS"); want != nil {
		c.rows = slices.DeleteFunc(c.rows, func(r row) bool { return !slices.Contains(want, r.id) })
		if !slices.Contains(want, chRowID) {
			c.ch = nil
		}
		if len(c.rows) == 0 && c.ch == nil {
			return fmt.Errorf("BENCH_B5_ROWS=%s selects no row (small1, small16, big, getafter, %s)", os.Getenv("BENCH_B5_ROWS"), chRowID)
		}
	}
	for name, set := range map[string]func(float64){
		"BENCH_B5_SECONDS": func(f float64) { c.cell = time.Duration(f * float64(time.Second)) },
		"BENCH_B5_ROUNDS":  func(f float64) { c.rounds = max(1, int(f)) },
		"BENCH_B5_NODES":   func(f float64) { c.nodes = max(1, int(f)) },
	} {
		if err := c.knobs.Positive(name, set); err != nil {
			return err
		}
	}
	if c.ch != nil {
		for name, set := range map[string]func(int){
			"BENCH_B5_CH_ROWS":    func(n int) { c.ch.rows = n },
			"BENCH_B5_CH_BATCHES": func(n int) { c.ch.batches = n },
		} {
			if err := c.knobs.PositiveInt(name, set); err != nil {
				return err
			}
		}
		if c.ch.batches > c.ch.rows {
			return fmt.Errorf("BENCH_B5_CH_BATCHES=%d is more than the %d rows inserted", c.ch.batches, c.ch.rows)
		}
	}
	switch v := os.Getenv("BENCH_B5_PUT_IF_ABSENT"); v {
	case "":
	case "0", "1":
		c.putIfAbsent = v == "1"
		c.knobs.Note("BENCH_B5_PUT_IF_ABSENT", v)
	default:
		return fmt.Errorf("BENCH_B5_PUT_IF_ABSENT=%q: 0 or 1", v)
	}
	slices.Sort(c.knobs)
	return nil
}

// Run is part B5 (write-through, write-back, ClickHouse's inserts).
func Run(ctx context.Context, env benchkit.Env) (benchkit.Section, error) {
	rep, err := measure(ctx, env)
	if err != nil {
		return benchkit.Section{}, err
	}
	return rep.section(), nil
}

// measure starts the world of the configuration (the defaults of
// env.Quick, changed by the BENCH_B5_* variables) and measures it.
func measure(ctx context.Context, env benchkit.Env) (*report, error) {
	cfg := defaultConfig(env.Quick)
	if err := cfg.applyKnobs(); err != nil {
		return nil, err
	}
	w, err := startWorld(ctx, env, cfg)
	if err != nil {
		return nil, err
	}
	defer w.close()
	return w.measureAll(ctx, env)
}

func plural(n int) string {
	if n == 1 {
		return ""
	}
	return "s"
}
