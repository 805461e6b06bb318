// Package freeport hands tests and benchmarks loopback addresses to give
// the processes and servers they start.
package freeport

import (
	"net"
	"sync"
	"testing"
)

var (
	mu     sync.Mutex
	issued = map[string]bool{} // handed out by Addr in this process
)

// Addr returns a loopback address nothing listens on, never one it (or
// Next) returned before in this process: the kernel may hand a just-closed
// port out again, and a process given the same port for two flags fails
// to start.
func Addr(t testing.TB) string {
	t.Helper()
	addr, err := Next()
	if err != nil {
		t.Fatal(err)
	}
	return addr
}

// Next is Addr for code without a testing.TB.
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
