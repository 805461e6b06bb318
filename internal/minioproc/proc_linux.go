package minioproc

import (
	"os/exec"
	"syscall"
)

// setProcAttrs makes the kernel kill MinIO if its parent dies without
// cleaning up (a panic, a test timeout, go test being killed).
func setProcAttrs(cmd *exec.Cmd) {
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
}
