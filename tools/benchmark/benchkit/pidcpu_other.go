//go:build !linux

package benchkit

import "time"

// PidCPU is 0 where there is no /proc: CPU figures of other processes are
// left out.
func PidCPU(int) time.Duration { return 0 }

// StatFields is nil where there is no /proc.
func StatFields(int) []string { return nil }
