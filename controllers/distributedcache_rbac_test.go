package controllers

import (
	"reflect"
	"testing"

	rbacv1 "k8s.io/api/rbac/v1"

	cachev1alpha1 "github.com/distcache/distcache/api/v1alpha1"
)

func TestBuildNodeRBAC(t *testing.T) {
	read := []string{"get", "list", "watch"}
	wantRules := []rbacv1.PolicyRule{
		{APIGroups: []string{""}, Resources: []string{"configmaps"}, ResourceNames: []string{"c-ring"}, Verbs: read},
		{APIGroups: []string{""}, Resources: []string{"secrets"}, ResourceNames: []string{"c-tenants"}, Verbs: read},
	}
	tests := []struct {
		name         string
		dc           *cachev1alpha1.DistributedCache
		podSA        string
		wantSubjects []string
	}{
		{name: "the operator's ServiceAccount", dc: testCache(nil), podSA: "c-node", wantSubjects: []string{"c-node"}},
		{
			name: "an overridden ServiceAccount is bound too",
			dc: testCache(func(dc *cachev1alpha1.DistributedCache) {
				dc.Spec.PodTemplate = &cachev1alpha1.PodTemplateOverrides{ServiceAccountName: "irsa"}
			}),
			podSA: "irsa", wantSubjects: []string{"c-node", "irsa"},
		},
		{
			name: "an override naming the operator's ServiceAccount",
			dc: testCache(func(dc *cachev1alpha1.DistributedCache) {
				dc.Spec.PodTemplate = &cachev1alpha1.PodTemplateOverrides{ServiceAccountName: "c-node"}
			}),
			podSA: "c-node", wantSubjects: []string{"c-node"},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			before := tt.dc.DeepCopy()
			sa, role, rb := buildNodeServiceAccount(tt.dc), buildNodeRole(tt.dc), buildNodeRoleBinding(tt.dc)
			for _, m := range []struct{ name, ns string }{{sa.Name, sa.Namespace}, {role.Name, role.Namespace}, {rb.Name, rb.Namespace}} {
				if m.name != "c-node" || m.ns != "ns" {
					t.Errorf("object %s/%s, want ns/c-node", m.ns, m.name)
				}
			}
			if sa.Labels[LabelManagedBy] != ManagedByValue || role.Labels[LabelManagedBy] != ManagedByValue || rb.Labels[LabelManagedBy] != ManagedByValue {
				t.Error("an object lacks the managed-by label the manager's cache selects on")
			}
			if !reflect.DeepEqual(role.Rules, wantRules) {
				t.Errorf("rules %+v, want %+v", role.Rules, wantRules)
			}
			if rb.RoleRef != (rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "Role", Name: "c-node"}) {
				t.Errorf("roleRef %+v", rb.RoleRef)
			}
			var subjects []string
			for _, s := range rb.Subjects {
				if s.Kind != rbacv1.ServiceAccountKind || s.Namespace != "ns" {
					t.Errorf("subject %+v", s)
				}
				subjects = append(subjects, s.Name)
			}
			if !reflect.DeepEqual(subjects, tt.wantSubjects) {
				t.Errorf("subjects %v, want %v", subjects, tt.wantSubjects)
			}
			if got := buildStatefulSet(tt.dc, "a", "img", "h").Spec.Template.Spec.ServiceAccountName; got != tt.podSA {
				t.Errorf("pods run as %q, want %q", got, tt.podSA)
			}
			if !reflect.DeepEqual(before, tt.dc) {
				t.Fatal("a builder changed the cache")
			}
		})
	}
}
