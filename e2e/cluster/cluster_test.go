package cluster_test

import (
	"bytes"
	"context"
	"crypto/x509"
	"encoding/json"
	"encoding/pem"
	"fmt"
	"net"
	"net/http"
	"net/url"
	"regexp"
	"strings"
	"sync"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/s3"
	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	cachev1alpha1 "github.com/distcache/distcache/api/v1alpha1"
	"github.com/distcache/distcache/controllers"
	"github.com/distcache/distcache/internal/kubectlplugin"
	"github.com/distcache/distcache/internal/ring"
	"github.com/distcache/distcache/internal/testutil"
	"github.com/distcache/distcache/internal/testutil/chdbtest"
	"github.com/distcache/distcache/internal/testutil/kubetest"
)

const specTimeout = 12 * time.Minute

var _ = Describe("a DistributedCache on a real cluster", Ordered, func() {
	var (
		gw       *s3.Client // S3 through the tenant's gateway
		gwIP     string
		objs     []object
		gwKeyID  string
		gwSecret string
	)
	// followGateway points the suite's gateway client at the tenant's Ready
	// gateway pod and its current keys (after the gateway was rolled or the
	// tenant re-created).
	followGateway := func(ctx context.Context, g Gomega) {
		gwIP = gatewayPod(ctx, g).Status.PodIP
		gwKeyID = secretValue(ctx, g, tenantNamespace, gatewayKeysSecret, "AWS_ACCESS_KEY_ID")
		gwSecret = secretValue(ctx, g, tenantNamespace, gatewayKeysSecret, "AWS_SECRET_ACCESS_KEY")
		gw = testutil.S3Client("http://"+net.JoinHostPort(gwIP, fmt.Sprint(gatewayPort)), gwKeyID, gwSecret)
	}

	AfterEach(func(ctx SpecContext) {
		if CurrentSpecReport().Failed() {
			dumpDiagnostics(ctx)
		}
	}, NodeTimeout(5*time.Minute))

	// waitRingSettled waits until every Ready cache node and the gateway
	// route by the ring the operator last published, with no member skipped
	// by the gateway, and returns its epoch.
	waitRingSettled := func(ctx context.Context) int64 {
		GinkgoHelper()
		var epoch int64
		start := time.Now()
		Eventually(ctx, func(g Gomega) {
			epoch = publishedRing(ctx, g).Epoch
			var ready []corev1.Pod
			for _, p := range cachePods(ctx, g) {
				if podReady(&p) {
					ready = append(ready, p)
				}
			}
			for name, s := range scrapePods(ctx, g, ready) {
				g.Expect(s.m.Sum(mRingEpoch, nil)).To(BeEquivalentTo(epoch), "node %s routes by the published ring", name)
			}
			m, err := scrape(ctx, gwIP, gatewayMetrics)
			g.Expect(err).NotTo(HaveOccurred())
			g.Expect(m.Sum(mClientEpoch, nil)).To(BeEquivalentTo(epoch), "the gateway routes by the published ring")
			// A member that failed moments ago (a pod that just came back
			// under its stable name) is tried last for a few seconds.
			g.Expect(m.Sum(mClientSkipped, nil)).To(BeZero(), "the gateway skips no member")
		}).WithTimeout(ringTimeout).WithPolling(time.Second).Should(Succeed())
		fmt.Fprintf(GinkgoWriter, "ring epoch %d reached every node and the gateway in %s\n", epoch, time.Since(start).Round(time.Second))
		AddReportEntry(fmt.Sprintf("ring epoch %d settled", epoch), fmt.Sprintf("every Ready node and the gateway route by it %s after the wait began", time.Since(start).Round(100*time.Millisecond)))
		return epoch
	}

	It("runs the cache and the tenant a user applies with kubectl", func(ctx SpecContext) {
		kubectlIn(ctx, renderLocal(ctx), "apply", "--server-side", "-f", "-")

		By("three Ready cache pods on the NVMe node of zone-a")
		var pods []corev1.Pod
		Eventually(ctx, func(g Gomega) { pods = expectCacheReady(ctx, g, 3) }).WithTimeout(timeout).Should(Succeed())
		for _, p := range pods {
			var node corev1.Node
			Expect(k8sClient.Get(ctx, key("", p.Spec.NodeName), &node)).To(Succeed())
			Expect(node.Labels).To(HaveKeyWithValue(controllers.InstanceTypeKey, nodeInstanceType), "pod %s", p.Name)
			Expect(node.Labels).To(HaveKeyWithValue(controllers.ZoneTopologyKey, zone), "pod %s", p.Name)
		}

		By("the ring lists the three pods")
		Eventually(ctx, func(g Gomega) {
			s := publishedRing(ctx, g)
			g.Expect(s.Zone).To(Equal(zone))
			g.Expect(s.States()).To(Equal(activeRing(3)))
		}).Should(Succeed())

		By("the tenant's client certificate Secret is issued in its namespace")
		Eventually(ctx, func(g Gomega) {
			for _, k := range []string{corev1.TLSCertKey, corev1.TLSPrivateKeyKey, "ca.crt"} {
				g.Expect(secretValue(ctx, g, tenantNamespace, tenantSecret, k)).To(ContainSubstring("-----BEGIN "))
			}
			var t cachev1alpha1.CacheTenant
			g.Expect(k8sClient.Get(ctx, key(tenantNamespace, tenantName), &t)).To(Succeed())
			g.Expect(meta.IsStatusConditionTrue(t.Status.Conditions, cachev1alpha1.ConditionReady)).To(BeTrue(), "tenant Ready")
			g.Expect(t.Status.TenantName).To(Equal(tenantNamespace + "-" + tenantName))
		}).Should(Succeed())

		By("kubectl get shows it Ready")
		Eventually(ctx, func(g Gomega) {
			out, err := kubectlStdin(ctx, nil, "get", "distributedcache", "-n", cacheNamespace)
			g.Expect(err).NotTo(HaveOccurred())
			row := table(g, out)[cacheName]
			dc := getCache(ctx, g)
			g.Expect(row).To(HaveKeyWithValue("REPLICAS", "3"))
			g.Expect(row).To(HaveKeyWithValue("READY", "3"))
			g.Expect(row).To(HaveKeyWithValue("RING EPOCH", fmt.Sprint(dc.Status.RingEpoch)))
			g.Expect(row).To(HaveKeyWithValue("STATUS", "True"))
			g.Expect(row).To(HaveKey("AGE"))
		}).Should(Succeed())
		Eventually(ctx, func(g Gomega) {
			out, err := kubectlStdin(ctx, nil, "get", "distributedcache", "-n", cacheNamespace, "-o", "wide")
			g.Expect(err).NotTo(HaveOccurred())
			progressing := meta.FindStatusCondition(getCache(ctx, g).Status.Conditions, cachev1alpha1.ConditionProgressing)
			g.Expect(progressing).NotTo(BeNil())
			g.Expect(table(g, out)[cacheName]).To(HaveKeyWithValue("PROGRESS", progressing.Reason), "-o wide shows the Progressing reason")
		}).Should(Succeed())

		By("MinIO and the gateway are Ready")
		Eventually(ctx, func(g Gomega) {
			var d appsv1.Deployment
			g.Expect(k8sClient.Get(ctx, key(minioNamespace, minioName), &d)).To(Succeed())
			g.Expect(d.Status.ReadyReplicas).To(BeEquivalentTo(1))
			gwIP = gatewayPod(ctx, g).Status.PodIP
		}).Should(Succeed())
	}, SpecTimeout(specTimeout))

	It("serves objects written and read through the gateway, byte-exact, from the cache nodes", func(ctx SpecContext) {
		By("the bucket exists in MinIO")
		var minio *s3.Client
		Eventually(ctx, func(g Gomega) {
			minio = minioClient(ctx, g)
			g.Expect(createBucket(ctx, minio)).To(Succeed())
		}).Should(Succeed())

		Eventually(ctx, func(g Gomega) {
			gwKeyID = secretValue(ctx, g, tenantNamespace, gatewayKeysSecret, "AWS_ACCESS_KEY_ID")
			gwSecret = secretValue(ctx, g, tenantNamespace, gatewayKeysSecret, "AWS_SECRET_ACCESS_KEY")
		}).Should(Succeed())
		gw = testutil.S3Client("http://"+net.JoinHostPort(gwIP, fmt.Sprint(gatewayPort)), gwKeyID, gwSecret)
		objs = dataSet(fmt.Sprintf("e2e-cluster/%d", time.Now().UnixNano()))
		fmt.Fprintf(GinkgoWriter, "data set: %d objects, %d bytes, %d chunks\n", len(objs), dataSetBytes(objs), dataSetChunks(objs))

		By("PutObject through the gateway (write-through to MinIO)")
		putAll(ctx, gw, objs)
		for _, o := range objs {
			head, err := minio.HeadObject(ctx, &s3.HeadObjectInput{Bucket: aws.String(bucket), Key: aws.String(o.key)})
			Expect(err).NotTo(HaveOccurred(), "%s in MinIO", o.key)
			Expect(aws.ToInt64(head.ContentLength)).To(BeEquivalentTo(len(o.data)), "%s in MinIO", o.key)
		}

		By("GetObject, whole and ranged, returns the bytes written")
		before := scrapeCache(ctx)
		readAll(ctx, gw, objs)
		for _, o := range objs {
			for _, rg := range ranges(int64(len(o.data))) {
				got, err := getObject(ctx, gw, o.key, rg.header)
				Expect(err).NotTo(HaveOccurred(), "GET %s %s", o.key, rg.header)
				Expect(got).To(Equal(o.data[rg.first:rg.last+1]), "GET %s %s", o.key, rg.header)
			}
		}
		after := scrapeCache(ctx)

		hitReads := total(after.delta(before, mChunkReads, hits))
		hitBytes := total(after.delta(before, mResponseBytes, map[string]string{"op": "get_chunk|get_object", "result": "hit_ram|hit_disk"}))
		gets := total(after.delta(before, mS3Requests, s3Gets))
		fmt.Fprintf(GinkgoWriter, "reads after write-through: %.0f chunk hits, %.0f hit bytes, %.0f S3 GETs\n", hitReads, hitBytes, gets)
		AddReportEntry("reads after write-through", fmt.Sprintf("%.0f chunk hits, %.0f hit bytes, %.0f S3 GETs", hitReads, hitBytes, gets))
		Expect(hitReads).To(BeNumerically(">", 0), "chunk reads served from the nodes' RAM or disk")
		Expect(hitBytes).To(BeNumerically(">", 0), "bytes served from the nodes' RAM or disk")
	}, SpecTimeout(specTimeout))

	It("shows the cache, its ring and the tenant with kubectl distcache, metrics read through the API server", func(ctx SpecContext) {
		buildPlugin(ctx)
		published := publishedRing(ctx, Default)
		dc := getCache(ctx, Default)

		By("status: every node Ready, active, on the published epoch, its metrics read through the pod proxy")
		var status kubectlplugin.StatusReport
		var direct scrapes
		Eventually(ctx, func(g Gomega) {
			kubectlDistcacheJSON(ctx, g, &status, "status", cacheName, "-n", cacheNamespace)
			direct = scrapeCache(ctx)
			g.Expect(status.Caches).To(HaveLen(1))
			c := status.Caches[0]
			g.Expect(c.OperatorVersion).To(Equal(dc.Status.OperatorVersion))
			g.Expect(c.RingEpoch).To(Equal(published.Epoch))
			g.Expect(c.Warnings).To(BeEmpty())
			g.Expect(c.Zones).To(HaveLen(1))
			z := c.Zones[0]
			g.Expect(z.Name).To(Equal(zone))
			g.Expect(z.RingEpoch).To(Equal(published.Epoch))
			g.Expect(z.Active).To(Equal(3))
			g.Expect(z.Nodes).To(HaveLen(3))
			for i, n := range z.Nodes {
				g.Expect(n.Name).To(Equal(ordinalPod(i)))
				g.Expect(n.Ring).To(Equal(string(ring.StateActive)))
				g.Expect(n.Ready).To(BeTrue())
				g.Expect(n.MetricsError).To(BeEmpty())
				g.Expect(n.Metrics.RingEpoch).To(Equal(published.Epoch))
				g.Expect(n.Metrics.Version).NotTo(BeEmpty())
				// What the suite scrapes from the pod itself.
				g.Expect(n.Metrics.Store.Chunks).To(BeEquivalentTo(direct[n.Name].m.Sum(mStoreChunks, nil)), n.Name)
				g.Expect(n.Metrics.ChunkReads.HitRAM+n.Metrics.ChunkReads.HitDisk).To(BeEquivalentTo(direct[n.Name].m.Sum(mChunkReads, hits)), n.Name)
			}
			g.Expect(c.HitRatio).NotTo(BeNil())
			g.Expect(*c.HitRatio).To(BeNumerically(">", 0), "the reads of the previous spec hit")
		}).WithTimeout(timeout).WithPolling(2 * time.Second).Should(Succeed())
		table, err := kubectlDistcache(ctx, "status", "-n", cacheNamespace)
		Expect(err).NotTo(HaveOccurred())
		fmt.Fprintln(GinkgoWriter, table)
		AddReportEntry("kubectl distcache status", table)
		Expect(table).To(MatchRegexp(`(?m)^%s\s+%s\s+3/3\s+%d\s`, zone, statefulSetName, published.Epoch))

		By("ring: the published members, each owning about a third of the chunks")
		var rings kubectlplugin.RingReport
		kubectlDistcacheJSON(ctx, Default, &rings, "ring", cacheName, "-n", cacheNamespace, "--zone", zone)
		zr := rings.Caches[0].Zones[0]
		Expect(zr.Epoch).To(Equal(published.Epoch))
		Expect(zr.Members).To(HaveLen(len(published.Members)))
		for i, m := range zr.Members {
			Expect(m.Name).To(Equal(published.Members[i].Name))
			Expect(m.Address).To(Equal(published.Members[i].Address))
			Expect(m.ExpectedShare).To(BeNumerically("~", 1.0/3, 1e-9))
			Expect(m.SampledShare).To(BeNumerically("~", 1.0/3, 0.015))
		}

		By("tenants: buckets, quota use on the nodes, the certificate's expiry from its Secret, the endpoint")
		var tenant cachev1alpha1.CacheTenant
		Expect(k8sClient.Get(ctx, key(tenantNamespace, tenantName), &tenant)).To(Succeed())
		block, _ := pem.Decode([]byte(secretValue(ctx, Default, tenantNamespace, tenantSecret, corev1.TLSCertKey)))
		Expect(block).NotTo(BeNil())
		cert, err := x509.ParseCertificate(block.Bytes)
		Expect(err).NotTo(HaveOccurred())
		var tenants kubectlplugin.TenantsReport
		kubectlDistcacheJSON(ctx, Default, &tenants, "tenants", tenantName, "-n", tenantNamespace)
		Expect(tenants.Tenants).To(HaveLen(1))
		ts := tenants.Tenants[0]
		Expect(ts.Cache).To(Equal(cacheNamespace + "/" + cacheName))
		Expect(ts.Buckets).To(Equal(tenant.Spec.Buckets))
		Expect(ts.Endpoint).To(Equal(tenant.Status.Endpoint))
		Expect(ts.CertificateSource).To(Equal("secret"))
		Expect(ts.CertificateNotAfter.Time.Equal(cert.NotAfter)).To(BeTrue(), "%v, the Secret's certificate: %v", ts.CertificateNotAfter, cert.NotAfter)
		Expect(ts.Use).NotTo(BeNil(), ts.UseError)
		Expect(ts.Use.Nodes).To(Equal(3))
		Expect(ts.Use.TotalBytes).To(BeNumerically(">", 0), "the data the previous spec wrote is on the nodes")
		table, err = kubectlDistcache(ctx, "tenants", "-A")
		Expect(err).NotTo(HaveOccurred())
		fmt.Fprintln(GinkgoWriter, table)
		AddReportEntry("kubectl distcache tenants -A", table)
	}, SpecTimeout(specTimeout))

	It("lets ClickHouse read and write through the tenant's status.endpoint with the generated credentials", func(ctx SpecContext) {
		By("the tenant publishes its endpoint and credentials; the Service behind the endpoint is reachable from this machine")
		var t cachev1alpha1.CacheTenant
		Expect(k8sClient.Get(ctx, key(tenantNamespace, tenantName), &t)).To(Succeed())
		Expect(t.Status.Endpoint).To(Equal(fmt.Sprintf("http://%s.%s.svc:%d", gatewayService, tenantNamespace, gatewayPort)))
		Expect(t.Status.CredentialsSecret).To(Equal(gatewayKeysSecret))
		Expect(meta.IsStatusConditionTrue(t.Status.Conditions, cachev1alpha1.ConditionGatewayReady)).To(BeTrue(), "GatewayReady")
		// This machine is outside the cluster's DNS: the endpoint's Service
		// name is resolved to its cluster IP as CoreDNS would, and kube-proxy
		// routes it to a gateway pod.
		u, err := url.Parse(t.Status.Endpoint)
		Expect(err).NotTo(HaveOccurred())
		svcName, svcNS, _ := strings.Cut(strings.TrimSuffix(u.Hostname(), ".svc"), ".")
		var svc corev1.Service
		Expect(k8sClient.Get(ctx, key(svcNS, svcName), &svc)).To(Succeed())
		endpoint := "http://" + net.JoinHostPort(svc.Spec.ClusterIP, u.Port())
		accessKey := secretValue(ctx, Default, tenantNamespace, t.Status.CredentialsSecret, "AWS_ACCESS_KEY_ID")
		secretKey := secretValue(ctx, Default, tenantNamespace, t.Status.CredentialsSecret, "AWS_SECRET_ACCESS_KEY")

		By("ClickHouse (chdb) runs the same scenario against MinIO directly and through the endpoint: the same answers")
		var pods corev1.PodList
		Expect(k8sClient.List(ctx, &pods, client.InNamespace(minioNamespace), client.MatchingLabels{"app": minioName})).To(Succeed())
		Expect(pods.Items).To(HaveLen(1))
		prefix := fmt.Sprintf("e2e-cluster-clickhouse/%d", time.Now().UnixNano())
		ref := chdbtest.Run(GinkgoTB(), chdbtest.Target{
			Endpoint:  "http://" + net.JoinHostPort(pods.Items[0].Status.PodIP, "9000"),
			AccessKey: secretValue(ctx, Default, minioNamespace, minioRootSecret, "MINIO_ROOT_USER"),
			SecretKey: secretValue(ctx, Default, minioNamespace, minioRootSecret, "MINIO_ROOT_PASSWORD"),
			Bucket:    bucket, Prefix: prefix + "/minio-direct",
		})
		got := chdbtest.Run(GinkgoTB(), chdbtest.Target{Endpoint: endpoint, AccessKey: accessKey, SecretKey: secretKey,
			Bucket: bucket, Prefix: prefix + "/through-endpoint"})
		chdbtest.RequireSame(GinkgoTB(), "MinIO direct", ref.Results, "status.endpoint", got.Results)
		AddReportEntry("ClickHouse through status.endpoint", fmt.Sprintf("%d queries: MinIO direct %v, through the endpoint %v",
			len(got.Results), ref.Elapsed.Round(time.Millisecond), got.Elapsed.Round(time.Millisecond)))
	}, SpecTimeout(specTimeout))

	It("rolls the tenant's gateway on a spec change without a failed read through its Service", func(ctx SpecContext) {
		By("a reader through the tenant's endpoint (its Service's cluster IP)")
		var t cachev1alpha1.CacheTenant
		Expect(k8sClient.Get(ctx, key(tenantNamespace, tenantName), &t)).To(Succeed())
		var svc corev1.Service
		Expect(k8sClient.Get(ctx, key(tenantNamespace, gatewayService), &svc)).To(Succeed())
		viaService := testutil.S3Client("http://"+net.JoinHostPort(svc.Spec.ClusterIP, fmt.Sprint(gatewayPort)), gwKeyID, gwSecret)
		r := startReader(viaService, objs)
		DeferCleanup(r.halt)
		r.awaitPasses(ctx, 1)
		var before appsv1.Deployment
		Expect(k8sClient.Get(ctx, key(tenantNamespace, gatewayName), &before)).To(Succeed())
		oldPod := gatewayPod(ctx, Default).Name

		By("spec.gateway.pageCacheSize changed: the Deployment rolls, surging a new pod before the old one goes")
		edit := func(size string) {
			Eventually(ctx, func() error {
				var cur cachev1alpha1.CacheTenant
				if err := k8sClient.Get(ctx, key(tenantNamespace, tenantName), &cur); err != nil {
					return err
				}
				q := resource.MustParse(size)
				cur.Spec.Gateway.PageCacheSize = &q
				return k8sClient.Update(ctx, &cur)
			}).Should(Succeed())
		}
		rolledPast := func(generation int64, oldPod string) func(g Gomega) {
			return func(g Gomega) {
				var d appsv1.Deployment
				g.Expect(k8sClient.Get(ctx, key(tenantNamespace, gatewayName), &d)).To(Succeed())
				g.Expect(d.Generation).To(BeNumerically(">", generation))
				g.Expect(d.Status.ObservedGeneration).To(Equal(d.Generation))
				g.Expect(d.Status.UpdatedReplicas).To(Equal(*d.Spec.Replicas))
				g.Expect(d.Status.ReadyReplicas).To(Equal(*d.Spec.Replicas))
				g.Expect(d.Status.Replicas).To(Equal(*d.Spec.Replicas))
				g.Expect(gatewayPod(ctx, g).Name).NotTo(Equal(oldPod))
				// Gone, not only terminating: it has left the Service's
				// endpoints, waited out its preStop and drained.
				err := k8sClient.Get(ctx, key(tenantNamespace, oldPod), &corev1.Pod{})
				g.Expect(apierrors.IsNotFound(err)).To(BeTrue(), "old gateway pod %s still exists", oldPod)
			}
		}
		edit("8Mi")
		Eventually(ctx, rolledPast(before.Generation, oldPod)).WithTimeout(rolloutTimeout).Should(Succeed())
		r.awaitPasses(ctx, 1)

		By("and back (the later specs read what the nodes serve, with the page cache off)")
		var mid appsv1.Deployment
		Expect(k8sClient.Get(ctx, key(tenantNamespace, gatewayName), &mid)).To(Succeed())
		midPod := gatewayPod(ctx, Default).Name
		edit("0")
		Eventually(ctx, rolledPast(mid.Generation, midPod)).WithTimeout(rolloutTimeout).Should(Succeed())
		r.awaitPasses(ctx, 1)
		r.stop()
		AddReportEntry("gateway rollouts", fmt.Sprintf("two rollouts of the tenant's gateway under a reader through its Service: %d reads, %d failed",
			r.reads.Load(), r.failures.Load()))

		By("the suite's own client follows the new pod")
		Eventually(ctx, func(g Gomega) {
			followGateway(ctx, g)
			g.Expect(verifyObject(ctx, gw, objs[0])).To(Succeed())
		}).WithTimeout(timeout).Should(Succeed())
	}, SpecTimeout(specTimeout))

	It("runs a cache over two zones with a gateway in each, and zone b's gateway reads from zone b's pods only", func(ctx SpecContext) {
		By("a DistributedCache over zone-a and zone-b, one node each, and a tenant with a gateway")
		var base cachev1alpha1.DistributedCache
		Expect(k8sClient.Get(ctx, key(cacheNamespace, cacheName), &base)).To(Succeed())
		dc := &cachev1alpha1.DistributedCache{
			ObjectMeta: metav1.ObjectMeta{Namespace: cacheNamespace, Name: "zoned"},
			Spec:       *base.Spec.DeepCopy(),
		}
		dc.Spec.Replicas = ptr.To[int32](1)
		dc.Spec.Zones = []cachev1alpha1.ZoneSpec{{Name: zone}, {Name: zoneB}}
		dc.Spec.Storage = cachev1alpha1.StorageSpec{EmptyDir: &cachev1alpha1.EmptyDirStorage{SizeLimit: ptr.To(resource.MustParse("1Gi"))}}
		dc.Spec.Monitoring = cachev1alpha1.MonitoringSpec{}
		Expect(k8sClient.Create(ctx, dc)).To(Succeed())
		DeferCleanup(func(ctx SpecContext) {
			Expect(client.IgnoreNotFound(k8sClient.Delete(ctx, dc))).To(Succeed())
		})
		var tenant cachev1alpha1.CacheTenant
		Expect(k8sClient.Get(ctx, key(tenantNamespace, tenantName), &tenant)).To(Succeed())
		t := &cachev1alpha1.CacheTenant{
			ObjectMeta: metav1.ObjectMeta{Namespace: tenantNamespace, Name: "zoned"},
			Spec: cachev1alpha1.CacheTenantSpec{
				CacheRef: cachev1alpha1.CacheReference{Namespace: cacheNamespace, Name: dc.Name},
				Buckets:  tenant.Spec.Buckets,
				Gateway:  tenant.Spec.Gateway.DeepCopy(),
			},
		}
		Expect(k8sClient.Create(ctx, t)).To(Succeed())
		DeferCleanup(func(ctx SpecContext) {
			Expect(client.IgnoreNotFound(k8sClient.Delete(ctx, t))).To(Succeed())
		})

		By("the scheduler and the kubelets put each zone's cache pod and gateway on that zone's node")
		zoneOfNode := func(g Gomega, name string) string {
			var n corev1.Node
			g.Expect(k8sClient.Get(ctx, key("", name), &n)).To(Succeed())
			return n.Labels["topology.kubernetes.io/zone"]
		}
		podsOn := map[string]corev1.Pod{} // "cache/zone" or "gateway/zone" -> its Ready pod
		Eventually(ctx, func(g Gomega) {
			for _, z := range []string{zone, zoneB} {
				for role, sel := range map[string]client.MatchingLabels{
					"cache":   {controllers.LabelInstance: dc.Name, controllers.LabelZone: z},
					"gateway": {controllers.LabelInstance: "zoned-gateway", controllers.LabelZone: z},
				} {
					var pods corev1.PodList
					ns := map[string]string{"cache": cacheNamespace, "gateway": tenantNamespace}[role]
					g.Expect(k8sClient.List(ctx, &pods, client.InNamespace(ns), sel)).To(Succeed())
					g.Expect(pods.Items).To(HaveLen(1), "%s pods of %s", role, z)
					p := pods.Items[0]
					g.Expect(podReady(&p)).To(BeTrue(), "%s pod %s Ready", role, p.Name)
					g.Expect(zoneOfNode(g, p.Spec.NodeName)).To(Equal(z), "%s pod %s runs on node %s", role, p.Name, p.Spec.NodeName)
					podsOn[role+"/"+z] = p
				}
			}
			var got cachev1alpha1.CacheTenant
			g.Expect(k8sClient.Get(ctx, key(tenantNamespace, t.Name), &got)).To(Succeed())
			g.Expect(meta.IsStatusConditionTrue(got.Status.Conditions, cachev1alpha1.ConditionGatewayReady)).To(BeTrue(), "GatewayReady")
		}).WithTimeout(rolloutTimeout).Should(Succeed())
		for role, p := range podsOn {
			fmt.Fprintf(GinkgoWriter, "%s: pod %s on node %s\n", role, p.Name, p.Spec.NodeName)
		}

		By("objects written and read through zone b's gateway come back byte-exact, served by zone b's cache pod alone")
		keyID := secretValue(ctx, Default, tenantNamespace, "zoned-s3-credentials", "AWS_ACCESS_KEY_ID")
		secret := secretValue(ctx, Default, tenantNamespace, "zoned-s3-credentials", "AWS_SECRET_ACCESS_KEY")
		gwB := testutil.S3Client("http://"+net.JoinHostPort(podsOn["gateway/"+zoneB].Status.PodIP, fmt.Sprint(gatewayPort)), keyID, secret)
		zoned := dataSet(fmt.Sprintf("e2e-zones/%d", time.Now().UnixNano()))[:6]
		cachePodsAB := []corev1.Pod{podsOn["cache/"+zone], podsOn["cache/"+zoneB]}
		before := scrapePods(ctx, Default, cachePodsAB)
		// The nodes learn the new tenant through their tenants watch: the
		// first write may come before that.
		Eventually(ctx, func() error {
			_, err := gwB.PutObject(ctx, &s3.PutObjectInput{Bucket: aws.String(bucket), Key: aws.String(zoned[0].key), Body: bytes.NewReader(zoned[0].data)})
			return err
		}).WithPolling(2 * time.Second).Should(Succeed())
		for _, o := range zoned[1:] {
			_, err := gwB.PutObject(ctx, &s3.PutObjectInput{Bucket: aws.String(bucket), Key: aws.String(o.key), Body: bytes.NewReader(o.data)})
			Expect(err).NotTo(HaveOccurred(), "PutObject %s", o.key)
		}
		readAll(ctx, gwB, zoned)
		after := scrapePods(ctx, Default, cachePodsAB)
		reads := after.delta(before, mChunkReads, nil)
		bytesOut := after.delta(before, mResponseBytes, nil)
		a, b := podsOn["cache/"+zone].Name, podsOn["cache/"+zoneB].Name
		AddReportEntry("zone b's gateway", fmt.Sprintf("chunk reads: %s (zone b) %.0f, %s (zone a) %.0f; bytes %.0f and %.0f",
			b, reads[b], a, reads[a], bytesOut[b], bytesOut[a]))
		Expect(reads[b]).To(BeNumerically(">", 0), "zone b's cache pod served zone b's gateway")
		Expect(reads[a]).To(BeZero(), "zone a's cache pod served zone b's gateway")
		Expect(bytesOut[a]).To(BeZero(), "bytes zone a's cache pod sent")
	}, SpecTimeout(specTimeout))

	It("scales with kubectl while reads go on, moving chunks by handoff rather than from S3", func(ctx SpecContext) {
		epoch0 := getCache(ctx, Default).Status.RingEpoch

		By("kubectl scale --replicas=4")
		r := startReader(gw, objs)
		DeferCleanup(r.halt)
		r.awaitPasses(ctx, 1)
		before := scrapeCache(ctx)
		Expect(kubectl(ctx, "scale", "distributedcache/"+cacheName, "-n", cacheNamespace, "--replicas=4")).To(ContainSubstring("scaled"))
		Eventually(ctx, func(g Gomega) { expectCacheReady(ctx, g, 4) }).WithTimeout(timeout).Should(Succeed())
		Eventually(ctx, func(g Gomega) {
			s := publishedRing(ctx, g)
			g.Expect(s.States()).To(Equal(activeRing(4)))
			g.Expect(s.Epoch).To(BeNumerically(">", epoch0))
			g.Expect(getCache(ctx, g).Status.RingEpoch).To(Equal(s.Epoch))
		}).Should(Succeed())
		epoch1 := waitRingSettled(ctx)
		r.awaitPasses(ctx, 1)
		r.stop()

		By("re-reading everything on the new ring")
		// Until the new node serves: its DNS record may lag its Ready (see
		// the restart test below).
		newMember := ordinalPod(3)
		settled := scrapeCache(ctx)
		var after scrapes
		Eventually(ctx, func(g Gomega) {
			readAll(ctx, gw, objs)
			after = scrapeCache(ctx)
			g.Expect(after.delta(settled, mChunkReads, hits)[newMember]).To(BeNumerically(">", 0), "the new node serves its share of the reads from its store")
		}).WithTimeout(timeout).WithPolling(time.Second).Should(Succeed())
		windowGets := total(after.delta(before, mS3Requests, s3Gets))
		rereadGets := total(after.delta(settled, mS3Requests, s3Gets))
		handoffs := total(after.delta(before, mPeerRequests, map[string]string{"kind": "handoff", "result": "ok"}))
		newChunks := after[newMember].m.Sum(mStoreChunks, nil)
		newHits := after.delta(settled, mChunkReads, hits)[newMember]
		figure := fmt.Sprintf("ring epoch %d -> %d; %d chunks in the data set; S3 GETs from the scale-up to the end of the re-read: %.0f "+
			"(of which the re-read on the settled ring: %.0f); chunks handed off between nodes: %.0f; chunks on the new node: %.0f; "+
			"its hits during the re-read: %.0f", epoch0, epoch1, dataSetChunks(objs), windowGets, rereadGets, handoffs, newChunks, newHits)
		fmt.Fprintln(GinkgoWriter, "scale-up 3 -> 4: "+figure)
		AddReportEntry("S3 GETs on re-reading after scale-up 3 -> 4", figure)
		Expect(rereadGets).To(BeZero(), "re-reading on the settled ring reads nothing from S3")

		By("spec.replicas back to 3: the fourth pod drains, then goes")
		r = startReader(gw, objs)
		DeferCleanup(r.halt)
		kubectl(ctx, "patch", "distributedcache/"+cacheName, "-n", cacheNamespace, "--type=merge", "-p", `{"spec":{"replicas":3}}`)
		Eventually(ctx, func(g Gomega) {
			g.Expect(publishedRing(ctx, g).States()).To(HaveKeyWithValue(newMember, ring.StateDraining))
			var p corev1.Pod
			g.Expect(k8sClient.Get(ctx, key(cacheNamespace, newMember), &p)).To(Succeed(), "the draining pod still runs")
		}).WithPolling(100*time.Millisecond).Should(Succeed(), "the ring marks %s draining while it still runs", newMember)
		fmt.Fprintf(GinkgoWriter, "%s is draining\n", newMember)
		By("kubectl distcache ring shows it draining and owning nothing, its chunks moved")
		buildPlugin(ctx)
		Eventually(ctx, func(g Gomega) {
			var rings kubectlplugin.RingReport
			kubectlDistcacheJSON(ctx, g, &rings, "ring", cacheName, "-n", cacheNamespace, "--zone", zone)
			zr := rings.Caches[0].Zones[0]
			g.Expect(zr.Members).To(ContainElement(And(
				HaveField("Name", newMember), HaveField("State", ring.StateDraining),
				HaveField("ExpectedShare", BeZero()), HaveField("SampledShare", BeZero()))))
			g.Expect(zr.MovedShare).NotTo(BeNil())
			g.Expect(*zr.MovedShare).To(BeNumerically("~", 0.25, 0.015), "the draining member's quarter of the chunks moved")
		}).WithTimeout(10 * time.Second).WithPolling(500 * time.Millisecond).Should(Succeed())
		Eventually(ctx, func(g Gomega) {
			expectCacheReady(ctx, g, 3)
			g.Expect(publishedRing(ctx, g).States()).To(Equal(activeRing(3)))
		}).WithTimeout(timeout).Should(Succeed())
		waitRingSettled(ctx)
		r.awaitPasses(ctx, 1)
		r.stop()
	}, SpecTimeout(specTimeout))

	It("scales down while the pod that goes holds write-back data S3 refuses, and MinIO ends with every object", func(ctx SpecContext) {
		scaleDownWithHeldData(ctx, followGateway, waitRingSettled, func() *s3.Client { return gw })
	}, SpecTimeout(specTimeout))

	It("restarts every pod (kubectl rollout restart) while each holds write-back data S3 refuses, without a failed read, and MinIO ends with every object", func(ctx SpecContext) {
		rollingRestartWithHeldData(ctx, followGateway, waitRingSettled, func() *s3.Client { return gw })
	}, SpecTimeout(specTimeout))

	It("loses a cache pod without a failed read, and gets it back with its cache warm", func(ctx SpecContext) {
		victim := ordinalPod(1)
		var old corev1.Pod
		Expect(k8sClient.Get(ctx, key(cacheNamespace, victim), &old)).To(Succeed())
		m, err := scrape(ctx, old.Status.PodIP, controllers.MetricsPort)
		Expect(err).NotTo(HaveOccurred())
		chunksBefore := m.Sum(mStoreChunks, nil)
		Expect(chunksBefore).To(BeNumerically(">", 0), "%s holds chunks on disk", victim)

		By("deleting the pod while a reader reads")
		r := startReader(gw, objs)
		DeferCleanup(r.halt)
		r.awaitPasses(ctx, 1)
		kubectl(ctx, "delete", "pod", victim, "-n", cacheNamespace, "--wait=false")
		Eventually(ctx, func(g Gomega) {
			var p corev1.Pod
			err := k8sClient.Get(ctx, key(cacheNamespace, victim), &p)
			if err == nil {
				g.Expect(p.UID).NotTo(Equal(old.UID), "the old pod is gone")
				return
			}
			g.Expect(apierrors.IsNotFound(err)).To(BeTrue(), "%v", err)
		}).WithTimeout(timeout).Should(Succeed())
		// Reads while the pod is away; the reader stops before the new pod
		// can serve, so what it holds when Ready came from its disk.
		r.awaitPasses(ctx, 1)
		r.stop()

		By("the new pod is Ready with the chunks the old one had on disk")
		var pod corev1.Pod
		Eventually(ctx, func(g Gomega) {
			g.Expect(k8sClient.Get(ctx, key(cacheNamespace, victim), &pod)).To(Succeed())
			g.Expect(pod.UID).NotTo(Equal(old.UID))
			g.Expect(podReady(&pod)).To(BeTrue())
		}).WithTimeout(timeout).WithPolling(100 * time.Millisecond).Should(Succeed())
		m, err = scrape(ctx, pod.Status.PodIP, controllers.MetricsPort)
		Expect(err).NotTo(HaveOccurred())
		chunksAfter := m.Sum(mStoreChunks, nil)
		fmt.Fprintf(GinkgoWriter, "%s: %.0f chunks on disk before the deletion, %.0f when Ready again\n", victim, chunksBefore, chunksAfter)
		Expect(chunksAfter).To(BeNumerically(">=", chunksBefore), "the restarted node finds its disk tier warm")

		By("re-reading everything once it is back in the ring")
		Eventually(ctx, func(g Gomega) {
			expectCacheReady(ctx, g, 3)
			g.Expect(publishedRing(ctx, g).States()).To(Equal(activeRing(3)))
		}).WithTimeout(timeout).Should(Succeed())
		waitRingSettled(ctx)
		// Ready and in the ring is not yet resolvable: the pod's DNS record
		// under its stable name can lag, and the gateway then routes around
		// it for a few seconds (no read fails). Re-read until it serves.
		before := scrapeCache(ctx)
		var after scrapes
		passes := 0
		Eventually(ctx, func(g Gomega) {
			readAll(ctx, gw, objs)
			passes++
			after = scrapeCache(ctx)
			g.Expect(after.delta(before, mChunkReads, hits)[victim]).To(BeNumerically(">", 0), "%s serves its chunks again", victim)
		}).WithTimeout(timeout).WithPolling(time.Second).Should(Succeed())
		gets := after.delta(before, mS3Requests, s3Gets)[victim]
		served := after.delta(before, mChunkReads, hits)[victim]
		diskHits := after.delta(before, mChunkReads, map[string]string{"result": "hit_disk"})[victim]
		figure := fmt.Sprintf("%s after its restart: %.0f S3 GETs, %.0f chunk hits (%.0f from disk) on re-reading the data set (%d passes)", victim, gets, served, diskHits, passes)
		fmt.Fprintln(GinkgoWriter, figure)
		AddReportEntry("re-read after a cache pod restart", figure)
		Expect(gets).To(BeZero(), "%s serves them from its warm disk tier, not from S3", victim)
	}, SpecTimeout(specTimeout))

	It("rolls the pods one at a time on a spec change, without a failed read", func(ctx SpecContext) {
		var sts appsv1.StatefulSet
		Expect(k8sClient.Get(ctx, key(cacheNamespace, statefulSetName), &sts)).To(Succeed())
		oldHash := sts.Spec.Template.Annotations[controllers.AnnotationInputHash]
		Expect(oldHash).NotTo(BeEmpty())
		oldUIDs := map[string]types.UID{}
		for _, p := range cachePods(ctx, Default) {
			oldUIDs[p.Name] = p.UID
		}
		Expect(oldUIDs).To(HaveLen(3))

		r := startReader(gw, objs)
		DeferCleanup(r.halt)
		readiness := watchReadiness()
		DeferCleanup(func() { _, _, _ = readiness.stop() })

		By("memorySize 128Mi -> 160Mi")
		kubectl(ctx, "patch", "distributedcache/"+cacheName, "-n", cacheNamespace, "--type=merge", "-p", `{"spec":{"memorySize":"160Mi"}}`)
		start := time.Now()
		var newHash string
		Eventually(ctx, func(g Gomega) {
			var sts appsv1.StatefulSet
			g.Expect(k8sClient.Get(ctx, key(cacheNamespace, statefulSetName), &sts)).To(Succeed())
			newHash = sts.Spec.Template.Annotations[controllers.AnnotationInputHash]
			g.Expect(newHash).NotTo(Equal(oldHash))
			g.Expect(sts.Status.ObservedGeneration).To(Equal(sts.Generation))
			g.Expect(sts.Status.UpdatedReplicas).To(BeEquivalentTo(3))
			g.Expect(sts.Status.CurrentRevision).To(Equal(sts.Status.UpdateRevision))
			for _, p := range expectCacheReady(ctx, g, 3) {
				g.Expect(p.UID).NotTo(Equal(oldUIDs[p.Name]), "pod %s replaced", p.Name)
				g.Expect(p.Annotations).To(HaveKeyWithValue(controllers.AnnotationInputHash, newHash), "pod %s", p.Name)
				g.Expect(p.Spec.Containers[0].Args).To(ContainElement("--ram-bytes=160Mi"), "pod %s", p.Name)
			}
		}).WithTimeout(rolloutTimeout).Should(Succeed())
		minReady, samples, atMin := readiness.stop()
		figure := fmt.Sprintf("3 pods replaced in %s; fewest Ready pods in %d samples: %d", time.Since(start).Round(time.Second), samples, minReady)
		fmt.Fprintln(GinkgoWriter, "rollout: "+figure+"; then: "+atMin)
		AddReportEntry("rollout memorySize 128Mi -> 160Mi", figure)
		Expect(minReady).To(BeNumerically(">=", 2), "never more than one pod down during the rollout; at the fewest: %s", atMin)

		for name, s := range scrapeCache(ctx) {
			Expect(s.m.Sum(mRAMCapacity, nil)).To(BeEquivalentTo(160<<20), "RAM tier of %s", name)
		}
		waitRingSettled(ctx)
		r.awaitPasses(ctx, 1)
		r.stop()
	}, SpecTimeout(specTimeout))

	It("rotates its CA while the gateway reads, without a failed read", func(ctx SpecContext) {
		dcRef := &cachev1alpha1.DistributedCache{ObjectMeta: metav1.ObjectMeta{Namespace: cacheNamespace, Name: cacheName}}
		caKey := key(cacheNamespace, controllers.CASecretName(dcRef))
		var ca corev1.Secret
		Expect(k8sClient.Get(ctx, caKey, &ca)).To(Succeed())
		oldCA := ca.Data[corev1.TLSCertKey]

		r := startReader(gw, objs)
		DeferCleanup(r.halt)
		r.awaitPasses(ctx, 1)

		By("kubectl annotate: the rotation runs its three phases (grace 30s each here)")
		kubectl(ctx, "annotate", "distributedcache/"+cacheName, "-n", cacheNamespace, "--overwrite", controllers.AnnotationRotateCA+"=e2e")
		start := time.Now()
		seen := map[string]bool{}
		Eventually(ctx, func(g Gomega) {
			var dc cachev1alpha1.DistributedCache
			g.Expect(k8sClient.Get(ctx, key(cacheNamespace, cacheName), &dc)).To(Succeed())
			g.Expect(dc.Status.CertificateAuthority).NotTo(BeNil())
			seen[dc.Status.CertificateAuthority.Rotation] = true
			g.Expect(k8sClient.Get(ctx, caKey, &ca)).To(Succeed())
			g.Expect(ca.Data[corev1.TLSCertKey]).NotTo(Equal(oldCA), "a new CA signs")
			g.Expect(dc.Status.CertificateAuthority.Rotation).To(BeEmpty(), "the rotation is over")
			for _, k := range []client.ObjectKey{key(cacheNamespace, controllers.NodeTLSSecretName(dcRef)), key(tenantNamespace, tenantSecret)} {
				var s corev1.Secret
				g.Expect(k8sClient.Get(ctx, k, &s)).To(Succeed())
				g.Expect(s.Data["ca.crt"]).To(Equal(ca.Data[corev1.TLSCertKey]), "%s trusts the new CA only", k)
			}
		}).WithTimeout(rolloutTimeout).WithPolling(time.Second).Should(Succeed())
		figure := fmt.Sprintf("CA rotated in %s (phases seen: %v)", time.Since(start).Round(time.Second), seen)
		fmt.Fprintln(GinkgoWriter, figure)
		AddReportEntry("CA rotation", figure)
		Expect(seen).To(HaveKey(controllers.CARotationDistributing), "the new CA was distributed before it signed")
		// Reads go on while the kubelets deliver the last bundle (their
		// sync period is 10s in this cluster).
		time.Sleep(15 * time.Second)
		r.awaitPasses(ctx, 1)
		r.stop()

		By("a new pod, trusting and presenting only the new CA, is reached by the gateway")
		victim := ordinalPod(0)
		var old corev1.Pod
		Expect(k8sClient.Get(ctx, key(cacheNamespace, victim), &old)).To(Succeed())
		kubectl(ctx, "delete", "pod", victim, "-n", cacheNamespace)
		Eventually(ctx, func(g Gomega) {
			var p corev1.Pod
			g.Expect(k8sClient.Get(ctx, key(cacheNamespace, victim), &p)).To(Succeed())
			g.Expect(p.UID).NotTo(Equal(old.UID))
			expectCacheReady(ctx, g, 3)
		}).WithTimeout(timeout).Should(Succeed())
		waitRingSettled(ctx)
		before := scrapeCache(ctx)
		Eventually(ctx, func(g Gomega) {
			readAll(ctx, gw, objs)
			g.Expect(scrapeCache(ctx).delta(before, mChunkReads, hits)[victim]).To(BeNumerically(">", 0), "%s serves the gateway", victim)
		}).WithTimeout(timeout).WithPolling(time.Second).Should(Succeed())
	}, SpecTimeout(specTimeout))

	// The tenant's gateway goes with it (the operator runs it for the
	// tenant): its reads end either refused by the nodes (403, the tenant
	// no longer in their tenants file) or with the gateway gone, whichever
	// comes first, and no read succeeds after.
	It("cuts a deleted CacheTenant off within seconds, and lets it back in when it is re-created", func(ctx SpecContext) {
		o := objs[0]
		Expect(verifyObject(ctx, gw, o)).To(Succeed())
		var tenantDoc []byte
		for _, obj := range kubetest.Decode(renderLocal(ctx)) {
			if obj.GetKind() == "CacheTenant" && obj.GetName() == tenantName {
				var err error
				tenantDoc, err = obj.MarshalJSON()
				Expect(err).NotTo(HaveOccurred())
			}
		}
		Expect(tenantDoc).NotTo(BeEmpty(), "config/local has the CacheTenant %s", tenantName)

		By("kubectl delete cachetenant while the gateway reads")
		p := startProbe(gw, o)
		DeferCleanup(p.halt)
		p.await(ctx, func(r probeRead) bool { return r.err == nil }, time.Minute)
		deleted := time.Now()
		kubectl(ctx, "delete", "cachetenant/"+tenantName, "-n", tenantNamespace, "--wait=false")
		// Generous: through the API watch it takes a second or two; through
		// the kubelet's refresh of the mounted tenants file it took a minute
		// or more.
		failed := func(r probeRead) bool { return r.err != nil }
		refused := p.await(ctx, failed, accessEndBound)
		since := refused.start.Sub(deleted)
		okAfter := p.count(func(r probeRead) bool { return r.err == nil && r.start.After(deleted) })
		By("every read after the first refusal fails")
		p.await(ctx, func(r probeRead) bool { return r.start.After(refused.end.Add(5 * time.Second)) }, time.Minute)
		var lateOK []string
		forbidden := 0
		for _, r := range p.reads() {
			if r.start.After(refused.end) && !failed(r) {
				lateOK = append(lateOK, fmt.Sprintf("%s: status %d", r.start.Format("15:04:05.000"), r.status))
			}
			if r.status == http.StatusForbidden {
				forbidden++
			}
		}
		Expect(lateOK).To(BeEmpty(), "reads after the first refusal that succeeded")
		p.halt()
		figure := fmt.Sprintf("first failed gateway read %s after kubectl delete cachetenant (status %d; %d reads succeeded in between, %d refused by the nodes)",
			since.Round(10*time.Millisecond), refused.status, okAfter, forbidden)
		fmt.Fprintln(GinkgoWriter, "deleted CacheTenant: "+figure)
		AddReportEntry("access of a deleted CacheTenant ends", figure)

		By("the CacheTenant applied again: the gateway reads again")
		Eventually(ctx, func() bool {
			return apierrors.IsNotFound(k8sClient.Get(ctx, key(tenantNamespace, tenantName), &cachev1alpha1.CacheTenant{}))
		}).WithTimeout(timeout).Should(BeTrue(), "the CacheTenant is gone")
		recreated := time.Now()
		kubectlIn(ctx, tenantDoc, "apply", "--server-side", "-f", "-")
		// A new gateway, with new keys: the suite's client follows it.
		Eventually(ctx, func(g Gomega) {
			followGateway(ctx, g)
			g.Expect(verifyObject(ctx, gw, o)).To(Succeed())
		}).WithTimeout(timeout).WithPolling(100 * time.Millisecond).Should(Succeed())
		back := time.Since(recreated)
		Eventually(ctx, func(g Gomega) {
			var t cachev1alpha1.CacheTenant
			g.Expect(k8sClient.Get(ctx, key(tenantNamespace, tenantName), &t)).To(Succeed())
			g.Expect(meta.IsStatusConditionTrue(t.Status.Conditions, cachev1alpha1.ConditionReady)).To(BeTrue(), "tenant Ready")
		}).Should(Succeed())
		readAll(ctx, gw, objs)
		figure = fmt.Sprintf("gateway reads succeed again %s after the CacheTenant was applied again", back.Round(10*time.Millisecond))
		fmt.Fprintln(GinkgoWriter, "re-created CacheTenant: "+figure)
		AddReportEntry("access of a re-created CacheTenant", figure)
	}, SpecTimeout(specTimeout))

	It("refuses an invalid DistributedCache, naming the field", func(ctx SpecContext) {
		cases := []struct {
			name, field string
			edit        func(spec map[string]any)
		}{
			{"invalid-chunk-size", "spec.chunkSize", func(spec map[string]any) { spec["chunkSize"] = "0" }},
			{"duplicate-zone", "spec.zones", func(spec map[string]any) {
				spec["zones"] = []any{map[string]any{"name": zone}, map[string]any{"name": zone}}
			}},
		}
		for _, c := range cases {
			By(c.name)
			_, err := kubectlStdin(ctx, invalidCache(c.name, c.edit), "apply", "-f", "-")
			Expect(err).To(HaveOccurred(), "kubectl apply of %s", c.name)
			Expect(err.(*commandError).stderr).To(ContainSubstring(c.field), "kubectl's error names the field")
			Expect(apierrors.IsNotFound(k8sClient.Get(ctx, key(cacheNamespace, c.name), &cachev1alpha1.DistributedCache{}))).
				To(BeTrue(), "%s was not created", c.name)
		}
	}, SpecTimeout(specTimeout))

	It("is deleted with everything it owned, by the garbage collector", func(ctx SpecContext) {
		dc := getCache(ctx, Default)
		owned := ownedObjects(ctx, dc.UID)
		kinds := map[string]int{}
		for _, o := range owned {
			kinds[fmt.Sprintf("%T", o)]++
		}
		fmt.Fprintf(GinkgoWriter, "owned objects: %v\n", kinds)
		Expect(kinds).To(HaveKeyWithValue("*v1.StatefulSet", 1))
		Expect(kinds).To(HaveKeyWithValue("*v1.Service", 2))
		Expect(kinds).To(HaveKeyWithValue("*v1.ConfigMap", BeNumerically(">=", 1)))
		Expect(kinds).To(HaveKeyWithValue("*v1.Secret", BeNumerically(">=", 3)))
		Expect(kinds).To(HaveKeyWithValue("*v1.PodDisruptionBudget", 1))
		Expect(kinds).To(HaveKeyWithValue("*v1.ServiceAccount", 1))
		Expect(kinds).To(HaveKeyWithValue("*v1.Role", 1))
		Expect(kinds).To(HaveKeyWithValue("*v1.RoleBinding", 1))
		pods := cachePods(ctx, Default)
		Expect(pods).To(HaveLen(3))

		kubectl(ctx, "delete", "distributedcache/"+cacheName, "-n", cacheNamespace, "--wait=false")
		Eventually(ctx, func(g Gomega) {
			for _, o := range owned {
				err := k8sClient.Get(ctx, client.ObjectKeyFromObject(o), o.DeepCopyObject().(client.Object))
				g.Expect(apierrors.IsNotFound(err)).To(BeTrue(), "%T %s is gone (%v)", o, o.GetName(), err)
			}
			g.Expect(cachePods(ctx, g)).To(BeEmpty(), "cache pods are gone")
			g.Expect(apierrors.IsNotFound(k8sClient.Get(ctx, key(cacheNamespace, cacheName), &cachev1alpha1.DistributedCache{}))).To(BeTrue())
		}).WithTimeout(timeout).Should(Succeed())

		By("the tenant loses its certificate")
		Eventually(ctx, func(g Gomega) {
			err := k8sClient.Get(ctx, key(tenantNamespace, tenantSecret), &corev1.Secret{})
			g.Expect(apierrors.IsNotFound(err)).To(BeTrue(), "Secret %s deleted (%v)", tenantSecret, err)
			var t cachev1alpha1.CacheTenant
			g.Expect(k8sClient.Get(ctx, key(tenantNamespace, tenantName), &t)).To(Succeed())
			g.Expect(meta.IsStatusConditionTrue(t.Status.Conditions, cachev1alpha1.ConditionReady)).To(BeFalse())
		}).Should(Succeed())
	}, SpecTimeout(specTimeout))
})

// table parses kubectl get's table: name -> column -> value. Columns are
// found where the header puts them (a header may hold a space: RING EPOCH).
func table(g Gomega, out string) map[string]map[string]string {
	lines := strings.Split(strings.TrimRight(out, "\n"), "\n")
	g.Expect(len(lines)).To(BeNumerically(">=", 2), "kubectl get printed %q", out)
	header := lines[0]
	var starts []int
	var names []string
	for _, loc := range regexp.MustCompile(`\S+( \S+)*`).FindAllStringIndex(header, -1) {
		starts = append(starts, loc[0])
		names = append(names, header[loc[0]:loc[1]])
	}
	rows := map[string]map[string]string{}
	for _, line := range lines[1:] {
		row := map[string]string{}
		for i, start := range starts {
			end := len(line)
			if i+1 < len(starts) {
				end = min(starts[i+1], len(line))
			}
			if start < len(line) {
				row[names[i]] = strings.TrimSpace(line[start:end])
			}
		}
		rows[row["NAME"]] = row
	}
	return rows
}

// ranges are Range headers covering the interesting parts of an object of
// size n: the first byte, a chunk boundary, the middle, a suffix and an
// open end.
type byteRange struct {
	header      string
	first, last int64
}

func ranges(n int64) []byteRange {
	if n == 0 {
		return nil
	}
	rs := []byteRange{
		{"bytes=0-0", 0, 0},
		{fmt.Sprintf("bytes=-%d", min(n, 1000)), n - min(n, 1000), n - 1},
		{fmt.Sprintf("bytes=%d-", n/2), n / 2, n - 1},
		{fmt.Sprintf("bytes=%d-%d", n/3, min(n/3+70000, n-1)), n / 3, min(n/3+70000, n-1)},
	}
	if n > chunkSize+10 {
		rs = append(rs, byteRange{fmt.Sprintf("bytes=%d-%d", chunkSize-10, chunkSize+9), chunkSize - 10, chunkSize + 9})
	}
	return rs
}

// invalidCache is config/local's DistributedCache renamed and edited, as
// JSON for kubectl apply.
func invalidCache(name string, edit func(spec map[string]any)) []byte {
	GinkgoHelper()
	for _, obj := range kubetest.Decode(renderLocal(context.Background())) {
		if obj.GetKind() != "DistributedCache" {
			continue
		}
		obj = obj.DeepCopy()
		obj.SetName(name)
		spec, ok := obj.Object["spec"].(map[string]any)
		Expect(ok).To(BeTrue())
		edit(spec)
		data, err := json.Marshal(obj.Object)
		Expect(err).NotTo(HaveOccurred())
		return data
	}
	Fail("no DistributedCache in config/local")
	return nil
}

// ownedObjects are the objects in the cache's namespace whose owner
// references name the cache.
func ownedObjects(ctx context.Context, uid types.UID) []client.Object {
	GinkgoHelper()
	var out []client.Object
	lists := []client.ObjectList{
		&appsv1.StatefulSetList{}, &corev1.ServiceList{}, &corev1.ConfigMapList{}, &corev1.SecretList{}, &policyv1.PodDisruptionBudgetList{},
		&corev1.ServiceAccountList{}, &rbacv1.RoleList{}, &rbacv1.RoleBindingList{},
	}
	for _, l := range lists {
		Expect(k8sClient.List(ctx, l, client.InNamespace(cacheNamespace))).To(Succeed())
		items, err := meta.ExtractList(l)
		Expect(err).NotTo(HaveOccurred())
		for _, item := range items {
			o := item.(client.Object)
			for _, ref := range o.GetOwnerReferences() {
				if ref.UID == uid {
					out = append(out, o)
				}
			}
		}
	}
	return out
}

// readinessWatch samples how many cache pods are Ready, every 200ms, from a
// goroutine of its own, until stopped.
type readinessWatch struct {
	sampling *poller
	mu       sync.Mutex
	minReady int
	samples  int
	// atMin says, for the first sample with minReady pods, what each pod
	// was then: a rare failure of the one-pod-at-a-time promise needs it.
	atMin string
}

func watchReadiness() *readinessWatch {
	w := &readinessWatch{minReady: -1}
	w.sampling = poll(200*time.Millisecond, true, w.sample)
	return w
}

// sample counts the Ready cache pods, if it can list them.
func (w *readinessWatch) sample(ctx context.Context) {
	var pods corev1.PodList
	err := k8sClient.List(ctx, &pods, client.InNamespace(cacheNamespace),
		client.MatchingLabels{controllers.LabelName: controllers.NodeAppName, controllers.LabelInstance: cacheName})
	if err != nil {
		return
	}
	ready := 0
	var states []string
	for i := range pods.Items {
		p := &pods.Items[i]
		if podReady(p) {
			ready++
		}
		states = append(states, podLine(p))
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.minReady < 0 || ready < w.minReady {
		w.minReady = ready
		w.atMin = time.Now().UTC().Format("15:04:05.000") + " " + strings.Join(states, "; ")
	}
	w.samples++
}

// podLine is a pod's name, phase, Ready condition (with its reason and
// last change), deletion and container restarts, in one line.
func podLine(p *corev1.Pod) string {
	s := fmt.Sprintf("%s %s", p.Name, p.Status.Phase)
	for _, c := range p.Status.Conditions {
		if c.Type == corev1.PodReady {
			s += fmt.Sprintf(" Ready=%s since %s", c.Status, c.LastTransitionTime.UTC().Format("15:04:05"))
			if c.Reason != "" {
				s += " (" + c.Reason + ")"
			}
		}
	}
	if p.DeletionTimestamp != nil {
		s += " deleting"
	}
	for _, cs := range p.Status.ContainerStatuses {
		if cs.RestartCount > 0 {
			s += fmt.Sprintf(" %s restarts=%d", cs.Name, cs.RestartCount)
		}
	}
	return s
}

// stop ends the sampling and returns the fewest Ready pods seen, the
// number of samples and what the pods were at the first sample with the
// fewest.
func (w *readinessWatch) stop() (int, int, string) {
	w.sampling.stop()
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.minReady, w.samples, w.atMin
}
