package controllers

import (
	"context"
	"slices"

	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	cachev1alpha1 "github.com/distcache/distcache/api/v1alpha1"
)

// The node pods watch their ring document and the tenants file through the
// API server (cachenode serve --ring-configmap, --tenants-secret): a change
// reaches them within about a second instead of the kubelet's minute or so
// for mounted volumes. They run as the ServiceAccount <cache>-node, which
// the Role <cache>-node allows get, list and watch on exactly the cache's
// ring ConfigMap and tenants Secret (by resourceNames; the nodes watch with
// a metadata.name field selector, which RBAC authorizes as that name) and
// nothing else.

// buildNodeServiceAccount is the ServiceAccount <cache>-node.
func buildNodeServiceAccount(dc *cachev1alpha1.DistributedCache) *corev1.ServiceAccount {
	return &corev1.ServiceAccount{
		ObjectMeta: metav1.ObjectMeta{Name: NodeServiceAccountName(dc), Namespace: dc.Namespace, Labels: objectLabels(dc, "")},
	}
}

// buildNodeRole is the Role <cache>-node: get, list and watch on the ring
// ConfigMap and the tenants Secret, by name.
func buildNodeRole(dc *cachev1alpha1.DistributedCache) *rbacv1.Role {
	read := []string{"get", "list", "watch"}
	return &rbacv1.Role{
		ObjectMeta: metav1.ObjectMeta{Name: NodeServiceAccountName(dc), Namespace: dc.Namespace, Labels: objectLabels(dc, "")},
		Rules: []rbacv1.PolicyRule{
			{APIGroups: []string{""}, Resources: []string{"configmaps"}, ResourceNames: []string{ringConfigMapName(dc)}, Verbs: read},
			{APIGroups: []string{""}, Resources: []string{"secrets"}, ResourceNames: []string{TenantsSecretName(dc)}, Verbs: read},
		},
	}
}

// buildNodeRoleBinding binds the Role <cache>-node to the ServiceAccount
// <cache>-node and, when spec.podTemplate.serviceAccountName names another,
// to that one too, since the pods run as it.
func buildNodeRoleBinding(dc *cachev1alpha1.DistributedCache) *rbacv1.RoleBinding {
	names := []string{NodeServiceAccountName(dc)}
	if sa := podServiceAccountName(dc); !slices.Contains(names, sa) {
		names = append(names, sa)
	}
	subjects := make([]rbacv1.Subject, 0, len(names))
	for _, n := range names {
		subjects = append(subjects, rbacv1.Subject{Kind: rbacv1.ServiceAccountKind, Name: n, Namespace: dc.Namespace})
	}
	return &rbacv1.RoleBinding{
		ObjectMeta: metav1.ObjectMeta{Name: NodeServiceAccountName(dc), Namespace: dc.Namespace, Labels: objectLabels(dc, "")},
		RoleRef:    rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "Role", Name: NodeServiceAccountName(dc)},
		Subjects:   subjects,
	}
}

// reconcileNodeRBAC writes the node pods' ServiceAccount, Role and
// RoleBinding.
func (r *DistributedCacheReconciler) reconcileNodeRBAC(ctx context.Context, dc *cachev1alpha1.DistributedCache, _ *reconcileState) error {
	if _, err := applyOwned(ctx, r, dc, "ServiceAccount", buildNodeServiceAccount(dc), &corev1.ServiceAccount{}, func(_, _ *corev1.ServiceAccount) {
		// Nothing but metadata: keep what the token controller or an
		// admission webhook (IRSA) added.
	}); err != nil {
		return err
	}
	if _, err := applyOwned(ctx, r, dc, "Role", buildNodeRole(dc), &rbacv1.Role{}, func(existing, desired *rbacv1.Role) {
		existing.Rules = desired.Rules
	}); err != nil {
		return err
	}
	_, err := applyOwned(ctx, r, dc, "RoleBinding", buildNodeRoleBinding(dc), &rbacv1.RoleBinding{}, func(existing, desired *rbacv1.RoleBinding) {
		// roleRef is immutable and always the same Role.
		existing.Subjects = desired.Subjects
	})
	return err
}
