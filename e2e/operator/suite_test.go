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
	"context"
	"os"
	"path/filepath"
	"testing"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	"k8s.io/apimachinery/pkg/runtime"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/envtest"
	logf "sigs.k8s.io/controller-runtime/pkg/log"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"

	cachev1alpha1 "github.com/distcache/distcache/api/v1alpha1"
	"github.com/distcache/distcache/controllers"
	"github.com/distcache/distcache/internal/testutil/envtestassets"
	"github.com/distcache/distcache/internal/testutil/repo"
)

const (
	testImage = "example.com/cachenode:test"
	// drainGrace is short so the scale-down spec can watch it pass.
	drainGrace = 2 * time.Second
	timeout    = 60 * time.Second
	interval   = 100 * time.Millisecond
)

var (
	testEnv   *envtest.Environment
	k8sClient client.Client
	scheme    = runtime.NewScheme()
	cancel    context.CancelFunc
	mgrDone   chan error
)

func TestOperator(t *testing.T) {
	RegisterFailHandler(Fail)
	RunSpecs(t, "operator suite")
}

var _ = BeforeSuite(func() {
	logf.SetLogger(GinkgoLogr)
	SetDefaultEventuallyTimeout(timeout)
	SetDefaultEventuallyPollingInterval(interval)
	Expect(clientgoscheme.AddToScheme(scheme)).To(Succeed())
	Expect(cachev1alpha1.AddToScheme(scheme)).To(Succeed())

	root, err := repo.Root()
	Expect(err).NotTo(HaveOccurred())
	assets, err := envtestassets.Path()
	Expect(err).NotTo(HaveOccurred())
	Expect(os.Setenv(envtestassets.EnvVar, assets)).To(Succeed())
	testEnv = &envtest.Environment{
		BinaryAssetsDirectory: assets,
		CRDDirectoryPaths:     []string{filepath.Join(root, "config", "crd", "bases")},
		ErrorIfCRDPathMissing: true,
	}
	cfg, err := testEnv.Start()
	Expect(err).NotTo(HaveOccurred())
	k8sClient, err = client.New(cfg, client.Options{Scheme: scheme})
	Expect(err).NotTo(HaveOccurred())

	mgr, err := ctrl.NewManager(cfg, ctrl.Options{
		Scheme:  scheme,
		Metrics: metricsserver.Options{BindAddress: "0"},
		Cache:   cache.Options{ByObject: controllers.CacheOptions()},
	})
	Expect(err).NotTo(HaveOccurred())
	Expect((&controllers.DistributedCacheReconciler{
		Client:         mgr.GetClient(),
		Scheme:         mgr.GetScheme(),
		Recorder:       mgr.GetEventRecorder("distributedcache-controller"),
		CacheNodeImage: testImage,
		DrainGrace:     drainGrace,
	}).SetupWithManager(mgr)).To(Succeed())

	var ctx context.Context
	ctx, cancel = context.WithCancel(context.Background())
	mgrDone = make(chan error, 1)
	go func() {
		defer GinkgoRecover()
		mgrDone <- mgr.Start(ctx)
	}()
})

var _ = AfterSuite(func() {
	if cancel != nil {
		cancel()
		Eventually(mgrDone).Should(Receive(BeNil()))
	}
	if testEnv != nil {
		Expect(testEnv.Stop()).To(Succeed())
	}
})
