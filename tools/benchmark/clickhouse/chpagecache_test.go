package clickhouse

import (
	"slices"
	"strings"
	"testing"
)

func TestRow7OnlyWhereTheEngineLooksUpItsPageCache(t *testing.T) {
	r := &results{Runs: fakeRuns([]float64{1}, []float64{1}), Load: &loadInfo{Chdb: "9.9.9", Version: "99.1"}}
	r.Cells, r.Spread = medianRuns(r.Runs)
	all := []int{0, 1, 2, 3, 4, 5, 6}
	for _, tc := range []struct {
		name  string
		probe chPageProbe
		shown []int
		says  string
	}{
		{"no lookups", chPageProbe{Bytes: 1 << 30, Cold: cell{CHBytes: 5 << 20}, Hot: cell{CHBytes: 5 << 20}}, all[:6],
			"**This engine (chdb 9.9.9, ClickHouse 99.1) takes the setting but has no userspace page cache**"},
		{"misses only", chPageProbe{Bytes: 1 << 30, Cold: cell{CHPageMisses: 3}}, all, "Row 7 measures it"},
		{"hits", chPageProbe{Bytes: 1 << 30, Hot: cell{CHPageHits: 3}}, all, "Row 7 measures it"},
	} {
		r.CHPage = tc.probe
		if got := r.shownRows(); !slices.Equal(got, tc.shown) {
			t.Errorf("%s: rows shown %v, want %v", tc.name, got, tc.shown)
		}
		if got := chPageReport(r); !strings.Contains(got, tc.says) {
			t.Errorf("%s: report lacks %q:\n%s", tc.name, tc.says, got)
		}
	}
}

func TestRow7RatiosAreWithinEachRun(t *testing.T) {
	// Every cell of run k takes secs[k]; row 7's are changed so that, run
	// by run, filling ClickHouse's page cache costs 1.5x, 2x, 1x over row 5
	// cold and reading from it gains 4x, 2x, 3x over row 5 hot.
	secs := []float64{2, 1, 4}
	runs := fakeRuns(secs, secs)
	fill, gain := []float64{1.5, 2, 1}, []float64{4, 2, 3}
	full := indexOf("full")
	for k := range runs {
		runs[k][chPageRow][full][0].Seconds = secs[k] * fill[k]
		runs[k][chPageRow][full][1].Seconds = secs[k] / gain[k]
	}
	r := &results{Runs: runs}
	f, g, vsFS := r.chPageRatios(full)
	if !slices.Equal(f.Each, fill) || f.Median != 1.5 {
		t.Errorf("fill: %+v, want %v, median 1.5", f, fill)
	}
	if !slices.Equal(g.Each, gain) || g.Median != 3 {
		t.Errorf("gain: %+v, want %v, median 3", g, gain)
	}
	// Row 7 hot / row 2 hot: row 2 hot takes secs[k], like row 5 hot.
	for k, x := range vsFS.Each {
		if want := 1 / gain[k]; x != want {
			t.Errorf("run %d: row 7 hot / row 2 hot = %v, want %v", k+1, x, want)
		}
	}
}
