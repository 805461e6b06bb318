package kubetest

import (
	"bytes"
	"context"
	"errors"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"
	logf "sigs.k8s.io/controller-runtime/pkg/log"

	"github.com/distcache/distcache/controllers"
	"github.com/distcache/distcache/internal/testutil/repo"
)

// RunSuite runs a Ginkgo suite whose Eventually calls given a spec's
// context still give up after the default timeout
// (EnforceDefaultTimeoutsWhenUsingContexts): the suites that run real
// processes and clusters, where a context alone could wait for hours.
func RunSuite(t *testing.T, description string) bool {
	RegisterFailHandler(Fail)
	EnforceDefaultTimeoutsWhenUsingContexts()
	return RunSpecs(t, description)
}

// SetUpSuite is how the e2e suites' BeforeSuite begins: controller-runtime
// logs to Ginkgo's writer, Eventually defaults to timeout and interval (0
// leaves Gomega's), scheme gets the operator's kinds (controllers.AddToScheme:
// client-go's, the distcache API's, the prometheus-operator's), and the
// repository root is returned.
func SetUpSuite(scheme *runtime.Scheme, timeout, interval time.Duration) (root string) {
	GinkgoHelper()
	logf.SetLogger(GinkgoLogr)
	if timeout > 0 {
		SetDefaultEventuallyTimeout(timeout)
	}
	if interval > 0 {
		SetDefaultEventuallyPollingInterval(interval)
	}
	Expect(controllers.AddToScheme(scheme)).To(Succeed())
	root, err := repo.Root()
	Expect(err).NotTo(HaveOccurred())
	return root
}

// StartPrometheusAdmin is StartAdmin with only the prometheus-operator's
// CRDs (ServiceMonitor, PrometheusRule; hack/prometheus-operator-crds.sh):
// the API server of the suites that install the distcache CRDs themselves,
// from the rendered manifests or the Helm chart. prefix names its
// directory; an error fails the calling BeforeSuite, and the Admin is
// stopped when the suite ends.
func StartPrometheusAdmin(ctx context.Context, root string, scheme *runtime.Scheme, prefix string) *Admin {
	GinkgoHelper()
	crds, err := CRDs(ctx, root, "prometheus-operator-crds.sh")
	Expect(err).NotTo(HaveOccurred())
	a, err := StartAdmin(scheme, prefix, crds)
	Expect(err).NotTo(HaveOccurred())
	DeferCleanup(a.Stop)
	return a
}

// StartAPI is Start with the distcache CRDs (config/crd/bases under root)
// and those of extraCRDs installed: the API server of the suites that
// check the operator's kinds. An error fails the calling BeforeSuite; the
// API server is stopped when the suite ends.
func StartAPI(root string, scheme *runtime.Scheme, extraCRDs ...string) *Env {
	GinkgoHelper()
	e, err := Start(scheme, append([]string{filepath.Join(root, "config", "crd", "bases")}, extraCRDs...)...)
	Expect(err).NotTo(HaveOccurred())
	DeferCleanup(e.Stop)
	return e
}

// RunOperator is StartManager for a BeforeSuite: an error fails it, and
// the manager is stopped when the suite ends (before an API server
// started earlier: cleanups run last first).
func RunOperator(cfg *rest.Config, scheme *runtime.Scheme, byObject map[client.Object]cache.ByObject, opts controllers.Options) *Manager {
	GinkgoHelper()
	m, err := StartManager(cfg, scheme, byObject, opts)
	Expect(err).NotTo(HaveOccurred())
	DeferCleanup(m.Stop)
	return m
}

// MustKubectl is Kubectl for a spec: a failure fails it, naming kubectl's
// arguments (the error ends with kubectl's stderr).
func (a *Admin) MustKubectl(ctx context.Context, dir, kubeconfig string, stdin []byte, args ...string) string {
	GinkgoHelper()
	out, err := a.Kubectl(ctx, dir, kubeconfig, stdin, args...)
	Expect(err).NotTo(HaveOccurred(), "kubectl %s", strings.Join(args, " "))
	return out
}

// Run runs name with args in dir, with env added to the test's environment
// and stdin (nil: none), and returns its stdout; when it fails, the error
// ends with its stderr.
func Run(ctx context.Context, dir string, env []string, stdin []byte, name string, args ...string) (string, error) {
	cmd := exec.CommandContext(ctx, name, args...)
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), env...)
	if stdin != nil {
		cmd.Stdin = bytes.NewReader(stdin)
	}
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		return string(out), errors.New(err.Error() + ": " + stderr.String())
	}
	return string(out), nil
}

// Decode splits a stream of YAML or JSON documents (what kustomize, helm
// template and the hack/ scripts print) into objects, leaving out empty
// documents; a stream that does not decode fails the spec.
func Decode(manifests []byte) []*unstructured.Unstructured {
	GinkgoHelper()
	var objs []*unstructured.Unstructured
	dec := utilyaml.NewYAMLOrJSONDecoder(bytes.NewReader(manifests), 4096)
	for {
		var u unstructured.Unstructured
		err := dec.Decode(&u.Object)
		if errors.Is(err, io.EOF) {
			return objs
		}
		Expect(err).NotTo(HaveOccurred())
		if len(u.Object) > 0 {
			objs = append(objs, &u)
		}
	}
}

// Convert turns an unstructured object into the typed into, failing the
// spec when it does not fit.
func Convert(obj *unstructured.Unstructured, into any) {
	GinkgoHelper()
	Expect(runtime.DefaultUnstructuredConverter.FromUnstructured(obj.Object, into)).To(Succeed())
}
