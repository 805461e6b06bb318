package clickhouse

import (
	"slices"
	"strings"
	"testing"
)

// fakeRuns builds runs whose cells' times are secs[run] for every cell
// but row 1 full cold, which is s3[run]; each cell remembers its run in
// CHGets.
func fakeRuns(secs, s3 []float64) [][][][2]cell {
	var runs [][][][2]cell
	for k := range secs {
		run := make([][][2]cell, len(rows))
		for ri := range run {
			run[ri] = make([][2]cell, len(queries))
			for qi := range run[ri] {
				for h := range 2 {
					run[ri][qi][h] = cell{Seconds: secs[k], CHGets: int64(k)}
				}
			}
		}
		run[0][indexOf("full")][0].Seconds = s3[k]
		runs = append(runs, run)
	}
	return runs
}

func TestMedianRunsKeepsOneRunPerCell(t *testing.T) {
	runs := fakeRuns([]float64{3, 1, 2}, []float64{9, 3, 5})
	cells, spreads := medianRuns(runs)
	for ri := range rows {
		for qi := range queries {
			for h := range 2 {
				c, sp := cells[ri][qi][h], spreads[ri][qi][h]
				want := cell{Seconds: 2, CHGets: 2} // run 3 (index 2) has the median time
				if ri == 0 && qi == indexOf("full") && h == 0 {
					want = cell{Seconds: 5, CHGets: 2}
					if sp != (spread{3, 9}) {
						t.Errorf("row 1 full cold spread %+v", sp)
					}
				} else if sp != (spread{1, 3}) {
					t.Errorf("row %d %s %d spread %+v", ri+1, queries[qi], h, sp)
				}
				if c.Seconds != want.Seconds || c.CHGets != want.CHGets {
					t.Errorf("row %d %s %d: median %+v, want %+v", ri+1, queries[qi], h, c, want)
				}
			}
		}
	}
	// An even count takes the lower middle run, still a measured one.
	cells, _ = medianRuns(fakeRuns([]float64{4, 1, 3, 2}, []float64{1, 1, 1, 1}))
	if c := cells[3][0][0]; c.Seconds != 2 || c.CHGets != 3 {
		t.Errorf("median of 4 runs: %+v, want the run of 2 s", c)
	}
}

func TestGoalsAreRatiosWithinEachRun(t *testing.T) {
	// Run by run, row 1 cold / row 4 cold is 9/3 = 3, 3/1 = 3 and 5/2 =
	// 2.5: ratios of the medians (5/2) would understate the run-by-run
	// median (3).
	r := &results{Runs: fakeRuns([]float64{3, 1, 2}, []float64{9, 3, 5})}
	r.Cells, r.Spread = medianRuns(r.Runs)
	full, scat := r.goals()
	if full.Median != 3 || full.atLeast(goalFullSpeedup) != 2 {
		t.Errorf("full: %+v, want median 3, met in 2 runs", full)
	}
	if got := full.String(); got != "3.00x (runs: 3.00x, 3.00x, 2.50x)" {
		t.Errorf("full: %q", got)
	}
	// Row 4 cold / row 2 hot is 1 in every run.
	if scat.Median != 1 || scat.atMost(goalScatteredWithin) != 3 {
		t.Errorf("scattered: %+v", scat)
	}
	one := newRatioRuns(fakeRuns([]float64{2}, []float64{7}), func(c [][][2]cell) float64 {
		return ratio(c[0][indexOf("full")][0].Seconds, c[3][indexOf("full")][0].Seconds)
	})
	if one.String() != "3.50x" || strings.Contains(one.String(), "runs") {
		t.Errorf("one run: %q", one.String())
	}
}

func TestRunsWanted(t *testing.T) {
	for _, tc := range []struct {
		env   string
		quick bool
		want  int
		err   bool
	}{
		{"", false, defaultRuns, false},
		{"", true, 1, false},
		{"5", true, 5, false},
		{"0", false, 0, true},
		{"three", false, 0, true},
	} {
		t.Setenv("BENCH_B2_RUNS", tc.env)
		n, err := runsWanted(tc.quick)
		if n != tc.want || (err != nil) != tc.err {
			t.Errorf("BENCH_B2_RUNS=%q quick=%v: %d, %v", tc.env, tc.quick, n, err)
		}
		if err != nil && !strings.Contains(err.Error(), "BENCH_B2_RUNS") {
			t.Errorf("error does not name the variable: %v", err)
		}
	}
}

func TestSweepSizes(t *testing.T) {
	for _, tc := range []struct {
		env   string
		quick bool
		want  []int64
		err   bool
	}{
		{"", false, []int64{1 << 20, 2 << 20, 4 << 20, 8 << 20}, false},
		{"", true, []int64{256 << 10, 4 << 20}, false},
		{"none", false, nil, false},
		{" 2, 16 ", false, []int64{2 << 20, 16 << 20}, false},
		{"0", false, nil, true},
		{"4Mi", false, nil, true},
		{"128", false, nil, true},
	} {
		t.Setenv("BENCH_B2_CHUNK_SIZES", tc.env)
		got, err := sizesWanted(tc.quick)
		if !slices.Equal(got, tc.want) || (err != nil) != tc.err {
			t.Errorf("BENCH_B2_CHUNK_SIZES=%q quick=%v: %v, %v", tc.env, tc.quick, got, err)
		}
		if err != nil && !strings.Contains(err.Error(), "BENCH_B2_CHUNK_SIZES") {
			t.Errorf("error does not name the variable: %v", err)
		}
	}
}
