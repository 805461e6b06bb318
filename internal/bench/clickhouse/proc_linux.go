package clickhouse

import (
	"os/exec"
	"syscall"
)

// setProcAttrs makes the kernel kill a child (cachenode, chdb) if the bench
// dies without cleaning up.
func setProcAttrs(cmd *exec.Cmd) {
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
}
