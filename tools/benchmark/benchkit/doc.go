package benchkit

import (
	"fmt"
	"os"
	"regexp"
	"runtime"
	"strings"
	"time"
)

// Machine describes where a run happened, for the reader of the numbers.
func Machine() string {
	model, mem, osName := "unknown CPU", "unknown", runtime.GOOS
	if b, err := os.ReadFile("/proc/cpuinfo"); err == nil {
		if m := regexp.MustCompile(`(?m)^model name\s*:\s*(.+)$`).FindSubmatch(b); m != nil {
			model = strings.TrimSpace(string(m[1]))
		}
	}
	if b, err := os.ReadFile("/proc/meminfo"); err == nil {
		var kb int64
		if m := regexp.MustCompile(`(?m)^MemTotal:\s*(\d+) kB`).FindSubmatch(b); m != nil {
			fmt.Sscan(string(m[1]), &kb)
			mem = fmt.Sprintf("%.1f GiB", float64(kb)/(1<<20))
		}
	}
	if b, err := os.ReadFile("/etc/os-release"); err == nil {
		if m := regexp.MustCompile(`(?m)^PRETTY_NAME="?([^"\n]+)"?$`).FindSubmatch(b); m != nil {
			osName = string(m[1])
		}
	}
	kernel := "unknown"
	if b, err := os.ReadFile("/proc/sys/kernel/osrelease"); err == nil {
		kernel = strings.TrimSpace(string(b))
	}
	return fmt.Sprintf("%d × %s, %s RAM, %s, Linux %s, %s", runtime.NumCPU(), model, mem, osName, kernel, runtime.Version())
}

// LoadAverage is the 1-minute load average, or "unknown".
func LoadAverage() string {
	b, err := os.ReadFile("/proc/loadavg")
	if err != nil {
		return "unknown"
	}
	if f := strings.Fields(string(b)); len(f) > 0 {
		return f[0]
	}
	return "unknown"
}

// RunInfo is the line under a section's title: when, where and how loaded.
func RunInfo(start time.Time, took time.Duration, loadBefore, loadAfter string) string {
	return fmt.Sprintf("_Run %s, took %s; machine: %s; load average %s before, %s after._\n",
		start.UTC().Format("2006-01-02 15:04 MST"), took.Round(time.Second), Machine(), loadBefore, loadAfter)
}

// Splice puts body between the markers of part id in doc, appending the part
// at the end when doc does not have it yet. Other parts are left alone, so a
// run of one part updates its chapter only.
func Splice(doc, id, body string) string {
	begin, end := "<!-- bench:"+id+" -->", "<!-- /bench:"+id+" -->"
	block := begin + "\n" + strings.TrimRight(body, "\n") + "\n" + end
	i := strings.Index(doc, begin)
	j := strings.Index(doc, end)
	if i < 0 || j < i {
		return strings.TrimRight(doc, "\n") + "\n\n" + block + "\n"
	}
	return doc[:i] + block + doc[j+len(end):]
}
