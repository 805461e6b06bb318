package release_test

import (
	"context"
	"fmt"
	"path/filepath"
	"sort"
	"strings"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/yaml"

	"github.com/distcache/distcache/internal/testutil/kubetest"
)

// The images config/default names (hack/deploy-manifests.sh).
const (
	operatorRepo  = "ghcr.io/distcache/operator"
	cachenodeRepo = "ghcr.io/distcache/cachenode"
)

// helmOnly are the metadata Helm adds that kustomize does not: release
// bookkeeping labels, and the annotation that keeps the CRDs (so every
// cache) when a release is uninstalled (crd.keep).
var (
	helmOnlyLabels      = []string{"helm.sh/chart", "app.kubernetes.io/instance", "app.kubernetes.io/managed-by"}
	helmOnlyAnnotations = []string{"helm.sh/resource-policy"}
)

var _ = Describe("the Helm chart", Ordered, func() {
	It("renders with default values the objects config/default renders (the development tree)", func(ctx SpecContext) {
		manifest := renderManifest(ctx, "latest")
		chart := helm(ctx, "template", releaseName, filepath.Join(root, "charts", "distcache"), "--namespace", namespace)
		expectSameObjects(manifest, chart)
	})

	It("packaged as a release renders the release's manifest, both images pinned to the version", func(ctx SpecContext) {
		pkgDir := filepath.Join(testEnv.Dir, "package")
		helm(ctx, "package", filepath.Join(root, "charts", "distcache"), "--version", "9.9.9", "--app-version", "v9.9.9",
			"--destination", pkgDir)
		chart := helm(ctx, "template", releaseName, filepath.Join(pkgDir, "distcache-9.9.9.tgz"), "--namespace", namespace)
		Expect(chart).NotTo(ContainSubstring(":latest"))
		Expect(chart).To(ContainSubstring(operatorRepo + ":v9.9.9"))
		Expect(chart).To(ContainSubstring(cachenodeRepo + ":v9.9.9"))
		expectSameObjects(renderManifest(ctx, "v9.9.9"), chart)
	})

	It("is accepted by the API server in a server-side dry run, with defaults and with every optional object", func(ctx SpecContext) {
		Expect(k8sClient.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: namespace}})).To(Succeed())
		chartDir := filepath.Join(root, "charts", "distcache")
		for _, set := range [][]string{
			nil,
			{"--set", "prometheus.enabled=true", "--set", "networkPolicy.enabled=true",
				"--set-string", "manager.nodeSelector.node-role\\.example\\.com/infra=true",
				"--set", "manager.tolerations[0].key=dedicated", "--set", "manager.tolerations[0].operator=Exists",
				"--set", "metrics.secure=false"},
		} {
			rendered := helm(ctx, append([]string{"template", releaseName, chartDir, "--namespace", namespace}, set...)...)
			out := kubectl(ctx, []byte(rendered), "apply", "--server-side", "--dry-run=server", "-f", "-")
			n := len(kubetest.Decode([]byte(rendered)))
			Expect(strings.Count(out, "serverside-applied (server dry run)")).To(Equal(n), "%v:\n%s", set, out)
		}
	})

	It("installs and upgrades on the API server; the upgrade changes the Deployment", func(ctx SpecContext) {
		chartDir := filepath.Join(root, "charts", "distcache")
		helm(ctx, "install", releaseName, chartDir, "--namespace", namespace)
		dep := &appsv1.Deployment{}
		key := types.NamespacedName{Namespace: namespace, Name: "distcache-controller-manager"}
		Expect(k8sClient.Get(ctx, key, dep)).To(Succeed())
		Expect(dep.Spec.Template.Spec.Containers[0].Image).To(Equal(operatorRepo + ":latest"))
		Expect(dep.Spec.Template.Spec.Tolerations).To(BeEmpty())

		helm(ctx, "upgrade", releaseName, chartDir, "--namespace", namespace, "--reuse-values",
			"--set", "manager.image.tag=v9.9.9", "--set", "cachenode.image.tag=v9.9.9",
			"--set", "manager.tolerations[0].key=dedicated", "--set", "manager.tolerations[0].operator=Exists")
		Expect(k8sClient.Get(ctx, key, dep)).To(Succeed())
		c := dep.Spec.Template.Spec.Containers[0]
		Expect(c.Image).To(Equal(operatorRepo + ":v9.9.9"))
		Expect(c.Env).To(ContainElement(corev1.EnvVar{Name: "CACHENODE_IMAGE", Value: cachenodeRepo + ":v9.9.9"}))
		Expect(dep.Spec.Template.Spec.Tolerations).To(ConsistOf(corev1.Toleration{Key: "dedicated", Operator: corev1.TolerationOpExists}))
		Expect(helm(ctx, "history", releaseName, "--namespace", namespace)).To(ContainSubstring("Upgrade complete"))

		helm(ctx, "uninstall", releaseName, "--namespace", namespace)
		Expect(k8sClient.Get(ctx, key, dep)).NotTo(Succeed())
		// crd.keep: the CRDs, and with them every cache, stay.
		Expect(kubectl(ctx, nil, "get", "crd", "-o", "name")).To(ContainSubstring("distributedcaches.cache.distcache.io"))
	})
})

// renderManifest renders config/default as the install manifest does, both
// images at tag.
func renderManifest(ctx context.Context, tag string) string {
	GinkgoHelper()
	return run(ctx, []string{"KUBECTL=" + testEnv.KubectlBin, "IMG=" + operatorRepo + ":" + tag, "CACHENODE_IMG=" + cachenodeRepo + ":" + tag},
		filepath.Join(root, "hack", "deploy-manifests.sh"))
}

// expectSameObjects compares the manifest's and the chart's objects, after
// taking out what only Helm adds. The one object only the manifest has is
// its Namespace (Helm installs into the release's namespace:
// helm install --namespace distcache-system --create-namespace).
func expectSameObjects(manifest, chart string) {
	GinkgoHelper()
	want, got := byKey(kubetest.Decode([]byte(manifest))), byKey(kubetest.Decode([]byte(chart)))
	Expect(want).To(HaveKey("Namespace//" + namespace))
	delete(want, "Namespace//"+namespace)
	Expect(sortedKeys(got)).To(Equal(sortedKeys(want)), "the chart's objects and the manifest's")
	for k, w := range want {
		Expect(toYAML(normalize(got[k]))).To(Equal(toYAML(normalize(w))), k)
	}
}

func byKey(objs []*unstructured.Unstructured) map[string]*unstructured.Unstructured {
	GinkgoHelper()
	m := map[string]*unstructured.Unstructured{}
	for _, o := range objs {
		k := fmt.Sprintf("%s/%s/%s", o.GetKind(), o.GetNamespace(), o.GetName())
		Expect(m).NotTo(HaveKey(k), "two objects %s", k)
		m[k] = o
	}
	return m
}

func sortedKeys(m map[string]*unstructured.Unstructured) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	return keys
}

// normalize drops Helm's own metadata (helmOnly*) from the object and its
// pod template, and sorts container arguments: the Go flag package reads
// them in any order, and the chart puts the metrics and health flags first.
func normalize(o *unstructured.Unstructured) map[string]any {
	obj := o.DeepCopy().Object
	dropMeta(obj, "metadata")
	dropMeta(obj, "spec", "template", "metadata")
	containers, _, _ := unstructured.NestedSlice(obj, "spec", "template", "spec", "containers")
	for _, c := range containers {
		cm := c.(map[string]any)
		if args, ok := cm["args"].([]any); ok {
			sort.Slice(args, func(i, j int) bool { return fmt.Sprint(args[i]) < fmt.Sprint(args[j]) })
		}
	}
	if containers != nil {
		_ = unstructured.SetNestedSlice(obj, containers, "spec", "template", "spec", "containers")
	}
	return obj
}

func dropMeta(obj map[string]any, path ...string) {
	for field, drop := range map[string][]string{"labels": helmOnlyLabels, "annotations": helmOnlyAnnotations} {
		fields := append(append([]string{}, path...), field)
		m, found, _ := unstructured.NestedStringMap(obj, fields...)
		if !found {
			continue
		}
		for _, k := range drop {
			delete(m, k)
		}
		if len(m) == 0 {
			unstructured.RemoveNestedField(obj, fields...)
		} else {
			_ = unstructured.SetNestedStringMap(obj, m, fields...)
		}
	}
}

func toYAML(obj map[string]any) string {
	GinkgoHelper()
	b, err := yaml.Marshal(obj)
	Expect(err).NotTo(HaveOccurred())
	return string(b)
}
