// Package freeport hands the processes and servers that programs and tests
// start loopback addresses nothing listens on. It is plain code with
// errors, so non-test programs (internal/minioproc, the benchmarks) use it
// without linking a test harness; tests use internal/testutil/freeport,
// a thin wrapper that fails the test instead.
package freeport

import (
	"net"
	"sync"
)

var (
	mu     sync.Mutex
	issued = map[string]bool{} // handed out by Next in this process
)

// Next returns a loopback address nothing listens on, never one it
// returned before in this process: the kernel may hand a just-closed port
// out again, and a process given the same port for two flags fails to
// start.
func Next() (string, error) {
	mu.Lock()
	defer mu.Unlock()
	for {
		l, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			return "", err
		}
		addr := l.Addr().String()
		l.Close()
		if !issued[addr] {
			issued[addr] = true
			return addr, nil
		}
	}
}

// Several returns n addresses from Next, for a process that listens on
// several ports.
func Several(n int) ([]string, error) {
	addrs := make([]string, n)
	for i := range addrs {
		var err error
		if addrs[i], err = Next(); err != nil {
			return nil, err
		}
	}
	return addrs, nil
}
