// Package envtest_test is a smoke test of the control-plane binaries the project
// builds from source (hack/build-kube.sh, hack/build-etcd.sh): it starts
// controller-runtime's envtest with them and talks to the real kube-apiserver.
//
// Run with: make envtest-assets && go test ./e2e/envtest/
// (or KUBEBUILDER_ASSETS=$(hack/envtest-assets.sh) go test ./e2e/envtest/).
package envtest_test

import (
	"os"
	"testing"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	"k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/envtest"
	logf "sigs.k8s.io/controller-runtime/pkg/log"

	"github.com/distcache/distcache/internal/testutil/envtestassets"
)

var (
	testEnv   *envtest.Environment
	cfg       *rest.Config
	k8sClient client.Client
)

func TestEnvtest(t *testing.T) {
	RegisterFailHandler(Fail)
	RunSpecs(t, "envtest smoke suite")
}

var _ = BeforeSuite(func() {
	logf.SetLogger(GinkgoLogr)

	assets, err := envtestassets.Path()
	Expect(err).NotTo(HaveOccurred())
	GinkgoWriter.Printf("envtest assets: %s\n", assets)
	// envtest looks KUBEBUILDER_ASSETS up before BinaryAssetsDirectory and takes
	// a set-but-empty value as the directory "" (then searches $PATH), so make
	// the environment agree with what we found.
	Expect(os.Setenv(envtestassets.EnvVar, assets)).To(Succeed())

	testEnv = &envtest.Environment{
		BinaryAssetsDirectory: assets,
		// No CRDs yet; when the API types exist, add CRDDirectoryPaths here.
		ErrorIfCRDPathMissing: true,
	}
	cfg, err = testEnv.Start()
	Expect(err).NotTo(HaveOccurred())
	Expect(cfg).NotTo(BeNil())

	k8sClient, err = client.New(cfg, client.Options{Scheme: scheme.Scheme})
	Expect(err).NotTo(HaveOccurred())
})

var _ = AfterSuite(func() {
	if testEnv != nil {
		Expect(testEnv.Stop()).To(Succeed())
	}
})
