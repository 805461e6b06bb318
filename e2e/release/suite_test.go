// Package release_test checks what `make release` ships, with the tools it
// ships them with (helm, ko, kubectl's kustomize, built from their Go
// modules into bin/):
//
//   - the Helm chart renders, with default values, the objects config/default
//     renders (what the install manifest holds), both for the development
//     tree (charts/distcache as committed) and for a release (the chart
//     packaged with version X and the manifest with both images at vX), so
//     the two install paths cannot drift;
//   - `helm template` output, with every optional object switched on too, is
//     accepted by a real kube-apiserver (envtest) in a server-side dry run;
//   - the release images (hack/ko-images.sh) pushed to a registry (an
//     in-process one on loopback, go-containerregistry's) are the ones in the
//     OCI archives, with their SBOMs attached, run as non-root, and carry the
//     version.
//
// Run with: KUBEBUILDER_ASSETS=$(hack/envtest-assets.sh) go test ./e2e/release/
package release_test

import (
	"context"
	"path/filepath"
	"strings"
	"testing"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	"k8s.io/apimachinery/pkg/runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/distcache/distcache/internal/testutil/kubetest"
)

const (
	// What config/default installs into, and the release name that makes
	// the chart's names those of config/default (namePrefix distcache-).
	namespace   = "distcache-system"
	releaseName = "distcache"
)

var (
	// testEnv.Dir is the suite's working directory.
	testEnv   *kubetest.Admin
	k8sClient client.Client
	scheme    = runtime.NewScheme()
	root      string // repository root
	helmBin   string
)

func TestRelease(t *testing.T) { kubetest.RunSuite(t, "release suite") }

var _ = BeforeSuite(func(ctx SpecContext) {
	root = kubetest.SetUpSuite(scheme, time.Minute, 0)
	run(ctx, nil, filepath.Join(root, "hack", "build-go-tool.sh"), "helm")
	helmBin = filepath.Join(root, "bin", "helm")

	// The ServiceMonitor CRD is the prometheus-operator's own, for the
	// chart's prometheus.enabled; the distcache CRDs come from the chart.
	testEnv = kubetest.StartPrometheusAdmin(ctx, root, scheme, "release-e2e-")
	k8sClient = testEnv.Client
}, NodeTimeout(10*time.Minute))

// run runs a program in the repository root and returns its stdout; a
// failure fails the spec with its stderr.
func run(ctx context.Context, env []string, name string, args ...string) string {
	GinkgoHelper()
	out, err := kubetest.Run(ctx, root, env, nil, name, args...)
	Expect(err).NotTo(HaveOccurred(), "%s %s", name, strings.Join(args, " "))
	return out
}

// helm runs bin/helm against the envtest API server.
func helm(ctx context.Context, args ...string) string {
	GinkgoHelper()
	dir := testEnv.Dir
	return run(ctx, []string{"KUBECONFIG=" + testEnv.AdminKubeconfig, "HELM_CACHE_HOME=" + filepath.Join(dir, "helm-cache"),
		"HELM_CONFIG_HOME=" + filepath.Join(dir, "helm-config"), "HELM_DATA_HOME=" + filepath.Join(dir, "helm-data")},
		helmBin, args...)
}

// kubectl runs kubectl as the admin user, with stdin.
func kubectl(ctx context.Context, stdin []byte, args ...string) string {
	GinkgoHelper()
	return testEnv.MustKubectl(ctx, root, testEnv.AdminKubeconfig, stdin, args...)
}
