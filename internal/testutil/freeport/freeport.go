// Package freeport is internal/freeport for tests: Addr fails the test
// instead of returning an error. Both hand out from the same set, so an
// address is never given twice in one process.
package freeport

import (
	"testing"

	"github.com/distcache/distcache/internal/freeport"
)

// Addr returns a loopback address nothing listens on, never one it (or
// internal/freeport.Next) returned before in this process.
func Addr(t testing.TB) string {
	t.Helper()
	addr, err := freeport.Next()
	if err != nil {
		t.Fatal(err)
	}
	return addr
}
