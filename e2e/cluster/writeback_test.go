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
	corev1 "k8s.io/api/core/v1"
	eventsv1 "k8s.io/api/events/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/tools/clientcmd"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	cachev1alpha1 "github.com/distcache/distcache/api/v1alpha1"
	"github.com/distcache/distcache/controllers"
)

// A scale-down while the pod that goes holds write-back data S3 has not
// taken: the tenant's prefix e2e-writeback/ is WriteBack and its S3
// credentials are made wrong, so every write stays held on two of the
// cache's four nodes, the fourth among them. The ring drains the fourth,
// its node hands what it holds to the nodes that stay, the operator asks
// it (by pod IP, its metrics port) before the StatefulSet shrinks, and
// once the credentials are right again MinIO ends with every object,
// byte-exact.

const (
	writeBackPrefix  = "e2e-writeback/"
	wrongCredsSecret = "clickhouse-wrong-s3-credentials"
	mHeldObjects     = "distcache_writeback_objects"
)

// minioClient is an S3 client of MinIO itself (root credentials).
func minioClient(ctx context.Context, g Gomega) *s3.Client {
	var pods corev1.PodList
	g.Expect(k8sClient.List(ctx, &pods, client.InNamespace(minioNamespace), client.MatchingLabels{"app": minioName})).To(Succeed())
	g.Expect(pods.Items).To(HaveLen(1))
	return newS3Client(net.JoinHostPort(pods.Items[0].Status.PodIP, "9000"),
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

// scaleDownWithHeldData is the spec; followGateway, waitRingSettled and
// gateway (the client followGateway set) are the suite's.
func scaleDownWithHeldData(ctx context.Context, followGateway func(context.Context, Gomega), waitRingSettled func(context.Context) int64,
	gateway func() *s3.Client) {
	Eventually(ctx, func(g Gomega) { followGateway(ctx, g) }).Should(Succeed())
	var minio *s3.Client
	Eventually(ctx, func(g Gomega) {
		minio = minioClient(ctx, g)
		g.Expect(createBucket(ctx, minio)).To(Succeed())
	}).Should(Succeed())
	start := time.Now()

	By("four cache pods")
	kubectl(ctx, "patch", "distributedcache/"+cacheName, "-n", cacheNamespace, "--type=merge", "-p", `{"spec":{"replicas":4}}`)
	Eventually(ctx, func(g Gomega) {
		expectCacheReady(ctx, g, 4)
		g.Expect(publishedRing(ctx, g).States()).To(Equal(activeRing(4)))
	}).WithTimeout(timeout).Should(Succeed())
	waitRingSettled(ctx)
	leaving := ordinalPod(3)

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
	DeferCleanup(func(ctx SpecContext) {
		editTenant(ctx, func(t *cachev1alpha1.CacheTenant) {
			t.Spec.Policies, t.Spec.CredentialsSecret = orig.Policies, orig.CredentialsSecret
		})
		Expect(client.IgnoreNotFound(k8sClient.Delete(ctx, wrong))).To(Succeed())
		kubectl(ctx, "patch", "distributedcache/"+cacheName, "-n", cacheNamespace, "--type=merge", "-p", `{"spec":{"replicas":3}}`)
	})

	run := fmt.Sprintf("%s%d/", writeBackPrefix, time.Now().UnixNano())
	r := rand.New(rand.NewPCG(27, uint64(time.Now().UnixNano())))
	objs := make([]object, 32)
	for i := range objs {
		data := make([]byte, 1000+r.IntN(200<<10))
		for j := range data {
			data[j] = byte(r.Uint32())
		}
		objs[i] = object{key: fmt.Sprintf("%sobj-%02d", run, i), data: data}
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
	probe := 0
	Eventually(ctx, func(g Gomega) {
		followGateway(ctx, g)
		probe++
		k := fmt.Sprintf("%sprobe-%d", run, probe)
		g.Expect(put(object{key: k, data: []byte("probe")})).To(Succeed())
		there, err := inMinIO(ctx, minio, k)
		g.Expect(err).NotTo(HaveOccurred())
		g.Expect(there).To(BeFalse(), "%s went through to MinIO: the nodes do not hold the prefix yet", k)
	}).WithTimeout(timeout).WithPolling(2 * time.Second).Should(Succeed())
	for _, o := range objs {
		Expect(put(o)).To(Succeed(), "PutObject %s", o.key)
	}
	for _, o := range objs {
		there, err := inMinIO(ctx, minio, o.key)
		Expect(err).NotTo(HaveOccurred())
		Expect(there).To(BeFalse(), "%s is in MinIO before the scale-down: it was not held", o.key)
	}
	pods := scrapeCache(ctx)
	held := pods[leaving].m.sum(mHeldObjects, nil)
	fmt.Fprintf(GinkgoWriter, "held objects before the scale-down: %s %.0f of %d written (two copies each)\n", leaving, held, len(objs)+probe)
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
	for _, o := range objs {
		Expect(verifyObject(ctx, gateway(), o)).To(Succeed())
		there, err := inMinIO(ctx, minio, o.key)
		Expect(err).NotTo(HaveOccurred())
		Expect(there).To(BeFalse(), "%s reached MinIO with wrong credentials", o.key)
	}

	By("the right credentials again: MinIO ends with every object, byte-exact")
	editTenant(ctx, func(t *cachev1alpha1.CacheTenant) { t.Spec.CredentialsSecret = orig.CredentialsSecret })
	Eventually(ctx, func(g Gomega) {
		for _, o := range objs {
			got, err := getObject(ctx, minio, o.key, "")
			g.Expect(err).NotTo(HaveOccurred(), "%s in MinIO", o.key)
			g.Expect(bytes.Equal(got, o.data)).To(BeTrue(), "%s in MinIO: %d bytes that are not the object's %d", o.key, len(got), len(o.data))
		}
	}).WithTimeout(ringTimeout).WithPolling(2 * time.Second).Should(Succeed())
}
