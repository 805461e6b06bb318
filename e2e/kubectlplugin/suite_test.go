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
	"testing"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	"k8s.io/apimachinery/pkg/runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/distcache/distcache/controllers"
	"github.com/distcache/distcache/internal/testutil/kubetest"
)

const (
	testImage       = "example.com/cachenode:test"
	operatorVersion = "v0.0.0-plugin-test"
	timeout         = 60 * time.Second
	interval        = 100 * time.Millisecond
)

var (
	testEnv       *kubetest.Env
	k8sClient     client.Client
	scheme        = runtime.NewScheme()
	kubeconfigDir string
	// adminKubeconfig is a kubeconfig file of a system:masters user.
	adminKubeconfig string
	operator        *kubetest.Manager
)

func TestKubectlPlugin(t *testing.T) {
	RegisterFailHandler(Fail)
	RunSpecs(t, "kubectl plugin suite")
}

var _ = BeforeSuite(func() {
	root := kubetest.SetUpSuite(scheme, timeout, interval)
	testEnv = kubetest.StartAPI(root, scheme)
	k8sClient = testEnv.Client

	kubeconfigDir = GinkgoT().TempDir()
	adminKubeconfig = userKubeconfig("plugin-admin", "system:masters")

	byObject, err := controllers.ManagerCacheOptions(testEnv.Config)
	Expect(err).NotTo(HaveOccurred())
	operator = kubetest.RunOperator(testEnv.Config, scheme, byObject, controllers.Options{
		CacheNodeImage: testImage, DrainGrace: time.Second, Version: operatorVersion,
	})
})

// userKubeconfig provisions a user authenticated by a client certificate
// (CN name, O groups) and writes a kubeconfig file for it.
func userKubeconfig(name string, groups ...string) string {
	GinkgoHelper()
	path, err := testEnv.Kubeconfig(kubeconfigDir, name, groups...)
	Expect(err).NotTo(HaveOccurred())
	return path
}
