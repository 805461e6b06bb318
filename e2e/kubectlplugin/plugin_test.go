package kubectlplugin_test

import (
	"bytes"
	"context"
	"crypto/x509"
	"encoding/json"
	"encoding/pem"
	"fmt"
	"sync"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/common/expfmt"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/cli-runtime/pkg/genericiooptions"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/yaml"

	cachev1alpha1 "github.com/distcache/distcache/api/v1alpha1"
	"github.com/distcache/distcache/controllers"
	"github.com/distcache/distcache/internal/kubectlplugin"
	"github.com/distcache/distcache/internal/metrics"
	"github.com/distcache/distcache/internal/ring"
	"github.com/distcache/distcache/internal/store"
)

// fakeNodes serves each pod's /metrics from a cache node's own collectors.
type fakeNodes struct {
	mu    sync.Mutex
	nodes map[string]*fakeNode // by pod name
	ports map[string]int32     // the port each pod was asked on
}

type fakeNode struct {
	reg   *prometheus.Registry
	m     *metrics.Node
	stats store.Stats
}

func newFakeNodes() *fakeNodes {
	return &fakeNodes{nodes: map[string]*fakeNode{}, ports: map[string]int32{}}
}

// node is pod's node, made on first use.
func (f *fakeNodes) node(pod string) *fakeNode {
	f.mu.Lock()
	defer f.mu.Unlock()
	n, ok := f.nodes[pod]
	if !ok {
		n = &fakeNode{reg: prometheus.NewRegistry()}
		n.m = metrics.NewNode(n.reg)
		metrics.RegisterStore(n.reg, func() store.Stats {
			f.mu.Lock()
			defer f.mu.Unlock()
			return n.stats
		})
		f.nodes[pod] = n
	}
	return n
}

func (f *fakeNodes) setStats(pod string, s store.Stats) {
	n := f.node(pod)
	f.mu.Lock()
	n.stats = s
	f.mu.Unlock()
}

func (f *fakeNodes) Scrape(_ context.Context, pod *corev1.Pod, port int32) ([]byte, error) {
	n := f.node(pod.Name)
	f.mu.Lock()
	f.ports[pod.Name] = port
	f.mu.Unlock()
	fams, err := n.reg.Gather()
	if err != nil {
		return nil, err
	}
	var buf bytes.Buffer
	enc := expfmt.NewEncoder(&buf, expfmt.NewFormat(expfmt.TypeTextPlain))
	for _, fam := range fams {
		if err := enc.Encode(fam); err != nil {
			return nil, err
		}
	}
	return buf.Bytes(), nil
}

// runPlugin runs `kubectl distcache ARGS` as the user of kubeconfig; a nil
// scraper reads metrics through the API server's pod proxy, as the binary
// does.
func runPlugin(ctx context.Context, kubeconfig string, scr kubectlplugin.Scraper, args ...string) (string, string, error) {
	var out, errOut bytes.Buffer
	var opts []kubectlplugin.Option
	if scr != nil {
		opts = append(opts, kubectlplugin.WithScraper(scr))
	}
	cmd := kubectlplugin.NewCommand(genericiooptions.IOStreams{In: &bytes.Buffer{}, Out: &out, ErrOut: &errOut}, opts...)
	cmd.SetArgs(append([]string{"--kubeconfig", kubeconfig}, args...))
	err := cmd.ExecuteContext(ctx)
	return out.String(), errOut.String(), err
}

// pluginJSON runs the plugin with -o json and decodes its report.
func pluginJSON(ctx context.Context, kubeconfig string, scr kubectlplugin.Scraper, into any, args ...string) {
	GinkgoHelper()
	out, errOut, err := runPlugin(ctx, kubeconfig, scr, append(args, "-o", "json")...)
	Expect(err).NotTo(HaveOccurred(), "kubectl distcache %v: %s", args, errOut)
	Expect(json.Unmarshal([]byte(out), into)).To(Succeed(), out)
}

// createReadyPod creates the pod the zone's StatefulSet would, from its
// template and owned by it, running on an address and Ready.
func createReadyPod(ctx context.Context, dc *cachev1alpha1.DistributedCache, zone string, ordinal int) *corev1.Pod {
	GinkgoHelper()
	var sts appsv1.StatefulSet
	Eventually(func() error { return k8sClient.Get(ctx, key(dc.Namespace, dc.Name+"-"+zone), &sts) }).Should(Succeed())
	pod := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{
			Name: fmt.Sprintf("%s-%d", sts.Name, ordinal), Namespace: dc.Namespace, Labels: sts.Spec.Template.Labels,
			OwnerReferences: []metav1.OwnerReference{*metav1.NewControllerRef(&sts, appsv1.SchemeGroupVersion.WithKind("StatefulSet"))},
		},
		Spec: *sts.Spec.Template.Spec.DeepCopy(),
	}
	pod.Spec.NodeName = "host-" + zone
	Expect(k8sClient.Create(ctx, pod)).To(Succeed())
	pod.Status.Phase = corev1.PodRunning
	pod.Status.PodIP = fmt.Sprintf("10.244.0.%d", 10+ordinal)
	pod.Status.Conditions = []corev1.PodCondition{{Type: corev1.PodReady, Status: corev1.ConditionTrue, LastTransitionTime: metav1.Now()}}
	Expect(k8sClient.Status().Update(ctx, pod)).To(Succeed())
	return pod
}

func key(ns, name string) client.ObjectKey { return client.ObjectKey{Namespace: ns, Name: name} }

// publishedRing is the zone's ring document as the operator published it.
func publishedRing(ctx context.Context, g Gomega, dc *cachev1alpha1.DistributedCache, zone string) ring.Spec {
	var cm corev1.ConfigMap
	g.Expect(k8sClient.Get(ctx, key(dc.Namespace, dc.RingConfigMapName()), &cm)).To(Succeed())
	r, err := ring.Parse([]byte(cm.Data[cachev1alpha1.RingConfigMapKey(zone)]))
	g.Expect(err).NotTo(HaveOccurred())
	return r.Spec()
}

var _ = Describe("kubectl distcache", Ordered, func() {
	const (
		ns     = "plugin"
		zone   = "zone-a"
		tenant = "reports"
	)
	var (
		dc    *cachev1alpha1.DistributedCache
		nodes = newFakeNodes()
		pods  []string
	)

	BeforeAll(func(ctx SpecContext) {
		Expect(k8sClient.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}})).To(Succeed())
		dc = &cachev1alpha1.DistributedCache{
			ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "demo"},
			Spec: cachev1alpha1.DistributedCacheSpec{
				Replicas: ptr.To[int32](3),
				Zones:    []cachev1alpha1.ZoneSpec{{Name: zone}},
				Storage:  cachev1alpha1.StorageSpec{EmptyDir: &cachev1alpha1.EmptyDirStorage{}},
			},
		}
		Expect(k8sClient.Create(ctx, dc)).To(Succeed())
		for i := range 3 {
			pods = append(pods, createReadyPod(ctx, dc, zone, i).Name)
		}
		Eventually(func(g Gomega) {
			g.Expect(publishedRing(ctx, g, dc, zone).States()).To(Equal(map[string]ring.State{
				pods[0]: ring.StateActive, pods[1]: ring.StateActive, pods[2]: ring.StateActive}))
			g.Expect(k8sClient.Get(ctx, key(ns, dc.Name), dc)).To(Succeed())
			g.Expect(meta.IsStatusConditionTrue(dc.Status.Conditions, cachev1alpha1.ConditionReady)).To(BeTrue())
			g.Expect(dc.Status.ObservedGeneration).To(Equal(dc.Generation))
		}).Should(Succeed())

		// Each node has served some reads: node i from RAM 10*(i+1)
		// chunks of 1 MiB, from disk 5, from S3 5 (and forwarded 100,
		// which its owners counted).
		for i, p := range pods {
			n := nodes.node(p)
			n.m.ChunkReads.WithLabelValues("plugin-reports", "hit_ram").Add(float64(10 * (i + 1)))
			n.m.ChunkReads.WithLabelValues("plugin-reports", "hit_disk").Add(5)
			n.m.ChunkReads.WithLabelValues("plugin-reports", "miss").Add(5)
			n.m.ChunkReads.WithLabelValues("plugin-reports", "forwarded").Add(100)
			n.m.ResponseBytes.WithLabelValues("plugin-reports", "get_chunk", "hit_ram").Add(float64(10 * (i + 1) << 20))
			n.m.ResponseBytes.WithLabelValues("plugin-reports", "get_chunk", "miss").Add(5 << 20)
			n.m.RingEpoch.Set(float64(dc.Status.RingEpoch))
			nodes.setStats(p, store.Stats{
				RAMBytes: 8 << 20, RAMCapacity: 1 << 30, DiskBytes: int64(i+1) << 30, DiskUsage: int64(i+1)<<30 + 1<<20,
				DiskLimit: 10 << 30, DiskCapacity: 10 << 30, Chunks: int64(i+1) * 1024, DiskFree: -1,
				Tenants: map[string]store.TenantStats{"plugin-reports": {Bytes: int64(i+1) << 28, Chunks: 1}},
			})
		}
	})

	It("status: the cache's conditions, version, zone, ring epoch and each node's ring state, hits and store", func(ctx SpecContext) {
		var report kubectlplugin.StatusReport
		pluginJSON(ctx, adminKubeconfig, nodes, &report, "status", "demo", "-n", ns)
		Expect(report.Caches).To(HaveLen(1))
		c := report.Caches[0]
		Expect(c.Namespace + "/" + c.Name).To(Equal(ns + "/demo"))
		Expect(c.OperatorVersion).To(Equal(operatorVersion))
		Expect(c.Replicas).To(BeEquivalentTo(3))
		Expect(c.ReadyReplicas).To(BeEquivalentTo(3))
		Expect(c.Warnings).To(BeEmpty())
		Expect(meta.IsStatusConditionTrue(c.Conditions, cachev1alpha1.ConditionReady)).To(BeTrue())

		published := publishedRing(ctx, Default, dc, zone)
		Expect(c.RingEpoch).To(Equal(published.Epoch))
		Expect(c.Zones).To(HaveLen(1))
		z := c.Zones[0]
		Expect(z.Name).To(Equal(zone))
		Expect(z.StatefulSet).To(Equal("demo-" + zone))
		Expect(z.RingEpoch).To(Equal(published.Epoch))
		Expect(z.RingPublished).NotTo(BeNil(), "the operator's published- annotation")
		Expect(z.Active).To(Equal(3))
		Expect(z.Nodes).To(HaveLen(3))
		for i, n := range z.Nodes {
			Expect(n.Name).To(Equal(pods[i]))
			Expect(n.Ring).To(Equal("active"))
			Expect(n.Ready).To(BeTrue())
			Expect(n.Phase).To(Equal("Running"))
			Expect(n.MetricsError).To(BeEmpty())
			Expect(n.Metrics).NotTo(BeNil())
			Expect(n.Metrics.RingEpoch).To(Equal(published.Epoch))
			Expect(n.Metrics.ChunkReads).To(Equal(kubectlplugin.Reads{HitRAM: int64(10 * (i + 1)), HitDisk: 5, Miss: 5, Forwarded: 100}))
			hits := float64(10*(i+1)+5) / float64(10*(i+1)+10)
			Expect(*n.HitRatio).To(BeNumerically("~", hits, 1e-9), "forwarded reads are left out")
			Expect(n.Metrics.Store.DiskUsageBytes).To(BeEquivalentTo(int64(i+1)<<30 + 1<<20))
			Expect(n.Metrics.Store.RAMCapacityBytes).To(BeEquivalentTo(1 << 30))
			// The port the operator names "metrics" on the pod.
			Expect(nodes.ports[n.Name]).To(BeEquivalentTo(controllers.MetricsPort))
		}
		Expect(z.ChunkReads).To(Equal(kubectlplugin.Reads{HitRAM: 60, HitDisk: 15, Miss: 15, Forwarded: 300}))
		Expect(*c.HitRatio).To(BeNumerically("~", 75.0/90, 1e-9))
		Expect(c.ReadBytes.HitRAM).To(BeEquivalentTo(60 << 20))

		By("the same as tables")
		out, _, err := runPlugin(ctx, adminKubeconfig, nodes, "status", "-n", ns)
		Expect(err).NotTo(HaveOccurred())
		GinkgoWriter.Println(out)
		Expect(out).To(ContainSubstring("DistributedCache plugin/demo (operator " + operatorVersion + "): 3 replicas per zone, 3 ready"))
		Expect(out).To(ContainSubstring("83.3% of chunk reads"))
		Expect(out).To(MatchRegexp(`(?m)^Ready\s+True\s+Available`))
		Expect(out).To(MatchRegexp(`(?m)^zone-a\s+demo-zone-a\s+3/3\s+%d\s`, published.Epoch))
		Expect(out).To(MatchRegexp(`(?m)^demo-zone-a-2\s+zone-a\s+active\s+Running\s+true\s+%d\s+87\.5%%\s+30MiB\s+0B\s+5\.0MiB\s+8\.0MiB/1\.0GiB \(1%%\)\s+3\.0GiB/10GiB \(30%%\)\s+3072`, published.Epoch))
	})

	It("ring: members, weights and shares, and the member a scale-down drains", func(ctx SpecContext) {
		var report kubectlplugin.RingReport
		pluginJSON(ctx, adminKubeconfig, nil, &report, "ring", "demo", "-n", ns, "--zone", zone)
		Expect(report.Caches).To(HaveLen(1))
		Expect(report.Caches[0].Zones).To(HaveLen(1))
		zr := report.Caches[0].Zones[0]
		published := publishedRing(ctx, Default, dc, zone)
		Expect(zr.Epoch).To(Equal(published.Epoch))
		Expect(zr.Algorithm).To(Equal(ring.AlgorithmRendezvousXXHash64))
		Expect(zr.Samples).To(Equal(kubectlplugin.DefaultSamples))
		Expect(zr.Members).To(HaveLen(3))
		for i, m := range zr.Members {
			Expect(m.Name).To(Equal(pods[i]))
			Expect(m.Address).To(Equal(published.Members[i].Address))
			Expect(m.Weight).To(Equal(ring.DefaultWeight))
			Expect(m.ExpectedShare).To(BeNumerically("~", 1.0/3, 1e-9))
			Expect(m.SampledShare).To(BeNumerically("~", 1.0/3, 0.015))
		}

		By("spec.replicas 3 -> 2: the third member drains while its pod runs")
		Expect(k8sClient.Get(ctx, key(ns, dc.Name), dc)).To(Succeed())
		dc.Spec.Replicas = ptr.To[int32](2)
		Expect(k8sClient.Update(ctx, dc)).To(Succeed())
		Eventually(func(g Gomega) {
			g.Expect(publishedRing(ctx, g, dc, zone).States()).To(HaveKeyWithValue(pods[2], ring.StateDraining))
		}).Should(Succeed())
		pluginJSON(ctx, adminKubeconfig, nil, &report, "ring", "-n", ns)
		zr = report.Caches[0].Zones[0]
		Expect(zr.Epoch).To(Equal(published.Epoch + 1))
		Expect(zr.PreviousEpoch).To(Equal(published.Epoch))
		Expect(zr.Members[2].State).To(Equal(ring.StateDraining))
		Expect(zr.Members[2].ExpectedShare).To(BeZero())
		Expect(zr.Members[2].SampledShare).To(BeZero())
		Expect(zr.Members[0].ExpectedShare).To(BeNumerically("~", 0.5, 1e-9))
		Expect(*zr.MovedShare).To(BeNumerically("~", 1.0/3, 0.015), "the draining member's chunks, and only those, move")

		out, _, err := runPlugin(ctx, adminKubeconfig, nil, "ring", "demo", "-n", ns, "--samples", "0")
		Expect(err).NotTo(HaveOccurred())
		GinkgoWriter.Println(out)
		Expect(out).To(MatchRegexp(`(?m)^demo-zone-a-2\s+2\s+draining\s+100\s+0\.0%\s+-\s+demo-zone-a-2\.demo-zone-a\.plugin\.svc:8443$`))
		Expect(out).To(MatchRegexp(`(?m)^demo-zone-a-0\s+0\s+active\s+100\s+50\.0%\s+-\s`))

		By("a zone the cache does not have is refused, naming the zones it has")
		_, _, err = runPlugin(ctx, adminKubeconfig, nil, "ring", "demo", "-n", ns, "--zone", "zone-x")
		Expect(err).To(MatchError(ContainSubstring(`has no zone "zone-x" (zones: [zone-a])`)))

		By("status shows the draining node too")
		var st kubectlplugin.StatusReport
		pluginJSON(ctx, adminKubeconfig, nodes, &st, "status", "demo", "-n", ns)
		Expect(st.Caches[0].Zones[0].Draining).To(Equal(1))
		Expect(st.Caches[0].Zones[0].Nodes[2].Ring).To(Equal("draining"))
	})

	It("tenants: cache, buckets, quota use from the nodes, the certificate's expiry from its Secret, and the endpoint", func(ctx SpecContext) {
		t := &cachev1alpha1.CacheTenant{
			ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: tenant},
			Spec: cachev1alpha1.CacheTenantSpec{
				CacheRef: cachev1alpha1.CacheReference{Namespace: ns, Name: dc.Name},
				Buckets:  []string{"reports-2026", "reports-2027"},
				Quota:    ptr.To(resource.MustParse("1Gi")),
				Gateway:  &cachev1alpha1.GatewaySpec{},
			},
		}
		Expect(k8sClient.Create(ctx, t)).To(Succeed())
		var secret corev1.Secret
		Eventually(func(g Gomega) {
			g.Expect(k8sClient.Get(ctx, key(ns, tenant), t)).To(Succeed())
			g.Expect(t.Status.TenantName).To(Equal("plugin-reports"))
			g.Expect(t.Status.Endpoint).NotTo(BeEmpty())
			g.Expect(t.Status.CertificateNotAfter).NotTo(BeNil())
			g.Expect(k8sClient.Get(ctx, key(ns, t.CertificateSecretName()), &secret)).To(Succeed())
		}).Should(Succeed())
		block, _ := pem.Decode(secret.Data[corev1.TLSCertKey])
		Expect(block).NotTo(BeNil())
		cert, err := x509.ParseCertificate(block.Bytes)
		Expect(err).NotTo(HaveOccurred())

		var report kubectlplugin.TenantsReport
		pluginJSON(ctx, adminKubeconfig, nodes, &report, "tenants", "-n", ns)
		Expect(report.Tenants).To(HaveLen(1))
		ts := report.Tenants[0]
		Expect(ts.Name).To(Equal(tenant))
		Expect(ts.TenantName).To(Equal("plugin-reports"))
		Expect(ts.Cache).To(Equal(ns + "/demo"))
		Expect(ts.Buckets).To(Equal([]string{"reports-2026", "reports-2027"}))
		Expect(ts.QuotaBytes).To(BeEquivalentTo(1 << 30))
		Expect(ts.Use).NotTo(BeNil(), ts.UseError)
		Expect(*ts.Use).To(Equal(kubectlplugin.QuotaUse{MaxNodeBytes: 3 << 28, MaxNode: pods[2], TotalBytes: 6 << 28, Nodes: 3}))
		Expect(ts.CertificateSecret).To(Equal(t.CertificateSecretName()))
		Expect(ts.CertificateSource).To(Equal("secret"))
		Expect(ts.CertificateNotAfter.Time.Equal(cert.NotAfter)).To(BeTrue(), "%v, the Secret's certificate says %v", ts.CertificateNotAfter, cert.NotAfter)
		Expect(ts.CertificateNotAfter.Time.Equal(t.Status.CertificateNotAfter.Time)).To(BeTrue())
		Expect(ts.Endpoint).To(Equal(t.Status.Endpoint))
		Expect(ts.CredentialsSecret).To(Equal(t.Status.CredentialsSecret))

		By("-o yaml, and the filters")
		out, _, err := runPlugin(ctx, adminKubeconfig, nodes, "tenants", "-A", "--cache", ns+"/demo", "-o", "yaml")
		Expect(err).NotTo(HaveOccurred())
		var fromYAML kubectlplugin.TenantsReport
		Expect(yaml.Unmarshal([]byte(out), &fromYAML)).To(Succeed())
		Expect(fromYAML.Tenants).To(HaveLen(1))
		Expect(fromYAML.Tenants[0].Endpoint).To(Equal(t.Status.Endpoint))
		_, errOut, err := runPlugin(ctx, adminKubeconfig, nodes, "tenants", "-A", "--cache", "other")
		Expect(err).NotTo(HaveOccurred())
		Expect(errOut).To(Equal("No CacheTenants found.\n"))

		out, _, err = runPlugin(ctx, adminKubeconfig, nodes, "tenants", tenant, "-n", ns)
		Expect(err).NotTo(HaveOccurred())
		GinkgoWriter.Println(out)
		Expect(out).To(MatchRegexp(`(?m)^plugin\s+reports\s+plugin/demo\s+reports-2026,reports-2027\s+768MiB/1\.0GiB\s+in \S+\s+%s\s+0/1\s+\S+$`, t.Status.Endpoint))
	})

	It("tells a user who may not proxy to pods or read Secrets what it could not read, and prints the rest", func(ctx SpecContext) {
		role := &rbacv1.Role{
			ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "distcache-viewer"},
			Rules: []rbacv1.PolicyRule{
				{APIGroups: []string{cachev1alpha1.GroupVersion.Group}, Resources: []string{"distributedcaches", "cachetenants"}, Verbs: []string{"get", "list"}},
				{APIGroups: []string{""}, Resources: []string{"configmaps", "pods"}, Verbs: []string{"get", "list"}},
			},
		}
		Expect(k8sClient.Create(ctx, role)).To(Succeed())
		Expect(k8sClient.Create(ctx, &rbacv1.RoleBinding{
			ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "distcache-viewer"},
			RoleRef:    rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "Role", Name: role.Name},
			Subjects:   []rbacv1.Subject{{Kind: rbacv1.UserKind, APIGroup: rbacv1.GroupName, Name: "viewer"}},
		})).To(Succeed())
		viewer := userKubeconfig("viewer")

		By("status: every node's metrics are refused by the API server's pod proxy, the rest is there")
		var report kubectlplugin.StatusReport
		Eventually(func(g Gomega) {
			out, errOut, err := runPlugin(ctx, viewer, nil, "status", "demo", "-n", ns, "-o", "json")
			g.Expect(err).NotTo(HaveOccurred(), errOut)
			g.Expect(json.Unmarshal([]byte(out), &report)).To(Succeed())
		}).Should(Succeed(), "the RoleBinding takes effect")
		z := report.Caches[0].Zones[0]
		Expect(z.RingEpoch).To(Equal(publishedRing(ctx, Default, dc, zone).Epoch))
		Expect(z.Nodes).To(HaveLen(3))
		for _, n := range z.Nodes {
			Expect(n.Metrics).To(BeNil())
			Expect(n.MetricsError).To(And(ContainSubstring("pod proxy"), ContainSubstring("forbidden")), n.Name)
		}
		out, _, err := runPlugin(ctx, viewer, nil, "status", "demo", "-n", ns)
		Expect(err).NotTo(HaveOccurred())
		GinkgoWriter.Println(out)
		Expect(out).To(MatchRegexp(`(?m)^Warning: demo-zone-a-0: metrics through the API server's pod proxy: .*forbidden`))

		By("tenants: the expiry in status, said to come from there, and why")
		var tenants kubectlplugin.TenantsReport
		pluginJSON(ctx, viewer, nil, &tenants, "tenants", "-n", ns)
		ts := tenants.Tenants[0]
		Expect(ts.CertificateSource).To(Equal("status"))
		Expect(ts.CertificateNotAfter).NotTo(BeNil())
		Expect(ts.CertificateError).To(ContainSubstring("forbidden"))
		Expect(ts.Use).To(BeNil())
		Expect(ts.UseError).To(ContainSubstring("forbidden"))
	})

	It("says when there is nothing to show, as kubectl get does", func(ctx SpecContext) {
		Expect(k8sClient.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "empty"}})).To(Succeed())
		out, errOut, err := runPlugin(ctx, adminKubeconfig, nodes, "status", "-n", "empty")
		Expect(err).NotTo(HaveOccurred())
		Expect(out).To(BeEmpty())
		Expect(errOut).To(Equal("No DistributedCaches found in namespace empty.\n"))
		out, _, err = runPlugin(ctx, adminKubeconfig, nodes, "status", "-n", "empty", "-o", "json")
		Expect(err).NotTo(HaveOccurred())
		Expect(out).To(MatchJSON(`{"caches": []}`))
		_, _, err = runPlugin(ctx, adminKubeconfig, nodes, "status", "nope", "-n", "empty")
		Expect(err).To(MatchError(ContainSubstring(`"nope" not found`)))
		_, _, err = runPlugin(ctx, adminKubeconfig, nodes, "status", "-o", "wide")
		Expect(err).To(MatchError(ContainSubstring("must be json or yaml")))
	})
})
