package clickhouse

import (
	"cmp"
	"fmt"
	"os"
	"slices"
	"strconv"
)

// defaultRuns is how many times a full run measures every cell. Times on a
// shared 2-core VM move by a third from one minute to the next, so one run
// decides a goal by luck; the report shows each cell's median run and the
// spread, and each goal ratio run by run.
const defaultRuns = 3

// runsWanted is BENCH_B2_RUNS, else defaultRuns; one in quick mode.
func runsWanted(quick bool) (int, error) {
	v := os.Getenv("BENCH_B2_RUNS")
	if v == "" {
		if quick {
			return 1, nil
		}
		return defaultRuns, nil
	}
	n, err := strconv.Atoi(v)
	if err != nil || n < 1 {
		return 0, fmt.Errorf("BENCH_B2_RUNS=%q: want a whole number of runs, 1 or more", v)
	}
	return n, nil
}

// spread is the fastest and slowest of a cell's runs.
type spread struct{ Min, Max float64 }

// medianRuns picks, for every cell, the run whose time is the median (the
// lower middle one for an even count), so that every counter shown beside
// that time comes from the same run; and the spread of its times.
func medianRuns(runs [][][][2]cell) (cells [][][2]cell, spreads [][][2]spread) {
	if len(runs) == 0 {
		return nil, nil
	}
	cells = make([][][2]cell, len(runs[0]))
	spreads = make([][][2]spread, len(runs[0]))
	for ri := range runs[0] {
		cells[ri] = make([][2]cell, len(runs[0][ri]))
		spreads[ri] = make([][2]spread, len(runs[0][ri]))
		for qi := range runs[0][ri] {
			for h := range 2 {
				of := make([]cell, len(runs))
				for k := range runs {
					of[k] = runs[k][ri][qi][h]
				}
				slices.SortStableFunc(of, func(a, b cell) int { return cmp.Compare(a.Seconds, b.Seconds) })
				cells[ri][qi][h] = of[(len(of)-1)/2]
				spreads[ri][qi][h] = spread{of[0].Seconds, of[len(of)-1].Seconds}
			}
		}
	}
	return cells, spreads
}

// ratioRuns is one goal ratio computed within each run (both of its cells
// measured minutes apart, not runs apart), and their median (the lower
// middle one for an even count).
type ratioRuns struct {
	Each   []float64 // in run order
	Median float64
}

func newRatioRuns(runs [][][][2]cell, ratio func(run [][][2]cell) float64) ratioRuns {
	var r ratioRuns
	for _, run := range runs {
		r.Each = append(r.Each, ratio(run))
	}
	if len(r.Each) > 0 {
		s := slices.Sorted(slices.Values(r.Each))
		r.Median = s[(len(s)-1)/2]
	}
	return r
}

// atLeast counts the runs whose ratio is at least goal.
func (r ratioRuns) atLeast(goal float64) int {
	n := 0
	for _, x := range r.Each {
		if x >= goal {
			n++
		}
	}
	return n
}

// atMost counts the runs whose ratio is positive and at most goal.
func (r ratioRuns) atMost(goal float64) int {
	n := 0
	for _, x := range r.Each {
		if x > 0 && x <= goal {
			n++
		}
	}
	return n
}

// String is "2.81x (runs: 2.40x, 2.81x, 3.02x)", or the ratio alone for
// one run.
func (r ratioRuns) String() string {
	s := fmt.Sprintf("%.2fx", r.Median)
	if len(r.Each) < 2 {
		return s
	}
	s += " (runs:"
	for i, x := range r.Each {
		if i > 0 {
			s += ","
		}
		s += fmt.Sprintf(" %.2fx", x)
	}
	return s + ")"
}
