package benchkit

import (
	"os/exec"
	"syscall"
)

// SetPdeathsig makes the kernel kill a child (cachenode, nginx, chdb) if
// the bench dies without stopping it.
func SetPdeathsig(cmd *exec.Cmd) {
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
}
