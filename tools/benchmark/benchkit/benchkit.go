// Package benchkit is what the parts of `make bench` share: the environment a
// part runs in, the report section it returns, markdown tables, latency
// quantiles, process CPU time and PNG plots.
package benchkit

import (
	"fmt"
	"log"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"
)

// Env is where a part runs.
type Env struct {
	Bin     string      // absolute path of the repository's bin/
	Root    string      // the repository (a part that runs cachenode builds it from here)
	WorkDir string      // scratch directory for this part, empty at start, removed afterwards
	ImgDir  string      // directory for PNGs, referenced from markdown as img/<file>.png
	Quick   bool        // smoke mode for `make test`: tiny sizes, same code paths
	Log     *log.Logger // progress lines
}

// Logf logs a progress line when the part has a logger.
func (e Env) Logf(format string, args ...any) {
	if e.Log != nil {
		e.Log.Printf(format, args...)
	}
}

// Section is one part's chapter of docs/benchmarks.md.
type Section struct {
	Title    string // "B1 — hit path"
	Markdown string // body, without the title
}

// Table renders as a GitHub markdown table.
type Table struct {
	Header []string
	Rows   [][]string
}

// Markdown returns the table with a trailing newline.
func (t Table) Markdown() string {
	var b strings.Builder
	row := func(cells []string) {
		b.WriteString("|")
		for _, c := range cells {
			b.WriteString(" " + strings.ReplaceAll(c, "|", `\|`) + " |")
		}
		b.WriteString("\n")
	}
	row(t.Header)
	b.WriteString("|" + strings.Repeat("---|", len(t.Header)) + "\n")
	for _, r := range t.Rows {
		row(r)
	}
	return b.String()
}

// Ratio formats a/b as "1.23x"; "n/a" when b is zero.
func Ratio(a, b float64) string {
	if b == 0 {
		return "n/a"
	}
	return fmt.Sprintf("%.2fx", a/b)
}

// Percent formats a/b as "83%"; "n/a" when b is zero.
func Percent(a, b float64) string {
	if b == 0 {
		return "n/a"
	}
	return fmt.Sprintf("%.0f%%", 100*a/b)
}

// Size formats a size in bytes as "4 MiB", "64 KiB" or "1000 B": in the
// largest unit that divides it.
func Size(n int64) string {
	switch {
	case n >= 1<<20 && n%(1<<20) == 0:
		return strconv.FormatInt(n>>20, 10) + " MiB"
	case n >= 1<<10 && n%(1<<10) == 0:
		return strconv.FormatInt(n>>10, 10) + " KiB"
	}
	return strconv.FormatInt(n, 10) + " B"
}

// Millis formats a duration as milliseconds with three decimals.
func Millis(d time.Duration) string {
	return fmt.Sprintf("%.3f ms", float64(d.Nanoseconds())/1e6)
}

// Latencies records durations from many goroutines and answers quantiles.
type Latencies struct {
	mu     sync.Mutex
	d      []time.Duration
	sorted bool
}

// Add records one duration.
func (l *Latencies) Add(d time.Duration) {
	l.mu.Lock()
	l.d = append(l.d, d)
	l.sorted = false
	l.mu.Unlock()
}

// Merge adds every duration of o.
func (l *Latencies) Merge(o *Latencies) {
	o.mu.Lock()
	src := slices.Clone(o.d)
	o.mu.Unlock()
	l.mu.Lock()
	l.d = append(l.d, src...)
	l.sorted = false
	l.mu.Unlock()
}

// Count is the number of durations recorded.
func (l *Latencies) Count() int {
	l.mu.Lock()
	defer l.mu.Unlock()
	return len(l.d)
}

// Quantile returns the q-quantile (0 <= q <= 1, nearest rank); 0 when empty.
func (l *Latencies) Quantile(q float64) time.Duration {
	l.mu.Lock()
	defer l.mu.Unlock()
	if len(l.d) == 0 {
		return 0
	}
	if !l.sorted {
		slices.Sort(l.d)
		l.sorted = true
	}
	i := int(q*float64(len(l.d))+0.5) - 1
	i = max(0, min(i, len(l.d)-1))
	return l.d[i]
}

// ProcessCPU is the user+system CPU time this process has used so far.
func ProcessCPU() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}
