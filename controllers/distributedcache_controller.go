// Package controllers holds the distcache operator's reconcilers.
package controllers

import (
	"context"
	"fmt"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/tools/events"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/builder"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	"sigs.k8s.io/controller-runtime/pkg/log"
	"sigs.k8s.io/controller-runtime/pkg/predicate"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	cachev1alpha1 "github.com/distcache/distcache/api/v1alpha1"
)

// Event reasons.
const (
	EventRingPublished     = "RingPublished"
	EventStatefulSetScaled = "StatefulSetScaled"
	EventScaleDownHeld     = "ScaleDownHeld"
	EventRolloutHeld       = "RolloutHeld"
	// EventWaitingForHeldData (Normal): a scale-down keeps pods that still
	// hold write-back or transient data, or cannot be asked; recorded when
	// the pods kept or why change.
	EventWaitingForHeldData = "WaitingForHeldData"
	// EventLeavingPodUnanswered (Warning): a pod being scaled away could
	// not be asked what it holds within the bound, and goes anyway.
	EventLeavingPodUnanswered = "LeavingPodUnanswered"
	// EventPinnedSpaceFull (Warning): a node's pinned write-back space is
	// full: its write-back and transient writes get 503 SlowDown.
	EventPinnedSpaceFull = "PinnedSpaceFull"
	// EventPinnedSpaceAvailable (Normal): a node whose pinned space was
	// full has room again.
	EventPinnedSpaceAvailable = "PinnedSpaceAvailable"
	EventCreated              = "Created"
	EventReconcileFailed      = "ReconcileFailed"
)

// DistributedCacheReconciler turns a DistributedCache into, per zone, a
// headless Service, a StatefulSet of cache nodes and a PodDisruptionBudget,
// plus one client Service, one ring ConfigMap with a document per zone, and
// the nodes' ServiceAccount, Role and RoleBinding.
type DistributedCacheReconciler struct {
	client.Client
	// APIReader reads what the manager does not cache: credentials Secrets
	// in any namespace. nil: the Client.
	APIReader client.Reader
	Scheme    *runtime.Scheme
	Recorder  events.EventRecorder
	// CacheNodeImage is the cachenode image used when spec.image is empty.
	CacheNodeImage string
	// DrainGrace is how long pods being scaled away stay after the ring
	// marking them draining was published (drainHold); 0: they go as soon
	// as that ring is published.
	DrainGrace time.Duration
	// HeldProber asks a node pod what it holds for WriteBack and
	// Transient policies (observeHeld); nil: an HTTPHeldProber.
	HeldProber HeldProber
	// UnansweredDrainTimeout is how long a scale-down waits, past the
	// drain grace, for a pod being removed that cannot be asked what it
	// holds (heldDrainHold); 0: DrainGrace.
	UnansweredDrainTimeout time.Duration
	// held remembers the pods' last answers (observeHeld, lookDirty).
	held heldObserver
	// removedZones remembers the waits of zones removed from the spec
	// (removedZoneWait).
	removedZones removedZoneWaits
	// CARotationGrace is how long a CA rotation waits for kubelets to
	// deliver changed Secrets (rotateCA); 0: DefaultCARotationGrace.
	CARotationGrace time.Duration
	// Now is the clock; nil: time.Now.
	Now func() time.Time
	// Version is the operator's version (status.operatorVersion).
	Version string
}

func (r *DistributedCacheReconciler) apiReader() client.Reader {
	if r.APIReader != nil {
		return r.APIReader
	}
	return r.Client
}

func (r *DistributedCacheReconciler) now() time.Time {
	if r.Now != nil {
		return r.Now()
	}
	return time.Now()
}

// CacheOptions restricts the manager's cache of the kinds this reconciler
// reads to the objects it manages (LabelManagedBy), so it does not hold
// every Pod and ConfigMap of the cluster.
func CacheOptions() map[client.Object]cache.ByObject {
	sel := labels.SelectorFromSet(labels.Set{LabelManagedBy: ManagedByValue})
	return map[client.Object]cache.ByObject{
		&corev1.Pod{}:                   {Label: sel},
		&corev1.ConfigMap{}:             {Label: sel},
		&corev1.Secret{}:                {Label: sel},
		&corev1.Service{}:               {Label: sel},
		&appsv1.StatefulSet{}:           {Label: sel},
		&appsv1.Deployment{}:            {Label: sel},
		&policyv1.PodDisruptionBudget{}: {Label: sel},
		&corev1.ServiceAccount{}:        {Label: sel},
		&rbacv1.Role{}:                  {Label: sel},
		&rbacv1.RoleBinding{}:           {Label: sel},
	}
}

// +kubebuilder:rbac:groups=apps,resources=statefulsets,verbs=get;list;watch;create;update;patch;delete
// +kubebuilder:rbac:groups=cache.distcache.io,resources=cachetenants,verbs=get;list;watch
// +kubebuilder:rbac:groups=cache.distcache.io,resources=distributedcaches,verbs=get;list;watch;update;patch
// +kubebuilder:rbac:groups=cache.distcache.io,resources=distributedcaches/finalizers,verbs=update
// +kubebuilder:rbac:groups=cache.distcache.io,resources=distributedcaches/status,verbs=get;update;patch
// +kubebuilder:rbac:groups=cert-manager.io,resources=certificates,verbs=get;list;watch;create;update;patch;delete
// +kubebuilder:rbac:groups=core,resources=configmaps,verbs=get;list;watch;create;update;patch;delete
// +kubebuilder:rbac:groups=core,resources=namespaces,verbs=get;list;watch
// +kubebuilder:rbac:groups=core,resources=pods,verbs=get;list;watch
// +kubebuilder:rbac:groups=core,resources=secrets,verbs=get;list;watch;create;update;patch;delete
// +kubebuilder:rbac:groups=core,resources=serviceaccounts,verbs=get;list;watch;create;update;patch;delete
// +kubebuilder:rbac:groups=core,resources=services,verbs=get;list;watch;create;update;patch;delete
// +kubebuilder:rbac:groups=events.k8s.io,resources=events,verbs=create;patch
// +kubebuilder:rbac:groups=monitoring.coreos.com,resources=servicemonitors;prometheusrules,verbs=get;list;watch;create;update;patch;delete
// +kubebuilder:rbac:groups=policy,resources=poddisruptionbudgets,verbs=get;list;watch;create;update;patch;delete
// +kubebuilder:rbac:groups=rbac.authorization.k8s.io,resources=rolebindings,verbs=get;list;watch;create;update;patch;delete
// +kubebuilder:rbac:groups=rbac.authorization.k8s.io,resources=roles,verbs=get;list;watch;create;update;patch;delete

// Reconcile fetches the cache and reconciles it. A deleted cache is held
// by CacheFinalizer until its nodes hold no write-back data S3 does not
// have yet (finalize); everything it owns carries an owner reference and
// is garbage collected once it is gone.
func (r *DistributedCacheReconciler) Reconcile(ctx context.Context, req ctrl.Request) (ctrl.Result, error) {
	dc := &cachev1alpha1.DistributedCache{}
	if err := r.Get(ctx, req.NamespacedName, dc); err != nil {
		return ctrl.Result{}, client.IgnoreNotFound(err)
	}
	if !dc.DeletionTimestamp.IsZero() {
		return r.finalize(ctx, dc)
	}
	if err := r.ensureFinalizer(ctx, dc); apierrors.IsConflict(err) {
		return retryAfterConflict, nil
	} else if err != nil {
		return ctrl.Result{}, client.IgnoreNotFound(err)
	}
	res, err := r.reconcile(ctx, dc)
	if apierrors.IsConflict(err) {
		// Someone wrote the object meanwhile: a retry, not a degradation.
		return retryAfterConflict, nil
	}
	if err != nil {
		r.Recorder.Eventf(dc, nil, corev1.EventTypeWarning, EventReconcileFailed, "Reconcile", "%v", err)
		if serr := r.patchStatus(ctx, req.NamespacedName, func(latest *cachev1alpha1.DistributedCache) {
			failedStatus(latest, err)
		}); serr != nil {
			log.FromContext(ctx).Error(serr, "recording the failure in status")
		}
	}
	return res, err
}

// reconcileState is what a reconcile's steps found, for the steps after
// them and for the status.
type reconcileState struct {
	zones     []zoneObservation        // observePods; the ring and statefulsets steps add what they wrote
	published map[string]publishedRing // the ring documents before this reconcile, by zone (reconcileRing)
	problems  []finding                // Degraded reasons that do not stop the reconcile
	requeue   time.Duration            // the soonest look again a step asked for
}

// after asks for a look again within d (d <= 0: nothing to ask).
func (st *reconcileState) after(d time.Duration) { st.requeue = soonest(st.requeue, d) }

// reconcileStep is one step of reconcile: it reads the cache and what the
// steps before it recorded in st, writes its objects, and records in st what
// the steps after it and the status need.
type reconcileStep func(ctx context.Context, dc *cachev1alpha1.DistributedCache, st *reconcileState) error

// reconcile runs the steps in order, stopping at the first that fails, and
// writes the status.
func (r *DistributedCacheReconciler) reconcile(ctx context.Context, dc *cachev1alpha1.DistributedCache) (ctrl.Result, error) {
	st := &reconcileState{requeue: resyncPeriod}
	for _, step := range []struct {
		name string
		run  reconcileStep
	}{
		{"listing pods", r.observePods},
		{"held data", r.observeHeld},
		{"services", r.reconcileServices},
		{"certificates", r.reconcileCertificates},
		{"tenants", r.reconcileTenants},
		{"node service account", r.reconcileNodeRBAC},
		{"ring", r.reconcileRing},
		{"statefulsets", r.reconcileStatefulSets},
		{"poddisruptionbudgets", r.reconcilePDBs},
		{"removed zones", r.deleteRemovedZones},
		{"monitoring", r.monitoringStep},
	} {
		if err := step.run(ctx, dc, st); err != nil {
			return ctrl.Result{}, fmt.Errorf("%s: %w", step.name, err)
		}
	}
	return ctrl.Result{RequeueAfter: st.requeue}, r.updateStatus(ctx, dc, st.zones, st.problems)
}

// applyOwned applies desired as an object of the cache (apply) and records
// an event when it was created; kind names it in the event.
func applyOwned[T client.Object](ctx context.Context, r *DistributedCacheReconciler, dc *cachev1alpha1.DistributedCache, kind string,
	desired, existing T, copySpec func(existing, desired T)) (applyResult, error) {
	res, err := apply(ctx, r.Client, r.Scheme, dc, desired, existing, copySpec)
	if err != nil {
		return "", err
	}
	r.recordCreated(dc, kind, desired.GetName(), res)
	return res, nil
}

func (r *DistributedCacheReconciler) recordCreated(dc *cachev1alpha1.DistributedCache, kind, name string, res applyResult) {
	if res == applyCreated {
		r.Recorder.Eventf(dc, nil, corev1.EventTypeNormal, EventCreated, "Create", "created %s %s", kind, name)
	}
}

// resyncPeriod bounds how long a change the operator does not watch (the
// contents of credentials Secrets) takes to reach the cache.
const resyncPeriod = 5 * time.Minute

// retryAfterConflict reconciles again soon after a write lost to another
// writer of the same object: a retry, not an error (the other write's
// watch event usually comes first).
var retryAfterConflict = ctrl.Result{RequeueAfter: 200 * time.Millisecond}

// soonest is the smallest positive duration of ds (0 if none is).
func soonest(ds ...time.Duration) time.Duration {
	var min time.Duration
	for _, d := range ds {
		if d > 0 && (min == 0 || d < min) {
			min = d
		}
	}
	return min
}

// SetupWithManager registers the reconciler: it owns the StatefulSets,
// Services, ConfigMaps, Secrets, PDBs and the nodes' ServiceAccount, Role
// and RoleBinding, and follows the readiness of the cache's
// pods (owned by the StatefulSets, so mapped by label).
func (r *DistributedCacheReconciler) SetupWithManager(mgr ctrl.Manager) error {
	kinds, err := InstalledMonitoringKinds(mgr.GetRESTMapper())
	if err != nil {
		return err
	}
	b := ctrl.NewControllerManagedBy(mgr).
		For(&cachev1alpha1.DistributedCache{}).
		Owns(&appsv1.StatefulSet{}).
		Owns(&corev1.Service{}).
		Owns(&corev1.ConfigMap{}).
		Owns(&corev1.Secret{}).
		Owns(&policyv1.PodDisruptionBudget{}).
		Owns(&corev1.ServiceAccount{}).
		Owns(&rbacv1.Role{}).
		Owns(&rbacv1.RoleBinding{}).
		Watches(&corev1.Pod{}, handler.EnqueueRequestsFromMapFunc(podToCache)).
		// A tenant's spec and deletion matter to the tenants file, its status
		// writes do not.
		Watches(&cachev1alpha1.CacheTenant{}, handler.EnqueueRequestsFromMapFunc(tenantToCache),
			builder.WithPredicates(predicate.GenerationChangedPredicate{})).
		Watches(&corev1.Namespace{}, handler.EnqueueRequestsFromMapFunc(r.namespaceToCaches))
	// The prometheus-operator's kinds are followed only where installed.
	for _, obj := range kinds {
		b = b.Owns(obj)
	}
	return b.Named("distributedcache").Complete(r)
}

// podToCache maps a cache node pod to its DistributedCache.
func podToCache(_ context.Context, o client.Object) []reconcile.Request {
	l := o.GetLabels()
	if l[LabelName] != NodeAppName || l[LabelManagedBy] != ManagedByValue || l[LabelInstance] == "" {
		return nil
	}
	return []reconcile.Request{{NamespacedName: types.NamespacedName{Namespace: o.GetNamespace(), Name: l[LabelInstance]}}}
}

// tenantToCache maps a CacheTenant to the DistributedCache it refers to.
func tenantToCache(_ context.Context, o client.Object) []reconcile.Request {
	t, ok := o.(*cachev1alpha1.CacheTenant)
	if !ok {
		return nil
	}
	return []reconcile.Request{{NamespacedName: types.NamespacedName{Namespace: t.Spec.CacheRef.Namespace, Name: t.Spec.CacheRef.Name}}}
}

// namespaceToCaches maps a namespace (whose labels decide which caches
// admit its tenants) to the caches its CacheTenants refer to.
func (r *DistributedCacheReconciler) namespaceToCaches(ctx context.Context, o client.Object) []reconcile.Request {
	return mapTenants(ctx, r, o.GetName(), func(t *cachev1alpha1.CacheTenant) []reconcile.Request { return tenantToCache(ctx, t) })
}
