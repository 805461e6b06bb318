//go:build !linux

package gateway

import "syscall"

const unsentLimitSupported = false

func setUnsentLimit(syscall.Conn, int) error { return nil }
