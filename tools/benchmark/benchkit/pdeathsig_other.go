//go:build !linux

package benchkit

import "os/exec"

// SetPdeathsig does nothing where the kernel has no parent-death signal.
func SetPdeathsig(*exec.Cmd) {}
