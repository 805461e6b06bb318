package cluster_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"net"
	"sync"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/s3"
	s3types "github.com/aws/aws-sdk-go-v2/service/s3/types"
	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	eventsv1 "k8s.io/api/events/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/tools/clientcmd"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	cachev1alpha1 "github.com/distcache/distcache/api/v1alpha1"
	"github.com/distcache/distcache/controllers"
	"github.com/distcache/distcache/internal/testutil"
)

// Membership changes while the cache's nodes hold write-back data S3 has
// not taken: the tenant's prefix e2e-writeback/ is WriteBack and its S3
// credentials are made wrong, so every write stays held on two of the
// cache's nodes (holdWrites). Two specs use it:
//
//   - a scale-down 4 -> 3: the ring drains the fourth pod, its node hands
//     what it holds to the nodes that stay, the operator asks it (by pod
//     IP, its metrics port) before the StatefulSet shrinks;
//   - a rolling restart (`kubectl rollout restart`) of the StatefulSet:
//     every pod goes and comes back with its disk, one at a time, while a
//     reader reads every held object byte-exact throughout.
//
// In both, every object reads back byte-exact while S3 still refuses it,
// and once the credentials are right again MinIO ends with every object,
// byte-exact.

const (
	writeBackPrefix  = "e2e-writeback/"
	wrongCredsSecret = "clickhouse-wrong-s3-credentials"
	mHeldObjects     = "distcache_writeback_objects"
	// What `kubectl rollout restart` sets on a pod template.
	restartedAtAnnotation = "kubectl.kubernetes.io/restartedAt"
)

// minioClient is an S3 client of MinIO itself (root credentials), once its
// one pod is Ready.
func minioClient(ctx context.Context, g Gomega) *s3.Client {
	var pods corev1.PodList
	g.Expect(k8sClient.List(ctx, &pods, client.InNamespace(minioNamespace), client.MatchingLabels{"app": minioName})).To(Succeed())
	g.Expect(pods.Items).To(HaveLen(1))
	g.Expect(podReady(&pods.Items[0])).To(BeTrue())
	return testutil.S3Client("http://"+net.JoinHostPort(pods.Items[0].Status.PodIP, "9000"),
		secretValue(ctx, g, minioNamespace, minioRootSecret, "MINIO_ROOT_USER"),
		secretValue(ctx, g, minioNamespace, minioRootSecret, "MINIO_ROOT_PASSWORD"))
}

// inMinIO: MinIO has the key (false on NoSuchKey/NotFound, an error
// otherwise).
func inMinIO(ctx context.Context, minio *s3.Client, k string) (bool, error) {
	_, err := minio.HeadObject(ctx, &s3.HeadObjectInput{Bucket: aws.String(bucket), Key: aws.String(k)})
	if err == nil {
		return true, nil
	}
	if _, nf := errors.AsType[*s3types.NotFound](err); nf {
		return false, nil
	}
	if _, nf := errors.AsType[*s3types.NoSuchKey](err); nf {
		return false, nil
	}
	return false, err
}

// editTenant changes the suite's CacheTenant, again on a conflict.
func editTenant(ctx context.Context, edit func(t *cachev1alpha1.CacheTenant)) {
	GinkgoHelper()
	Eventually(ctx, func(g Gomega) {
		var t cachev1alpha1.CacheTenant
		g.Expect(k8sClient.Get(ctx, key(tenantNamespace, tenantName), &t)).To(Succeed())
		edit(&t)
		g.Expect(k8sClient.Update(ctx, &t)).To(Succeed())
	}).Should(Succeed())
}

// leavingSeen follows the cache's status with a watch (every write, none
// missed between polls) and records each leaving pod entry it shows.
type leavingSeen struct {
	w    watch.Interface
	done chan []cachev1alpha1.LeavingPodStatus
	once sync.Once
	seen []cachev1alpha1.LeavingPodStatus
}

func watchLeaving(ctx context.Context) *leavingSeen {
	GinkgoHelper()
	cfg, err := clientcmd.BuildConfigFromFlags("", kubeconfig)
	Expect(err).NotTo(HaveOccurred())
	wc, err := client.NewWithWatch(cfg, client.Options{Scheme: scheme})
	Expect(err).NotTo(HaveOccurred())
	w, err := wc.Watch(ctx, &cachev1alpha1.DistributedCacheList{}, client.InNamespace(cacheNamespace))
	Expect(err).NotTo(HaveOccurred())
	s := &leavingSeen{w: w, done: make(chan []cachev1alpha1.LeavingPodStatus, 1)}
	go func() {
		var seen []cachev1alpha1.LeavingPodStatus
		for ev := range w.ResultChan() {
			dc, ok := ev.Object.(*cachev1alpha1.DistributedCache)
			if !ok || dc.Name != cacheName {
				continue
			}
			for _, z := range dc.Status.Zones {
				seen = append(seen, z.LeavingPods...)
			}
		}
		s.done <- seen
	}()
	return s
}

func (s *leavingSeen) stop() []cachev1alpha1.LeavingPodStatus {
	s.once.Do(func() {
		s.w.Stop()
		s.seen = <-s.done
	})
	return s.seen
}

// heldWrites are objects the cache's nodes hold because S3 refuses them
// (holdWrites).
type heldWrites struct {
	minio *s3.Client
	objs  []object
	// probes: keys written until the nodes held the prefix (the last of
	// them held, the others possibly in MinIO).
	probes int
	// restoreCreds gives the tenant its own S3 credentials again.
	restoreCreds func(ctx context.Context)
}

// holdWrites makes the tenant's writeBackPrefix WriteBack (2 replicas) and
// its S3 credentials wrong (both undone when the spec ends), then writes n
// objects of 1,000 bytes to 200 KiB, the last large of them of 1 to 3
// chunks (bodies in files of their own), under a prefix of their own once
// the nodes hold the prefix, and checks MinIO has none of them.
func holdWrites(ctx context.Context, followGateway func(context.Context, Gomega), gateway func() *s3.Client, n, large int) *heldWrites {
	GinkgoHelper()
	h := &heldWrites{}
	Eventually(ctx, func(g Gomega) {
		h.minio = minioClient(ctx, g)
		g.Expect(createBucket(ctx, h.minio)).To(Succeed())
	}).Should(Succeed())

	By("the tenant's " + writeBackPrefix + " is WriteBack and its S3 credentials are wrong: writes stay held")
	keyID := secretValue(ctx, Default, minioNamespace, minioRootSecret, "MINIO_ROOT_USER")
	wrong := &corev1.Secret{
		ObjectMeta: metav1.ObjectMeta{Namespace: tenantNamespace, Name: wrongCredsSecret},
		StringData: map[string]string{"AWS_ACCESS_KEY_ID": keyID, "AWS_SECRET_ACCESS_KEY": "not-the-secret-key"},
	}
	Expect(client.IgnoreAlreadyExists(k8sClient.Create(ctx, wrong))).To(Succeed())
	var orig cachev1alpha1.CacheTenantSpec
	editTenant(ctx, func(t *cachev1alpha1.CacheTenant) {
		orig = *t.Spec.DeepCopy()
		t.Spec.Policies = append(t.Spec.Policies, cachev1alpha1.WritePolicy{
			Bucket: bucket, Prefix: writeBackPrefix, Mode: cachev1alpha1.WriteModeWriteBack, Replicas: ptr.To[int32](2)})
		t.Spec.CredentialsSecret = &cachev1alpha1.CredentialsSecretReference{Name: wrongCredsSecret}
	})
	h.restoreCreds = func(ctx context.Context) {
		editTenant(ctx, func(t *cachev1alpha1.CacheTenant) { t.Spec.CredentialsSecret = orig.CredentialsSecret })
	}
	DeferCleanup(func(ctx SpecContext) {
		editTenant(ctx, func(t *cachev1alpha1.CacheTenant) {
			t.Spec.Policies, t.Spec.CredentialsSecret = orig.Policies, orig.CredentialsSecret
		})
		Expect(client.IgnoreNotFound(k8sClient.Delete(ctx, wrong))).To(Succeed())
	})

	run := fmt.Sprintf("%s%d/", writeBackPrefix, time.Now().UnixNano())
	r := rand.New(rand.NewPCG(27, uint64(time.Now().UnixNano())))
	h.objs = make([]object, n)
	for i := range h.objs {
		size := 1000 + r.IntN(200<<10)
		if i >= n-large {
			size = chunkSize + r.IntN(2*chunkSize)
		}
		data := make([]byte, size)
		for j := range data {
			data[j] = byte(r.Uint32())
		}
		h.objs[i] = object{key: fmt.Sprintf("%sobj-%02d", run, i), data: data}
	}
	put := func(o object) error {
		pctx, cancel := context.WithTimeout(ctx, requestTimeout)
		defer cancel()
		_, err := gateway().PutObject(pctx, &s3.PutObjectInput{Bucket: aws.String(bucket), Key: aws.String(o.key), Body: bytes.NewReader(o.data)})
		return err
	}
	// The nodes take the new tenants file (policy and credentials at once)
	// through their watch: until then a write goes through to S3 with the
	// old credentials. Probe with keys of their own until one is held.
	Eventually(ctx, func(g Gomega) {
		followGateway(ctx, g)
		h.probes++
		k := fmt.Sprintf("%sprobe-%d", run, h.probes)
		g.Expect(put(object{key: k, data: []byte("probe")})).To(Succeed())
		there, err := inMinIO(ctx, h.minio, k)
		g.Expect(err).NotTo(HaveOccurred())
		g.Expect(there).To(BeFalse(), "%s went through to MinIO: the nodes do not hold the prefix yet", k)
	}).WithTimeout(timeout).WithPolling(2 * time.Second).Should(Succeed())
	for _, o := range h.objs {
		Expect(put(o)).To(Succeed(), "PutObject %s", o.key)
	}
	h.expectNotInMinIO(ctx, "once written")
	return h
}

// expectNotInMinIO checks that S3 has none of the objects (when says at
// what point of the spec).
func (h *heldWrites) expectNotInMinIO(ctx context.Context, when string) {
	GinkgoHelper()
	for _, o := range h.objs {
		there, err := inMinIO(ctx, h.minio, o.key)
		Expect(err).NotTo(HaveOccurred())
		Expect(there).To(BeFalse(), "%s is in MinIO %s, with wrong credentials: it was not held", o.key, when)
	}
}

// readBack reads every object through c, byte-exact, and checks S3 still
// has none of them.
func (h *heldWrites) readBack(ctx context.Context, c *s3.Client, when string) {
	GinkgoHelper()
	for _, o := range h.objs {
		Expect(verifyObject(ctx, c, o)).To(Succeed())
	}
	h.expectNotInMinIO(ctx, when)
}

// persisted gives the tenant its credentials back and waits until MinIO
// has every object, byte-exact.
func (h *heldWrites) persisted(ctx context.Context) {
	GinkgoHelper()
	By("the right credentials again: MinIO ends with every object, byte-exact")
	h.restoreCreds(ctx)
	Eventually(ctx, func(g Gomega) {
		for _, o := range h.objs {
			got, err := getObject(ctx, h.minio, o.key, "")
			g.Expect(err).NotTo(HaveOccurred(), "%s in MinIO", o.key)
			g.Expect(bytes.Equal(got, o.data)).To(BeTrue(), "%s in MinIO: %d bytes that are not the object's %d", o.key, len(got), len(o.data))
		}
	}).WithTimeout(ringTimeout).WithPolling(2 * time.Second).Should(Succeed())
}

// heldPerPod is each cache pod's count of held objects.
func heldPerPod(ctx context.Context) map[string]float64 {
	out := map[string]float64{}
	for name, s := range scrapeCache(ctx) {
		out[name] = s.m.Sum(mHeldObjects, nil)
	}
	return out
}

// scaleDownWithHeldData is the spec; followGateway, waitRingSettled and
// gateway (the client followGateway set) are the suite's.
func scaleDownWithHeldData(ctx context.Context, followGateway func(context.Context, Gomega), waitRingSettled func(context.Context) int64,
	gateway func() *s3.Client) {
	Eventually(ctx, func(g Gomega) { followGateway(ctx, g) }).Should(Succeed())
	start := time.Now()

	By("four cache pods")
	kubectl(ctx, "patch", "distributedcache/"+cacheName, "-n", cacheNamespace, "--type=merge", "-p", `{"spec":{"replicas":4}}`)
	DeferCleanup(func(ctx SpecContext) {
		kubectl(ctx, "patch", "distributedcache/"+cacheName, "-n", cacheNamespace, "--type=merge", "-p", `{"spec":{"replicas":3}}`)
	})
	Eventually(ctx, func(g Gomega) {
		expectCacheReady(ctx, g, 4)
		g.Expect(publishedRing(ctx, g).States()).To(Equal(activeRing(4)))
	}).WithTimeout(timeout).Should(Succeed())
	waitRingSettled(ctx)
	leaving := ordinalPod(3)

	h := holdWrites(ctx, followGateway, gateway, 32, 0)
	held := heldPerPod(ctx)[leaving]
	fmt.Fprintf(GinkgoWriter, "held objects before the scale-down: %s %.0f of %d written (two copies each)\n", leaving, held, len(h.objs)+h.probes)
	Expect(held).To(BeNumerically(">", 0), "the leaving pod %s holds write-back objects", leaving)

	By("spec.replicas 3: " + leaving + " drains, hands its held objects over, and the operator asks it before it goes")
	seen := watchLeaving(ctx)
	DeferCleanup(func() { seen.stop() })
	kubectl(ctx, "patch", "distributedcache/"+cacheName, "-n", cacheNamespace, "--type=merge", "-p", `{"spec":{"replicas":3}}`)
	Eventually(ctx, func(g Gomega) {
		expectCacheReady(ctx, g, 3)
		g.Expect(publishedRing(ctx, g).States()).To(Equal(activeRing(3)))
	}).WithTimeout(ringTimeout).Should(Succeed())
	entries := seen.stop()
	fmt.Fprintf(GinkgoWriter, "status.zones[].leavingPods during the scale-down: %+v\n", entries)
	AddReportEntry("scale-down 4 -> 3 with held data on the leaving pod",
		fmt.Sprintf("%s held %.0f objects; leavingPods shown: %+v", leaving, held, entries))
	Expect(entries).To(ContainElement(And(HaveField("Name", leaving), HaveField("Unanswered", BeEmpty()), HaveField("HeldObjects", BeZero()))),
		"the operator asked %s over the pod network and removed it once it held nothing", leaving)
	var evs eventsv1.EventList
	Expect(k8sClient.List(ctx, &evs, client.InNamespace(cacheNamespace))).To(Succeed())
	for _, e := range evs.Items {
		if e.Regarding.Name == cacheName && e.CreationTimestamp.After(start) {
			Expect(e.Reason).NotTo(Equal(controllers.EventLeavingPodUnanswered), "event: %s", e.Note)
		}
	}

	By("while S3 still refuses them, every object reads back byte-exact from the nodes that stay")
	Eventually(ctx, func(g Gomega) { followGateway(ctx, g) }).Should(Succeed())
	h.readBack(ctx, gateway(), "after the scale-down")
	h.persisted(ctx)
}

// rollingRestartWithHeldData is the spec of a rolling restart while every
// pod holds write-back data S3 refuses: `kubectl rollout restart` of the
// zone's StatefulSet (kubectl's restartedAt annotation on its pod
// template, which the operator leaves alone: it writes the StatefulSet
// only when what it renders changes), read continuously through the
// gateway, every byte compared. docs/upgrade.md promises that reads go on
// being answered while the pods restart one at a time, so a failed read
// fails the spec as a wrong byte does. Arguments as scaleDownWithHeldData's.
func rollingRestartWithHeldData(ctx context.Context, followGateway func(context.Context, Gomega), waitRingSettled func(context.Context) int64,
	gateway func() *s3.Client) {
	Eventually(ctx, func(g Gomega) {
		followGateway(ctx, g)
		expectCacheReady(ctx, g, 3)
		g.Expect(publishedRing(ctx, g).States()).To(Equal(activeRing(3)))
	}).WithTimeout(timeout).Should(Succeed())
	waitRingSettled(ctx)

	h := holdWrites(ctx, followGateway, gateway, 32, 4)
	copies := 2 * len(h.objs) // at least: the probe held and older held objects add to it
	heldBefore := heldPerPod(ctx)
	fmt.Fprintf(GinkgoWriter, "held objects before the restart: %v (%d objects written, two copies each)\n", heldBefore, len(h.objs))
	Expect(heldBefore).To(HaveLen(3))
	for name, n := range heldBefore {
		Expect(n).To(BeNumerically(">", 0), "pod %s holds write-back objects before it restarts", name)
	}
	Expect(total(heldBefore)).To(BeNumerically(">=", copies), "two copies of each object are held")

	oldUIDs := map[string]types.UID{}
	for _, p := range cachePods(ctx, Default) {
		oldUIDs[p.Name] = p.UID
	}
	Expect(oldUIDs).To(HaveLen(3))

	By("a reader reads every held object through the gateway, byte-exact, throughout")
	r := startReader(gateway(), h.objs)
	DeferCleanup(r.halt)
	r.awaitPasses(ctx, 1)
	readiness := watchReadiness()
	DeferCleanup(func() { _, _, _ = readiness.stop() })

	By("kubectl rollout restart statefulset/" + statefulSetName + ": every pod goes and comes back with its disk, one at a time")
	kubectl(ctx, "rollout", "restart", "statefulset/"+statefulSetName, "-n", cacheNamespace)
	start := time.Now()
	Eventually(ctx, func(g Gomega) {
		var sts appsv1.StatefulSet
		g.Expect(k8sClient.Get(ctx, key(cacheNamespace, statefulSetName), &sts)).To(Succeed())
		g.Expect(sts.Spec.Template.Annotations).To(HaveKey(restartedAtAnnotation), "the operator left kubectl's restart in the pod template")
		g.Expect(sts.Status.ObservedGeneration).To(Equal(sts.Generation))
		g.Expect(sts.Status.UpdatedReplicas).To(BeEquivalentTo(3))
		g.Expect(sts.Status.CurrentRevision).To(Equal(sts.Status.UpdateRevision))
		for _, p := range expectCacheReady(ctx, g, 3) {
			g.Expect(p.UID).NotTo(Equal(oldUIDs[p.Name]), "pod %s replaced", p.Name)
			g.Expect(p.Annotations).To(HaveKeyWithValue(restartedAtAnnotation, sts.Spec.Template.Annotations[restartedAtAnnotation]), "pod %s", p.Name)
		}
	}).WithTimeout(rolloutTimeout).Should(Succeed())
	rolled := time.Since(start).Round(time.Second)
	minReady, samples, atMin := readiness.stop()
	waitRingSettled(ctx)
	r.awaitPasses(ctx, 1)
	r.halt()
	reads, failed, wrong := r.reads.Load(), r.failures.Load(), r.wrong.Load()
	figure := fmt.Sprintf("%d held objects (%d bytes), every pod holding some (%v); 3 pods replaced in %s, fewest Ready pods in %d samples: %d; "+
		"reads through the gateway from before the restart to a pass after it: %d, %d failed, %d with wrong bytes",
		len(h.objs), dataSetBytes(h.objs), heldBefore, rolled, samples, minReady, reads, failed, wrong)
	fmt.Fprintln(GinkgoWriter, "rolling restart with held data: "+figure)
	AddReportEntry("rolling restart with held data on every pod", figure)
	Expect(minReady).To(BeNumerically(">=", 2), "never more than one pod down during the restart; at the fewest: %s", atMin)
	r.expectNoFailures()

	By("while S3 still refuses them, the restarted pods hold every object and it reads back byte-exact")
	Eventually(ctx, func(g Gomega) {
		g.Expect(total(heldPerPod(ctx))).To(BeNumerically(">=", copies))
	}).WithTimeout(timeout).Should(Succeed(), "two copies of each object held again")
	Eventually(ctx, func(g Gomega) { followGateway(ctx, g) }).Should(Succeed())
	h.readBack(ctx, gateway(), "after the restart")
	h.persisted(ctx)
}
