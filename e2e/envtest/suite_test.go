// Package envtest_test is a smoke test of the control-plane binaries the project
// builds from source (hack/build-kube.sh, hack/build-etcd.sh): it starts
// controller-runtime's envtest with them and talks to the real kube-apiserver.
//
// Run with: make envtest-assets && go test ./e2e/envtest/
// (or KUBEBUILDER_ASSETS=$(hack/envtest-assets.sh) go test ./e2e/envtest/).
package envtest_test

import (
	"testing"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	"k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"
	logf "sigs.k8s.io/controller-runtime/pkg/log"

	"github.com/distcache/distcache/internal/testutil/kubetest"
)

var (
	testEnv   *kubetest.Env
	cfg       *rest.Config
	k8sClient client.Client
)

func TestEnvtest(t *testing.T) {
	RegisterFailHandler(Fail)
	RunSpecs(t, "envtest smoke suite")
}

var _ = BeforeSuite(func() {
	logf.SetLogger(GinkgoLogr)
	var err error
	testEnv, err = kubetest.Start(scheme.Scheme) // no CRDs
	Expect(err).NotTo(HaveOccurred())
	GinkgoWriter.Printf("envtest assets: %s\n", testEnv.Assets)
	cfg, k8sClient = testEnv.Config, testEnv.Client
	Expect(cfg).NotTo(BeNil())
})

var _ = AfterSuite(func() {
	Expect(testEnv.Stop()).To(Succeed())
})
