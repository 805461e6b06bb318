package deploy_test

import (
	"io/fs"
	"os"
	"path/filepath"
	"strconv"
	"strings"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/types"

	"github.com/distcache/distcache/internal/testutil/kubetest"
)

// copyTree copies the regular files under src to dst.
func copyTree(src, dst string) {
	GinkgoHelper()
	Expect(filepath.WalkDir(src, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, err := filepath.Rel(src, path)
		if err != nil {
			return err
		}
		if d.IsDir() {
			return os.MkdirAll(filepath.Join(dst, rel), 0o755)
		}
		data, err := os.ReadFile(path)
		if err != nil {
			return err
		}
		return os.WriteFile(filepath.Join(dst, rel), data, 0o644)
	})).To(Succeed())
}

var _ = Describe("config/prometheus", func() {
	It("is enabled by uncommenting ../prometheus in config/default, and scrapes the operator's metrics port", func(ctx SpecContext) {
		By("following config/default's instructions in a copy of config/")
		config := filepath.Join(GinkgoT().TempDir(), "config")
		copyTree(filepath.Join(root, "config"), config)
		path := filepath.Join(config, "default", "kustomization.yaml")
		data, err := os.ReadFile(path)
		Expect(err).NotTo(HaveOccurred())
		Expect(strings.Count(string(data), "\n#- ../prometheus\n")).To(Equal(1), "the commented line config/default tells to uncomment")
		Expect(os.WriteFile(path, []byte(strings.Replace(string(data), "\n#- ../prometheus\n", "\n- ../prometheus\n", 1)), 0o644)).To(Succeed())
		manifests := renderDeploy(ctx, "CONFIG_DIR="+filepath.Join(config, "default"))
		objs := kubetest.Decode(manifests)

		monitor := find(objs, "ServiceMonitor", systemNamespace, "distcache-controller-manager-metrics-monitor")
		svcObj := find(objs, "Service", systemNamespace, "distcache-controller-manager-metrics-service")
		depObj := find(objs, "Deployment", systemNamespace, deploymentName)
		svc := &corev1.Service{}
		kubetest.Convert(svcObj, svc)
		dep := &appsv1.Deployment{}
		kubetest.Convert(depObj, dep)

		By("selecting the metrics Service, whose port the endpoint names")
		selector, _, err := unstructured.NestedStringMap(monitor.Object, "spec", "selector", "matchLabels")
		Expect(err).NotTo(HaveOccurred())
		Expect(selector).NotTo(BeEmpty())
		Expect(labels.SelectorFromSet(selector).Matches(labels.Set(svc.Labels))).To(BeTrue(), "ServiceMonitor selects the Service")
		endpoints, _, err := unstructured.NestedSlice(monitor.Object, "spec", "endpoints")
		Expect(err).NotTo(HaveOccurred())
		Expect(endpoints).To(HaveLen(1))
		endpoint := endpoints[0].(map[string]any)
		Expect(endpoint).To(HaveKeyWithValue("path", "/metrics"))
		// The manager serves its metrics over HTTPS to authorized callers:
		// Prometheus presents its ServiceAccount token.
		Expect(endpoint).To(HaveKeyWithValue("scheme", "https"))
		Expect(endpoint).To(HaveKeyWithValue("bearerTokenFile", "/var/run/secrets/kubernetes.io/serviceaccount/token"))
		Expect(svc.Spec.Ports).To(HaveLen(1))
		Expect(endpoint).To(HaveKeyWithValue("port", svc.Spec.Ports[0].Name))

		By("a Service that selects the manager's pods and targets the port --metrics-bind-address listens on")
		pod := dep.Spec.Template
		Expect(labels.SelectorFromSet(svc.Spec.Selector).Matches(labels.Set(pod.Labels))).To(BeTrue(), "Service selects the manager's pods")
		c := pod.Spec.Containers[0]
		var metricsPort int32
		for _, p := range c.Ports {
			if p.Name == svc.Spec.Ports[0].TargetPort.String() {
				metricsPort = p.ContainerPort
			}
		}
		Expect(expandArgs(c)).To(ContainElement("--metrics-bind-address=:" + strconv.Itoa(int(metricsPort))))

		By("being accepted by the prometheus-operator's ServiceMonitor CRD")
		applyManifests(ctx, adminKubeconfig, manifests)
		got := &unstructured.Unstructured{}
		got.SetGroupVersionKind(monitor.GroupVersionKind())
		Expect(k8sClient.Get(ctx, types.NamespacedName{Namespace: systemNamespace, Name: monitor.GetName()}, got)).To(Succeed())
		gotSelector, _, err := unstructured.NestedStringMap(got.Object, "spec", "selector", "matchLabels")
		Expect(err).NotTo(HaveOccurred())
		Expect(gotSelector).To(Equal(selector))
	})
})
