// Package operator_test runs the DistributedCache reconciler in-process
// against a real kube-apiserver and etcd (envtest) with the generated CRDs,
// and checks what it makes of DistributedCache objects: the StatefulSets,
// Services, PodDisruptionBudgets and ring ConfigMap, scaling, the ring
// following pod readiness, and scale-down through draining.
//
// envtest has no kubelet, scheduler, StatefulSet controller or garbage
// collector: the tests create the pods a StatefulSet would and set their
// readiness themselves, and check owner references instead of deletion.
//
// Run with: KUBEBUILDER_ASSETS=$(hack/envtest-assets.sh) go test ./e2e/operator/
package operator_test

import (
	"sync/atomic"
	"testing"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/distcache/distcache/controllers"
	"github.com/distcache/distcache/internal/testutil/kubetest"
)

const (
	testImage = "example.com/cachenode:test"
	// operatorVersion is the version the reconcilers report in status.
	operatorVersion = "v0.0.0-test"
	// drainGrace is short so the scale-down spec can watch it pass.
	drainGrace = 2 * time.Second
	timeout    = 60 * time.Second
	interval   = 100 * time.Millisecond
)

var (
	// clock is the reconcilers' clock; specs move it forward to reach
	// certificate renewal.
	clock     = &testClock{}
	testEnv   *kubetest.Env
	k8sClient client.Client
	// restCfg is the admin's configuration of the API server.
	restCfg  *rest.Config
	scheme   = runtime.NewScheme()
	operator *kubetest.Manager
)

func TestOperator(t *testing.T) {
	RegisterFailHandler(Fail)
	RunSpecs(t, "operator suite")
}

var _ = BeforeSuite(func(ctx SpecContext) {
	root := kubetest.SetUpSuite(scheme, timeout, interval)
	// cert-manager's CRDs (not its controller): the specs check the
	// Certificates the operator writes in cert-manager mode.
	crds, err := kubetest.CRDs(ctx, root, "cert-manager-crds.sh")
	Expect(err).NotTo(HaveOccurred())
	testEnv = kubetest.StartAPI(root, scheme, crds)
	restCfg, k8sClient = testEnv.Config, testEnv.Client

	operator = kubetest.RunOperator(restCfg, scheme, controllers.CacheOptions(), controllers.Options{
		CacheNodeImage: testImage, DrainGrace: drainGrace, Now: clock.Now, Version: operatorVersion,
	})
})

// testClock is time.Now plus an offset the specs can move forward.
type testClock struct{ offset atomic.Int64 }

func (c *testClock) Now() time.Time { return time.Now().Add(time.Duration(c.offset.Load())) }

// Advance moves the clock forward by d.
func (c *testClock) Advance(d time.Duration) { c.offset.Add(int64(d)) }

// Reset puts the clock back to time.Now.
func (c *testClock) Reset() { c.offset.Store(0) }
