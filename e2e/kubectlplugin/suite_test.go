// Package kubectlplugin_test runs `kubectl distcache` (internal/kubectlplugin,
// the commands of cmd/kubectl-distcache) against a real kube-apiserver and
// etcd (envtest) with the operator's reconcilers running in-process, so the
// plugin reads the ring ConfigMap, status, certificate Secrets and endpoint
// the operator itself writes.
//
// envtest has no kubelet and no StatefulSet controller: the specs create the
// pods a StatefulSet would, mark them Ready, and serve each one's /metrics
// from the cache node's own collectors (internal/metrics) through a Scraper
// (the API server cannot proxy to pods that do not exist). The pod proxy
// itself is exercised by e2e/cluster on the real cluster, and here by a
// user who may not use it.
//
// Run with: KUBEBUILDER_ASSETS=$(hack/envtest-assets.sh) go test ./e2e/kubectlplugin/
package kubectlplugin_test

import (
	"context"
	"os"
	"path/filepath"
	"testing"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	"k8s.io/apimachinery/pkg/runtime"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/envtest"
	logf "sigs.k8s.io/controller-runtime/pkg/log"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"

	"github.com/distcache/distcache/controllers"
	"github.com/distcache/distcache/internal/testutil/envtestassets"
	"github.com/distcache/distcache/internal/testutil/repo"
)

const (
	testImage       = "example.com/cachenode:test"
	operatorVersion = "v0.0.0-plugin-test"
	timeout         = 60 * time.Second
	interval        = 100 * time.Millisecond
)

var (
	testEnv       *envtest.Environment
	k8sClient     client.Client
	scheme        = runtime.NewScheme()
	kubeconfigDir string
	// adminKubeconfig is a kubeconfig file of a system:masters user.
	adminKubeconfig string
	cancel          context.CancelFunc
	mgrDone         chan error
)

func TestKubectlPlugin(t *testing.T) {
	RegisterFailHandler(Fail)
	RunSpecs(t, "kubectl plugin suite")
}

var _ = BeforeSuite(func() {
	logf.SetLogger(GinkgoLogr)
	SetDefaultEventuallyTimeout(timeout)
	SetDefaultEventuallyPollingInterval(interval)
	Expect(controllers.AddToScheme(scheme)).To(Succeed())

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

	kubeconfigDir = GinkgoT().TempDir()
	adminKubeconfig = userKubeconfig("plugin-admin", "system:masters")

	byObject, err := controllers.ManagerCacheOptions(cfg)
	Expect(err).NotTo(HaveOccurred())
	mgr, err := ctrl.NewManager(cfg, ctrl.Options{
		Scheme:  scheme,
		Metrics: metricsserver.Options{BindAddress: "0"},
		Cache:   cache.Options{ByObject: byObject},
	})
	Expect(err).NotTo(HaveOccurred())
	Expect(controllers.SetupWithManager(mgr, controllers.Options{
		CacheNodeImage: testImage, DrainGrace: time.Second, Version: operatorVersion,
	})).To(Succeed())
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

// userKubeconfig provisions a user authenticated by a client certificate
// (CN name, O groups) and writes a kubeconfig file for it.
func userKubeconfig(name string, groups ...string) string {
	GinkgoHelper()
	user, err := testEnv.AddUser(envtest.User{Name: name, Groups: groups}, nil)
	Expect(err).NotTo(HaveOccurred())
	data, err := user.KubeConfig()
	Expect(err).NotTo(HaveOccurred())
	path := filepath.Join(kubeconfigDir, name+".kubeconfig")
	Expect(os.WriteFile(path, data, 0o600)).To(Succeed())
	return path
}
