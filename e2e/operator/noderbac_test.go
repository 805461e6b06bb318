package operator_test

import (
	"context"
	"fmt"
	"log/slog"
	"sync/atomic"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"

	cachev1alpha1 "github.com/distcache/distcache/api/v1alpha1"
	"github.com/distcache/distcache/internal/kubewatch"
	"github.com/distcache/distcache/internal/ring"
	"github.com/distcache/distcache/internal/tenancy"
)

// asServiceAccount is the API server configuration of a pod running as the
// ServiceAccount ns/name (the admin impersonating it, so RBAC decides as it
// would for the pod's token).
func asServiceAccount(ns, name string) *rest.Config {
	cfg := rest.CopyConfig(restCfg)
	cfg.Impersonate = rest.ImpersonationConfig{
		UserName: fmt.Sprintf("system:serviceaccount:%s:%s", ns, name),
		Groups:   []string{"system:serviceaccounts", "system:serviceaccounts:" + ns, "system:authenticated"},
	}
	return cfg
}

var _ = Describe("the cache nodes' access to the API server", func() {
	It("gives the nodes a ServiceAccount whose Role reads exactly the ring ConfigMap and the tenants Secret", func(ctx SpecContext) {
		ns := newNamespace(ctx)
		dc := newCache(ns, "beta", 2, "zone-a")
		Expect(k8sClient.Create(ctx, dc)).To(Succeed())

		var sts appsv1.StatefulSet
		Eventually(func() error { return k8sClient.Get(ctx, key(ns, "beta-zone-a"), &sts) }).Should(Succeed())
		pod := sts.Spec.Template.Spec
		Expect(pod.ServiceAccountName).To(Equal("beta-node"))
		Expect(pod.AutomountServiceAccountToken).To(HaveValue(BeTrue()))
		Expect(pod.Containers[0].Args).To(ContainElements(
			"--ring-configmap="+ns+"/beta-ring:zone-a.json", "--tenants-secret="+ns+"/beta-tenants:tenants.yaml",
			"--ring-file=/etc/distcache/ring/ring.json", "--tenants-file=/etc/distcache/tenants/tenants.yaml"))

		By("the ServiceAccount, Role and RoleBinding are controlled by the cache")
		var created cachev1alpha1.DistributedCache
		Expect(k8sClient.Get(ctx, key(ns, "beta"), &created)).To(Succeed())
		sa, role, rb := &corev1.ServiceAccount{}, &rbacv1.Role{}, &rbacv1.RoleBinding{}
		for _, o := range []client.Object{sa, role, rb} {
			Eventually(func() error { return k8sClient.Get(ctx, key(ns, "beta-node"), o) }).Should(Succeed())
			ref := metav1.GetControllerOf(o)
			Expect(ref).NotTo(BeNil(), "%T has no controller", o)
			Expect(ref.UID).To(Equal(created.UID))
			Expect(ref.Kind).To(Equal("DistributedCache"))
		}
		read := []string{"get", "list", "watch"}
		Expect(role.Rules).To(ConsistOf(
			rbacv1.PolicyRule{APIGroups: []string{""}, Resources: []string{"configmaps"}, ResourceNames: []string{"beta-ring"}, Verbs: read},
			rbacv1.PolicyRule{APIGroups: []string{""}, Resources: []string{"secrets"}, ResourceNames: []string{"beta-tenants"}, Verbs: read},
		))
		Expect(rb.RoleRef).To(Equal(rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "Role", Name: "beta-node"}))
		Expect(rb.Subjects).To(Equal([]rbacv1.Subject{{Kind: rbacv1.ServiceAccountKind, Name: "beta-node", Namespace: ns}}))

		By("as the ServiceAccount, a node's watches deliver the ring and the tenants")
		node := asServiceAccount(ns, "beta-node")
		wctx, stop := context.WithCancel(ctx)
		DeferCleanup(stop)
		h := &ring.Holder{}
		rw, err := kubewatch.Start(wctx, node, kubewatch.Options{
			Kind: kubewatch.ConfigMap, Ref: kubewatch.Ref{Namespace: ns, Name: "beta-ring", Key: "zone-a.json"},
			Apply: ring.NewUpdater(h, "ring ConfigMap", slog.New(slog.DiscardHandler)).Update,
		})
		Expect(err).NotTo(HaveOccurred())
		// The ring is stored inside the update, before the update is
		// counted: wait for the count, then look at the ring.
		Eventually(func() uint64 { ok, _ := rw.Updates(); return ok }).Should(Equal(uint64(1)))
		Expect(h.Load()).NotTo(BeNil())
		Expect(h.Load().Zone()).To(Equal("zone-a"))
		Expect(rw.Updates()).To(Equal(uint64(1)))

		var tenantsDoc corev1.Secret
		Eventually(func() error { return k8sClient.Get(ctx, key(ns, "beta-tenants"), &tenantsDoc) }).Should(Succeed())
		var delivered atomic.Pointer[[]byte]
		tw, err := kubewatch.Start(wctx, node, kubewatch.Options{
			Kind: kubewatch.Secret, Ref: kubewatch.Ref{Namespace: ns, Name: "beta-tenants", Key: "tenants.yaml"},
			Apply: func(data []byte) error {
				if _, err := tenancy.Parse(data); err != nil {
					return err
				}
				delivered.Store(&data)
				return nil
			},
		})
		Expect(err).NotTo(HaveOccurred())
		Eventually(tw.Delivered()).Should(BeClosed())
		Eventually(func() uint64 { ok, _ := tw.Updates(); return ok }).Should(Equal(uint64(1)))
		Expect(*delivered.Load()).To(Equal(tenantsDoc.Data["tenants.yaml"]))

		By("and nothing else")
		nodeClient, err := client.New(node, client.Options{Scheme: scheme})
		Expect(err).NotTo(HaveOccurred())
		forbidden := []struct {
			obj  client.Object
			name string
		}{{&corev1.Secret{}, "beta-node-tls"}, {&corev1.Secret{}, "beta-ca"}, {&corev1.ConfigMap{}, "kube-root-ca.crt"}}
		for _, f := range forbidden {
			err := nodeClient.Get(ctx, key(ns, f.name), f.obj)
			Expect(apierrors.IsForbidden(err)).To(BeTrue(), "reading %T %s: %v", f.obj, f.name, err)
		}
		Expect(apierrors.IsForbidden(nodeClient.List(ctx, &corev1.SecretList{}, client.InNamespace(ns)))).To(BeTrue(), "listing all Secrets")
		Expect(apierrors.IsForbidden(nodeClient.Update(ctx, &tenantsDoc))).To(BeTrue(), "writing the tenants Secret")

		By("an overridden ServiceAccount is bound too, since the pods run as it")
		updateCache(ctx, ns, "beta", func(dc *cachev1alpha1.DistributedCache) {
			dc.Spec.PodTemplate = &cachev1alpha1.PodTemplateOverrides{ServiceAccountName: "irsa"}
		})
		Eventually(func(g Gomega) {
			g.Expect(k8sClient.Get(ctx, key(ns, "beta-node"), rb)).To(Succeed())
			g.Expect(rb.Subjects).To(ConsistOf(
				rbacv1.Subject{Kind: rbacv1.ServiceAccountKind, Name: "beta-node", Namespace: ns},
				rbacv1.Subject{Kind: rbacv1.ServiceAccountKind, Name: "irsa", Namespace: ns}))
			g.Expect(k8sClient.Get(ctx, key(ns, "beta-zone-a"), &sts)).To(Succeed())
			g.Expect(sts.Spec.Template.Spec.ServiceAccountName).To(Equal("irsa"))
		}).Should(Succeed())
	})
})
