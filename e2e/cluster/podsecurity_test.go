package cluster_test

import (
	"context"
	"fmt"
	"net"
	"strings"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	cachev1alpha1 "github.com/distcache/distcache/api/v1alpha1"
	"github.com/distcache/distcache/controllers"
	"github.com/distcache/distcache/internal/testutil"
	"github.com/distcache/distcache/internal/testutil/kubetest"
)

// Pod Security (docs/operations.md, "Pod Security"): a cache on emptyDir
// and a tenant's gateway run in namespaces that enforce the restricted
// level, the API server's PodSecurity admission (on by default in
// kube-apiserver) judging every pod; a hostPath cache there is refused.
// The namespaces are the spec's own; the S3 backend is config/local's
// MinIO, applied here if the main specs have not yet.
var _ = Describe("Pod Security on a real cluster", Ordered, func() {
	const (
		cacheNS  = "psa-cache"
		tenantNS = "psa-tenant"
		name     = "restricted"
	)
	restricted := map[string]string{
		"pod-security.kubernetes.io/enforce":         "restricted",
		"pod-security.kubernetes.io/enforce-version": "latest",
	}
	BeforeAll(func(ctx SpecContext) {
		deleteNamespaces(ctx, cacheNS, tenantNS) // a previous run's
		DeferCleanup(func(ctx SpecContext) {
			if CurrentSpecReport().Failed() {
				dumpNamespaces(ctx, cacheNS, tenantNS)
			}
			deleteNamespaces(ctx, cacheNS, tenantNS)
		}, NodeTimeout(5*time.Minute))
	}, NodeTimeout(5*time.Minute))

	It("runs an emptyDir cache and a tenant's gateway in namespaces that enforce restricted, and refuses a hostPath cache there", func(ctx SpecContext) {
		local, localTenant, s3Secret := localObjects(ctx)
		Expect(local.Name).NotTo(BeEmpty())
		Expect(localTenant.Spec.Gateway).NotTo(BeNil())
		Expect(s3Secret.StringData).NotTo(BeEmpty(), "config/local's S3 Secret")
		ensureMinIO(ctx)

		By("namespaces labelled pod-security.kubernetes.io/enforce=restricted, the tenant's admitted by the cache's selector")
		tenantLabels := map[string]string{}
		for k, v := range restricted {
			tenantLabels[k] = v
		}
		for k, v := range local.Spec.TenantNamespaceSelector.MatchLabels {
			tenantLabels[k] = v
		}
		Expect(k8sClient.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: cacheNS, Labels: restricted}})).To(Succeed())
		Expect(k8sClient.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: tenantNS, Labels: tenantLabels}})).To(Succeed())

		By("the level is enforced there: a privileged pod is refused")
		priv := &corev1.Pod{
			ObjectMeta: metav1.ObjectMeta{Namespace: cacheNS, Name: "privileged"},
			Spec: corev1.PodSpec{Containers: []corev1.Container{{
				Name: "c", Image: cachenodeImage, ImagePullPolicy: corev1.PullNever,
				SecurityContext: &corev1.SecurityContext{Privileged: ptr.To(true)},
			}}},
		}
		err := k8sClient.Create(ctx, priv, client.DryRunAll)
		Expect(apierrors.IsForbidden(err)).To(BeTrue(), "%v", err)
		Expect(err.Error()).To(ContainSubstring(`violates PodSecurity "restricted:latest"`))

		By("a one-node emptyDir cache and a tenant with a gateway")
		secret := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: cacheNS, Name: s3Secret.Name}, StringData: s3Secret.StringData}
		Expect(k8sClient.Create(ctx, secret)).To(Succeed())
		dc := &cachev1alpha1.DistributedCache{ObjectMeta: metav1.ObjectMeta{Namespace: cacheNS, Name: name}, Spec: *local.Spec.DeepCopy()}
		dc.Spec.Replicas = ptr.To[int32](1)
		dc.Spec.Storage = cachev1alpha1.StorageSpec{EmptyDir: &cachev1alpha1.EmptyDirStorage{SizeLimit: ptr.To(resource.MustParse("2Gi"))}}
		dc.Spec.Monitoring = cachev1alpha1.MonitoringSpec{}
		Expect(k8sClient.Create(ctx, dc)).To(Succeed())
		t := &cachev1alpha1.CacheTenant{
			ObjectMeta: metav1.ObjectMeta{Namespace: tenantNS, Name: name},
			Spec: cachev1alpha1.CacheTenantSpec{
				CacheRef: cachev1alpha1.CacheReference{Namespace: cacheNS, Name: name},
				Buckets:  localTenant.Spec.Buckets,
				Gateway:  localTenant.Spec.Gateway.DeepCopy(),
			},
		}
		Expect(k8sClient.Create(ctx, t)).To(Succeed())

		By("the cache pod and the gateway pod are admitted, start and turn Ready")
		var node, gw corev1.Pod
		Eventually(ctx, func(g Gomega) {
			node = onlyReadyPod(ctx, g, cacheNS, client.MatchingLabels{controllers.LabelName: controllers.NodeAppName, controllers.LabelInstance: name})
			gw = onlyReadyPod(ctx, g, tenantNS, client.MatchingLabels{controllers.LabelInstance: name + "-gateway", controllers.LabelZone: zone})
			var got cachev1alpha1.CacheTenant
			g.Expect(k8sClient.Get(ctx, key(tenantNS, name), &got)).To(Succeed())
			g.Expect(got.Status.Conditions).To(ContainElement(And(
				HaveField("Type", cachev1alpha1.ConditionGatewayReady), HaveField("Status", metav1.ConditionTrue))))
		}).WithTimeout(rolloutTimeout).Should(Succeed())
		for _, p := range []corev1.Pod{node, gw} {
			// What the admission plugin saw: the operator's settings, not
			// defaults a mutating webhook might have added.
			Expect(p.Spec.SecurityContext.RunAsNonRoot).To(HaveValue(BeTrue()), p.Name)
			Expect(p.Spec.SecurityContext.SeccompProfile).To(HaveField("Type", corev1.SeccompProfileTypeRuntimeDefault), p.Name)
			for _, c := range p.Spec.Containers {
				Expect(c.SecurityContext.AllowPrivilegeEscalation).To(HaveValue(BeFalse()), "%s/%s", p.Name, c.Name)
				Expect(c.SecurityContext.Capabilities.Drop).To(ConsistOf(corev1.Capability("ALL")), "%s/%s", p.Name, c.Name)
			}
		}

		By("objects written and read through the restricted gateway come back byte-exact, stored on the restricted node's disk tier")
		keyID := secretValue(ctx, Default, tenantNS, name+"-s3-credentials", "AWS_ACCESS_KEY_ID")
		secretKey := secretValue(ctx, Default, tenantNS, name+"-s3-credentials", "AWS_SECRET_ACCESS_KEY")
		c := testutil.S3Client("http://"+net.JoinHostPort(gw.Status.PodIP, fmt.Sprint(gatewayPort)), keyID, secretKey)
		objs := dataSet(fmt.Sprintf("e2e-podsecurity/%d", time.Now().UnixNano()))[:6]
		putAll(ctx, c, objs)
		readAll(ctx, c, objs)
		Eventually(ctx, func(g Gomega) {
			m := scrapePods(ctx, g, []corev1.Pod{node})[node.Name].m
			g.Expect(m.Sum(mStoreChunks, nil)).To(BeNumerically(">", 0), "chunks on the node's emptyDir")
		}).Should(Succeed())

		By("a hostPath cache in the same namespace gets no pod: the PodSecurity admission refuses it")
		hp := &cachev1alpha1.DistributedCache{ObjectMeta: metav1.ObjectMeta{Namespace: cacheNS, Name: name + "-hostpath"}, Spec: *dc.Spec.DeepCopy()}
		hp.Spec.Storage = cachev1alpha1.StorageSpec{HostPath: &cachev1alpha1.HostPathStorage{Path: "/var/lib/distcache-cluster/volumes/psa"}}
		Expect(k8sClient.Create(ctx, hp)).To(Succeed())
		sts := hp.Name + "-" + zone
		Eventually(ctx, func(g Gomega) {
			var events corev1.EventList
			g.Expect(k8sClient.List(ctx, &events, client.InNamespace(cacheNS))).To(Succeed())
			var refusals []string
			for _, e := range events.Items {
				if e.InvolvedObject.Kind == "StatefulSet" && e.InvolvedObject.Name == sts && e.Reason == "FailedCreate" {
					refusals = append(refusals, e.Message)
				}
			}
			g.Expect(refusals).To(ContainElement(And(
				ContainSubstring(`violates PodSecurity "restricted:latest"`),
				ContainSubstring("hostPath"), ContainSubstring("runAsUser=0"))))
		}).Should(Succeed())
		var pods corev1.PodList
		Expect(k8sClient.List(ctx, &pods, client.InNamespace(cacheNS), client.MatchingLabels{controllers.LabelInstance: hp.Name})).To(Succeed())
		Expect(pods.Items).To(BeEmpty())
	}, SpecTimeout(specTimeout))
})

// onlyReadyPod is the one pod of namespace ns that sel selects, Ready (a
// terminating one fails the check).
func onlyReadyPod(ctx context.Context, g Gomega, ns string, sel client.MatchingLabels) corev1.Pod {
	var pods corev1.PodList
	g.Expect(k8sClient.List(ctx, &pods, client.InNamespace(ns), sel)).To(Succeed())
	g.Expect(pods.Items).To(HaveLen(1), "pods %v in %s", sel, ns)
	p := pods.Items[0]
	g.Expect(podReady(&p)).To(BeTrue(), "pod %s/%s Ready", ns, p.Name)
	return p
}

// ensureMinIO applies config/local's MinIO (its namespace and what is in
// it) if the main specs have not, and waits for it and the bucket.
func ensureMinIO(ctx context.Context) {
	GinkgoHelper()
	var b strings.Builder
	for _, obj := range kubetest.Decode(renderLocal(ctx)) {
		if obj.GetNamespace() != minioNamespace && !(obj.GetKind() == "Namespace" && obj.GetName() == minioNamespace) {
			continue
		}
		y, err := obj.MarshalJSON()
		Expect(err).NotTo(HaveOccurred())
		b.Write(y)
		b.WriteString("\n")
	}
	kubectlIn(ctx, []byte(b.String()), "apply", "--server-side", "-f", "-")
	Eventually(ctx, func(g Gomega) {
		g.Expect(createBucket(ctx, minioClient(ctx, g))).To(Succeed())
	}).WithTimeout(rolloutTimeout).Should(Succeed())
}

// dumpNamespaces prints the pods, events and logs of the namespaces, for a
// failed spec.
func dumpNamespaces(ctx context.Context, namespaces ...string) {
	for _, ns := range namespaces {
		for _, args := range [][]string{
			{"get", "pods,statefulsets,deployments,events", "-n", ns, "-o", "wide"},
			{"logs", "-n", ns, "--all-containers", "--prefix", "--tail=50", "-l", controllers.LabelManagedBy + "=" + controllers.ManagedByValue},
		} {
			out, err := kubectlStdin(ctx, nil, args...)
			fmt.Fprintf(GinkgoWriter, "kubectl %s: %v\n%s\n", strings.Join(args, " "), err, out)
		}
	}
}
