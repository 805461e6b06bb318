package benchkit

import (
	"bytes"
	"os"
	"strconv"
	"strings"
	"time"
)

// clockTick is USER_HZ, the unit of /proc/<pid>/stat times (100 on every
// Linux architecture Go supports).
const clockTick = 10 * time.Millisecond

// PidCPU is the user+system CPU time of process pid (its own threads, not
// its children), from /proc/<pid>/stat; 0 once the process is gone.
func PidCPU(pid int) time.Duration {
	f := StatFields(pid)
	if len(f) < 15 {
		return 0
	}
	// Fields after the command: state is f[2]; utime and stime are fields
	// 14 and 15 of the man page, f[13] and f[14] here.
	u, _ := strconv.ParseInt(f[13], 10, 64)
	s, _ := strconv.ParseInt(f[14], 10, 64)
	return time.Duration(u+s) * clockTick
}

// StatFields splits /proc/<pid>/stat, keeping the command (which may hold
// spaces) as one field; nil once the process is gone.
func StatFields(pid int) []string {
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
