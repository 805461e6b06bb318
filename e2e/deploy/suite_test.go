// Package deploy_test checks what `make deploy` installs. It renders
// config/default exactly as the Makefile does (hack/deploy-manifests.sh, with
// image overrides), applies it with kubectl's server-side apply to a real
// kube-apiserver (envtest), and checks what the API server made of it: the
// CRDs are established, the Deployment runs the overridden images with
// main.go's flags, the ServiceAccount holds manager-role and the
// leader-election Role, the user-facing roles let the right people create
// the samples, and the manager binary, started with the Deployment's
// arguments and the ServiceAccount's identity, reconciles the sample cache.
// config/prometheus is checked against the prometheus-operator's real
// ServiceMonitor CRD.
//
// envtest has no kubelet: the Deployment's pod never runs, so the test runs
// the manager itself, as the kubelet would have (arguments with $(VAR)
// expanded from the container's env), as the ServiceAccount's user name.
//
// Run with: KUBEBUILDER_ASSETS=$(hack/envtest-assets.sh) go test ./e2e/deploy/
package deploy_test

import (
	"bytes"
	"context"
	"path/filepath"
	"strings"
	"testing"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	"github.com/onsi/gomega/gexec"
	authorizationv1 "k8s.io/api/authorization/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/yaml"

	"github.com/distcache/distcache/internal/testutil/kubetest"
)

const (
	timeout  = 2 * time.Minute
	interval = 250 * time.Millisecond

	// The images `make deploy IMG=... CACHENODE_IMG=...` is given: a registry
	// with a port (not a tag) and a digest, the cases an images: entry gets
	// wrong when written naively.
	testIMG          = "registry.example.com:5000/platform/distcache-operator:v0.3.1"
	testCacheNodeIMG = "registry.example.com:5000/platform/distcache-cachenode:v0.3.1@sha256:" +
		"4f53cda18c2baa0c0354bb5f9a3ecbe5ed12ab4d8e11ba873c2f11161202b945"

	// What config/default is expected to make of config/manager and config/rbac.
	systemNamespace = "distcache-system"
	deploymentName  = "distcache-controller-manager"
	serviceAccount  = "distcache-controller-manager"
	managerRole     = "distcache-manager-role"
	electionRole    = "distcache-leader-election-role"
)

var (
	testEnv   *kubetest.Admin
	k8sClient client.Client
	scheme    = runtime.NewScheme()
	root      string // repository root
	// adminKubeconfig is a system:masters user's kubeconfig file.
	adminKubeconfig string
)

func TestDeploy(t *testing.T) { kubetest.RunSuite(t, "deploy suite") }

var _ = BeforeSuite(func(ctx SpecContext) {
	root = kubetest.SetUpSuite(scheme, timeout, interval)
	// The distcache CRDs come from the rendered manifests, not from envtest;
	// the ServiceMonitor CRD is the prometheus-operator's own, for
	// config/prometheus.
	testEnv = kubetest.StartPrometheusAdmin(ctx, root, scheme, "deploy-e2e-")
	k8sClient, adminKubeconfig = testEnv.Client, testEnv.AdminKubeconfig
}, NodeTimeout(5*time.Minute))

var _ = AfterSuite(func() {
	gexec.CleanupBuildArtifacts()
})

// userKubeconfig provisions a user authenticated by a client certificate
// (CN name, O groups) and writes a kubeconfig file for it. RBAC treats the
// user name system:serviceaccount:NS:NAME as that ServiceAccount.
func userKubeconfig(name string, groups ...string) string {
	GinkgoHelper()
	path, err := testEnv.Kubeconfig(testEnv.Dir, name, groups...)
	Expect(err).NotTo(HaveOccurred())
	return path
}

// kubectl runs kubectl as the user of kubeconfig and returns its stdout; a
// failure fails the spec with kubectl's stderr.
func kubectl(ctx context.Context, kubeconfig string, stdin []byte, args ...string) string {
	GinkgoHelper()
	return testEnv.MustKubectl(ctx, root, kubeconfig, stdin, args...)
}

func tryKubectl(ctx context.Context, kubeconfig string, stdin []byte, args ...string) (string, error) {
	return testEnv.Kubectl(ctx, root, kubeconfig, stdin, args...)
}

// applyManifests applies like `make deploy` does.
func applyManifests(ctx context.Context, kubeconfig string, manifests []byte) {
	GinkgoHelper()
	kubectl(ctx, kubeconfig, manifests, "apply", "--server-side", "--force-conflicts", "-f", "-")
}

// renderDeploy runs hack/deploy-manifests.sh, which `make deploy` pipes into
// kubectl apply, with the test images and the given extra environment.
func renderDeploy(ctx context.Context, env ...string) []byte {
	GinkgoHelper()
	out, err := kubetest.Run(ctx, root, append([]string{
		"KUBECTL=" + testEnv.KubectlBin, "IMG=" + testIMG, "CACHENODE_IMG=" + testCacheNodeIMG,
	}, env...), nil, filepath.Join(root, "hack", "deploy-manifests.sh"))
	Expect(err).NotTo(HaveOccurred(), "hack/deploy-manifests.sh")
	return []byte(out)
}

// encode joins objects into a YAML stream.
func encode(objs ...*unstructured.Unstructured) []byte {
	GinkgoHelper()
	var buf bytes.Buffer
	for _, obj := range objs {
		data, err := yaml.Marshal(obj.Object)
		Expect(err).NotTo(HaveOccurred())
		buf.WriteString("---\n")
		buf.Write(data)
	}
	return buf.Bytes()
}

// find returns the one object of kind and name (and namespace, if not
// empty) in objs.
func find(objs []*unstructured.Unstructured, kind, namespace, name string) *unstructured.Unstructured {
	GinkgoHelper()
	var found []*unstructured.Unstructured
	for _, obj := range objs {
		if obj.GetKind() == kind && obj.GetName() == name && (namespace == "" || obj.GetNamespace() == namespace) {
			found = append(found, obj)
		}
	}
	Expect(found).To(HaveLen(1), "%s %s/%s in the manifests", kind, namespace, name)
	return found[0]
}

// ofKind returns the objects of kind in objs.
func ofKind(objs []*unstructured.Unstructured, kind string) []*unstructured.Unstructured {
	var found []*unstructured.Unstructured
	for _, obj := range objs {
		if obj.GetKind() == kind {
			found = append(found, obj)
		}
	}
	return found
}

// serviceAccountUser is the user name and groups the API server gives a
// ServiceAccount's token.
func serviceAccountUser(namespace, name string) (string, []string) {
	return "system:serviceaccount:" + namespace + ":" + name,
		[]string{"system:serviceaccounts", "system:serviceaccounts:" + namespace, "system:authenticated"}
}

// access asks the API server's authorizer whether user (in groups) may do
// verb on resource ("name" or "name/subresource") of group in namespace ("":
// cluster-wide).
func access(ctx context.Context, user string, groups []string, verb, group, resource, namespace string) (bool, string) {
	GinkgoHelper()
	res, sub, _ := strings.Cut(resource, "/")
	sar := &authorizationv1.SubjectAccessReview{Spec: authorizationv1.SubjectAccessReviewSpec{
		User: user, Groups: groups,
		ResourceAttributes: &authorizationv1.ResourceAttributes{
			Namespace: namespace, Verb: verb, Group: group, Resource: res, Subresource: sub,
		},
	}}
	Expect(k8sClient.Create(ctx, sar)).To(Succeed())
	return sar.Status.Allowed, sar.Status.Reason
}
