package envtest_test

import (
	"encoding/json"
	"fmt"
	"io"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/discovery"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/envtest"

	"github.com/distcache/distcache/internal/testutil/envtestassets"
)

var _ = Describe("the source-built control plane", func() {
	It("stores and serves objects", func(ctx SpecContext) {
		ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{GenerateName: "smoke-"}}
		Expect(k8sClient.Create(ctx, ns)).To(Succeed())
		Expect(ns.Name).NotTo(BeEmpty())
		DeferCleanup(func(ctx SpecContext) {
			Expect(client.IgnoreNotFound(k8sClient.Delete(ctx, ns))).To(Succeed())
		})

		cm := &corev1.ConfigMap{
			ObjectMeta: metav1.ObjectMeta{Name: "smoke", Namespace: ns.Name, Labels: map[string]string{"app": "distcache"}},
			Data:       map[string]string{"greeting": "hello", "bucket": "s3://example"},
		}
		Expect(k8sClient.Create(ctx, cm)).To(Succeed())
		Expect(cm.UID).NotTo(BeEmpty())

		var got corev1.ConfigMap
		Expect(k8sClient.Get(ctx, types.NamespacedName{Namespace: ns.Name, Name: "smoke"}, &got)).To(Succeed())
		Expect(got.UID).To(Equal(cm.UID))
		Expect(got.Data).To(Equal(cm.Data))
		Expect(got.Labels).To(HaveKeyWithValue("app", "distcache"))

		// A list served by the apiserver's watch cache, filtered by label.
		var list corev1.ConfigMapList
		Expect(k8sClient.List(ctx, &list, client.InNamespace(ns.Name), client.MatchingLabels{"app": "distcache"})).To(Succeed())
		Expect(list.Items).To(HaveLen(1))
		Expect(list.Items[0].Name).To(Equal("smoke"))
	})

	It("reports the pinned Kubernetes version", func() {
		dc, err := discovery.NewDiscoveryClientForConfig(cfg)
		Expect(err).NotTo(HaveOccurred())
		info, err := dc.ServerVersion()
		Expect(err).NotTo(HaveOccurred())

		var major, minor, patch int
		_, err = fmt.Sscanf(envtestassets.KubeVersion, "v%d.%d.%d", &major, &minor, &patch)
		Expect(err).NotTo(HaveOccurred())
		Expect(info.GitVersion).To(Equal(envtestassets.KubeVersion))
		Expect(info.Major).To(Equal(fmt.Sprint(major)))
		Expect(info.Minor).To(Equal(fmt.Sprint(minor)))
		Expect(info.GitTreeState).To(Equal("clean"))
		Expect(info.BuildDate).NotTo(HavePrefix("1970-"), "buildDate ldflag not set")
	})

	It("has a kubectl that can parse the server version", func() {
		admin, err := testEnv.AddUser(envtest.User{Name: "kubectl-admin", Groups: []string{"system:masters"}}, nil)
		Expect(err).NotTo(HaveOccurred())
		kubectl, err := admin.Kubectl()
		Expect(err).NotTo(HaveOccurred())
		Expect(kubectl).NotTo(BeNil())
		stdout, stderr, err := kubectl.Run("version", "--output=json")
		Expect(err).NotTo(HaveOccurred(), "kubectl version: %s", readAll(stderr))

		var v struct {
			ClientVersion struct{ GitVersion string } `json:"clientVersion"`
			ServerVersion struct{ GitVersion string } `json:"serverVersion"`
		}
		Expect(json.Unmarshal([]byte(readAll(stdout)), &v)).To(Succeed())
		Expect(v.ClientVersion.GitVersion).To(Equal(envtestassets.KubeVersion))
		Expect(v.ServerVersion.GitVersion).To(Equal(envtestassets.KubeVersion))
	})
})

func readAll(r io.Reader) string {
	if r == nil {
		return ""
	}
	b, _ := io.ReadAll(r)
	return string(b)
}
