package deploy_test

import (
	"strings"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"sigs.k8s.io/controller-runtime/pkg/client"

	cachev1alpha1 "github.com/distcache/distcache/api/v1alpha1"
	"github.com/distcache/distcache/internal/testutil/kubetest"
)

// checkNetworkPolicySample is a spec of the "make deploy" container, run
// after the samples are applied: config/samples/networkpolicy, applied as
// docs/operations.md says (kubectl apply --server-side -k), is accepted by
// the API server's validation under strict field validation, and reads
// back as written. What the policy admits is TestNetworkPolicySamples's
// (controllers), against the pods the operator builds; envtest runs no
// network plugin to enforce it.
func checkNetworkPolicySample(ctx SpecContext) {
	samples := kubetest.Decode([]byte(kubectl(ctx, adminKubeconfig, nil, "kustomize", "config/samples")))
	dc := &cachev1alpha1.DistributedCache{}
	kubetest.Convert(ofKind(samples, "DistributedCache")[0], dc)

	objs := kubetest.Decode([]byte(kubectl(ctx, adminKubeconfig, nil, "kustomize", "config/samples/networkpolicy")))
	policies := ofKind(objs, "NetworkPolicy")
	Expect(policies).NotTo(BeEmpty())
	Expect(policies).To(HaveLen(len(objs)), "the kustomization holds NetworkPolicies only")
	var want []networkingv1.NetworkPolicy
	for _, obj := range policies {
		var np networkingv1.NetworkPolicy
		kubetest.Convert(obj, &np)
		Expect(np.Namespace).To(Equal(dc.Namespace), "policy %s guards the sample cache's namespace", np.Name)
		Expect(np.Spec.PodSelector.MatchLabels).To(HaveKeyWithValue("app.kubernetes.io/instance", dc.Name))
		want = append(want, np)
	}

	ns := &corev1.Namespace{ObjectMeta: objectMeta("", dc.Namespace, nil)}
	if err := k8sClient.Create(ctx, ns); err != nil && !apierrors.IsAlreadyExists(err) {
		Expect(err).NotTo(HaveOccurred()) // run alone (-ginkgo.focus), the samples spec has not made it
	}
	out := kubectl(ctx, adminKubeconfig, nil, "apply", "--server-side", "--validate=strict", "-k", "config/samples/networkpolicy")
	Expect(strings.Count(out, "serverside-applied")).To(Equal(len(want)), out)

	for _, np := range want {
		var got networkingv1.NetworkPolicy
		Expect(k8sClient.Get(ctx, client.ObjectKeyFromObject(&np), &got)).To(Succeed())
		Expect(got.Spec.PodSelector).To(Equal(np.Spec.PodSelector))
		Expect(got.Spec.PolicyTypes).To(Equal(np.Spec.PolicyTypes))
		Expect(got.Spec.Egress).To(BeEmpty(), "ingress only: the nodes keep their egress to S3, the API server and DNS")
		Expect(got.Spec.Ingress).To(HaveLen(len(np.Spec.Ingress)))
		for i, rule := range got.Spec.Ingress {
			Expect(rule.From).To(Equal(np.Spec.Ingress[i].From), "policy %s rule %d", np.Name, i)
			Expect(rule.Ports).To(HaveLen(len(np.Spec.Ingress[i].Ports)))
			for j, p := range rule.Ports {
				Expect(p.Port).To(Equal(np.Spec.Ingress[i].Ports[j].Port))
				Expect(p.Protocol).To(HaveValue(Equal(corev1.ProtocolTCP)))
			}
		}
	}

	By("the API server refuses a policy that names no port it could enforce")
	bad := want[0].DeepCopy()
	bad.ResourceVersion, bad.Name = "", bad.Name+"-bad"
	bad.Spec.Ingress[0].Ports[0].Port.IntVal = 70000
	err := k8sClient.Create(ctx, bad, client.DryRunAll)
	Expect(apierrors.IsInvalid(err)).To(BeTrue(), "%v", err)
}
