package crdvalidation_test

import (
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strings"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	autoscalingv1 "k8s.io/api/autoscaling/v1"
	apimeta "k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/envtest"

	cachev1alpha1 "github.com/distcache/distcache/api/v1alpha1"
)

var _ = Describe("the scale subresource", func() {
	var dc *cachev1alpha1.DistributedCache
	BeforeEach(func(ctx SpecContext) {
		obj := object(baseCache, `{}`, newNamespace(ctx))
		Expect(k8sClient.Create(ctx, obj)).To(Succeed())
		dc = getCache(ctx, client.ObjectKeyFromObject(obj))
	})

	It("reads and writes spec.replicas (kubectl scale)", func(ctx SpecContext) {
		scale := &autoscalingv1.Scale{}
		Expect(k8sClient.SubResource("scale").Get(ctx, dc, scale)).To(Succeed())
		Expect(scale.Spec.Replicas).To(Equal(int32(3)))

		scale.Spec.Replicas = 5
		Expect(k8sClient.SubResource("scale").Update(ctx, dc, client.WithSubResourceBody(scale))).To(Succeed())
		Expect(getCache(ctx, client.ObjectKeyFromObject(dc)).Spec.Replicas).To(Equal(int32p(5)))

		// A merge patch of /scale, as `kubectl patch --subresource=scale` sends.
		scale = &autoscalingv1.Scale{}
		Expect(k8sClient.SubResource("scale").Patch(ctx, dc, mergePatchJSON(`spec: {replicas: 7}`),
			client.WithSubResourceBody(scale))).To(Succeed())
		Expect(scale.Spec.Replicas).To(Equal(int32(7)))
		Expect(getCache(ctx, client.ObjectKeyFromObject(dc)).Spec.Replicas).To(Equal(int32p(7)))
	})

	It("works with kubectl scale", func(ctx SpecContext) {
		admin, err := testEnv.AddUser(envtest.User{Name: "kubectl-admin", Groups: []string{"system:masters"}}, nil)
		Expect(err).NotTo(HaveOccurred())
		kubectl, err := admin.Kubectl()
		Expect(err).NotTo(HaveOccurred())
		stdout, stderr, err := kubectl.Run("scale", "--namespace", dc.Namespace, "distributedcache/"+dc.Name, "--replicas=4")
		Expect(err).NotTo(HaveOccurred(), "kubectl scale: %s", readAll(stderr))
		Expect(readAll(stdout)).To(ContainSubstring("scaled"))
		Expect(getCache(ctx, client.ObjectKeyFromObject(dc)).Spec.Replicas).To(Equal(int32p(4)))

		_, stderr, err = kubectl.Run("scale", "--namespace", dc.Namespace, "dcache/"+dc.Name, "--replicas=0")
		Expect(err).To(HaveOccurred())
		Expect(readAll(stderr)).To(ContainSubstring("spec.replicas"))
	})

	It("refuses to scale to zero, naming spec.replicas", func(ctx SpecContext) {
		err := k8sClient.SubResource("scale").Patch(ctx, dc, mergePatchJSON(`spec: {replicas: 0}`),
			client.WithSubResourceBody(&autoscalingv1.Scale{}))
		expectInvalid(err, "spec.replicas", "greater than or equal to 1")
		Expect(getCache(ctx, client.ObjectKeyFromObject(dc)).Spec.Replicas).To(Equal(int32p(3)))
	})

	It("reports status.replicas and status.selector (for HPA)", func(ctx SpecContext) {
		dc.Status.Replicas = 2
		dc.Status.Selector = "app.kubernetes.io/name=distcache,app.kubernetes.io/instance=" + dc.Name
		Expect(k8sClient.Status().Update(ctx, dc)).To(Succeed())

		scale := &autoscalingv1.Scale{}
		Expect(k8sClient.SubResource("scale").Get(ctx, dc, scale)).To(Succeed())
		Expect(scale.Status.Replicas).To(Equal(int32(2)))
		Expect(scale.Status.Selector).To(Equal(dc.Status.Selector))
	})
})

var _ = Describe("the status subresource", func() {
	It("is written apart from the spec", func(ctx SpecContext) {
		obj := object(baseCache, `{}`, newNamespace(ctx))
		Expect(k8sClient.Create(ctx, obj)).To(Succeed())
		key := client.ObjectKeyFromObject(obj)
		dc := getCache(ctx, key)
		generation := dc.Generation

		// A status write changes the status only: not the spec, not the generation.
		dc.Status = cachev1alpha1.DistributedCacheStatus{
			ObservedGeneration: generation, Replicas: 3, ReadyReplicas: 3, RingEpoch: 7, OperatorVersion: "v0.3.0",
			Selector: "app.kubernetes.io/instance=" + dc.Name,
			Zones: []cachev1alpha1.ZoneStatus{{Name: "zone-a", StatefulSet: dc.Name + "-zone-a",
				RingConfigMap: dc.Name + "-zone-a-ring", Replicas: 3, ReadyReplicas: 3, RingEpoch: 7}},
		}
		apimeta.SetStatusCondition(&dc.Status.Conditions, metav1.Condition{Type: cachev1alpha1.ConditionReady,
			Status: metav1.ConditionTrue, Reason: cachev1alpha1.ReasonAvailable, Message: "all zones ready", ObservedGeneration: generation})
		apimeta.SetStatusCondition(&dc.Status.Conditions, metav1.Condition{Type: cachev1alpha1.ConditionProgressing,
			Status: metav1.ConditionTrue, Reason: cachev1alpha1.ReasonHeldDataDraining, Message: "zone-a: keeping 4 pods", ObservedGeneration: generation})
		dc.Spec.Replicas = int32p(9)
		Expect(k8sClient.Status().Update(ctx, dc)).To(Succeed())
		got := getCache(ctx, key)
		Expect(got.Spec.Replicas).To(Equal(int32p(3)))
		Expect(got.Generation).To(Equal(generation))
		Expect(got.Status.RingEpoch).To(Equal(int64(7)))
		Expect(got.Status.Zones).To(HaveLen(1))
		Expect(apimeta.IsStatusConditionTrue(got.Status.Conditions, cachev1alpha1.ConditionReady)).To(BeTrue())

		// A spec write ignores the status and bumps the generation.
		got.Spec.Replicas = int32p(4)
		got.Status.RingEpoch = 99
		Expect(k8sClient.Update(ctx, got)).To(Succeed())
		got = getCache(ctx, key)
		Expect(got.Spec.Replicas).To(Equal(int32p(4)))
		Expect(got.Status.RingEpoch).To(Equal(int64(7)))
		Expect(got.Generation).To(Equal(generation + 1))

		// The printer columns show it.
		Expect(tableRow(dc.Namespace, "distributedcaches", dc.Name)).To(Equal(map[string]any{
			"Name": dc.Name, "Replicas": float64(4), "Ready": float64(3), "Ring Epoch": float64(7),
			"Status": "True", "Reason": cachev1alpha1.ReasonAvailable, "Version": "v0.3.0",
			"Progress": cachev1alpha1.ReasonHeldDataDraining,
		}))
	})

	It("exists for CacheTenant too", func(ctx SpecContext) {
		obj := object(baseTenant, `{}`, newNamespace(ctx))
		Expect(k8sClient.Create(ctx, obj)).To(Succeed())
		t := getTenant(ctx, client.ObjectKeyFromObject(obj))
		notAfter := metav1.Date(2031, 1, 2, 3, 4, 5, 0, time.UTC)
		t.Status.CertificateSecretName = t.CertificateSecretName()
		t.Status.CertificateNotAfter = &notAfter
		t.Status.TenantName = t.Namespace + "-" + t.Name
		t.Status.Endpoint = "http://" + t.Name + "-gateway." + t.Namespace + ".svc:8099"
		apimeta.SetStatusCondition(&t.Status.Conditions, metav1.Condition{Type: cachev1alpha1.ConditionReady,
			Status: metav1.ConditionTrue, Reason: cachev1alpha1.ReasonCertificateIssued, ObservedGeneration: t.Generation})
		t.Spec.Buckets = []string{"sneaky-bucket"}
		Expect(k8sClient.Status().Update(ctx, t)).To(Succeed())
		got := getTenant(ctx, client.ObjectKeyFromObject(obj))
		Expect(got.Spec.Buckets).To(Equal([]string{"team-data"}))
		Expect(got.Status.CertificateNotAfter.UTC()).To(Equal(notAfter.UTC()))

		Expect(tableRow(t.Namespace, "cachetenants", t.Name)).To(Equal(map[string]any{
			"Name": t.Name, "Cache": "analytics", "Cache Namespace": "distcache", "Secret": t.Name + "-distcache-client",
			"Expires": "2031-01-02T03:04:05Z", "Status": "True", "Reason": cachev1alpha1.ReasonCertificateIssued,
			"Endpoint": t.Status.Endpoint,
		}))
	})
})

// tableRow fetches one object as the server-side Table that kubectl get
// prints, and returns its cells by column name (all columns, priority too),
// but for Age.
func tableRow(ns, resource, name string) map[string]any {
	GinkgoHelper()
	httpClient, err := rest.HTTPClientFor(cfg)
	Expect(err).NotTo(HaveOccurred())
	url := fmt.Sprintf("%s/apis/%s/namespaces/%s/%s/%s", strings.TrimSuffix(cfg.Host, "/"), cachev1alpha1.GroupVersion, ns, resource, name)
	req, err := http.NewRequest(http.MethodGet, url, nil)
	Expect(err).NotTo(HaveOccurred())
	req.Header.Set("Accept", "application/json;as=Table;v=v1;g=meta.k8s.io")
	resp, err := httpClient.Do(req)
	Expect(err).NotTo(HaveOccurred())
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	Expect(err).NotTo(HaveOccurred())
	Expect(resp.StatusCode).To(Equal(http.StatusOK), "GET %s: %s", url, body)
	var table metav1.Table
	Expect(json.Unmarshal(body, &table)).To(Succeed())
	Expect(table.Rows).To(HaveLen(1))
	row := map[string]any{}
	for i, col := range table.ColumnDefinitions {
		row[col.Name] = table.Rows[0].Cells[i]
	}
	// Dates are printed as ages ("0s", "5m"); the age of a new object varies.
	Expect(row).To(HaveKeyWithValue("Age", MatchRegexp(`^[0-9]+[smhd]`)))
	delete(row, "Age")
	return row
}
