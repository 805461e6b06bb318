package deploy_test

import (
	"slices"
	"strings"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	monitoringv1 "github.com/prometheus-operator/prometheus-operator/pkg/apis/monitoring/v1"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"

	cachev1alpha1 "github.com/distcache/distcache/api/v1alpha1"
	"github.com/distcache/distcache/internal/monitoring"
)

// podLabelSource is how Prometheus's Kubernetes service discovery names a
// pod label (every character that is not alphanumeric becomes '_').
func podLabelSource(label string) monitoringv1.LabelName {
	return monitoringv1.LabelName("__meta_kubernetes_pod_label_" + strings.Map(func(r rune) rune {
		if r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' {
			return r
		}
		return '_'
	}, label))
}

// checkGatewaySample is a spec of the "make deploy" container, run after the
// samples are applied (the tenant's namespace exists then).
func checkGatewaySample(ctx SpecContext) {
	samples := decode([]byte(kubectl(ctx, adminKubeconfig, nil, "kustomize", "config/samples")))
	dc := &cachev1alpha1.DistributedCache{}
	convert(ofKind(samples, "DistributedCache")[0], dc)
	tenant := &cachev1alpha1.CacheTenant{}
	convert(ofKind(samples, "CacheTenant")[0], tenant)

	objs := decode([]byte(kubectl(ctx, adminKubeconfig, nil, "kustomize", "config/samples/gateway")))
	Expect(ofKind(objs, "Deployment")).To(HaveLen(1))
	Expect(ofKind(objs, "PodMonitor")).To(HaveLen(1))
	gw := &appsv1.Deployment{}
	convert(ofKind(objs, "Deployment")[0], gw)
	pm := &monitoringv1.PodMonitor{}
	convert(ofKind(objs, "PodMonitor")[0], pm)

	By("the gateway runs in the tenant's namespace with its certificate and names the tenant's cache")
	Expect(gw.Namespace).To(Equal(tenant.Namespace))
	pod := gw.Spec.Template
	Expect(pod.Labels).To(HaveKeyWithValue(monitoring.GatewayPodLabelCache, tenant.Spec.CacheRef.Name))
	Expect(pod.Labels).To(HaveKeyWithValue(monitoring.GatewayPodLabelCacheNamespace, tenant.Spec.CacheRef.Namespace))
	Expect(tenant.Spec.CacheRef.Name).To(Equal(dc.Name))
	Expect(pod.Spec.Volumes).To(ContainElement(HaveField("Secret.SecretName", tenant.CertificateSecretName())))
	Expect(pod.Spec.Containers).To(HaveLen(1))
	c := pod.Spec.Containers[0]
	Expect(c.Args).To(ContainElement("--nodes=https://" + dc.Name + "." + dc.Namespace + ".svc:8443"))
	Expect(c.Args).To(ContainElement("--metrics-listen=:9091"))

	By("the PodMonitor selects the gateway's pods, scrapes its metrics port and relabels the cache labels")
	Expect(pm.Namespace).To(Equal(gw.Namespace))
	sel, err := metav1.LabelSelectorAsSelector(&pm.Spec.Selector)
	Expect(err).NotTo(HaveOccurred())
	Expect(sel.Matches(labels.Set(pod.Labels))).To(BeTrue(), "selector %s, pod labels %v", sel, pod.Labels)
	Expect(pod.Labels).To(HaveKeyWithValue("app.kubernetes.io/name", monitoring.GatewayAppName))
	Expect(pm.Spec.PodMetricsEndpoints).To(HaveLen(1))
	ep := pm.Spec.PodMetricsEndpoints[0]
	Expect(ep.Port).NotTo(BeNil())
	Expect(c.Ports).To(ContainElement(corev1.ContainerPort{Name: *ep.Port, ContainerPort: 9091}))
	relabelled := map[string]monitoringv1.LabelName{}
	for _, r := range ep.RelabelConfigs {
		Expect(r.SourceLabels).To(HaveLen(1))
		relabelled[r.TargetLabel] = r.SourceLabels[0]
	}
	Expect(relabelled).To(Equal(map[string]monitoringv1.LabelName{
		monitoring.LabelCache:          podLabelSource(monitoring.GatewayPodLabelCache),
		monitoring.LabelCacheNamespace: podLabelSource(monitoring.GatewayPodLabelCacheNamespace),
	}))

	By("the API server accepts all of it (the prometheus-operator's PodMonitor CRD included)")
	ns := &corev1.Namespace{ObjectMeta: objectMeta("", gw.Namespace, nil)}
	if err := k8sClient.Create(ctx, ns); err != nil && !apierrors.IsAlreadyExists(err) {
		Expect(err).NotTo(HaveOccurred()) // run alone (-ginkgo.focus), the samples spec has not made it
	}
	out := kubectl(ctx, adminKubeconfig, nil, "apply", "--server-side", "-k", "config/samples/gateway")
	Expect(strings.Count(out, "serverside-applied")).To(Equal(3), out)
	Expect(slices.ContainsFunc(strings.Split(out, "\n"), func(l string) bool {
		return strings.HasPrefix(l, "podmonitor.monitoring.coreos.com/distcache-gateway")
	})).To(BeTrue(), out)
}
