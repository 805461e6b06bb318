// Package cluster_test runs distcache on a real Kubernetes cluster: the
// single-node cluster of hack/cluster.sh (kubelet, containerd, the control
// plane, kube-proxy and CoreDNS on this machine), with the operator deployed
// as `make deploy` installs it and config/local applied on top (MinIO as a
// pod, the 3-node DistributedCache `demo` on hostPath in namespace
// distcache, the CacheTenant `clickhouse` and its S3 gateway in namespace
// analytics).
//
// The specs run in order, as a platform engineer and a tenant would: apply
// the cache and the tenant; write and read objects through the gateway;
// `kubectl scale` up and down while a reader keeps checking every byte;
// delete a cache pod; roll the pods with a spec change; have an invalid
// cache refused; delete the cache and watch the garbage collector take
// everything it owned. Changes go through bin/kubectl, as a user makes
// them; state is polled with controller-runtime's client. The host reaches
// pod IPs directly (the node is this machine), so the suite talks to MinIO,
// the gateway's S3 port and each cache pod's /metrics without port-forwards.
//
// It needs root (hack/cluster.sh runs kubelet). Not root: skipped, unless
// CI is set, when it fails instead. A cluster that is already up
// (`hack/cluster.sh status`) is reused, its images rebuilt and imported
// (`hack/cluster.sh images`), and left up; otherwise the suite brings one
// up and tears it down at the end unless DISTCACHE_KEEP_CLUSTER=1. On a
// reused cluster the suite owns the namespaces of config/local (minio,
// distcache, analytics): it deletes them before it starts and when it ends.
//
// Run: go test -count=1 -v -timeout 40m ./e2e/cluster/
package cluster_test

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/tools/clientcmd"
	"sigs.k8s.io/controller-runtime/pkg/client"

	cachev1alpha1 "github.com/distcache/distcache/api/v1alpha1"
	"github.com/distcache/distcache/internal/testutil/kubetest"
)

const (
	// The images hack/cluster-images.sh builds and imports.
	operatorImage  = "distcache.local/operator:dev"
	cachenodeImage = "distcache.local/cachenode:dev"

	// What config/default and config/local name.
	operatorNamespace  = "distcache-system"
	operatorDeployment = "distcache-controller-manager"
	cacheNamespace     = "distcache"
	cacheName          = "demo"
	zone               = "zone-a"
	zoneB              = "zone-b" // hack/cluster.sh's second node
	statefulSetName    = cacheName + "-" + zone
	ringConfigMap      = cacheName + "-ring"
	tenantNamespace    = "analytics"
	tenantName         = "clickhouse"
	tenantSecret       = "clickhouse-distcache-client"
	// The tenant's operator-run gateway (spec.gateway): its zone's
	// Deployment, its Service and the Secret of keys clients sign with.
	gatewayName       = tenantName + "-gateway-" + zone
	gatewayService    = tenantName + "-gateway"
	gatewayKeysSecret = tenantName + "-s3-credentials"
	gatewayPort       = 8099
	minioNamespace    = "minio"
	minioName         = "minio"
	minioRootSecret   = "minio-root"
	bucket            = "analytics-data"
	chunkSize         = 1 << 20 // spec.chunkSize of config/local

	// The node hack/cluster.sh brings up is labelled like an NVMe instance
	// in zone-a.
	nodeInstanceType = "i4i.2xlarge"

	// Waits, generous for a loaded machine. The nodes follow the ring
	// ConfigMap and the tenants Secret through the API server (a second or
	// so); the mounted files the kubelet refreshes every minute or more are
	// only their start values.
	timeout     = 3 * time.Minute
	ringTimeout = 4 * time.Minute
	// accessEndBound bounds the time from deleting a CacheTenant to the
	// first read of its gateway that is refused.
	accessEndBound  = 30 * time.Second
	rolloutTimeout  = 8 * time.Minute
	interval        = 250 * time.Millisecond
	commandTimeout  = 2 * time.Minute
	clusterUpBudget = 30 * time.Minute
)

var (
	root       string // repository root
	kubectlBin string
	kubeconfig string
	k8sClient  client.Client
	scheme     = runtime.NewScheme()

	// ownCluster: the suite brought the cluster up and takes it down.
	ownCluster bool
	// clusterUsable: BeforeSuite got as far as a working cluster, so
	// AfterSuite has something to clean up.
	clusterUsable bool
)

func TestCluster(t *testing.T) {
	if os.Geteuid() != 0 {
		const why = "e2e/cluster needs root: it runs a real Kubernetes node on this machine (hack/cluster.sh)"
		if os.Getenv("CI") != "" {
			t.Fatal(why + "; CI is set, so this is a failure, not a skip: run the tests as root on CI")
		}
		t.Skip(why + "; run as root to include it (with CI set, not being root fails instead)")
	}
	kubetest.RunSuite(t, "cluster suite")
}

var _ = BeforeSuite(func(ctx SpecContext) {
	root = kubetest.SetUpSuite(scheme, timeout, interval)
	Expect(apiextensionsv1.AddToScheme(scheme)).To(Succeed())
	kubectlBin = filepath.Join(root, "bin", "kubectl")
	DeferCleanup(func(ctx SpecContext) {
		if CurrentSpecReport().Failed() && clusterUsable {
			dumpDiagnostics(ctx)
		}
	}, NodeTimeout(5*time.Minute))

	start := time.Now()
	startCluster(ctx)
	clusterTime := time.Since(start)
	cfg, err := clientcmd.BuildConfigFromFlags("", kubeconfig)
	Expect(err).NotTo(HaveOccurred())
	cfg.QPS, cfg.Burst = 50, 100
	k8sClient, err = client.New(cfg, client.Options{Scheme: scheme})
	Expect(err).NotTo(HaveOccurred())
	clusterUsable = true

	start = time.Now()
	deployOperator(ctx)
	removeLeftovers(ctx)
	how := "reused, images rebuilt and imported"
	if ownCluster {
		how = "brought up"
	}
	AddReportEntry("cluster", fmt.Sprintf("%s in %s; operator deployed and leftovers removed in %s",
		how, clusterTime.Round(time.Second), time.Since(start).Round(time.Second)))
}, NodeTimeout(clusterUpBudget))

var _ = AfterSuite(func(ctx SpecContext) {
	switch {
	case ownCluster && os.Getenv("DISTCACHE_KEEP_CLUSTER") == "1":
		fmt.Fprintf(GinkgoWriter, "DISTCACHE_KEEP_CLUSTER=1: the cluster stays up (KUBECONFIG=%s; hack/cluster.sh down removes it)\n", kubeconfig)
	case ownCluster:
		runHack(ctx, "cluster.sh", "down")
	case clusterUsable:
		// A cluster someone else brought up: leave it as found, minus what
		// the suite applied (the operator stays installed).
		_, err := kubectlStdin(ctx, renderLocal(ctx), "delete", "--ignore-not-found", "--wait=false", "-f", "-")
		Expect(err).NotTo(HaveOccurred())
	}
}, NodeTimeout(10*time.Minute))

// startCluster reuses a running cluster (with fresh images) or brings one up.
func startCluster(ctx context.Context) {
	GinkgoHelper()
	if _, err := tryHack(ctx, "cluster.sh", "status"); err == nil {
		fmt.Fprintln(GinkgoWriter, "reusing the running cluster; rebuilding and importing the images")
		runHack(ctx, "cluster.sh", "images")
		kubeconfig = strings.TrimSpace(runHack(ctx, "cluster.sh", "kubeconfig"))
		return
	}
	fmt.Fprintln(GinkgoWriter, "no cluster is up: hack/cluster.sh up")
	ownCluster = true
	out := strings.TrimSpace(runHack(ctx, "cluster.sh", "up"))
	// up prints the kubeconfig path as its last line.
	lines := strings.Split(out, "\n")
	kubeconfig = strings.TrimSpace(lines[len(lines)-1])
	Expect(kubeconfig).To(BeAnExistingFile(), "hack/cluster.sh up printed %q", out)
}

// deployOperator installs the operator as `make deploy` does (rendered by
// hack/deploy-manifests.sh, applied server-side), from testdata/operator:
// config/default with --ring-drain-grace=15s and --ca-rotation-grace=30s. On a reused cluster the
// Deployment is restarted so that it runs the image just imported (same
// tag, so the template does not change).
func deployOperator(ctx context.Context) {
	GinkgoHelper()
	manifests := runHackEnv(ctx, []string{
		"KUBECTL=" + kubectlBin, "IMG=" + operatorImage, "CACHENODE_IMG=" + cachenodeImage,
		"CONFIG_DIR=" + filepath.Join("e2e", "cluster", "testdata", "operator"),
	}, "deploy-manifests.sh")
	kubectlIn(ctx, []byte(manifests), "apply", "--server-side", "--force-conflicts", "-f", "-")
	for _, crd := range []string{"distributedcaches.cache.distcache.io", "cachetenants.cache.distcache.io"} {
		Eventually(ctx, func(g Gomega) {
			var c apiextensionsv1.CustomResourceDefinition
			g.Expect(k8sClient.Get(ctx, client.ObjectKey{Name: crd}, &c)).To(Succeed())
			g.Expect(c.Status.Conditions).To(ContainElement(And(
				HaveField("Type", apiextensionsv1.Established), HaveField("Status", apiextensionsv1.ConditionTrue))))
		}).Should(Succeed(), "CRD %s established", crd)
	}
	if !ownCluster {
		kubectl(ctx, "rollout", "restart", "-n", operatorNamespace, "deployment/"+operatorDeployment)
	}
	Eventually(ctx, func(g Gomega) {
		var d appsv1.Deployment
		g.Expect(k8sClient.Get(ctx, client.ObjectKey{Namespace: operatorNamespace, Name: operatorDeployment}, &d)).To(Succeed())
		g.Expect(d.Status.ObservedGeneration).To(Equal(d.Generation))
		g.Expect(d.Status.UpdatedReplicas).To(Equal(*d.Spec.Replicas))
		g.Expect(d.Status.Replicas).To(Equal(*d.Spec.Replicas), "old operator pods still running")
		g.Expect(d.Status.AvailableReplicas).To(Equal(*d.Spec.Replicas))
		g.Expect(d.Spec.Template.Spec.Containers[0].Args).To(ContainElements("--ring-drain-grace=15s", "--ca-rotation-grace=30s"))
	}).WithTimeout(timeout).Should(Succeed(), "operator Deployment rolled out")
}

// removeLeftovers deletes what a previous run may have left (its
// namespaces, with the cache, tenant, gateway and MinIO) and the cache's
// host directory, so every run starts with cold caches and empty S3.
func removeLeftovers(ctx context.Context) {
	GinkgoHelper()
	_, err := kubectlStdin(ctx, renderLocal(ctx), "delete", "--ignore-not-found", "--wait=false", "-f", "-")
	Expect(err).NotTo(HaveOccurred())
	// The operator goes with the rest, so no one would lift a leftover
	// cache's finalizer (controllers.CacheFinalizer): a previous run's
	// cache is let go by hand.
	var caches cachev1alpha1.DistributedCacheList
	Expect(k8sClient.List(ctx, &caches)).To(Succeed())
	for i := range caches.Items {
		dc := &caches.Items[i]
		if len(dc.Finalizers) > 0 {
			patch := client.MergeFrom(dc.DeepCopy())
			dc.Finalizers = nil
			Expect(client.IgnoreNotFound(k8sClient.Patch(ctx, dc, patch))).To(Succeed())
		}
	}
	for _, ns := range []string{cacheNamespace, tenantNamespace, minioNamespace} {
		Eventually(ctx, func() bool {
			err := k8sClient.Get(ctx, client.ObjectKey{Name: ns}, &corev1.Namespace{})
			return apierrors.IsNotFound(err)
		}).WithTimeout(timeout).Should(BeTrue(), "namespace %s of a previous run deleted", ns)
	}
	dir := hostPathDir(ctx)
	Expect(os.RemoveAll(dir)).To(Succeed())
	fmt.Fprintf(GinkgoWriter, "removed %s\n", dir)
}

// hostPathDir is the directory on this machine (the node) holding the
// cache pods' disk tiers: spec.storage.hostPath.path/<cache>.
func hostPathDir(ctx context.Context) string {
	GinkgoHelper()
	for _, obj := range kubetest.Decode(renderLocal(ctx)) {
		if obj.GetKind() != "DistributedCache" {
			continue
		}
		var dc cachev1alpha1.DistributedCache
		kubetest.Convert(obj, &dc)
		Expect(dc.Spec.Storage.HostPath).NotTo(BeNil(), "config/local's cache stores on a hostPath")
		Expect(dc.Spec.Storage.HostPath.Path).To(HavePrefix("/var/lib/distcache-cluster/"), "not a test directory")
		return filepath.Join(dc.Spec.Storage.HostPath.Path, dc.Name)
	}
	Fail("no DistributedCache in config/local")
	return ""
}
