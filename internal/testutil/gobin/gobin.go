// Package gobin gives tests the binaries of this module, built from the
// tree under test by internal/gobuild: once per test process, and shared
// by the test processes of one state of the tree (go test ./... runs a
// process per package), so the e2e suites that run `cachenode` as a
// process do not each build it.
package gobin

import (
	"context"
	"sync"
	"testing"

	"github.com/distcache/distcache/internal/gobuild"
)

var (
	mu    sync.Mutex
	built = map[[2]string]string{} // package, ldflags: binary
)

// Cachenode returns the path of the cachenode binary of this tree.
func Cachenode(t testing.TB) string {
	t.Helper()
	return Build(t, gobuild.Cachenode, "")
}

// Build returns the path of the binary of the program pkg (an import
// path) linked with ldflags, failing the test when it does not build.
func Build(t testing.TB, pkg, ldflags string) string {
	t.Helper()
	bin, err := Path(pkg, ldflags)
	if err != nil {
		t.Fatalf("building %s: %v", pkg, err)
	}
	return bin
}

// Path is Build for code without a testing.TB (a TestMain, a ginkgo
// suite).
func Path(pkg, ldflags string) (string, error) {
	mu.Lock()
	defer mu.Unlock()
	if bin, ok := built[[2]string{pkg, ldflags}]; ok {
		return bin, nil
	}
	bin, err := gobuild.Build(context.Background(), "", pkg, ldflags)
	if err != nil {
		return "", err
	}
	built[[2]string{pkg, ldflags}] = bin
	return bin, nil
}
