package hitpath

import (
	"bytes"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"
)

// setPdeathsig makes the kernel kill the child if this process dies
// without stopping it.
func setPdeathsig(cmd *exec.Cmd) {
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
}

// clockTick is USER_HZ, the unit of /proc/<pid>/stat times (100 on every
// Linux architecture Go supports).
const clockTick = 10 * time.Millisecond

// procCPU is the user+system CPU time of process pid (its own threads, not
// its children), from /proc/<pid>/stat; 0 once the process is gone.
func procCPU(pid int) time.Duration {
	f := statFields(pid)
	if len(f) < 15 {
		return 0
	}
	// Fields after the command: state is f[2]; utime and stime are fields
	// 14 and 15 of the man page, f[13] and f[14] here.
	u, _ := strconv.ParseInt(f[13], 10, 64)
	s, _ := strconv.ParseInt(f[14], 10, 64)
	return time.Duration(u+s) * clockTick
}

// statFields splits /proc/<pid>/stat, keeping the command (which may hold
// spaces) as one field.
func statFields(pid int) []string {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return nil
	}
	i, j := bytes.IndexByte(b, '('), bytes.LastIndexByte(b, ')')
	if i < 0 || j < i {
		return nil
	}
	return append([]string{string(b[:i-1]), string(b[i+1 : j])}, strings.Fields(string(b[j+1:]))...)
}

// childrenOf lists the processes whose parent is pid.
func childrenOf(pid int) []int {
	dirs, _ := filepath.Glob("/proc/[0-9]*")
	var out []int
	for _, d := range dirs {
		child, err := strconv.Atoi(filepath.Base(d))
		if err != nil {
			continue
		}
		if f := statFields(child); len(f) > 3 && f[3] == strconv.Itoa(pid) {
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
