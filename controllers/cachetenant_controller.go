package controllers

import (
	"context"
	"fmt"
	"strings"
	"time"

	monitoringv1 "github.com/prometheus-operator/prometheus-operator/pkg/apis/monitoring/v1"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/tools/events"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller/controllerutil"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	"sigs.k8s.io/controller-runtime/pkg/log"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	cachev1alpha1 "github.com/distcache/distcache/api/v1alpha1"
	"github.com/distcache/distcache/internal/tenancy"
)

// TenantFinalizer holds a CacheTenant until its certificate Secret is
// deleted and the cache's tenants file no longer lists it.
const TenantFinalizer = "cache.distcache.io/tenant-cleanup"

// tenantRetry is how soon a tenant waiting for something the operator does
// not watch (a credentials Secret, the cache's CA being written, the
// tenants file dropping a deleted tenant) is looked at again.
const tenantRetry = 5 * time.Second

// CacheTenantReconciler issues each CacheTenant's client certificate into a
// Secret in the tenant's namespace and reports whether the tenant is
// admitted to its cache (the DistributedCacheReconciler writes the nodes'
// tenants file from the same decision, decideTenants).
type CacheTenantReconciler struct {
	client.Client
	// APIReader reads credentials Secrets, which the manager does not cache.
	// nil: the Client.
	APIReader client.Reader
	Scheme    *runtime.Scheme
	Recorder  events.EventRecorder
	// CacheNodeImage is the image of gateways of caches without spec.image.
	CacheNodeImage string
	// Now is the clock of renewal decisions; nil: time.Now.
	Now func() time.Time
}

func (r *CacheTenantReconciler) now() time.Time {
	if r.Now != nil {
		return r.Now()
	}
	return time.Now()
}

func (r *CacheTenantReconciler) apiReader() client.Reader {
	if r.APIReader != nil {
		return r.APIReader
	}
	return r.Client
}

// +kubebuilder:rbac:groups=apps,resources=deployments,verbs=get;list;watch;create;update;patch;delete
// +kubebuilder:rbac:groups=cache.distcache.io,resources=cachetenants,verbs=get;list;watch;update;patch
// +kubebuilder:rbac:groups=cache.distcache.io,resources=cachetenants/finalizers,verbs=update
// +kubebuilder:rbac:groups=cache.distcache.io,resources=cachetenants/status,verbs=get;update;patch
// +kubebuilder:rbac:groups=cache.distcache.io,resources=distributedcaches,verbs=get;list;watch
// +kubebuilder:rbac:groups=cert-manager.io,resources=certificates,verbs=get;list;watch;create;update;patch;delete
// +kubebuilder:rbac:groups=core,resources=namespaces,verbs=get;list;watch
// +kubebuilder:rbac:groups=core,resources=secrets,verbs=get;list;watch;create;update;patch;delete
// +kubebuilder:rbac:groups=events.k8s.io,resources=events,verbs=create;patch
// +kubebuilder:rbac:groups=monitoring.coreos.com,resources=podmonitors,verbs=get;list;watch;create;update;patch;delete

// Reconcile fetches the tenant, cleans up after a deleted one, and otherwise
// keeps its certificate and status current.
func (r *CacheTenantReconciler) Reconcile(ctx context.Context, req ctrl.Request) (ctrl.Result, error) {
	t := &cachev1alpha1.CacheTenant{}
	if err := r.Get(ctx, req.NamespacedName, t); err != nil {
		return ctrl.Result{}, client.IgnoreNotFound(err)
	}
	if !t.DeletionTimestamp.IsZero() {
		return r.finalize(ctx, t)
	}
	if controllerutil.AddFinalizer(t, TenantFinalizer) {
		if err := r.Update(ctx, t); err != nil {
			return ctrl.Result{}, client.IgnoreNotFound(err)
		}
	}
	res, err := r.reconcile(ctx, t)
	if apierrors.IsConflict(err) {
		return retryAfterConflict, nil
	}
	return res, err
}

// tenantState is what a reconcile found, for the status.
type tenantState struct {
	name     string
	reason   string // a Ready=False reason; "" when the certificate is current
	message  string
	revoke   bool // not admitted: its certificate goes
	secret   string
	notAfter time.Time
	renewAt  time.Time
}

// reconcile decides whether the tenant is admitted, issues or renews its
// certificate if so (and revokes it if not), runs its gateways, and writes
// the status.
func (r *CacheTenantReconciler) reconcile(ctx context.Context, t *cachev1alpha1.CacheTenant) (ctrl.Result, error) {
	st, retry, err := r.reconcileCertificate(ctx, t)
	if err != nil {
		return ctrl.Result{}, err
	}
	if st.revoke {
		if err := r.revoke(ctx, t); err != nil {
			return ctrl.Result{}, err
		}
	}
	gw, err := r.reconcileGateway(ctx, t, st)
	if err != nil {
		return ctrl.Result{}, err
	}
	if err := r.updateStatus(ctx, t, st, gw); err != nil {
		return ctrl.Result{}, err
	}
	if st.reason == "" {
		retry = st.renewAt.Sub(r.now())
	}
	return ctrl.Result{RequeueAfter: retry}, nil
}

// finalize revokes a deleted tenant's certificate and lets the object go
// once the cache's tenants file no longer lists it, so its access has ended
// (up to the nodes' reload of the file) by the time it is gone.
func (r *CacheTenantReconciler) finalize(ctx context.Context, t *cachev1alpha1.CacheTenant) (ctrl.Result, error) {
	if !controllerutil.ContainsFinalizer(t, TenantFinalizer) {
		return ctrl.Result{}, nil
	}
	if err := r.revoke(ctx, t); err != nil {
		return ctrl.Result{}, err
	}
	// Owner references would remove the gateways too, but only where a
	// garbage collector runs and only after the tenant is gone: its
	// gateways stop serving with its access.
	if err := r.removeGateway(ctx, t, nil); err != nil {
		return ctrl.Result{}, err
	}
	listed, err := r.listedByCache(ctx, t)
	if err != nil {
		return ctrl.Result{}, err
	}
	if listed {
		return ctrl.Result{RequeueAfter: tenantRetry}, nil
	}
	return removeFinalizer(ctx, r.Client, t, TenantFinalizer)
}

// listedByCache reports whether the cache's tenants file still lists the
// tenant.
func (r *CacheTenantReconciler) listedByCache(ctx context.Context, t *cachev1alpha1.CacheTenant) (bool, error) {
	dc := &cachev1alpha1.DistributedCache{ObjectMeta: metav1.ObjectMeta{Namespace: t.Spec.CacheRef.Namespace, Name: t.Spec.CacheRef.Name}}
	var s corev1.Secret
	err := r.Get(ctx, types.NamespacedName{Namespace: dc.Namespace, Name: TenantsSecretName(dc)}, &s)
	if apierrors.IsNotFound(err) {
		return false, nil
	}
	if err != nil {
		return false, err
	}
	cfg, err := tenancy.Parse(s.Data[TenantsFileKey])
	if err != nil {
		log.FromContext(ctx).Error(err, "unreadable tenants file; not holding the tenant's deletion", "secret", s.Name)
		return false, nil
	}
	_, listed := cfg.Tenant(tenantName(t))
	return listed, nil
}

func (r *CacheTenantReconciler) updateStatus(ctx context.Context, t *cachev1alpha1.CacheTenant, st tenantState, gw gatewayState) error {
	return patchStatus(ctx, r.Client, client.ObjectKeyFromObject(t), &cachev1alpha1.CacheTenant{},
		func(t *cachev1alpha1.CacheTenant) any { return t.Status }, func(latest *cachev1alpha1.CacheTenant) {
			s := &latest.Status
			s.ObservedGeneration = t.Generation
			s.TenantName = st.name
			cond := metav1.Condition{
				Type: cachev1alpha1.ConditionReady, Status: metav1.ConditionTrue, ObservedGeneration: t.Generation,
				Reason:  cachev1alpha1.ReasonCertificateIssued,
				Message: fmt.Sprintf("tenant %s is registered with the cache; client certificate in Secret %s", st.name, st.secret),
			}
			if st.reason != "" {
				cond.Status, cond.Reason, cond.Message = metav1.ConditionFalse, st.reason, st.message
				s.CertificateSecretName, s.CertificateNotAfter, s.CertificateRenewalTime = "", nil, nil
			} else {
				s.CertificateSecretName = st.secret
				s.CertificateNotAfter = &metav1.Time{Time: st.notAfter}
				s.CertificateRenewalTime = &metav1.Time{Time: st.renewAt}
			}
			meta.SetStatusCondition(&s.Conditions, cond)
			setGatewayStatus(s, t.Generation, gw)
		})
}

// SetupWithManager registers the reconciler: it owns the certificate and
// credentials Secrets and the gateways' objects, and follows the caches
// (created, deleted, selector or zones changed) and namespaces (labels)
// that decide admission.
func (r *CacheTenantReconciler) SetupWithManager(mgr ctrl.Manager) error {
	kinds, err := InstalledMonitoringKinds(mgr.GetRESTMapper())
	if err != nil {
		return err
	}
	b := ctrl.NewControllerManagedBy(mgr).
		For(&cachev1alpha1.CacheTenant{}).
		Owns(&corev1.Secret{}).
		Owns(&corev1.Service{}).
		Owns(&appsv1.Deployment{}).
		Owns(&policyv1.PodDisruptionBudget{}).
		Watches(&corev1.Secret{}, handler.EnqueueRequestsFromMapFunc(r.secretToTenants)).
		Watches(&cachev1alpha1.DistributedCache{}, handler.EnqueueRequestsFromMapFunc(r.cacheToTenants)).
		Watches(&corev1.Namespace{}, handler.EnqueueRequestsFromMapFunc(r.namespaceToTenants))
	for _, obj := range kinds {
		if _, ok := obj.(*monitoringv1.PodMonitor); ok {
			b = b.Owns(obj)
		}
	}
	return b.Named("cachetenant").Complete(r)
}

// secretToTenants maps a Secret cert-manager issued for a tenant (in
// cert-manager mode) to that tenant, so renewals are copied promptly, and a
// cache's CA Secret to the cache's tenants, so their certificates follow a
// CA rotation's steps.
func (r *CacheTenantReconciler) secretToTenants(ctx context.Context, o client.Object) []reconcile.Request {
	// A cache's CA Secret: its tenants' certificates follow its rotations.
	if owner := metav1.GetControllerOf(o); owner != nil && owner.Kind == "DistributedCache" &&
		o.GetName() == CASecretName(&cachev1alpha1.DistributedCache{ObjectMeta: metav1.ObjectMeta{Name: owner.Name}}) {
		return r.cacheToTenants(ctx, &cachev1alpha1.DistributedCache{ObjectMeta: metav1.ObjectMeta{Namespace: o.GetNamespace(), Name: owner.Name}})
	}
	ns, name, ok := strings.Cut(o.GetAnnotations()[AnnotationTenant], "/")
	if !ok {
		return nil
	}
	return []reconcile.Request{{NamespacedName: types.NamespacedName{Namespace: ns, Name: name}}}
}

// cacheToTenants maps a cache to every tenant that refers to it (all
// tenants of the cache, since one tenant's admission can change another's
// name conflict).
func (r *CacheTenantReconciler) cacheToTenants(ctx context.Context, o client.Object) []reconcile.Request {
	return mapTenants(ctx, r, "", func(t *cachev1alpha1.CacheTenant) []reconcile.Request {
		if t.Spec.CacheRef.Namespace != o.GetNamespace() || t.Spec.CacheRef.Name != o.GetName() {
			return nil
		}
		return tenantRequest(t)
	})
}

// namespaceToTenants maps a namespace to its tenants.
func (r *CacheTenantReconciler) namespaceToTenants(ctx context.Context, o client.Object) []reconcile.Request {
	return mapTenants(ctx, r, o.GetName(), tenantRequest)
}

// tenantRequest is the request to reconcile t.
func tenantRequest(t *cachev1alpha1.CacheTenant) []reconcile.Request {
	return []reconcile.Request{{NamespacedName: client.ObjectKeyFromObject(t)}}
}
