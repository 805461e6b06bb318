package deploy_test

import (
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	cachev1alpha1 "github.com/distcache/distcache/api/v1alpha1"
	"github.com/distcache/distcache/internal/testutil/kubetest"
)

const (
	crdCaches  = "distributedcaches.cache.distcache.io"
	crdTenants = "cachetenants.cache.distcache.io"
	cacheGroup = "cache.distcache.io"
)

// deployed is what the specs below share: the objects `make deploy` applied.
var deployed []*unstructured.Unstructured

var _ = Describe("make deploy", Ordered, func() {
	BeforeAll(func(ctx SpecContext) {
		manifests := renderDeploy(ctx)
		deployed = kubetest.Decode(manifests)
		applyManifests(ctx, adminKubeconfig, manifests)
	})

	It("renders the operator into distcache-system with the distcache- prefix, without config/prometheus", func() {
		kinds := map[string]int{}
		for _, obj := range deployed {
			kinds[obj.GetKind()]++
			switch obj.GetKind() {
			case "CustomResourceDefinition", "ClusterRole", "ClusterRoleBinding":
				Expect(obj.GetNamespace()).To(BeEmpty(), obj.GetName())
			case "Namespace":
				Expect(obj.GetName()).To(Equal(systemNamespace))
			default:
				Expect(obj.GetNamespace()).To(Equal(systemNamespace), "%s %s", obj.GetKind(), obj.GetName())
			}
			if obj.GetKind() != "CustomResourceDefinition" && obj.GetKind() != "Namespace" {
				Expect(obj.GetName()).To(HavePrefix("distcache-"), obj.GetKind())
			}
		}
		Expect(kinds).NotTo(HaveKey("ServiceMonitor"), "a cluster without the prometheus-operator takes make deploy as it is")
		Expect(kinds).To(Equal(map[string]int{
			"Namespace": 1, "CustomResourceDefinition": 2, "ServiceAccount": 1,
			"ClusterRole": 6, "ClusterRoleBinding": 1, "Role": 1, "RoleBinding": 1,
			"Service": 1, "Deployment": 1,
		}))
	})

	It("installs both CRDs, established", func(ctx SpecContext) {
		for _, name := range []string{crdCaches, crdTenants} {
			Eventually(func(g Gomega) {
				crd := &unstructured.Unstructured{}
				crd.SetAPIVersion("apiextensions.k8s.io/v1")
				crd.SetKind("CustomResourceDefinition")
				g.Expect(k8sClient.Get(ctx, types.NamespacedName{Name: name}, crd)).To(Succeed())
				conditions, _, err := unstructured.NestedSlice(crd.Object, "status", "conditions")
				g.Expect(err).NotTo(HaveOccurred())
				g.Expect(conditions).To(ContainElement(And(
					HaveKeyWithValue("type", "Established"),
					HaveKeyWithValue("status", "True"),
				)), name)
			}).WithContext(ctx).Should(Succeed())
		}
		// The same schema as config/crd/bases, nothing lost on the way.
		for file, name := range map[string]string{
			"cache.distcache.io_distributedcaches.yaml": crdCaches,
			"cache.distcache.io_cachetenants.yaml":      crdTenants,
		} {
			data, err := os.ReadFile(filepath.Join(root, "config", "crd", "bases", file))
			Expect(err).NotTo(HaveOccurred())
			want := kubetest.Decode(data)
			Expect(want).To(HaveLen(1))
			Expect(find(deployed, "CustomResourceDefinition", "", name).Object["spec"]).To(Equal(want[0].Object["spec"]), file)
		}
	})

	It("runs the operator image IMG with main.go's flags, CACHENODE_IMG as --cachenode-image", func(ctx SpecContext) {
		dep := &appsv1.Deployment{}
		Expect(k8sClient.Get(ctx, types.NamespacedName{Namespace: systemNamespace, Name: deploymentName}, dep)).To(Succeed())
		pod := dep.Spec.Template.Spec
		Expect(pod.ServiceAccountName).To(Equal(serviceAccount))
		Expect(pod.Containers).To(HaveLen(1))
		c := pod.Containers[0]
		Expect(c.Name).To(Equal("manager"))
		Expect(c.Image).To(Equal(testIMG))
		Expect(c.Command).To(BeEmpty(), "the image's entrypoint: /manager in the Dockerfile's image, /ko-app/distcache in ko's")
		Expect(c.Env).To(ContainElement(corev1.EnvVar{Name: "CACHENODE_IMAGE", Value: testCacheNodeIMG}))
		Expect(expandArgs(c)).To(ConsistOf(
			"--leader-elect",
			"--metrics-bind-address=:8443",
			"--health-probe-bind-address=:8081",
			"--cachenode-image="+testCacheNodeIMG,
		))

		By("probing /healthz and /readyz on the health probe port, 8081")
		ports := map[string]int32{}
		for _, p := range c.Ports {
			ports[p.Name] = p.ContainerPort
		}
		Expect(ports).To(Equal(map[string]int32{"metrics": 8443, "health": 8081}))
		Expect(c.LivenessProbe.HTTPGet.Path).To(Equal("/healthz"))
		Expect(ports[c.LivenessProbe.HTTPGet.Port.String()]).To(Equal(int32(8081)))
		Expect(c.ReadinessProbe.HTTPGet.Path).To(Equal("/readyz"))
		Expect(ports[c.ReadinessProbe.HTTPGet.Port.String()]).To(Equal(int32(8081)))

		By("running locked down: non-root, read-only root, no capabilities, RuntimeDefault seccomp")
		Expect(*pod.SecurityContext.RunAsNonRoot).To(BeTrue())
		Expect(pod.SecurityContext.SeccompProfile.Type).To(Equal(corev1.SeccompProfileTypeRuntimeDefault))
		Expect(*c.SecurityContext.ReadOnlyRootFilesystem).To(BeTrue())
		Expect(*c.SecurityContext.AllowPrivilegeEscalation).To(BeFalse())
		Expect(c.SecurityContext.Capabilities.Drop).To(Equal([]corev1.Capability{"ALL"}))
		Expect(c.Resources.Requests).NotTo(BeEmpty())
		Expect(c.Resources.Limits).NotTo(BeEmpty())

		ns := &corev1.Namespace{}
		Expect(k8sClient.Get(ctx, types.NamespacedName{Name: systemNamespace}, ns)).To(Succeed())
		Expect(ns.Labels).To(HaveKeyWithValue("pod-security.kubernetes.io/enforce", "restricted"))
	})

	It("grants the ServiceAccount every rule of role.yaml in every namespace, and no way to escalate", func(ctx SpecContext) {
		user, groups := serviceAccountUser(systemNamespace, serviceAccount)
		data, err := os.ReadFile(filepath.Join(root, "config", "rbac", "role.yaml"))
		Expect(err).NotTo(HaveOccurred())
		generated := &rbacv1.ClusterRole{}
		kubetest.Convert(kubetest.Decode(data)[0], generated)
		Expect(generated.Rules).NotTo(BeEmpty())

		bound := &rbacv1.ClusterRole{}
		Expect(k8sClient.Get(ctx, types.NamespacedName{Name: managerRole}, bound)).To(Succeed())
		Expect(bound.Rules).To(Equal(generated.Rules), "the deployed manager-role is role.yaml")

		checked := 0
		for _, rule := range generated.Rules {
			for _, group := range rule.APIGroups {
				for _, resource := range rule.Resources {
					for _, verb := range rule.Verbs {
						for _, ns := range []string{"", "clickhouse"} {
							ok, reason := access(ctx, user, groups, verb, group, resource, ns)
							Expect(ok).To(BeTrue(), "%s %s.%s in %q: %s", verb, resource, group, ns, reason)
							checked++
						}
					}
				}
			}
		}
		Expect(checked).To(BeNumerically(">", 0))

		By("the rules a cache needs no matter how controllers/ changes")
		for _, verb := range []string{"get", "list", "watch"} {
			ok, _ := access(ctx, user, groups, verb, cacheGroup, "distributedcaches", "")
			Expect(ok).To(BeTrue(), verb+" distributedcaches")
		}
		ok, _ := access(ctx, user, groups, "patch", cacheGroup, "distributedcaches/status", "distcache")
		Expect(ok).To(BeTrue(), "patch distributedcaches/status")

		By("nothing that would let it escalate")
		for _, verb := range []string{"create", "bind", "escalate"} {
			ok, _ := access(ctx, user, groups, verb, "rbac.authorization.k8s.io", "clusterrolebindings", "")
			Expect(ok).To(BeFalse(), verb+" clusterrolebindings")
		}
		ok, _ = access(ctx, user, groups, "delete", "apiextensions.k8s.io", "customresourcedefinitions", "")
		Expect(ok).To(BeFalse(), "delete customresourcedefinitions")
	})

	It("lets the ServiceAccount hold the leader-election Lease in its own namespace only", func(ctx SpecContext) {
		user, groups := serviceAccountUser(systemNamespace, serviceAccount)
		for _, verb := range []string{"get", "create", "update"} {
			ok, reason := access(ctx, user, groups, verb, "coordination.k8s.io", "leases", systemNamespace)
			Expect(ok).To(BeTrue(), "%s leases: %s", verb, reason)
		}
		ok, reason := access(ctx, user, groups, "create", "", "events", systemNamespace)
		Expect(ok).To(BeTrue(), "create events (leader election's recorder): %s", reason)
		ok, _ = access(ctx, user, groups, "create", "coordination.k8s.io", "leases", "kube-system")
		Expect(ok).To(BeFalse(), "leases elsewhere")

		rb := &rbacv1.RoleBinding{}
		Expect(k8sClient.Get(ctx, types.NamespacedName{Namespace: systemNamespace, Name: "distcache-leader-election-rolebinding"}, rb)).To(Succeed())
		Expect(rb.RoleRef.Name).To(Equal(electionRole))
		Expect(rb.Subjects).To(ConsistOf(rbacv1.Subject{Kind: "ServiceAccount", Name: serviceAccount, Namespace: systemNamespace}))
		crb := &rbacv1.ClusterRoleBinding{}
		Expect(k8sClient.Get(ctx, types.NamespacedName{Name: "distcache-manager-rolebinding"}, crb)).To(Succeed())
		Expect(crb.RoleRef.Name).To(Equal(managerRole))
		Expect(crb.Subjects).To(ConsistOf(rbacv1.Subject{Kind: "ServiceAccount", Name: serviceAccount, Namespace: systemNamespace}))
	})

	It("aggregates CacheTenant editing into admin and edit, viewing both kinds into view, and never cache editing", func(ctx SpecContext) {
		const (
			admin = "rbac.authorization.k8s.io/aggregate-to-admin"
			edit  = "rbac.authorization.k8s.io/aggregate-to-edit"
			view  = "rbac.authorization.k8s.io/aggregate-to-view"
		)
		labels := func(name string) map[string]string {
			role := &rbacv1.ClusterRole{}
			Expect(k8sClient.Get(ctx, types.NamespacedName{Name: name}, role)).To(Succeed())
			return role.Labels
		}
		Expect(labels("distcache-cachetenant-editor-role")).To(And(HaveKeyWithValue(admin, "true"), HaveKeyWithValue(edit, "true")))
		Expect(labels("distcache-cachetenant-viewer-role")).To(HaveKeyWithValue(view, "true"))
		Expect(labels("distcache-distributedcache-viewer-role")).To(HaveKeyWithValue(view, "true"))
		// A cache runs hostPath pods that the operator creates for its owner.
		Expect(labels("distcache-distributedcache-editor-role")).NotTo(Or(HaveKey(admin), HaveKey(edit), HaveKey(view)))
	})

	It("accepts the samples, each from a user holding only the role meant for it", func(ctx SpecContext) {
		samples := kubetest.Decode([]byte(kubectl(ctx, adminKubeconfig, nil, "kustomize", "config/samples")))
		cacheObj := ofKind(samples, "DistributedCache")
		tenantObj := ofKind(samples, "CacheTenant")
		Expect(cacheObj).To(HaveLen(1))
		Expect(tenantObj).To(HaveLen(1))
		dc := &cachev1alpha1.DistributedCache{}
		kubetest.Convert(cacheObj[0], dc)
		tenant := &cachev1alpha1.CacheTenant{}
		kubetest.Convert(tenantObj[0], tenant)
		Expect(tenant.Spec.CacheRef.Namespace).To(Equal(dc.Namespace))
		Expect(tenant.Spec.CacheRef.Name).To(Equal(dc.Name))

		By("creating the namespaces, the tenant's labelled for the cache's tenantNamespaceSelector, and the S3 Secrets")
		Expect(dc.Spec.TenantNamespaceSelector).NotTo(BeNil())
		Expect(dc.Spec.TenantNamespaceSelector.MatchExpressions).To(BeEmpty())
		Expect(k8sClient.Create(ctx, &corev1.Namespace{ObjectMeta: objectMeta("", dc.Namespace, nil)})).To(Succeed())
		Expect(k8sClient.Create(ctx, &corev1.Namespace{ObjectMeta: objectMeta("", tenant.Namespace, dc.Spec.TenantNamespaceSelector.MatchLabels)})).To(Succeed())
		for _, s := range []struct{ ns, name string }{
			{dc.Namespace, dc.Spec.S3.CredentialsSecret.Name},
			{tenant.Namespace, tenant.Spec.CredentialsSecret.Name},
		} {
			Expect(k8sClient.Create(ctx, &corev1.Secret{
				ObjectMeta: objectMeta(s.ns, s.name, nil),
				StringData: map[string]string{"AWS_ACCESS_KEY_ID": "AKIAEXAMPLE", "AWS_SECRET_ACCESS_KEY": "example-secret"},
			})).To(Succeed())
		}

		By("the platform team, bound cluster-wide to the DistributedCache editor role, applies the cache")
		platform := userKubeconfig("platform-admin", "platform")
		Expect(k8sClient.Create(ctx, &rbacv1.ClusterRoleBinding{
			ObjectMeta: objectMeta("", "platform-distcache", nil),
			RoleRef:    rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: "distcache-distributedcache-editor-role"},
			Subjects:   []rbacv1.Subject{{Kind: rbacv1.GroupKind, APIGroup: rbacv1.GroupName, Name: "platform"}},
		})).To(Succeed())
		applyManifests(ctx, platform, encode(cacheObj[0]))
		ok, reason := access(ctx, "platform-admin", []string{"platform"}, "update", cacheGroup, "distributedcaches/scale", dc.Namespace)
		Expect(ok).To(BeTrue(), "kubectl scale: %s", reason)

		By("the tenant namespace's admin, bound there to the CacheTenant editor role (what aggregation into admin gives), applies the tenant")
		tenantAdmin := userKubeconfig("clickhouse-admin")
		Expect(k8sClient.Create(ctx, &rbacv1.RoleBinding{
			ObjectMeta: objectMeta(tenant.Namespace, "clickhouse-admin-cachetenants", nil),
			RoleRef:    rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: "distcache-cachetenant-editor-role"},
			Subjects:   []rbacv1.Subject{{Kind: rbacv1.UserKind, APIGroup: rbacv1.GroupName, Name: "clickhouse-admin"}},
		})).To(Succeed())
		// As below: the new binding reaches the authorizer through an informer.
		Eventually(func() error {
			_, err := tryKubectl(ctx, tenantAdmin, encode(tenantObj[0]), "apply", "--server-side", "--force-conflicts", "-f", "-")
			return err
		}).WithTimeout(30 * time.Second).WithPolling(500 * time.Millisecond).Should(Succeed())
		inTenantNS := cacheObj[0].DeepCopy()
		inTenantNS.SetNamespace(tenant.Namespace)
		_, err := tryKubectl(ctx, tenantAdmin, encode(inTenantNS), "apply", "--server-side", "-f", "-")
		Expect(err).To(MatchError(ContainSubstring("forbidden")), "a tenant cannot run a cache")

		By("a viewer reads both kinds and writes neither")
		for _, resource := range []string{"distributedcaches", "cachetenants"} {
			role := "distcache-" + strings.TrimSuffix(resource, "s") + "-viewer-role"
			Expect(k8sClient.Create(ctx, &rbacv1.ClusterRoleBinding{
				ObjectMeta: objectMeta("", "viewer-"+resource, nil),
				RoleRef:    rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: role},
				Subjects:   []rbacv1.Subject{{Kind: rbacv1.UserKind, APIGroup: rbacv1.GroupName, Name: "viewer"}},
			})).To(Succeed())
			for _, verb := range []string{"get", "list", "watch"} {
				// The authorizer learns of a new binding from its informer:
				// a review right after the create may not see it yet.
				Eventually(func() (bool, error) {
					ok, reason := access(ctx, "viewer", nil, verb, cacheGroup, resource, tenant.Namespace)
					if !ok {
						return false, fmt.Errorf("%s %s: %s", verb, resource, reason)
					}
					return true, nil
				}).WithTimeout(30 * time.Second).WithPolling(200 * time.Millisecond).Should(BeTrue())
			}
			for _, verb := range []string{"create", "update", "delete"} {
				ok, _ := access(ctx, "viewer", nil, verb, cacheGroup, resource, tenant.Namespace)
				Expect(ok).To(BeFalse(), "%s %s", verb, resource)
			}
		}

		By("reading them back as written")
		got := &cachev1alpha1.DistributedCache{}
		Expect(k8sClient.Get(ctx, client.ObjectKeyFromObject(dc), got)).To(Succeed())
		Expect(got.Spec.Zones).To(HaveLen(len(dc.Spec.Zones)))
		gotTenant := &cachev1alpha1.CacheTenant{}
		Expect(k8sClient.Get(ctx, client.ObjectKeyFromObject(tenant), gotTenant)).To(Succeed())
		Expect(gotTenant.Spec.Buckets).To(Equal(tenant.Spec.Buckets))

		// What `kubectl apply -k config/samples` does, on top: nothing changes.
		out := kubectl(ctx, adminKubeconfig, nil, "apply", "--server-side", "-k", "config/samples")
		Expect(strings.Count(out, "serverside-applied")).To(Equal(2), out)
	})

	It("runs the sample tenant's gateway as a ClickHouse sidecar (config/samples/sidecar), and its PodMonitor gives the gateway's series the labels the dashboard selects", checkSidecarSample)

	It("accepts the NetworkPolicy sample (config/samples/networkpolicy) that guards the sample cache's nodes", checkNetworkPolicySample)

	It("runs, as the ServiceAccount with the Deployment's arguments, the manager that reconciles the sample cache", func(ctx SpecContext) {
		runManagerAsDeployed(ctx)
	})
})

// expandArgs expands $(VAR) in the container's arguments from its env, as
// the kubelet does; a reference to an undefined variable stays as written.
func expandArgs(c corev1.Container) []string {
	args := slices.Clone(c.Args)
	for i := range args {
		for _, e := range c.Env {
			args[i] = strings.ReplaceAll(args[i], "$("+e.Name+")", e.Value)
		}
	}
	return args
}
