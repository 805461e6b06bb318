package cluster_test

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"strings"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/s3"
	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	eventsv1 "k8s.io/api/events/v1"
	policyv1 "k8s.io/api/policy/v1"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	cachev1alpha1 "github.com/distcache/distcache/api/v1alpha1"
	"github.com/distcache/distcache/controllers"
	"github.com/distcache/distcache/internal/ring"
)

// Upgrading a running cache from one release to the next (docs/upgrade.md),
// by the install manifest and by Helm, on the real cluster: two releases
// built from this tree by hack/release.sh (N and N+1: the same sources, each
// stamped with its version, so every binary and image differs), their
// images imported into both nodes. The suite's own operator is removed
// first (the releases install theirs under the same names) and put back at
// the end.
//
// One cache serves all of it: two zones of two nodes each, its disk tier on
// a hostPath (kept across a pod's restart), and a tenant with a gateway per
// zone, its page cache off so that every read reaches the cache nodes. Two
// readers, one per zone, read the data set byte-exact through the tenant's
// endpoint throughout each rollout, recording every failure; a watch of the
// cache's pods records every moment they are not all Ready.
//
//  1. install N by its manifest; create the cache and tenant; write the data
//     through the gateway and read it once through each zone (warm);
//  2. apply N+1's manifest;
//  3. hand the cache to Helm: delete the operator (not the CRDs, so the cache
//     and tenant stay), `helm install` N's chart (taking over the CRDs), which
//     brings the cache back to N (a downgrade, under the same checks);
//  4. `helm upgrade` to N+1's chart.
//
// Each of 2-4 checks: the operator runs the new image; the pods roll one
// at a time, highest ordinal first, zone-a before zone-b (RolloutHeld
// names zone-b held while zone-a rolls), never more than one of the four
// not Ready; every pod and gateway ends on the new image and reports the
// new version (distcache_build_info); status.operatorVersion is the new
// version; no read failed; and re-reading the data set afterwards through
// both zones costs the cache nodes no S3 GET (distcache_s3_requests_total).
var _ = Describe("upgrading a release on a real cluster", Ordered, func() {
	const (
		versionN  = "0.0.1"
		versionN1 = "0.0.2"

		upNS        = "upgrade"        // the cache's namespace: privileged (hostPath)
		upTenantNS  = "upgrade-tenant" // the tenant's: restricted
		upCache     = "upgrade"
		upTenant    = "reader"
		upReplicas  = 2 // per zone
		upHostPath  = "/var/lib/distcache-cluster/volumes/upgrade"
		helmRelease = "distcache" // the release name that gives the manifest's object names
		upTimeout   = 15 * time.Minute
	)
	zones := []string{zone, zoneB}
	crds := []string{"distributedcaches.cache.distcache.io", "cachetenants.cache.distcache.io"}
	var (
		relN, relN1 release
		helmHome    string
		objs        []object
		endpoint    string // the tenant's status.endpoint
		keyID       string // and its credentials
		secretKey   string
	)

	BeforeAll(func(ctx SpecContext) {
		By("releases " + versionN + " and " + versionN1 + " built from this tree (bin/releases/VERSION) and imported into both nodes")
		start := time.Now()
		digest := releaseSourceDigest(ctx)
		var builtN, builtN1 bool
		relN, builtN = buildRelease(ctx, versionN, digest)
		relN1, builtN1 = buildRelease(ctx, versionN1, digest)
		built := time.Since(start)
		start = time.Now()
		runHack(ctx, "cluster.sh", append([]string{"import"}, append(relN.images, relN1.images...)...)...)
		AddReportEntry("releases", fmt.Sprintf("%s (built now: %v) and %s (built now: %v) from sources %s in %s; imported into the nodes in %s",
			versionN, builtN, versionN1, builtN1, digest, built.Round(time.Second), time.Since(start).Round(time.Second)))
		helmHome = GinkgoT().TempDir()

		By("a previous run's cache gone, MinIO up, the suite's operator removed")
		deleteNamespaces(ctx, upTenantNS, upNS) // with the suite's operator still there to finalize the tenant
		Expect(os.RemoveAll(upHostPath)).To(Succeed())
		ensureMinIO(ctx)
		deleteOperator(ctx, relN)
		DeferCleanup(func(ctx SpecContext) {
			// The spec's namespaces go while an operator runs (the tenant's
			// finalizer needs one; if none is left, the suite's comes back
			// first); then whatever installed the operator last makes way
			// for the suite's (make deploy's CRDs, RBAC and Deployment).
			var d appsv1.Deployment
			if err := k8sClient.Get(ctx, key(operatorNamespace, operatorDeployment), &d); err != nil || d.Status.AvailableReplicas == 0 {
				deployOperator(ctx)
			}
			deleteNamespaces(ctx, upTenantNS, upNS)
			Expect(os.RemoveAll(upHostPath)).To(Succeed())
			_, _ = helmIn(ctx, helmHome, "uninstall", helmRelease, "--namespace", operatorNamespace, "--ignore-not-found", "--wait")
			// The CRDs the release kept (crd.keep) stop being Helm's.
			for _, name := range crds {
				var crd apiextensionsv1.CustomResourceDefinition
				Expect(k8sClient.Get(ctx, key("", name), &crd)).To(Succeed())
				orig := crd.DeepCopy()
				for _, a := range []string{"meta.helm.sh/release-name", "meta.helm.sh/release-namespace", "helm.sh/resource-policy"} {
					delete(crd.Annotations, a)
				}
				if crd.Labels["app.kubernetes.io/managed-by"] == "Helm" {
					delete(crd.Labels, "app.kubernetes.io/managed-by")
				}
				Expect(k8sClient.Patch(ctx, &crd, client.MergeFrom(orig))).To(Succeed())
			}
			deployOperator(ctx)
		}, NodeTimeout(2*rolloutTimeout+3*timeout))
	}, NodeTimeout(30*time.Minute))

	AfterEach(func(ctx SpecContext) {
		if CurrentSpecReport().Failed() {
			dumpNamespaces(ctx, upNS, upTenantNS)
			out, err := kubectlStdin(ctx, nil, "logs", "-n", operatorNamespace, "-l", "control-plane=controller-manager", "--tail=200")
			fmt.Fprintf(GinkgoWriter, "operator logs: %v\n%s\n", err, out)
		}
	}, NodeTimeout(5*time.Minute))

	// gatewayPods are the tenant's gateway pods of zone z, not terminating.
	gatewayPods := func(ctx context.Context, g Gomega, z string) []corev1.Pod {
		var pods corev1.PodList
		g.Expect(k8sClient.List(ctx, &pods, client.InNamespace(upTenantNS), client.MatchingLabels{
			controllers.LabelInstance: upTenant + "-gateway", controllers.LabelZone: z})).To(Succeed())
		var live []corev1.Pod
		for _, p := range pods.Items {
			if p.DeletionTimestamp == nil {
				live = append(live, p)
			}
		}
		return live
	}

	// nodePods are the cache's pods of zone z ("" for all).
	nodePods := func(ctx context.Context, g Gomega, z string) []corev1.Pod {
		sel := client.MatchingLabels{controllers.LabelName: controllers.NodeAppName, controllers.LabelInstance: upCache}
		if z != "" {
			sel[controllers.LabelZone] = z
		}
		var pods corev1.PodList
		g.Expect(k8sClient.List(ctx, &pods, client.InNamespace(upNS), sel)).To(Succeed())
		return pods.Items
	}

	// settledOn checks that the cache and the tenant's gateways run rel:
	// status says so, every zone's StatefulSet and gateway Deployment has
	// rolled out rel's image with no old pod left, and all are Ready.
	settledOn := func(ctx context.Context, g Gomega, rel release) {
		var dc cachev1alpha1.DistributedCache
		g.Expect(k8sClient.Get(ctx, key(upNS, upCache), &dc)).To(Succeed())
		g.Expect(dc.Status.OperatorVersion).To(Equal(rel.version), "status.operatorVersion")
		g.Expect(dc.Status.ObservedGeneration).To(Equal(dc.Generation))
		ready := meta.FindStatusCondition(dc.Status.Conditions, cachev1alpha1.ConditionReady)
		g.Expect(ready).NotTo(BeNil())
		g.Expect(ready.Status).To(Equal(metav1.ConditionTrue), "Ready: %s %s", ready.Reason, ready.Message)
		g.Expect(dc.Status.ReadyReplicas).To(BeEquivalentTo(upReplicas))
		for _, z := range zones {
			var sts appsv1.StatefulSet
			g.Expect(k8sClient.Get(ctx, key(upNS, upCache+"-"+z), &sts)).To(Succeed())
			g.Expect(sts.Spec.Template.Spec.Containers[0].Image).To(Equal(rel.cachenodeImage()), "StatefulSet %s", sts.Name)
			g.Expect(sts.Status.ObservedGeneration).To(Equal(sts.Generation))
			g.Expect(sts.Status.CurrentRevision).To(Equal(sts.Status.UpdateRevision), "StatefulSet %s rolled out", sts.Name)
			g.Expect(sts.Status.UpdatedReplicas).To(BeEquivalentTo(upReplicas))
			g.Expect(sts.Status.ReadyReplicas).To(BeEquivalentTo(upReplicas))
			pods := nodePods(ctx, g, z)
			g.Expect(pods).To(HaveLen(upReplicas), "cache pods of %s", z)
			for _, p := range pods {
				g.Expect(podReady(&p)).To(BeTrue(), "pod %s Ready", p.Name)
				g.Expect(p.Spec.Containers[0].Image).To(Equal(rel.cachenodeImage()), "pod %s", p.Name)
			}
			var d appsv1.Deployment
			g.Expect(k8sClient.Get(ctx, key(upTenantNS, upTenant+"-gateway-"+z), &d)).To(Succeed())
			g.Expect(d.Spec.Template.Spec.Containers[0].Image).To(Equal(rel.cachenodeImage()), "gateway Deployment %s", d.Name)
			g.Expect(d.Status.ObservedGeneration).To(Equal(d.Generation))
			g.Expect(d.Status.UpdatedReplicas).To(Equal(*d.Spec.Replicas))
			g.Expect(d.Status.Replicas).To(Equal(*d.Spec.Replicas), "old gateway pods of %s still running", z)
			g.Expect(d.Status.AvailableReplicas).To(Equal(*d.Spec.Replicas))
			var all corev1.PodList
			g.Expect(k8sClient.List(ctx, &all, client.InNamespace(upTenantNS), client.MatchingLabels{
				controllers.LabelInstance: upTenant + "-gateway", controllers.LabelZone: z})).To(Succeed())
			g.Expect(all.Items).To(HaveLen(int(*d.Spec.Replicas)), "gateway pods of %s (none terminating)", z)
			for _, p := range all.Items {
				g.Expect(podReady(&p)).To(BeTrue(), "gateway pod %s Ready", p.Name)
			}
		}
		var t cachev1alpha1.CacheTenant
		g.Expect(k8sClient.Get(ctx, key(upTenantNS, upTenant), &t)).To(Succeed())
		g.Expect(meta.IsStatusConditionTrue(t.Status.Conditions, cachev1alpha1.ConditionGatewayReady)).To(BeTrue(), "GatewayReady")
	}

	// versionsRunning checks that every cache pod and gateway reports
	// rel's version in distcache_build_info: the binaries, not only the
	// image names, are the release's.
	versionsRunning := func(ctx context.Context, g Gomega, rel release) {
		for _, z := range zones {
			for _, p := range nodePods(ctx, g, z) {
				m, err := scrape(ctx, p.Status.PodIP, controllers.MetricsPort)
				g.Expect(err).NotTo(HaveOccurred())
				g.Expect(m.Sum("distcache_build_info", map[string]string{"version": rel.version})).To(BeEquivalentTo(1), "node %s runs %s", p.Name, rel.version)
			}
			for _, p := range gatewayPods(ctx, g, z) {
				m, err := scrape(ctx, p.Status.PodIP, gatewayMetrics)
				g.Expect(err).NotTo(HaveOccurred())
				g.Expect(m.Sum("distcache_build_info", map[string]string{"version": rel.version})).To(BeEquivalentTo(1), "gateway %s runs %s", p.Name, rel.version)
			}
		}
	}

	// ringSettled waits until each zone's published ring has that zone's
	// pods, all active, and each of its Ready nodes and its gateway route by
	// it, the gateway skipping no member.
	ringSettled := func(ctx context.Context) {
		GinkgoHelper()
		Eventually(ctx, func(g Gomega) {
			var cm corev1.ConfigMap
			g.Expect(k8sClient.Get(ctx, key(upNS, upCache+"-ring"), &cm)).To(Succeed())
			for _, z := range zones {
				doc, ok := cm.Data[z+".json"]
				g.Expect(ok).To(BeTrue(), "ring of %s", z)
				r, err := ring.Parse([]byte(doc))
				g.Expect(err).NotTo(HaveOccurred())
				spec := r.Spec()
				want := map[string]ring.State{}
				for i := range upReplicas {
					want[fmt.Sprintf("%s-%s-%d", upCache, z, i)] = ring.StateActive
				}
				g.Expect(spec.States()).To(Equal(want), "ring of %s", z)
				for _, p := range nodePods(ctx, g, z) {
					g.Expect(podReady(&p)).To(BeTrue(), "pod %s Ready", p.Name)
					m, err := scrape(ctx, p.Status.PodIP, controllers.MetricsPort)
					g.Expect(err).NotTo(HaveOccurred())
					g.Expect(m.Sum(mRingEpoch, nil)).To(BeEquivalentTo(spec.Epoch), "node %s routes by the published ring", p.Name)
				}
				for _, p := range gatewayPods(ctx, g, z) {
					m, err := scrape(ctx, p.Status.PodIP, gatewayMetrics)
					g.Expect(err).NotTo(HaveOccurred())
					g.Expect(m.Sum(mClientEpoch, nil)).To(BeEquivalentTo(spec.Epoch), "gateway %s routes by the published ring", p.Name)
					g.Expect(m.Sum(mClientSkipped, nil)).To(BeZero(), "gateway %s skips no member", p.Name)
				}
			}
		}).WithTimeout(ringTimeout).WithPolling(time.Second).Should(Succeed())
	}

	// scrapeNodes scrapes every cache pod (all must be Ready).
	scrapeNodes := func(ctx context.Context) scrapes {
		GinkgoHelper()
		var out scrapes
		Eventually(ctx, func(g Gomega) {
			pods := nodePods(ctx, g, "")
			g.Expect(pods).To(HaveLen(len(zones) * upReplicas))
			for _, p := range pods {
				g.Expect(podReady(&p)).To(BeTrue(), "pod %s Ready", p.Name)
			}
			out = scrapePods(ctx, g, pods)
		}).Should(Succeed())
		return out
	}

	// byZone sums a per-pod figure by zone.
	byZone := func(perPod map[string]float64) map[string]float64 {
		out := map[string]float64{}
		for pod, v := range perPod {
			for _, z := range zones {
				if strings.HasPrefix(pod, upCache+"-"+z+"-") {
					out[z] += v
				}
			}
		}
		return out
	}

	// clients are S3 clients of the tenant's endpoint in each zone.
	clients := func(ctx context.Context) []*zoneClient {
		GinkgoHelper()
		out := []*zoneClient{
			newZoneClient(ctx, endpoint, zone, true, keyID, secretKey),
			newZoneClient(ctx, endpoint, zoneB, false, keyID, secretKey),
		}
		DeferCleanup(func() {
			for _, c := range out {
				c.close()
			}
		})
		return out
	}

	// readCost reads the whole data set through each client and returns
	// the S3 GETs and chunk hits that cost the cache nodes, by zone.
	readCost := func(ctx context.Context, cs []*zoneClient) (gets, hitsByZone map[string]float64) {
		GinkgoHelper()
		before := scrapeNodes(ctx)
		for _, c := range cs {
			readAll(ctx, c.s3, objs)
		}
		after := scrapeNodes(ctx)
		return byZone(after.delta(before, mS3Requests, s3Gets)), byZone(after.delta(before, mChunkReads, hits))
	}

	// rolloutHeld are the RolloutHeld events of the cache that say zone-b
	// waits for zone-a, observed since t.
	rolloutHeld := func(ctx context.Context, since time.Time) []string {
		GinkgoHelper()
		var evs eventsv1.EventList
		Expect(k8sClient.List(ctx, &evs, client.InNamespace(upNS))).To(Succeed())
		var notes []string
		for _, e := range evs.Items {
			if e.Reason != controllers.EventRolloutHeld || e.Regarding.Name != upCache {
				continue
			}
			last := e.EventTime.Time
			if e.Series != nil {
				last = e.Series.LastObservedTime.Time
			}
			if !last.Before(since.Truncate(time.Second)) && strings.Contains(e.Note, "zone "+zoneB+": new pod template held until zone "+zone) {
				notes = append(notes, e.Note)
			}
		}
		return notes
	}

	// rollUnderReaders runs change (which installs or upgrades the operator
	// to rel) while a reader per zone reads the data set, and checks the
	// rollout of the cache from its current release to rel. It returns a
	// line of figures for the report.
	rollUnderReaders := func(ctx context.Context, how string, from, to release, change func(context.Context)) {
		GinkgoHelper()
		Eventually(ctx, func(g Gomega) { settledOn(ctx, g, from) }).Should(Succeed(), "the cache runs %s before", from.version)
		Eventually(ctx, func(g Gomega) {
			for _, z := range zones {
				var pdb policyv1.PodDisruptionBudget
				g.Expect(k8sClient.Get(ctx, key(upNS, upCache+"-"+z), &pdb)).To(Succeed())
				g.Expect(pdb.Spec.MaxUnavailable).To(HaveValue(Equal(intstr.FromInt32(1))), "PodDisruptionBudget of %s", z)
			}
		}).Should(Succeed())
		cs := clients(ctx)
		readers := make([]*reader, len(cs))
		for i, c := range cs {
			readers[i] = startReader(c.s3, objs)
			DeferCleanup(readers[i].halt)
		}
		for _, r := range readers {
			r.awaitPasses(ctx, 1)
		}
		w := watchRollout(ctx, upNS, upCache, len(zones)*upReplicas, to.cachenodeImage())
		DeferCleanup(w.halt)
		s3During := sampleCounter(ctx, upNS, upCache, mS3Requests, s3Gets, 500*time.Millisecond)
		DeferCleanup(s3During.halt)

		By(how)
		start := time.Now()
		readsBefore := make([]int64, len(readers))
		for i, r := range readers {
			readsBefore[i] = r.reads.Load()
		}
		change(ctx)
		operatorRolledOut(ctx, to.operatorImage())
		operatorTime := time.Since(start)
		By("the cache rolls to " + to.version + ": zone by zone, one pod at a time")
		Eventually(ctx, func(g Gomega) { settledOn(ctx, g, to) }).WithTimeout(upTimeout).WithPolling(time.Second).Should(Succeed())
		rolled := time.Since(start)
		res := w.stop()
		readsDuring := make([]int64, len(readers))
		for i, r := range readers {
			readsDuring[i] = r.reads.Load() - readsBefore[i]
		}
		Eventually(ctx, func(g Gomega) { versionsRunning(ctx, g, to) }).Should(Succeed())
		ringSettled(ctx)
		for _, r := range readers {
			r.awaitPasses(ctx, 1)
		}
		var reads, failures int64
		var errs []string
		for _, r := range readers {
			r.halt()
			reads += r.reads.Load()
			failures += r.failures.Load()
			r.mu.Lock()
			errs = append(errs, r.errs...)
			r.mu.Unlock()
		}
		during := s3During.stop()
		held := rolloutHeld(ctx, start)

		By("re-reading the data set through both zones")
		gets, hitsByZone := readCost(ctx, cs)

		spanA0, spanA1 := res.zoneSpan(zone)
		spanB0, spanB1 := res.zoneSpan(zoneB)
		at := func(t time.Time) string { return fmt.Sprintf("%.0fs", t.Sub(start).Seconds()) }
		figure := fmt.Sprintf("%s -> %s (%s): operator rolled in %s, cache in %s; pods down in order %v; zone-a rolled %s-%s, zone-b %s-%s; "+
			"most pods taken down at once: %d, not Ready at once: %d of %d (%d pod changes watched); RolloutHeld for zone-b: %d event(s); "+
			"reads through zone-a's and zone-b's gateway while it rolled: %d and %d, in all (until the rings settled) %d, failed %d; "+
			"S3 GETs by the nodes meanwhile (sampled every 0.5 s): zone-a %.0f, zone-b %.0f; "+
			"re-read of %d objects (%d chunks) through each zone afterwards: S3 GETs zone-a %.0f, zone-b %.0f, chunk hits zone-a %.0f, zone-b %.0f",
			from.version, to.version, how, operatorTime.Round(time.Second), rolled.Round(time.Second), res.sequence(),
			at(spanA0), at(spanA1), at(spanB0), at(spanB1),
			res.maxTakenDown, res.maxUnready, len(zones)*upReplicas, res.changes, len(held),
			readsDuring[0], readsDuring[1], reads, failures, during[zone], during[zoneB],
			len(objs), dataSetChunks(objs), gets[zone], gets[zoneB], hitsByZone[zone], hitsByZone[zoneB])
		fmt.Fprintln(GinkgoWriter, "upgrade: "+figure)
		AddReportEntry(fmt.Sprintf("%s -> %s by %s", from.version, to.version, how), figure)

		Expect(res.err).NotTo(HaveOccurred())
		Expect(failures).To(BeZero(), "failed reads:\n%s", joinLines(errs))
		for i, n := range readsDuring {
			Expect(n).To(BeNumerically(">", 0), "the reader through %s's gateway read while the cache rolled", cs[i].zone)
		}
		// The rollout takes at most one pod down at a time; a pod that
		// turns unready on its own meanwhile (the figure above says so,
		// and the log which) is not the rollout's doing.
		Expect(res.maxTakenDown).To(BeNumerically("<=", 1), "never more than one cache pod taken down by the rollout (at %s; pods not Ready at the worst moment, %s: %s)",
			res.maxTakenDownAt.Format("15:04:05.000"), res.maxUnreadyAt.Format("15:04:05.000"), strings.Join(res.maxDown, ", "))
		Expect(res.sequence()).To(Equal([]string{upCache + "-" + zone + "-1", upCache + "-" + zone + "-0", upCache + "-" + zoneB + "-1", upCache + "-" + zoneB + "-0"}),
			"highest ordinal first, zone-a (first in spec.zones) before zone-b")
		Expect(res.ups).To(HaveLen(len(zones)*upReplicas), "every pod replaced by one on %s", to.cachenodeImage())
		Expect(spanB0.After(spanA1)).To(BeTrue(), "zone-b began (%s) after zone-a's last pod was Ready (%s)", at(spanB0), at(spanA1))
		Expect(held).NotTo(BeEmpty(), "a RolloutHeld event said zone-b waits for zone-a")
		Expect(gets[zone]+gets[zoneB]).To(BeZero(), "the cache is warm after the rollout: re-reading costs no S3 GET")
		Expect(hitsByZone[zone]).To(BeNumerically(">=", dataSetChunks(objs)))
		Expect(hitsByZone[zoneB]).To(BeNumerically(">=", dataSetChunks(objs)))
	}

	It("installs "+versionN+" by its manifest and serves a two-zone cache through a tenant's gateways, warm", func(ctx SpecContext) {
		By("kubectl apply --server-side -f distcache-" + versionN + ".yaml")
		kubectl(ctx, "apply", "--server-side", "-f", relN.manifest)
		operatorRolledOut(ctx, relN.operatorImage())

		By("a cache over zone-a and zone-b, two nodes each on a hostPath, and a tenant with a gateway per zone")
		local, localTenant, s3Secret := localObjects(ctx)
		Expect(localTenant.Spec.Gateway).NotTo(BeNil())
		Expect(localTenant.Spec.Gateway.PageCacheSize).NotTo(BeNil())
		Expect(localTenant.Spec.Gateway.PageCacheSize.IsZero()).To(BeTrue(), "testdata/local turns the gateway's page cache off")
		tenantLabels := map[string]string{"pod-security.kubernetes.io/enforce": "restricted"}
		for k, v := range local.Spec.TenantNamespaceSelector.MatchLabels {
			tenantLabels[k] = v
		}
		Expect(k8sClient.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: upNS,
			Labels: map[string]string{"pod-security.kubernetes.io/enforce": "privileged"}}})).To(Succeed())
		Expect(k8sClient.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: upTenantNS, Labels: tenantLabels}})).To(Succeed())
		Expect(k8sClient.Create(ctx, &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: upNS, Name: s3Secret.Name}, StringData: s3Secret.StringData})).To(Succeed())
		dc := &cachev1alpha1.DistributedCache{ObjectMeta: metav1.ObjectMeta{Namespace: upNS, Name: upCache}, Spec: *local.Spec.DeepCopy()}
		dc.Spec.Replicas = ptr.To[int32](upReplicas)
		dc.Spec.Zones = []cachev1alpha1.ZoneSpec{{Name: zone}, {Name: zoneB}}
		dc.Spec.Storage = cachev1alpha1.StorageSpec{HostPath: &cachev1alpha1.HostPathStorage{Path: upHostPath}}
		dc.Spec.Monitoring = cachev1alpha1.MonitoringSpec{}
		Expect(k8sClient.Create(ctx, dc)).To(Succeed())
		Expect(k8sClient.Create(ctx, &cachev1alpha1.CacheTenant{
			ObjectMeta: metav1.ObjectMeta{Namespace: upTenantNS, Name: upTenant},
			Spec: cachev1alpha1.CacheTenantSpec{
				CacheRef: cachev1alpha1.CacheReference{Namespace: upNS, Name: upCache},
				Buckets:  localTenant.Spec.Buckets,
				Gateway:  localTenant.Spec.Gateway.DeepCopy(),
			},
		})).To(Succeed())
		Eventually(ctx, func(g Gomega) { settledOn(ctx, g, relN) }).WithTimeout(rolloutTimeout).Should(Succeed())
		Eventually(ctx, func(g Gomega) { versionsRunning(ctx, g, relN) }).Should(Succeed())
		Eventually(ctx, func(g Gomega) {
			out, err := kubectlStdin(ctx, nil, "get", "distributedcache", "-n", upNS)
			g.Expect(err).NotTo(HaveOccurred())
			g.Expect(table(g, out)[upCache]).To(HaveKeyWithValue("VERSION", versionN))
		}).Should(Succeed())
		ringSettled(ctx)

		By("the data written through the tenant's endpoint, then read once through each zone's gateway")
		var t cachev1alpha1.CacheTenant
		Eventually(ctx, func(g Gomega) {
			g.Expect(k8sClient.Get(ctx, key(upTenantNS, upTenant), &t)).To(Succeed())
			g.Expect(t.Status.Endpoint).NotTo(BeEmpty())
			g.Expect(t.Status.CredentialsSecret).NotTo(BeEmpty())
			keyID = secretValue(ctx, g, upTenantNS, t.Status.CredentialsSecret, controllers.CredentialsAccessKeyID)
			secretKey = secretValue(ctx, g, upTenantNS, t.Status.CredentialsSecret, controllers.CredentialsSecretAccessKey)
		}).Should(Succeed())
		endpoint = t.Status.Endpoint
		cs := clients(ctx)
		objs = dataSet(fmt.Sprintf("e2e-upgrade/%d", time.Now().UnixNano()))
		put := func(o object) error {
			pctx, cancel := context.WithTimeout(ctx, requestTimeout)
			defer cancel()
			_, err := cs[0].s3.PutObject(pctx, &s3.PutObjectInput{Bucket: aws.String(bucket), Key: aws.String(o.key), Body: bytes.NewReader(o.data)})
			return err
		}
		// The nodes learn the new tenant through their tenants watch.
		Eventually(ctx, func() error { return put(objs[0]) }).WithPolling(2 * time.Second).Should(Succeed())
		for _, o := range objs[1:] {
			Expect(put(o)).To(Succeed(), "PutObject %s", o.key)
		}
		firstGets, _ := readCost(ctx, cs)
		gets, hitsByZone := readCost(ctx, cs)
		figure := fmt.Sprintf("%d objects, %d bytes, %d chunks; first read through each zone: S3 GETs zone-a %.0f, zone-b %.0f; second: S3 GETs zone-a %.0f, zone-b %.0f, chunk hits %.0f and %.0f",
			len(objs), dataSetBytes(objs), dataSetChunks(objs), firstGets[zone], firstGets[zoneB], gets[zone], gets[zoneB], hitsByZone[zone], hitsByZone[zoneB])
		fmt.Fprintln(GinkgoWriter, "warm-up: "+figure)
		AddReportEntry("data set on "+versionN, figure)
		// Zone b's nodes filled from S3 on the first read (crossZone Never);
		// the counter the later checks rely on sees S3 GETs.
		Expect(firstGets[zoneB]).To(BeNumerically(">", 0))
		Expect(gets[zone]+gets[zoneB]).To(BeZero(), "warm: a second read costs no S3 GET")
	}, SpecTimeout(upTimeout))

	It("upgrades to "+versionN1+" by applying its manifest: zone by zone, one pod at a time, no failed read, warm after", func(ctx SpecContext) {
		rollUnderReaders(ctx, "kubectl apply --server-side -f distcache-"+versionN1+".yaml", relN, relN1, func(ctx context.Context) {
			kubectl(ctx, "apply", "--server-side", "-f", relN1.manifest)
		})
		Eventually(ctx, func(g Gomega) {
			out, err := kubectlStdin(ctx, nil, "get", "distributedcache", "-n", upNS)
			g.Expect(err).NotTo(HaveOccurred())
			g.Expect(table(g, out)[upCache]).To(HaveKeyWithValue("VERSION", versionN1))
		}).Should(Succeed())
	}, SpecTimeout(upTimeout))

	It("moves to Helm: the operator removed, helm install of "+versionN+" takes the CRDs over and brings the cache back to "+versionN+" without a failed read", func(ctx SpecContext) {
		rollUnderReaders(ctx, "operator removed, then helm install of distcache-"+versionN+".tgz", relN1, relN, func(ctx context.Context) {
			deleteOperator(ctx, relN1)
			_, err := helmIn(ctx, helmHome, "install", helmRelease, relN.chart, "--namespace", operatorNamespace, "--create-namespace",
				"--take-ownership", "--wait", "--timeout", "5m")
			Expect(err).NotTo(HaveOccurred())
		})
		for _, name := range crds {
			var crd apiextensionsv1.CustomResourceDefinition
			Expect(k8sClient.Get(ctx, key("", name), &crd)).To(Succeed())
			Expect(crd.Annotations).To(HaveKeyWithValue("meta.helm.sh/release-name", helmRelease), "CRD %s is the release's", name)
			Expect(crd.Annotations).To(HaveKeyWithValue("helm.sh/resource-policy", "keep"), "CRD %s", name)
		}
	}, SpecTimeout(upTimeout))

	It("upgrades to "+versionN1+" by helm upgrade: zone by zone, one pod at a time, no failed read, warm after", func(ctx SpecContext) {
		rollUnderReaders(ctx, "helm upgrade to distcache-"+versionN1+".tgz", relN, relN1, func(ctx context.Context) {
			_, err := helmIn(ctx, helmHome, "upgrade", helmRelease, relN1.chart, "--namespace", operatorNamespace,
				"--reuse-values", "--wait", "--timeout", "5m")
			Expect(err).NotTo(HaveOccurred())
		})
		out, err := helmIn(ctx, helmHome, "list", "--namespace", operatorNamespace, "-o", "json")
		Expect(err).NotTo(HaveOccurred())
		var releases []map[string]any
		Expect(json.Unmarshal([]byte(out), &releases)).To(Succeed())
		Expect(releases).To(HaveLen(1), "helm list: %s", out)
		got := map[string]string{}
		for k, v := range releases[0] {
			got[k] = fmt.Sprint(v)
		}
		Expect(got).To(And(HaveKeyWithValue("name", helmRelease), HaveKeyWithValue("status", "deployed"),
			HaveKeyWithValue("chart", "distcache-"+versionN1), HaveKeyWithValue("app_version", relN1.tag()),
			HaveKeyWithValue("revision", "2")))
	}, SpecTimeout(upTimeout))
})
