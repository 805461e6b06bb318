// Package crdvalidation_test installs the generated CRDs (config/crd/bases)
// into a real kube-apiserver (envtest) and checks what the API server itself
// does with DistributedCache and CacheTenant objects: defaults, the OpenAPI
// and CEL validation, immutable fields, and the scale and status
// subresources. No operator runs here; this is the schema's contract.
//
// Run with: KUBEBUILDER_ASSETS=$(hack/envtest-assets.sh) go test ./e2e/crdvalidation/
// After changing api/, run `make generate manifests` first.
package crdvalidation_test

import (
	"os"
	"path/filepath"
	"testing"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	"k8s.io/apimachinery/pkg/runtime"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/envtest"
	logf "sigs.k8s.io/controller-runtime/pkg/log"

	cachev1alpha1 "github.com/distcache/distcache/api/v1alpha1"
	"github.com/distcache/distcache/internal/testutil/envtestassets"
	"github.com/distcache/distcache/internal/testutil/repo"
)

var (
	testEnv   *envtest.Environment
	cfg       *rest.Config
	k8sClient client.Client
	scheme    = runtime.NewScheme()
	root      string // repository root
)

func TestCRDValidation(t *testing.T) {
	RegisterFailHandler(Fail)
	RunSpecs(t, "CRD validation suite")
}

var _ = BeforeSuite(func() {
	logf.SetLogger(GinkgoLogr)
	Expect(clientgoscheme.AddToScheme(scheme)).To(Succeed())
	Expect(cachev1alpha1.AddToScheme(scheme)).To(Succeed())

	var err error
	root, err = repo.Root()
	Expect(err).NotTo(HaveOccurred())
	assets, err := envtestassets.Path()
	Expect(err).NotTo(HaveOccurred())
	// envtest reads KUBEBUILDER_ASSETS before BinaryAssetsDirectory and takes
	// a set-but-empty value as "", so make the environment agree.
	Expect(os.Setenv(envtestassets.EnvVar, assets)).To(Succeed())

	testEnv = &envtest.Environment{
		BinaryAssetsDirectory: assets,
		CRDDirectoryPaths:     []string{filepath.Join(root, "config", "crd", "bases")},
		ErrorIfCRDPathMissing: true,
	}
	cfg, err = testEnv.Start()
	Expect(err).NotTo(HaveOccurred())
	Expect(testEnv.CRDs).To(HaveLen(2), "both CRDs installed")

	k8sClient, err = client.New(cfg, client.Options{Scheme: scheme})
	Expect(err).NotTo(HaveOccurred())
})

var _ = AfterSuite(func() {
	if testEnv != nil {
		Expect(testEnv.Stop()).To(Succeed())
	}
})
