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
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
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
	"github.com/distcache/distcache/internal/ring"
)

// Event reasons.
const (
	EventRingPublished     = "RingPublished"
	EventStatefulSetScaled = "StatefulSetScaled"
	EventScaleDownHeld     = "ScaleDownHeld"
	EventRolloutHeld       = "RolloutHeld"
	EventCreated           = "Created"
	EventReconcileFailed   = "ReconcileFailed"
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

// publishedRing is a zone's ring document as it was before this reconcile,
// and when its epoch was published.
type publishedRing struct {
	spec *ring.Spec
	at   time.Time
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
// +kubebuilder:rbac:groups=cache.distcache.io,resources=distributedcaches,verbs=get;list;watch
// +kubebuilder:rbac:groups=cache.distcache.io,resources=distributedcaches/status,verbs=get;update;patch
// +kubebuilder:rbac:groups=core,resources=configmaps,verbs=get;list;watch;create;update;patch;delete
// +kubebuilder:rbac:groups=core,resources=namespaces,verbs=get;list;watch
// +kubebuilder:rbac:groups=core,resources=pods,verbs=get;list;watch
// +kubebuilder:rbac:groups=core,resources=secrets,verbs=get;list;watch;create;update;patch;delete
// +kubebuilder:rbac:groups=core,resources=serviceaccounts,verbs=get;list;watch;create;update;patch;delete
// +kubebuilder:rbac:groups=core,resources=services,verbs=get;list;watch;create;update;patch;delete
// +kubebuilder:rbac:groups=events.k8s.io,resources=events,verbs=create;patch
// +kubebuilder:rbac:groups=policy,resources=poddisruptionbudgets,verbs=get;list;watch;create;update;patch;delete
// +kubebuilder:rbac:groups=rbac.authorization.k8s.io,resources=rolebindings,verbs=get;list;watch;create;update;patch;delete
// +kubebuilder:rbac:groups=rbac.authorization.k8s.io,resources=roles,verbs=get;list;watch;create;update;patch;delete

// Reconcile fetches the cache and reconciles it. A deleted cache needs
// nothing: everything it owns carries an owner reference and is garbage
// collected.
func (r *DistributedCacheReconciler) Reconcile(ctx context.Context, req ctrl.Request) (ctrl.Result, error) {
	dc := &cachev1alpha1.DistributedCache{}
	if err := r.Get(ctx, req.NamespacedName, dc); err != nil {
		return ctrl.Result{}, client.IgnoreNotFound(err)
	}
	if !dc.DeletionTimestamp.IsZero() {
		return ctrl.Result{}, nil
	}
	res, err := r.reconcile(ctx, dc)
	if apierrors.IsConflict(err) {
		// Someone wrote the object meanwhile: a retry, not a degradation.
		return ctrl.Result{Requeue: true}, nil
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

// reconcile is the list of steps; each reads what it needs and records what
// the next ones and the status need in zones.
func (r *DistributedCacheReconciler) reconcile(ctx context.Context, dc *cachev1alpha1.DistributedCache) (ctrl.Result, error) {
	zones, err := r.observePods(ctx, dc)
	if err != nil {
		return ctrl.Result{}, fmt.Errorf("listing pods: %w", err)
	}
	if err := r.reconcileServices(ctx, dc); err != nil {
		return ctrl.Result{}, fmt.Errorf("services: %w", err)
	}
	renewIn, err := r.reconcileCertificates(ctx, dc)
	if err != nil {
		return ctrl.Result{}, fmt.Errorf("certificates: %w", err)
	}
	if err := r.reconcileTenants(ctx, dc); err != nil {
		return ctrl.Result{}, fmt.Errorf("tenants: %w", err)
	}
	if err := r.reconcileNodeRBAC(ctx, dc); err != nil {
		return ctrl.Result{}, fmt.Errorf("node service account: %w", err)
	}
	published, err := r.reconcileRing(ctx, dc, zones)
	if err != nil {
		return ctrl.Result{}, fmt.Errorf("ring: %w", err)
	}
	var problems []finding
	requeue, err := r.reconcileStatefulSets(ctx, dc, zones, published, &problems)
	if err != nil {
		return ctrl.Result{}, fmt.Errorf("statefulsets: %w", err)
	}
	if err := r.reconcilePDBs(ctx, dc); err != nil {
		return ctrl.Result{}, fmt.Errorf("poddisruptionbudgets: %w", err)
	}
	if err := r.deleteRemovedZones(ctx, dc); err != nil {
		return ctrl.Result{}, fmt.Errorf("removed zones: %w", err)
	}
	available, err := r.reconcileMonitoring(ctx, dc)
	if err != nil {
		return ctrl.Result{}, fmt.Errorf("monitoring: %w", err)
	}
	if !available {
		problems = append(problems, finding{cachev1alpha1.ReasonMonitoringUnavailable,
			"spec.monitoring asks for a ServiceMonitor or PrometheusRule but the prometheus-operator's CRDs (monitoring.coreos.com) are not installed; the cache runs without them"})
		r.Recorder.Eventf(dc, nil, corev1.EventTypeWarning, cachev1alpha1.ReasonMonitoringUnavailable, "Monitoring",
			"the prometheus-operator's CRDs are not installed: no ServiceMonitor or PrometheusRule")
	}
	return ctrl.Result{RequeueAfter: soonest(requeue, renewIn, resyncPeriod)}, r.updateStatus(ctx, dc, zones, problems)
}

// observePods lists the cache's pods, per zone of the spec.
func (r *DistributedCacheReconciler) observePods(ctx context.Context, dc *cachev1alpha1.DistributedCache) ([]zoneObservation, error) {
	var pods corev1.PodList
	if err := r.List(ctx, &pods, client.InNamespace(dc.Namespace), client.MatchingLabels(cacheLabels(dc))); err != nil {
		return nil, err
	}
	zones := make([]zoneObservation, len(dc.Spec.Zones))
	for i, z := range dc.Spec.Zones {
		zones[i].Name = z.Name
		sts := zoneObjectName(dc, z.Name)
		for j := range pods.Items {
			p := &pods.Items[j]
			if p.Labels[LabelZone] != z.Name {
				continue
			}
			ord, ok := podOrdinal(sts, p.Name)
			if !ok {
				continue
			}
			zones[i].Pods = append(zones[i].Pods, zonePod{Name: p.Name, Ordinal: ord, Ready: podReady(p)})
		}
	}
	return zones, nil
}

func podReady(p *corev1.Pod) bool {
	if p.DeletionTimestamp != nil {
		return false
	}
	for _, c := range p.Status.Conditions {
		if c.Type == corev1.PodReady {
			return c.Status == corev1.ConditionTrue
		}
	}
	return false
}

func (r *DistributedCacheReconciler) reconcileServices(ctx context.Context, dc *cachev1alpha1.DistributedCache) error {
	desired := []*corev1.Service{buildClientService(dc)}
	for _, z := range dc.Spec.Zones {
		desired = append(desired, buildZoneService(dc, z.Name))
	}
	for _, svc := range desired {
		res, err := apply(ctx, r.Client, r.Scheme, dc, svc, &corev1.Service{}, func(existing, desired *corev1.Service) {
			// clusterIP(s) are allocated by the API server and immutable.
			ip, ips := existing.Spec.ClusterIP, existing.Spec.ClusterIPs
			existing.Spec = desired.Spec
			if desired.Spec.ClusterIP == "" {
				existing.Spec.ClusterIP, existing.Spec.ClusterIPs = ip, ips
			}
		})
		if err != nil {
			return err
		}
		r.recordCreated(dc, "Service", svc.Name, res)
	}
	return nil
}

// reconcileRing publishes each zone's ring document, with the time its
// epoch was published in an annotation, and returns the documents that were
// published before this reconcile (by zone), which decide whether a
// scale-down may proceed.
func (r *DistributedCacheReconciler) reconcileRing(ctx context.Context, dc *cachev1alpha1.DistributedCache, zones []zoneObservation) (map[string]publishedRing, error) {
	var existing corev1.ConfigMap
	err := r.Get(ctx, types.NamespacedName{Namespace: dc.Namespace, Name: ringConfigMapName(dc)}, &existing)
	if client.IgnoreNotFound(err) != nil {
		return nil, err
	}
	minEpochs := map[string]int64{}
	for _, zs := range dc.Status.Zones {
		minEpochs[zs.Name] = zs.RingEpoch
	}
	published := map[string]publishedRing{}
	cm := &corev1.ConfigMap{
		ObjectMeta: metav1.ObjectMeta{
			Name: ringConfigMapName(dc), Namespace: dc.Namespace, Labels: objectLabels(dc, ""),
			Annotations: map[string]string{},
		},
		Data: map[string]string{},
	}
	now := r.now().UTC().Truncate(time.Second)
	var changed []ring.Spec
	for i := range zones {
		z := &zones[i]
		prev := parsePublishedRing(existing.Data[ringKey(z.Name)])
		annKey := AnnotationRingPublishedPrefix + z.Name
		at, err := time.Parse(time.RFC3339, existing.Annotations[annKey])
		if err != nil {
			at = now // unknown: count the grace from now
		}
		published[z.Name] = publishedRing{spec: prev, at: at}
		next := buildRing(dc, z.Name, prev, minEpochs[z.Name], z.Pods)
		doc, err := encodeRing(next)
		if err != nil {
			return nil, err
		}
		cm.Data[ringKey(z.Name)] = doc
		z.Ring = &next
		if prev == nil || prev.Epoch != next.Epoch {
			changed = append(changed, next)
			at = now
		}
		cm.Annotations[annKey] = at.Format(time.RFC3339)
	}
	if _, err := apply(ctx, r.Client, r.Scheme, dc, cm, &corev1.ConfigMap{}, func(existing, desired *corev1.ConfigMap) {
		existing.Data = desired.Data
		existing.BinaryData = nil
	}); err != nil {
		return nil, err
	}
	for _, s := range changed {
		active, draining := 0, 0
		for _, m := range s.Members {
			if m.State == ring.StateDraining {
				draining++
			} else {
				active++
			}
		}
		r.Recorder.Eventf(dc, nil, corev1.EventTypeNormal, EventRingPublished, "PublishRing",
			"zone %s: ring epoch %d with %d active and %d draining members", s.Zone, s.Epoch, active, draining)
	}
	return published, nil
}

// reconcileStatefulSets writes each zone's StatefulSet. It returns when to
// look again if a scale-down waits for the drain grace period.
func (r *DistributedCacheReconciler) reconcileStatefulSets(ctx context.Context, dc *cachev1alpha1.DistributedCache, zones []zoneObservation,
	published map[string]publishedRing, problems *[]finding) (time.Duration, error) {
	image := dc.Spec.CacheNodeImage(r.CacheNodeImage)
	hash, err := podTemplateInputHash(dc, image)
	if err != nil {
		return 0, err
	}
	if withCreds, err := r.withCredentialsHash(ctx, dc, hash); err == nil {
		hash = withCreds
	} else {
		// The pods cannot start without it (the kubelet says so on each);
		// keep the workload and say which Secret is missing.
		*problems = append(*problems, finding{cachev1alpha1.ReasonSecretNotFound, err.Error()})
	}
	var requeue time.Duration
	existing := make([]*appsv1.StatefulSet, len(zones))
	for i := range zones {
		var cur appsv1.StatefulSet
		err := r.Get(ctx, client.ObjectKey{Namespace: dc.Namespace, Name: zoneObjectName(dc, zones[i].Name)}, &cur)
		if err == nil {
			existing[i] = &cur
		} else if client.IgnoreNotFound(err) != nil {
			return 0, err
		}
	}
	rollingZone := rollingOut(zones, existing)
	for i := range zones {
		z := &zones[i]
		desired := buildStatefulSet(dc, z.Name, image, hash)
		var current *int32
		var cur appsv1.StatefulSet
		if existing[i] != nil {
			cur = *existing[i]
			current = cur.Spec.Replicas
		}
		if existing[i] != nil && templateHash(&cur) != hash {
			// Zone by zone: a new pod template goes to one zone at a time,
			// once every other zone's pods are all updated and ready, so
			// an upgrade never takes more than one pod of the cache down.
			if rollingZone != "" && rollingZone != z.Name {
				desired.Spec.Template = cur.Spec.Template
				r.Recorder.Eventf(dc, nil, corev1.EventTypeNormal, EventRolloutHeld, "Rollout",
					"zone %s: new pod template held until zone %s has rolled out", z.Name, rollingZone)
				requeue = soonest(requeue, rolloutPoll)
			} else {
				rollingZone = z.Name
			}
		}
		pub := published[z.Name]
		replicas := statefulSetReplicas(dc, pub.spec, current)
		if held, wait := drainHold(dc, pub.spec, pub.at, r.now(), r.DrainGrace, current); held > replicas {
			replicas = held
			if requeue == 0 || wait < requeue {
				requeue = wait
			}
		}
		desired.Spec.Replicas = &replicas
		if replicas > desiredReplicas(dc) {
			r.Recorder.Eventf(dc, nil, corev1.EventTypeNormal, EventScaleDownHeld, "ScaleDown",
				"zone %s: keeping %d pods until the ring with the pods above %d draining is published and has been for %s", z.Name, replicas, desiredReplicas(dc), r.DrainGrace)
		}
		res, err := apply(ctx, r.Client, r.Scheme, dc, desired, &appsv1.StatefulSet{}, func(existing, desired *appsv1.StatefulSet) {
			// Only these fields of a StatefulSet's spec may change.
			existing.Spec.Replicas = desired.Spec.Replicas
			existing.Spec.Template = desired.Spec.Template
			existing.Spec.UpdateStrategy = desired.Spec.UpdateStrategy
			existing.Spec.MinReadySeconds = desired.Spec.MinReadySeconds
			existing.Spec.PersistentVolumeClaimRetentionPolicy = desired.Spec.PersistentVolumeClaimRetentionPolicy
		})
		if err != nil {
			return 0, err
		}
		r.recordCreated(dc, "StatefulSet", desired.Name, res)
		if res == applyUpdated && current != nil && *current != replicas {
			r.Recorder.Eventf(dc, nil, corev1.EventTypeNormal, EventStatefulSetScaled, "Scale",
				"zone %s: StatefulSet %s scaled from %d to %d", z.Name, desired.Name, *current, replicas)
		}
		z.StatefulSet = desired
		if res != applyCreated {
			cur.Spec = desired.Spec
			z.StatefulSet = &cur
		}
	}
	return requeue, nil
}

// rolloutPoll is how soon a held zone's rollout is looked at again (the
// StatefulSets' status changes requeue the cache sooner).
const rolloutPoll = 10 * time.Second

// templateHash is the input hash a StatefulSet's pod template carries.
func templateHash(sts *appsv1.StatefulSet) string {
	return sts.Spec.Template.Annotations[AnnotationInputHash]
}

// rollingOut names the zone whose StatefulSet is rolling out or not all
// ready yet (the first in spec order), "" when every zone is settled: its
// pods all run the current template and are ready.
func rollingOut(zones []zoneObservation, existing []*appsv1.StatefulSet) string {
	for i, sts := range existing {
		if sts == nil {
			continue
		}
		st, want := sts.Status, int32(1)
		if sts.Spec.Replicas != nil {
			want = *sts.Spec.Replicas
		}
		if st.ObservedGeneration < sts.Generation || st.UpdateRevision != st.CurrentRevision ||
			st.UpdatedReplicas < want || st.ReadyReplicas < want {
			return zones[i].Name
		}
	}
	return ""
}

func (r *DistributedCacheReconciler) reconcilePDBs(ctx context.Context, dc *cachev1alpha1.DistributedCache) error {
	for _, z := range dc.Spec.Zones {
		pdb := buildPDB(dc, z.Name)
		res, err := apply(ctx, r.Client, r.Scheme, dc, pdb, &policyv1.PodDisruptionBudget{}, func(existing, desired *policyv1.PodDisruptionBudget) {
			existing.Spec = desired.Spec
		})
		if err != nil {
			return err
		}
		r.recordCreated(dc, "PodDisruptionBudget", pdb.Name, res)
	}
	return nil
}

// deleteRemovedZones deletes the StatefulSets, Services and PDBs of zones
// no longer in the spec (their ring documents went with the rewrite of the
// ring ConfigMap).
func (r *DistributedCacheReconciler) deleteRemovedZones(ctx context.Context, dc *cachev1alpha1.DistributedCache) error {
	inSpec := map[string]bool{}
	for _, z := range dc.Spec.Zones {
		inSpec[z.Name] = true
	}
	opts := []client.ListOption{client.InNamespace(dc.Namespace), client.MatchingLabels(objectLabels(dc, ""))}
	var objs []client.Object
	var stss appsv1.StatefulSetList
	var svcs corev1.ServiceList
	var pdbs policyv1.PodDisruptionBudgetList
	for _, l := range []client.ObjectList{&stss, &svcs, &pdbs} {
		if err := r.List(ctx, l, opts...); err != nil {
			return err
		}
	}
	for i := range stss.Items {
		objs = append(objs, &stss.Items[i])
	}
	for i := range svcs.Items {
		objs = append(objs, &svcs.Items[i])
	}
	for i := range pdbs.Items {
		objs = append(objs, &pdbs.Items[i])
	}
	for _, o := range objs {
		zone, ok := o.GetLabels()[LabelZone]
		if !ok || inSpec[zone] || !metav1.IsControlledBy(o, dc) {
			continue
		}
		if err := r.Delete(ctx, o); client.IgnoreNotFound(err) != nil {
			return err
		}
	}
	return nil
}

// updateStatus writes the status of a successful reconcile.
func (r *DistributedCacheReconciler) updateStatus(ctx context.Context, dc *cachev1alpha1.DistributedCache, zones []zoneObservation, problems []finding) error {
	return r.patchStatus(ctx, client.ObjectKeyFromObject(dc), func(latest *cachev1alpha1.DistributedCache) {
		// Describe the generation this reconcile acted on, not a newer one.
		gen := latest.Generation
		latest.Generation = dc.Generation
		computeStatus(latest, zones, problems...)
		latest.Status.OperatorVersion = r.Version
		latest.Generation = gen
	})
}

func (r *DistributedCacheReconciler) recordCreated(dc *cachev1alpha1.DistributedCache, kind, name string, res applyResult) {
	if res == applyCreated {
		r.Recorder.Eventf(dc, nil, corev1.EventTypeNormal, EventCreated, "Create", "created %s %s", kind, name)
	}
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

// resyncPeriod bounds how long a change the operator does not watch (the
// contents of credentials Secrets) takes to reach the cache.
const resyncPeriod = 5 * time.Minute

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
	var tenants cachev1alpha1.CacheTenantList
	if err := r.List(ctx, &tenants, client.InNamespace(o.GetName())); err != nil {
		log.FromContext(ctx).Error(err, "listing CacheTenants", "namespace", o.GetName())
		return nil
	}
	var reqs []reconcile.Request
	for i := range tenants.Items {
		reqs = append(reqs, tenantToCache(ctx, &tenants.Items[i])...)
	}
	return reqs
}

// withCredentialsHash adds the contents of spec.s3.credentialsSecret to
// the pod template's input hash: the nodes read those credentials from
// their environment, so new ones need new pods.
func (r *DistributedCacheReconciler) withCredentialsHash(ctx context.Context, dc *cachev1alpha1.DistributedCache, hash string) (string, error) {
	ref := dc.Spec.S3.CredentialsSecret
	if ref == nil {
		return hash, nil
	}
	creds, err := readCredentials(ctx, r.apiReader(), dc.Namespace, ref)
	if err != nil {
		return "", fmt.Errorf("spec.s3.credentialsSecret: %w", err)
	}
	return hashOf([]string{hash, creds.AccessKeyID, creds.SecretAccessKey, creds.SessionToken})
}
