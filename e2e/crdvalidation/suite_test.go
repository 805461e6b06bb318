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
	"testing"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/distcache/distcache/internal/testutil/kubetest"
)

var (
	testEnv   *kubetest.Env
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
	root = kubetest.SetUpSuite(scheme, 0, 0)
	testEnv = kubetest.StartAPI(root, scheme)
	Expect(testEnv.CRDs).To(HaveLen(2), "both CRDs installed")
	cfg, k8sClient = testEnv.Config, testEnv.Client
})
