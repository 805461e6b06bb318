package controllers

import (
	"context"
	"fmt"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/log"
	"sigs.k8s.io/yaml"

	cachev1alpha1 "github.com/distcache/distcache/api/v1alpha1"
	"github.com/distcache/distcache/internal/tenancy"
)

// reconcileTenants writes the nodes' tenants file, the Secret
// <cache>-tenants, from the admitted CacheTenants. A tenant whose own
// credentials Secret cannot be read is left out (its CacheTenant says why):
// falling back to the cache's credentials would widen its access. The nodes
// hot-reload the file, so tenants come and go without a restart.
func (r *DistributedCacheReconciler) reconcileTenants(ctx context.Context, dc *cachev1alpha1.DistributedCache) error {
	decisions, err := listTenantDecisions(ctx, r.Client, dc)
	if err != nil {
		return err
	}
	cfg := tenancy.Config{Tenants: []tenancy.Tenant{}}
	for _, d := range decisions {
		if d.Reason != "" {
			continue
		}
		var creds *tenancy.Credentials
		if ref := d.Tenant.Spec.CredentialsSecret; ref != nil {
			if creds, err = readCredentials(ctx, r.apiReader(), d.Tenant.Namespace, ref); err != nil {
				log.FromContext(ctx).V(1).Info("leaving tenant out of the tenants file", "tenant", d.Name, "reason", err.Error())
				continue
			}
		}
		cfg.Tenants = append(cfg.Tenants, tenantEntry(d, creds))
	}
	doc, err := renderTenantsFile(&cfg)
	if err != nil {
		return err
	}
	s := &corev1.Secret{
		ObjectMeta: metav1.ObjectMeta{Name: TenantsSecretName(dc), Namespace: dc.Namespace, Labels: objectLabels(dc, "")},
		Type:       corev1.SecretTypeOpaque,
		Data:       map[string][]byte{TenantsFileKey: doc},
	}
	res, err := apply(ctx, r.Client, r.Scheme, dc, s, &corev1.Secret{}, func(existing, desired *corev1.Secret) {
		existing.Data = desired.Data
	})
	if err != nil {
		return err
	}
	if res == applyUpdated {
		r.Recorder.Eventf(dc, nil, corev1.EventTypeNormal, EventTenantsUpdated, "UpdateTenants", "tenants file lists %d tenants", len(cfg.Tenants))
	}
	r.recordCreated(dc, "Secret", s.Name, res)
	return nil
}

// EventTenantsUpdated is the reason of the event for a rewritten tenants
// file.
const EventTenantsUpdated = "TenantsUpdated"

// renderTenantsFile renders the tenants file and checks that the nodes'
// parser accepts it, so a file the nodes would refuse is never written.
func renderTenantsFile(cfg *tenancy.Config) ([]byte, error) {
	doc, err := yaml.Marshal(cfg)
	if err != nil {
		return nil, err
	}
	if _, err := tenancy.Parse(doc); err != nil {
		return nil, fmt.Errorf("rendered tenants file is invalid: %w", err)
	}
	return doc, nil
}
