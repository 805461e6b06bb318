// Package sharedapi gives a package's plain Go tests one real
// kube-apiserver and etcd (controller-runtime's envtest, with the binaries
// envtestassets finds), started by the first test that asks for it and
// stopped when the package's tests end: its TestMain is
//
//	func TestMain(m *testing.M) { os.Exit(server.Main(m)) }
//
// The ginkgo suites under e2e/ start theirs with kubetest instead.
package sharedapi

import (
	"fmt"
	"os"
	"path/filepath"
	"sync"
	"testing"

	"sigs.k8s.io/controller-runtime/pkg/envtest"

	"github.com/distcache/distcache/internal/testutil/envtestassets"
	"github.com/distcache/distcache/internal/testutil/repo"
)

// Server is a package's shared API server, not started until a test asks.
type Server struct {
	crdDirs []string

	once sync.Once
	env  *envtest.Environment // nil until it started
	err  error
}

// New is a server that installs the CRDs of crdDirs (relative to the
// repository root, each must exist) when it starts.
func New(crdDirs ...string) *Server { return &Server{crdDirs: crdDirs} }

// Env starts the server the first time it is called and returns it, its
// Config the admin's; the test fails when it cannot start (and every later
// one with the same error).
func (s *Server) Env(t testing.TB) *envtest.Environment {
	t.Helper()
	s.once.Do(func() { s.env, s.err = start(s.crdDirs) })
	if s.err != nil {
		t.Fatalf("starting envtest: %v", s.err)
	}
	return s.env
}

func start(crdDirs []string) (*envtest.Environment, error) {
	assets, err := envtestassets.Path()
	if err != nil {
		return nil, err
	}
	env := &envtest.Environment{BinaryAssetsDirectory: assets}
	if len(crdDirs) > 0 {
		root, err := repo.Root()
		if err != nil {
			return nil, err
		}
		for _, dir := range crdDirs {
			env.CRDDirectoryPaths = append(env.CRDDirectoryPaths, filepath.Join(root, dir))
		}
		env.ErrorIfCRDPathMissing = true
	}
	if _, err := env.Start(); err != nil {
		return nil, err
	}
	return env, nil
}

// Main runs the package's tests, then stops the server if a test started
// it, and returns the tests' exit code.
func (s *Server) Main(m *testing.M) int {
	code := m.Run()
	if s.env != nil {
		if err := s.env.Stop(); err != nil {
			fmt.Fprintln(os.Stderr, "stopping envtest:", err)
		}
	}
	return code
}
