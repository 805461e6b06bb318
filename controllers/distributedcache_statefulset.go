package controllers

import (
	"context"
	"fmt"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	cachev1alpha1 "github.com/distcache/distcache/api/v1alpha1"
)

// StatefulSets: one per zone, with the pod template of
// distributedcache_pod.go, rolled out zone by zone when the hash of its
// inputs changes, scaled down only as far as the ring allows
// (distributedcache_ring.go); and the objects of zones removed from the
// spec deleted.

// reconcileStatefulSets writes each zone's StatefulSet. It asks for a look
// again when a zone's new pod template is held or a scale-down waits for
// the drain grace period.
func (r *DistributedCacheReconciler) reconcileStatefulSets(ctx context.Context, dc *cachev1alpha1.DistributedCache, st *reconcileState) error {
	zones, published := st.zones, st.published
	image := dc.Spec.CacheNodeImage(r.CacheNodeImage)
	hash, err := podTemplateInputHash(dc, image)
	if err != nil {
		return err
	}
	if withCreds, err := r.withCredentialsHash(ctx, dc, hash); err == nil {
		hash = withCreds
	} else {
		// The pods cannot start without it (the kubelet says so on each);
		// keep the workload and say which Secret is missing.
		st.problems = append(st.problems, finding{cachev1alpha1.ReasonSecretNotFound, err.Error()})
	}
	var requeue time.Duration
	existing := make([]*appsv1.StatefulSet, len(zones))
	for i := range zones {
		var cur appsv1.StatefulSet
		err := r.Get(ctx, client.ObjectKey{Namespace: dc.Namespace, Name: zoneObjectName(dc, zones[i].Name)}, &cur)
		if err == nil {
			existing[i] = &cur
		} else if client.IgnoreNotFound(err) != nil {
			return err
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
		var drain heldDrain
		if replicas > desiredReplicas(dc) {
			r.Recorder.Eventf(dc, nil, corev1.EventTypeNormal, EventScaleDownHeld, "ScaleDown",
				"zone %s: keeping %d pods until the ring with the pods above %d draining is published and has been for %s", z.Name, replicas, desiredReplicas(dc), r.DrainGrace)
		} else if current != nil && *current > replicas {
			// The ring and the grace let the pods go: not while they hold
			// write-back or transient data.
			drain = r.holdForHeldData(dc, z, replicas, *current)
			replicas = max(replicas, drain.keep)
			requeue = soonest(requeue, drain.wait)
			z.Leaving = drain.leaving
		}
		desired.Spec.Replicas = &replicas
		res, err := applyOwned(ctx, r, dc, "StatefulSet", desired, &appsv1.StatefulSet{}, func(existing, desired *appsv1.StatefulSet) {
			// Only these fields of a StatefulSet's spec may change.
			existing.Spec.Replicas = desired.Spec.Replicas
			existing.Spec.Template = keepRestart(existing.Spec.Template, desired.Spec.Template)
			existing.Spec.UpdateStrategy = desired.Spec.UpdateStrategy
			existing.Spec.MinReadySeconds = desired.Spec.MinReadySeconds
			existing.Spec.PersistentVolumeClaimRetentionPolicy = desired.Spec.PersistentVolumeClaimRetentionPolicy
		})
		if err != nil {
			return err
		}
		if res == applyUpdated && current != nil && *current != replicas {
			r.Recorder.Eventf(dc, nil, corev1.EventTypeNormal, EventStatefulSetScaled, "Scale",
				"zone %s: StatefulSet %s scaled from %d to %d", z.Name, desired.Name, *current, replicas)
			for _, p := range drain.givenUp {
				r.Recorder.Eventf(dc, nil, corev1.EventTypeWarning, EventLeavingPodUnanswered, "ScaleDown",
					"zone %s: pod %s removed without knowing what write-back or transient data it held: it could not be asked (%s) since %s; "+
						"with replicas >= 2 its other holders have its data, and its volume claim is kept",
					z.Name, p.Name, p.Unanswered, p.UnansweredSince.UTC().Format(time.RFC3339))
			}
		}
		z.StatefulSet = desired
		if res != applyCreated {
			cur.Spec = desired.Spec
			z.StatefulSet = &cur
		}
	}
	st.after(requeue)
	return nil
}

// holdForHeldData is heldDrainHold for zone z, whose StatefulSet may go
// from current to replicas pods, with the zone's status as it was; it
// records an event when the pods kept, or why, change.
func (r *DistributedCacheReconciler) holdForHeldData(dc *cachev1alpha1.DistributedCache, z *zoneObservation, replicas, current int32) heldDrain {
	var prev []cachev1alpha1.LeavingPodStatus
	for _, zs := range dc.Status.Zones {
		if zs.Name == z.Name {
			prev = zs.LeavingPods
		}
	}
	now, timeout := r.now(), r.unansweredTimeout()
	drain := heldDrainHold(zoneObjectName(dc, z.Name), replicas, current, z.Pods, prev, now, timeout)
	if msg := waitingSummary(drain.leaving, now, timeout); msg != "" && msg != waitingSummary(prev, now, timeout) {
		r.Recorder.Eventf(dc, nil, corev1.EventTypeNormal, EventWaitingForHeldData, "ScaleDown",
			"zone %s: keeping %d pods (want %d): %s", z.Name, drain.keep, replicas, msg)
	}
	return drain
}

// podInputs are what the nodes' pod template is made of, by name (as
// prometheus-operator's createSSetInputHash): a new spec field reaches the
// hash, and so rolls the pods when it changes, only once it is added here.
// Replicas, the PDB, monitoring, tenants and TLS are not inputs
// (certificates and tenants are hot-reloaded files).
type podInputs struct {
	Image            string
	ImagePullPolicy  corev1.PullPolicy
	ImagePullSecrets []corev1.LocalObjectReference
	Resources        corev1.ResourceRequirements
	Storage          cachev1alpha1.StorageSpec
	ChunkSize        *resource.Quantity
	DiskSize         *resource.Quantity
	MemorySize       *resource.Quantity
	ObjectMetadata   cachev1alpha1.ObjectMetadataSpec
	S3               cachev1alpha1.S3Spec
	InstanceTypes    []string
	NodeSelector     map[string]string
	Tolerations      []corev1.Toleration
	PodTemplate      *cachev1alpha1.PodTemplateOverrides
	// CrossZone and the zones reach the pods only as OnMiss's --zones:
	// with the default, adding a zone rolls no existing pod.
	CrossZone cachev1alpha1.CrossZonePolicy `json:",omitempty"`
	Zones     []string                      `json:",omitempty"`
}

// podTemplateInputHash hashes the podInputs of dc with image, the
// resolved cachenode image. A change rolls the pods.
func podTemplateInputHash(dc *cachev1alpha1.DistributedCache, image string) (string, error) {
	s := &dc.Spec
	in := podInputs{Image: image, ImagePullPolicy: s.ImagePullPolicy, ImagePullSecrets: s.ImagePullSecrets,
		Resources: s.Resources, Storage: s.Storage, ChunkSize: s.ChunkSize, DiskSize: s.DiskSize, MemorySize: s.MemorySize,
		ObjectMetadata: s.ObjectMetadata, S3: s.S3, InstanceTypes: s.InstanceTypes, NodeSelector: s.NodeSelector,
		Tolerations: s.Tolerations, PodTemplate: s.PodTemplate}
	if in.S3.PutIfAbsent == cachev1alpha1.PutIfAbsentAuto {
		in.S3.PutIfAbsent = "" // the same pods as omitted
	}
	if s.CrossZone == cachev1alpha1.CrossZoneOnMiss {
		in.CrossZone = s.CrossZone
		for _, z := range s.Zones {
			in.Zones = append(in.Zones, z.Name)
		}
	}
	return hashOf(in)
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

// buildStatefulSet is the StatefulSet <cache>-<zone> running the zone's
// cache nodes, with spec.replicas pods (reconcileStatefulSets holds a
// scale-down until the ring has drained the pods that go). image is the
// resolved cachenode image and inputHash its podTemplateInputHash.
func buildStatefulSet(dc *cachev1alpha1.DistributedCache, zone, image, inputHash string) *appsv1.StatefulSet {
	spec := &dc.Spec
	name := zoneObjectName(dc, zone)
	podLabels := objectLabels(dc, zone)
	podAnnotations := map[string]string{AnnotationInputHash: inputHash}
	var ov cachev1alpha1.PodTemplateOverrides
	if spec.PodTemplate != nil {
		ov = *spec.PodTemplate
	}
	// The operator's labels and annotations win over the overrides.
	podLabels = mergeMaps(ov.Metadata.Labels, podLabels)
	podAnnotations = mergeMaps(ov.Metadata.Annotations, podAnnotations)

	grace := int64(30)
	if ov.TerminationGracePeriodSeconds != nil {
		grace = *ov.TerminationGracePeriodSeconds
	}
	sts := &appsv1.StatefulSet{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: dc.Namespace, Labels: objectLabels(dc, zone)},
		Spec: appsv1.StatefulSetSpec{
			Replicas:            ptr.To(desiredReplicas(dc)),
			ServiceName:         name,
			PodManagementPolicy: appsv1.ParallelPodManagement,
			Selector:            &metav1.LabelSelector{MatchLabels: zoneSelectorLabels(dc, zone)},
			UpdateStrategy:      appsv1.StatefulSetUpdateStrategy{Type: appsv1.RollingUpdateStatefulSetStrategyType},
			Template: corev1.PodTemplateSpec{
				ObjectMeta: metav1.ObjectMeta{Labels: podLabels, Annotations: podAnnotations},
				Spec: corev1.PodSpec{
					InitContainers:                buildInitContainers(dc, image, ov),
					Containers:                    []corev1.Container{buildContainer(dc, zone, image, ov)},
					Volumes:                       buildVolumes(dc, zone),
					Affinity:                      buildAffinity(dc, zone, ov.Affinity),
					NodeSelector:                  spec.NodeSelector,
					Tolerations:                   spec.Tolerations,
					ImagePullSecrets:              spec.ImagePullSecrets,
					PriorityClassName:             ov.PriorityClassName,
					ServiceAccountName:            podServiceAccountName(dc),
					AutomountServiceAccountToken:  ptr.To(true), // the node watches its ring and tenants through the API
					SecurityContext:               nodePodSecurity(ov),
					TopologySpreadConstraints:     ov.TopologySpreadConstraints,
					TerminationGracePeriodSeconds: &grace,
				},
			},
		},
	}
	if vct := spec.Storage.VolumeClaimTemplate; vct != nil {
		sts.Spec.VolumeClaimTemplates = []corev1.PersistentVolumeClaim{{
			ObjectMeta: metav1.ObjectMeta{Name: dataVolume, Labels: zoneSelectorLabels(dc, zone)},
			Spec: corev1.PersistentVolumeClaimSpec{
				AccessModes:      []corev1.PersistentVolumeAccessMode{corev1.ReadWriteOnce},
				StorageClassName: vct.StorageClassName,
				Resources: corev1.VolumeResourceRequirements{
					Requests: corev1.ResourceList{corev1.ResourceStorage: vct.Size},
				},
			},
		}}
	}
	return sts
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

// deleteRemovedZones deletes the StatefulSets, Services and PDBs of zones
// no longer in the spec (their ring documents went with the rewrite of the
// ring ConfigMap; a node keeps the ring it has when its document goes, and
// goes on persisting), once the zone's nodes hold no write-back data S3
// does not have yet (removedZoneWait).
func (r *DistributedCacheReconciler) deleteRemovedZones(ctx context.Context, dc *cachev1alpha1.DistributedCache, st *reconcileState) error {
	inSpec := map[string]bool{}
	for _, z := range dc.Spec.Zones {
		inSpec[z.Name] = true
	}
	objs, err := listObjects(ctx, r, []client.ListOption{client.InNamespace(dc.Namespace), client.MatchingLabels(objectLabels(dc, ""))},
		&appsv1.StatefulSetList{}, &corev1.ServiceList{}, &policyv1.PodDisruptionBudgetList{})
	if err != nil {
		return err
	}
	waiting := map[string]bool{}
	for _, o := range objs {
		zone, ok := o.GetLabels()[LabelZone]
		if !ok || inSpec[zone] || !metav1.IsControlledBy(o, dc) {
			continue
		}
		held, seen := waiting[zone]
		if !seen {
			wait, err := r.removedZoneWait(ctx, dc, zone)
			if err != nil {
				return err
			}
			st.after(wait)
			held, waiting[zone] = wait > 0, wait > 0
		}
		if held {
			continue
		}
		if err := r.Delete(ctx, o); client.IgnoreNotFound(err) != nil {
			return err
		}
	}
	return nil
}

// restartedAtAnnotation is what `kubectl rollout restart` sets in a pod
// template to roll the pods.
const restartedAtAnnotation = "kubectl.kubernetes.io/restartedAt"

// keepRestart is the pod template to write over existing: desired, with
// the restart a user asked of existing kept, so that the operator's next
// write (a scale, a spec change) does not roll the pods once more.
func keepRestart(existing, desired corev1.PodTemplateSpec) corev1.PodTemplateSpec {
	at, ok := existing.Annotations[restartedAtAnnotation]
	if !ok {
		return desired
	}
	out := *desired.DeepCopy()
	if out.Annotations == nil {
		out.Annotations = map[string]string{}
	}
	out.Annotations[restartedAtAnnotation] = at
	return out
}
