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
	"github.com/distcache/distcache/internal/testutil/kubetest"
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

// checkSidecarSample is a spec of the "make deploy" container, run after the
// samples are applied (the tenant's namespace exists then): the gateway as
// a sidecar of clickhouse-server (config/samples/sidecar).
func checkSidecarSample(ctx SpecContext) {
	samples := kubetest.Decode([]byte(kubectl(ctx, adminKubeconfig, nil, "kustomize", "config/samples")))
	dc := &cachev1alpha1.DistributedCache{}
	kubetest.Convert(ofKind(samples, "DistributedCache")[0], dc)
	tenant := &cachev1alpha1.CacheTenant{}
	kubetest.Convert(ofKind(samples, "CacheTenant")[0], tenant)

	objs := kubetest.Decode([]byte(kubectl(ctx, adminKubeconfig, nil, "kustomize", "config/samples/sidecar")))
	Expect(ofKind(objs, "StatefulSet")).To(HaveLen(1))
	Expect(ofKind(objs, "PodMonitor")).To(HaveLen(1))
	ch := &appsv1.StatefulSet{}
	kubetest.Convert(ofKind(objs, "StatefulSet")[0], ch)
	pm := &monitoringv1.PodMonitor{}
	kubetest.Convert(ofKind(objs, "PodMonitor")[0], pm)

	By("the gateway runs beside clickhouse-server with the tenant's certificate, in its zone, on a port ClickHouse leaves free")
	Expect(ch.Namespace).To(Equal(tenant.Namespace))
	pod := ch.Spec.Template
	Expect(pod.Labels).To(HaveKeyWithValue(monitoring.GatewayPodLabelCache, tenant.Spec.CacheRef.Name))
	Expect(pod.Labels).To(HaveKeyWithValue(monitoring.GatewayPodLabelCacheNamespace, tenant.Spec.CacheRef.Namespace))
	Expect(tenant.Spec.CacheRef.Name).To(Equal(dc.Name))
	Expect(pod.Spec.Volumes).To(ContainElement(HaveField("Secret.SecretName", tenant.CertificateSecretName())))
	Expect(pod.Spec.InitContainers).To(HaveLen(1))
	gw := pod.Spec.InitContainers[0]
	Expect(gw.RestartPolicy).To(HaveValue(Equal(corev1.ContainerRestartPolicyAlways)), "a native sidecar")
	zone := dc.Spec.Zones[0].Name
	Expect(gw.Args).To(ContainElements(
		"--zone="+zone,
		"--nodes=https://"+dc.Name+"-"+zone+"."+dc.Namespace+".svc:8443",
		"--metrics-listen=:9091", "--listen=127.0.0.1:8099"))
	Expect(pod.Spec.Affinity.NodeAffinity.RequiredDuringSchedulingIgnoredDuringExecution.NodeSelectorTerms[0].MatchExpressions).To(
		ContainElement(corev1.NodeSelectorRequirement{Key: "topology.kubernetes.io/zone", Operator: corev1.NodeSelectorOpIn, Values: []string{zone}}))
	Expect(pod.Spec.Containers).To(HaveLen(1))
	for _, p := range pod.Spec.Containers[0].Ports {
		Expect(p.ContainerPort).NotTo(BeElementOf(int32(8099), int32(9091)), "ClickHouse's port %s collides with the gateway's", p.Name)
	}
	var cm corev1.ConfigMap
	kubetest.Convert(ofKind(objs, "ConfigMap")[0], &cm)
	Expect(cm.Data["distcache.xml"]).To(ContainSubstring("<endpoint>http://127.0.0.1:8099/"))

	By("the PodMonitor selects the pods, scrapes the gateway's metrics port and relabels the cache labels")
	Expect(pm.Namespace).To(Equal(ch.Namespace))
	sel, err := metav1.LabelSelectorAsSelector(&pm.Spec.Selector)
	Expect(err).NotTo(HaveOccurred())
	Expect(sel.Matches(labels.Set(pod.Labels))).To(BeTrue(), "selector %s, pod labels %v", sel, pod.Labels)
	Expect(pm.Spec.PodMetricsEndpoints).To(HaveLen(1))
	ep := pm.Spec.PodMetricsEndpoints[0]
	Expect(ep.Port).NotTo(BeNil())
	Expect(gw.Ports).To(ContainElement(corev1.ContainerPort{Name: *ep.Port, ContainerPort: 9091}))
	relabelled := map[string]monitoringv1.LabelName{}
	for _, r := range ep.RelabelConfigs {
		Expect(r.SourceLabels).To(HaveLen(1))
		relabelled[r.TargetLabel] = r.SourceLabels[0]
	}
	Expect(relabelled).To(Equal(map[string]monitoringv1.LabelName{
		monitoring.LabelCache:          podLabelSource(monitoring.GatewayPodLabelCache),
		monitoring.LabelCacheNamespace: podLabelSource(monitoring.GatewayPodLabelCacheNamespace),
		monitoring.LabelZone:           podLabelSource("cache.distcache.io/zone"),
	}))

	By("the API server accepts all of it (the prometheus-operator's PodMonitor CRD included)")
	ns := &corev1.Namespace{ObjectMeta: objectMeta("", ch.Namespace, nil)}
	if err := k8sClient.Create(ctx, ns); err != nil && !apierrors.IsAlreadyExists(err) {
		Expect(err).NotTo(HaveOccurred()) // run alone (-ginkgo.focus), the samples spec has not made it
	}
	out := kubectl(ctx, adminKubeconfig, nil, "apply", "--server-side", "-k", "config/samples/sidecar")
	Expect(strings.Count(out, "serverside-applied")).To(Equal(3), out)
	Expect(slices.ContainsFunc(strings.Split(out, "\n"), func(l string) bool {
		return strings.HasPrefix(l, "podmonitor.monitoring.coreos.com/clickhouse-distcache-sidecar")
	})).To(BeTrue(), out)
}
