package cluster_test

import (
	"context"
	"path/filepath"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"sigs.k8s.io/controller-runtime/pkg/client"

	cachev1alpha1 "github.com/distcache/distcache/api/v1alpha1"
)

// The chart (charts/distcache) installed with helm and upgraded, on the real
// cluster, running the local images: its operator starts and reconciles a
// cache, and an upgrade rolls its Deployment to a new operator that takes
// over. The suite's own operator (make deploy's) is scaled to zero
// meanwhile, so that one operator acts on the cluster's caches, and back
// afterwards. The chart's CRDs are off (crd.enabled=false): the suite's
// install owns them; e2e/release installs the chart's CRDs on envtest.
var _ = Describe("the Helm chart on a real cluster", Ordered, func() {
	const (
		helmNamespace  = "distcache-helm"
		helmRelease    = "dchelm"
		helmDeployment = helmRelease + "-distcache-controller-manager"
		checkNamespace = "helm-check"
		checkCache     = "helm-check"
	)
	var helmBin string
	helm := func(ctx context.Context, args ...string) string {
		GinkgoHelper()
		out, err := run(ctx, []string{"KUBECONFIG=" + kubeconfig, "HELM_CACHE_HOME=" + GinkgoT().TempDir(),
			"HELM_CONFIG_HOME=" + GinkgoT().TempDir(), "HELM_DATA_HOME=" + GinkgoT().TempDir()},
			nil, helmBin, args...)
		Expect(err).NotTo(HaveOccurred())
		return out
	}
	// rolledOut waits for the Deployment to run its current template only,
	// every replica available, and returns it.
	rolledOut := func(ctx context.Context, ns, name string) *appsv1.Deployment {
		GinkgoHelper()
		var d appsv1.Deployment
		Eventually(ctx, func(g Gomega) {
			g.Expect(k8sClient.Get(ctx, key(ns, name), &d)).To(Succeed())
			g.Expect(d.Status.ObservedGeneration).To(Equal(d.Generation))
			g.Expect(d.Status.UpdatedReplicas).To(Equal(*d.Spec.Replicas))
			g.Expect(d.Status.Replicas).To(Equal(*d.Spec.Replicas), "old pods still running")
			g.Expect(d.Status.AvailableReplicas).To(Equal(*d.Spec.Replicas))
		}).WithTimeout(rolloutTimeout).Should(Succeed(), "Deployment %s/%s rolled out", ns, name)
		return &d
	}
	scaleSuiteOperator := func(ctx context.Context, replicas string) {
		GinkgoHelper()
		kubectl(ctx, "scale", "-n", operatorNamespace, "deployment/"+operatorDeployment, "--replicas="+replicas)
		rolledOut(ctx, operatorNamespace, operatorDeployment)
	}

	BeforeAll(func(ctx SpecContext) {
		runHack(ctx, "build-go-tool.sh", "helm")
		helmBin = filepath.Join(root, "bin", "helm")
		scaleSuiteOperator(ctx, "0")
		DeferCleanup(func(ctx SpecContext) {
			gone := func(ns string) {
				Eventually(ctx, func() bool {
					return apierrors.IsNotFound(k8sClient.Get(ctx, client.ObjectKey{Name: ns}, &corev1.Namespace{}))
				}).WithTimeout(timeout).Should(BeTrue(), "namespace %s deleted", ns)
			}
			// The cache goes first, while the chart's operator runs: its
			// finalizer needs one (docs/install.md: delete caches before
			// uninstalling the operator).
			kubectl(ctx, "delete", "namespace", checkNamespace, "--ignore-not-found", "--wait=false")
			gone(checkNamespace)
			_, _ = run(ctx, []string{"KUBECONFIG=" + kubeconfig}, nil, helmBin, "uninstall", helmRelease,
				"--namespace", helmNamespace, "--ignore-not-found", "--wait")
			kubectl(ctx, "delete", "namespace", helmNamespace, "--ignore-not-found", "--wait=false")
			gone(helmNamespace)
			scaleSuiteOperator(ctx, "1")
		}, NodeTimeout(rolloutTimeout+2*timeout))
	}, NodeTimeout(rolloutTimeout+commandTimeout))

	It("installs with the local images; its operator reconciles a cache", func(ctx SpecContext) {
		helm(ctx, "install", helmRelease, filepath.Join(root, "charts", "distcache"),
			"--namespace", helmNamespace, "--create-namespace", "--wait", "--timeout", "5m",
			"--set", "crd.enabled=false",
			"--set", "manager.image.repository=distcache.local/operator", "--set", "manager.image.tag=dev",
			"--set", "manager.image.pullPolicy=Never",
			"--set", "cachenode.image.repository=distcache.local/cachenode", "--set", "cachenode.image.tag=dev")
		d := rolledOut(ctx, helmNamespace, helmDeployment)
		Expect(d.Spec.Template.Spec.Containers[0].Image).To(Equal(operatorImage))

		kubectlIn(ctx, []byte(`
apiVersion: v1
kind: Namespace
metadata:
  name: `+checkNamespace+`
  labels:
    pod-security.kubernetes.io/enforce: restricted
---
apiVersion: cache.distcache.io/v1alpha1
kind: DistributedCache
metadata:
  name: `+checkCache+`
  namespace: `+checkNamespace+`
spec:
  replicas: 1
  zones:
  - name: `+zone+`
  storage:
    emptyDir: {}
  diskSize: 256Mi
  memorySize: 64Mi
  imagePullPolicy: Never
  s3:
    endpoint: http://minio.minio.svc:9000
    pathStyle: true
`), "apply", "--server-side", "-f", "-")
		Eventually(ctx, func(g Gomega) {
			var sts appsv1.StatefulSet
			g.Expect(k8sClient.Get(ctx, key(checkNamespace, checkCache+"-"+zone), &sts)).To(Succeed())
			g.Expect(sts.Spec.Template.Spec.Containers[0].Image).To(Equal(cachenodeImage), "the chart's cachenode.image")
			var dc cachev1alpha1.DistributedCache
			g.Expect(k8sClient.Get(ctx, key(checkNamespace, checkCache), &dc)).To(Succeed())
			g.Expect(dc.Status.OperatorVersion).NotTo(BeEmpty())
		}).Should(Succeed(), "the chart's operator reconciled the cache")
	})

	It("upgrades: the Deployment rolls to the new values and the new operator takes over", func(ctx SpecContext) {
		before := rolledOut(ctx, helmNamespace, helmDeployment)
		helm(ctx, "upgrade", helmRelease, filepath.Join(root, "charts", "distcache"),
			"--namespace", helmNamespace, "--reuse-values", "--wait", "--timeout", "5m",
			"--set", "manager.resources.limits.memory=300Mi", "--set-string", "manager.pod.annotations.upgraded=yes")
		after := rolledOut(ctx, helmNamespace, helmDeployment)
		Expect(after.Generation).To(BeNumerically(">", before.Generation))
		Expect(after.Spec.Template.Annotations).To(HaveKeyWithValue("upgraded", "yes"))
		Expect(after.Spec.Template.Spec.Containers[0].Resources.Limits.Memory().String()).To(Equal("300Mi"))
		Expect(helm(ctx, "history", helmRelease, "--namespace", helmNamespace)).To(And(
			ContainSubstring("Install complete"), ContainSubstring("Upgrade complete")))

		// The upgraded operator is the one reconciling now.
		kubectl(ctx, "scale", "-n", checkNamespace, "distributedcache/"+checkCache, "--replicas=2")
		Eventually(ctx, func(g Gomega) {
			var sts appsv1.StatefulSet
			g.Expect(k8sClient.Get(ctx, key(checkNamespace, checkCache+"-"+zone), &sts)).To(Succeed())
			g.Expect(*sts.Spec.Replicas).To(Equal(int32(2)))
		}).Should(Succeed(), "the upgraded operator scaled the cache")
	})
})
