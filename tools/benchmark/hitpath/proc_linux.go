package hitpath

import (
	"bytes"
	"os"
	"path/filepath"
	"strconv"
	"time"

	"github.com/distcache/distcache/tools/benchmark/benchkit"
)

// procCPU is the user+system CPU time of process pid (benchkit.PidCPU).
func procCPU(pid int) time.Duration { return benchkit.PidCPU(pid) }

// childrenOf lists the processes whose parent is pid.
func childrenOf(pid int) []int {
	dirs, _ := filepath.Glob("/proc/[0-9]*")
	var out []int
	for _, d := range dirs {
		child, err := strconv.Atoi(filepath.Base(d))
		if err != nil {
			continue
		}
		if f := benchkit.StatFields(child); len(f) > 3 && f[3] == strconv.Itoa(pid) {
			out = append(out, child)
		}
	}
	return out
}

// childWith finds a child of this process whose command line contains s.
func childWith(s string) int {
	for _, pid := range childrenOf(os.Getpid()) {
		b, _ := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/cmdline")
		if bytes.Contains(b, []byte(s)) {
			return pid
		}
	}
	return 0
}
