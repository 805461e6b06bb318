package cluster_test

import (
	"bufio"
	"bytes"
	"context"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	cachev1alpha1 "github.com/distcache/distcache/api/v1alpha1"
	"github.com/distcache/distcache/controllers"
	"github.com/distcache/distcache/internal/ring"
	"github.com/distcache/distcache/internal/testutil/kubetest"
)

// ---------------------------------------------------------------- commands

// commandError carries a failed command's stderr.
type commandError struct {
	cmd    string
	err    error
	stderr string
}

func (e *commandError) Error() string {
	return fmt.Sprintf("%s: %v: %s", e.cmd, e.err, strings.TrimSpace(e.stderr))
}

// run runs name with args in the repository root and returns its stdout;
// stderr goes to GinkgoWriter as well as into the error.
func run(ctx context.Context, env []string, stdin []byte, name string, args ...string) (string, error) {
	cmd := exec.CommandContext(ctx, name, args...)
	cmd.Dir = root
	cmd.Env = append(os.Environ(), env...)
	if stdin != nil {
		cmd.Stdin = bytes.NewReader(stdin)
	}
	var stdout, stderr bytes.Buffer
	cmd.Stdout = &stdout
	cmd.Stderr = io.MultiWriter(&stderr, GinkgoWriter)
	cmd.WaitDelay = 10 * time.Second
	if err := cmd.Run(); err != nil {
		return stdout.String(), &commandError{cmd: name + " " + strings.Join(args, " "), err: err, stderr: stderr.String()}
	}
	return stdout.String(), nil
}

// tryHack runs hack/SCRIPT.
func tryHack(ctx context.Context, script string, args ...string) (string, error) {
	fmt.Fprintf(GinkgoWriter, "$ hack/%s %s\n", script, strings.Join(args, " "))
	return run(ctx, nil, nil, filepath.Join(root, "hack", script), args...)
}

func runHack(ctx context.Context, script string, args ...string) string {
	GinkgoHelper()
	out, err := tryHack(ctx, script, args...)
	Expect(err).NotTo(HaveOccurred())
	return out
}

func runHackEnv(ctx context.Context, env []string, script string, args ...string) string {
	GinkgoHelper()
	out, err := run(ctx, env, nil, filepath.Join(root, "hack", script), args...)
	Expect(err).NotTo(HaveOccurred())
	return out
}

// kubectlStdin runs bin/kubectl against the cluster, with stdin, bounded
// by commandTimeout.
func kubectlStdin(ctx context.Context, stdin []byte, args ...string) (string, error) {
	ctx, cancel := context.WithTimeout(ctx, commandTimeout)
	defer cancel()
	fmt.Fprintf(GinkgoWriter, "$ kubectl %s\n", strings.Join(args, " "))
	return run(ctx, nil, stdin, kubectlBin, append([]string{"--kubeconfig=" + kubeconfig}, args...)...)
}

// kubectl runs kubectl and fails the spec if it fails.
func kubectl(ctx context.Context, args ...string) string {
	GinkgoHelper()
	return kubectlIn(ctx, nil, args...)
}

// kubectlIn is kubectl with stdin.
func kubectlIn(ctx context.Context, stdin []byte, args ...string) string {
	GinkgoHelper()
	out, err := kubectlStdin(ctx, stdin, args...)
	Expect(err).NotTo(HaveOccurred())
	return out
}

var localManifests []byte

// renderLocal is testdata/local rendered by kubectl's kustomize: config/local
// with the gateway's page cache off.
func renderLocal(ctx context.Context) []byte {
	GinkgoHelper()
	if localManifests == nil {
		out, err := run(ctx, nil, nil, kubectlBin, "kustomize", filepath.Join("e2e", "cluster", "testdata", "local"))
		Expect(err).NotTo(HaveOccurred())
		localManifests = []byte(out)
	}
	return localManifests
}

// localObjects are config/local's DistributedCache, CacheTenant and the S3
// Secret in the cache's namespace.
func localObjects(ctx context.Context) (dc cachev1alpha1.DistributedCache, tenant cachev1alpha1.CacheTenant, s3Secret corev1.Secret) {
	GinkgoHelper()
	for _, obj := range kubetest.Decode(renderLocal(ctx)) {
		switch obj.GetKind() {
		case "DistributedCache":
			kubetest.Convert(obj, &dc)
		case "CacheTenant":
			kubetest.Convert(obj, &tenant)
		case "Secret":
			if obj.GetNamespace() == cacheNamespace {
				kubetest.Convert(obj, &s3Secret)
			}
		}
	}
	return dc, tenant, s3Secret
}

// ---------------------------------------------------------------- state

func key(ns, name string) client.ObjectKey { return client.ObjectKey{Namespace: ns, Name: name} }

func getCache(ctx context.Context, g Gomega) *cachev1alpha1.DistributedCache {
	var dc cachev1alpha1.DistributedCache
	g.Expect(k8sClient.Get(ctx, key(cacheNamespace, cacheName), &dc)).To(Succeed())
	return &dc
}

// deleteNamespaces deletes the namespaces and waits until they are gone.
func deleteNamespaces(ctx context.Context, namespaces ...string) {
	GinkgoHelper()
	for _, ns := range namespaces {
		err := k8sClient.Delete(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}})
		Expect(client.IgnoreNotFound(err)).To(Succeed())
	}
	for _, ns := range namespaces {
		Eventually(ctx, func() bool {
			return apierrors.IsNotFound(k8sClient.Get(ctx, key("", ns), &corev1.Namespace{}))
		}).WithTimeout(timeout).Should(BeTrue(), "namespace %s deleted", ns)
	}
}

func podReady(p *corev1.Pod) bool {
	if p.DeletionTimestamp != nil || p.Status.Phase != corev1.PodRunning {
		return false
	}
	for _, c := range p.Status.Conditions {
		if c.Type == corev1.PodReady {
			return c.Status == corev1.ConditionTrue
		}
	}
	return false
}

// cachePods are the cache's node pods, by name.
func cachePods(ctx context.Context, g Gomega) []corev1.Pod {
	var pods corev1.PodList
	g.Expect(k8sClient.List(ctx, &pods, client.InNamespace(cacheNamespace),
		client.MatchingLabels{controllers.LabelName: controllers.NodeAppName, controllers.LabelInstance: cacheName})).To(Succeed())
	slices.SortFunc(pods.Items, func(a, b corev1.Pod) int { return strings.Compare(a.Name, b.Name) })
	return pods.Items
}

func podNames(pods []corev1.Pod) []string {
	var names []string
	for _, p := range pods {
		names = append(names, p.Name)
	}
	return names
}

func ordinalPod(i int) string { return fmt.Sprintf("%s-%d", statefulSetName, i) }

func ordinalPods(n int) []string {
	var names []string
	for i := range n {
		names = append(names, ordinalPod(i))
	}
	return names
}

// expectCacheReady checks that exactly the pods demo-zone-a-0..n-1 run,
// Ready, on the node labelled as an NVMe instance in the zone, and that the
// DistributedCache says so in its status. It returns the pods.
func expectCacheReady(ctx context.Context, g Gomega, n int) []corev1.Pod {
	pods := cachePods(ctx, g)
	g.Expect(podNames(pods)).To(Equal(ordinalPods(n)))
	for i := range pods {
		p := &pods[i]
		g.Expect(podReady(p)).To(BeTrue(), "pod %s Ready", p.Name)
		g.Expect(p.Status.PodIP).NotTo(BeEmpty())
	}
	var sts appsv1.StatefulSet
	g.Expect(k8sClient.Get(ctx, key(cacheNamespace, statefulSetName), &sts)).To(Succeed())
	g.Expect(sts.Spec.Replicas).To(HaveValue(BeEquivalentTo(n)))
	g.Expect(sts.Status.ReadyReplicas).To(BeEquivalentTo(n))
	dc := getCache(ctx, g)
	g.Expect(dc.Status.ObservedGeneration).To(Equal(dc.Generation))
	g.Expect(dc.Status.Replicas).To(BeEquivalentTo(n))
	g.Expect(dc.Status.ReadyReplicas).To(BeEquivalentTo(n))
	ready := meta.FindStatusCondition(dc.Status.Conditions, cachev1alpha1.ConditionReady)
	g.Expect(ready).NotTo(BeNil())
	g.Expect(ready.Status).To(Equal(metav1.ConditionTrue), "Ready: %s %s", ready.Reason, ready.Message)
	g.Expect(ready.ObservedGeneration).To(Equal(dc.Generation))
	return pods
}

// publishedRing is the zone's ring document in the ConfigMap demo-ring.
func publishedRing(ctx context.Context, g Gomega) ring.Spec {
	var cm corev1.ConfigMap
	g.Expect(k8sClient.Get(ctx, key(cacheNamespace, ringConfigMap), &cm)).To(Succeed())
	doc, ok := cm.Data[zone+".json"]
	g.Expect(ok).To(BeTrue(), "ConfigMap %s has no key %s.json", ringConfigMap, zone)
	r, err := ring.Parse([]byte(doc))
	g.Expect(err).NotTo(HaveOccurred())
	return r.Spec()
}

// activeRing is the map memberStates has for the pods 0..n-1, all active.
func activeRing(n int) map[string]ring.State {
	out := map[string]ring.State{}
	for _, name := range ordinalPods(n) {
		out[name] = ring.StateActive
	}
	return out
}

// gatewayPod is the gateway's Ready pod (one that is terminating, after a
// rollout or a deletion, does not count).
func gatewayPod(ctx context.Context, g Gomega) corev1.Pod {
	var pods corev1.PodList
	g.Expect(k8sClient.List(ctx, &pods, client.InNamespace(tenantNamespace), client.MatchingLabels{
		controllers.LabelInstance: gatewayService, controllers.LabelZone: zone})).To(Succeed())
	var live []corev1.Pod
	for _, p := range pods.Items {
		if p.DeletionTimestamp == nil {
			live = append(live, p)
		}
	}
	g.Expect(live).To(HaveLen(1), "gateway pods not terminating")
	g.Expect(podReady(&live[0])).To(BeTrue(), "gateway pod Ready")
	return live[0]
}

// ---------------------------------------------------------------- diagnostics

// dumpDiagnostics writes what one needs to see why a spec failed: every
// pod, the cache's objects and events, and the logs of the operator, the
// gateway and the cache nodes.
func dumpDiagnostics(ctx context.Context) {
	fmt.Fprintln(GinkgoWriter, "\n======== diagnostics ========")
	for _, args := range [][]string{
		{"get", "nodes", "-o", "wide", "--show-labels"},
		{"get", "pods", "-A", "-o", "wide"},
		{"get", "distributedcaches,cachetenants", "-A", "-o", "wide"},
		{"get", "statefulsets,services,configmaps,secrets,poddisruptionbudgets", "-n", cacheNamespace},
		{"describe", "distributedcache", "-n", cacheNamespace, cacheName},
		{"describe", "cachetenant", "-n", tenantNamespace, tenantName},
		{"describe", "statefulset", "-n", cacheNamespace},
		{"describe", "pods", "-n", cacheNamespace},
		{"get", "configmap", ringConfigMap, "-n", cacheNamespace, "-o", "yaml"},
		{"get", "events", "-A", "--sort-by=.lastTimestamp"},
		{"logs", "-n", operatorNamespace, "deployment/" + operatorDeployment, "--tail=300"},
		{"logs", "-n", tenantNamespace, "deployment/" + gatewayName, "--tail=100"},
		{"logs", "-n", cacheNamespace, "-l", controllers.LabelInstance + "=" + cacheName, "--prefix", "--tail=100", "--max-log-requests=10"},
		{"logs", "-n", cacheNamespace, "-l", controllers.LabelInstance + "=" + cacheName, "--prefix", "--tail=50", "--previous", "--max-log-requests=10"},
	} {
		out, err := kubectlStdin(ctx, nil, args...)
		fmt.Fprintf(GinkgoWriter, "---- kubectl %s\n", strings.Join(args, " "))
		if args[0] == "get" && args[1] == "events" {
			out = lastLines(out, 60)
		}
		fmt.Fprint(GinkgoWriter, out)
		if err != nil {
			fmt.Fprintf(GinkgoWriter, "(%v)\n", err)
		}
	}
	fmt.Fprintln(GinkgoWriter, "======== end of diagnostics ========")
}

func lastLines(s string, n int) string {
	var lines []string
	sc := bufio.NewScanner(strings.NewReader(s))
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	for sc.Scan() {
		lines = append(lines, sc.Text())
	}
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return strings.Join(lines, "\n") + "\n"
}
