package miniotest

import (
	"os/exec"
	"syscall"
)

// setProcAttrs makes the kernel kill MinIO if the test binary dies without
// running its cleanups (a panic, a timeout, go test being killed).
func setProcAttrs(cmd *exec.Cmd) {
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
}
