// Package kubetest starts what the operator's e2e suites run against: a
// real kube-apiserver and etcd (controller-runtime's envtest, with the
// binaries envtestassets finds), users with kubeconfig files, and the
// operator's controllers in a manager in the test process. The suites
// call it from their BeforeSuite instead of each wiring envtest and the
// manager.
package kubetest

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"time"

	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/util/retry"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/envtest"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"

	"github.com/distcache/distcache/controllers"
	"github.com/distcache/distcache/internal/testutil/envtestassets"
)

// Env is a running API server and a client of it.
type Env struct {
	*envtest.Environment
	Config *rest.Config
	Client client.Client
	// Assets is the directory of kube-apiserver, etcd and kubectl.
	Assets string
}

// Start starts kube-apiserver and etcd with the CRDs of crdDirs installed
// (each must exist), and a client of scheme. KUBEBUILDER_ASSETS is set to
// the binaries used: envtest reads it before BinaryAssetsDirectory and
// takes a set-but-empty value as "", so the environment must agree.
func Start(scheme *runtime.Scheme, crdDirs ...string) (*Env, error) {
	assets, err := envtestassets.Path()
	if err != nil {
		return nil, err
	}
	if err := os.Setenv(envtestassets.EnvVar, assets); err != nil {
		return nil, err
	}
	e := &Env{Assets: assets, Environment: &envtest.Environment{
		BinaryAssetsDirectory: assets, CRDDirectoryPaths: crdDirs, ErrorIfCRDPathMissing: true,
	}}
	if e.Config, err = e.Environment.Start(); err != nil {
		return nil, err
	}
	if e.Client, err = client.New(e.Config, client.Options{Scheme: scheme}); err != nil {
		return nil, errors.Join(err, e.Environment.Stop())
	}
	return e, nil
}

// Stop stops the API server and etcd; a nil Env is stopped already.
func (e *Env) Stop() error {
	if e == nil {
		return nil
	}
	return e.Environment.Stop()
}

// Kubeconfig adds a user authenticated by a client certificate (CN name,
// O groups; RBAC takes the name system:serviceaccount:NS:NAME for that
// ServiceAccount) and writes a kubeconfig file for it into dir, under a
// name of its own each time.
func (e *Env) Kubeconfig(dir, name string, groups ...string) (string, error) {
	user, err := e.AddUser(envtest.User{Name: name, Groups: groups}, nil)
	if err != nil {
		return "", err
	}
	data, err := user.KubeConfig()
	if err != nil {
		return "", err
	}
	f, err := os.CreateTemp(dir, "*.kubeconfig")
	if err != nil {
		return "", err
	}
	_, err = f.Write(data)
	return f.Name(), errors.Join(err, f.Close())
}

// CRDs runs script, one of the hack/ scripts that fetch another
// project's CRDs into bin/ (prometheus-operator-crds.sh,
// cert-manager-crds.sh: a no-op once they are there, the Go module proxy
// on the first run), in the repository root and returns the directory it
// prints.
func CRDs(ctx context.Context, root, script string) (string, error) {
	out, err := Run(ctx, root, nil, nil, filepath.Join(root, "hack", script))
	if err != nil {
		return "", fmt.Errorf("hack/%s (needs the Go module proxy on its first run): %w", script, err)
	}
	return strings.TrimSpace(out), nil
}

// Admin is Env plus what the suites that drive the API server with
// kubectl, helm and the hack/ scripts need: a temporary directory and in
// it a system:masters user's kubeconfig.
type Admin struct {
	*Env
	// Dir is the suite's temporary directory, removed by Stop.
	Dir string
	// KubectlBin is the kubectl of the envtest binaries.
	KubectlBin string
	// AdminKubeconfig is the kubeconfig file of user "admin" in group
	// system:masters.
	AdminKubeconfig string
}

// StartAdmin is Start (the CRDs of crdDirs), then a new temporary
// directory, its name beginning with prefix, holding an admin's kubeconfig.
func StartAdmin(scheme *runtime.Scheme, prefix string, crdDirs ...string) (*Admin, error) {
	env, err := Start(scheme, crdDirs...)
	if err != nil {
		return nil, err
	}
	a := &Admin{Env: env, KubectlBin: filepath.Join(env.Assets, "kubectl")}
	if a.Dir, err = os.MkdirTemp("", prefix); err != nil {
		return nil, errors.Join(err, env.Stop())
	}
	if a.AdminKubeconfig, err = env.Kubeconfig(a.Dir, "admin", "system:masters"); err != nil {
		return nil, errors.Join(err, a.Stop())
	}
	return a, nil
}

// Stop stops the API server and removes Dir; a nil Admin is stopped
// already.
func (a *Admin) Stop() error {
	if a == nil {
		return nil
	}
	return errors.Join(a.Env.Stop(), os.RemoveAll(a.Dir))
}

// Kubectl runs kubectl in dir as the user of kubeconfig, with stdin (nil:
// none), and returns its stdout; when it fails, the error ends with its
// stderr.
func (a *Admin) Kubectl(ctx context.Context, dir, kubeconfig string, stdin []byte, args ...string) (string, error) {
	return Run(ctx, dir, nil, stdin, a.KubectlBin, append([]string{"--kubeconfig=" + kubeconfig}, args...)...)
}

// Edit changes the object at key as kubectl edit does: reads it, calls
// edit on it and writes it, from a fresh read again when the write
// conflicts (the operator writes the status concurrently, which moves the
// resourceVersion).
func Edit[T any, PT interface {
	*T
	client.Object
}](ctx context.Context, c client.Client, key client.ObjectKey, edit func(PT)) error {
	return retry.RetryOnConflict(retry.DefaultRetry, func() error {
		obj := PT(new(T))
		if err := c.Get(ctx, key, obj); err != nil {
			return err
		}
		edit(obj)
		return c.Update(ctx, obj)
	})
}

// Manager is the operator running in the test process.
type Manager struct {
	cancel context.CancelFunc
	done   chan error
}

// StartManager runs the operator's controllers (controllers.SetupWithManager
// with opts) in a manager on cfg, as main.go does: its cache limited by
// byObject, its metrics server off.
func StartManager(cfg *rest.Config, scheme *runtime.Scheme, byObject map[client.Object]cache.ByObject, opts controllers.Options) (*Manager, error) {
	mgr, err := ctrl.NewManager(cfg, ctrl.Options{
		Scheme:  scheme,
		Metrics: metricsserver.Options{BindAddress: "0"},
		Cache:   cache.Options{ByObject: byObject},
	})
	if err != nil {
		return nil, err
	}
	if err := controllers.SetupWithManager(mgr, opts); err != nil {
		return nil, err
	}
	ctx, cancel := context.WithCancel(context.Background())
	m := &Manager{cancel: cancel, done: make(chan error, 1)}
	go func() { m.done <- mgr.Start(ctx) }()
	return m, nil
}

// StopTimeout bounds how long Manager.Stop waits for the manager.
const StopTimeout = time.Minute

// Stop stops the manager and returns what its Start returned (nil for a
// clean stop), or an error when it has not returned within StopTimeout. A
// nil Manager (a suite that failed before starting one) is stopped.
func (m *Manager) Stop() error {
	if m == nil {
		return nil
	}
	m.cancel()
	select {
	case err := <-m.done:
		return err
	case <-time.After(StopTimeout):
		return fmt.Errorf("the manager did not stop within %s", StopTimeout)
	}
}
