package controllers

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller/controllerutil"
)

// applyResult says what apply did.
type applyResult string

const (
	applyCreated   applyResult = "created"
	applyUpdated   applyResult = "updated"
	applyUnchanged applyResult = "unchanged"
)

// hashOf is a short stable hash of v's JSON form.
func hashOf(v any) (string, error) {
	b, err := json.Marshal(v)
	if err != nil {
		return "", err
	}
	sum := sha256.Sum256(b)
	return hex.EncodeToString(sum[:10]), nil
}

// apply makes the object named like desired match it: it sets owner as the
// controller of desired, hashes desired into AnnotationSpecHash, creates the
// object if missing, and otherwise updates it only when the hash differs,
// through copySpec (which copies the mutable fields of desired into the
// existing object; labels, annotations and owner references are merged
// here). Writes that would change nothing are skipped, so reconciling an
// unchanged cache does not write.
func apply[T client.Object](ctx context.Context, c client.Client, scheme *runtime.Scheme, owner client.Object,
	desired T, existing T, copySpec func(existing, desired T)) (applyResult, error) {
	if err := controllerutil.SetControllerReference(owner, desired, scheme); err != nil {
		return "", err
	}
	h, err := hashOf(desired)
	if err != nil {
		return "", err
	}
	ann := desired.GetAnnotations()
	if ann == nil {
		ann = map[string]string{}
	}
	ann[AnnotationSpecHash] = h
	desired.SetAnnotations(ann)

	err = c.Get(ctx, client.ObjectKeyFromObject(desired), existing)
	if apierrors.IsNotFound(err) {
		if err := c.Create(ctx, desired); err != nil {
			return "", fmt.Errorf("creating %s: %w", desired.GetName(), err)
		}
		return applyCreated, nil
	}
	if err != nil {
		return "", err
	}
	if existing.GetAnnotations()[AnnotationSpecHash] == h {
		return applyUnchanged, nil
	}
	existing.SetLabels(mergeMaps(existing.GetLabels(), desired.GetLabels()))
	existing.SetAnnotations(mergeMaps(existing.GetAnnotations(), desired.GetAnnotations()))
	existing.SetOwnerReferences(desired.GetOwnerReferences())
	copySpec(existing, desired)
	if err := c.Update(ctx, existing); err != nil {
		return "", fmt.Errorf("updating %s: %w", desired.GetName(), err)
	}
	return applyUpdated, nil
}

// mergeMaps returns base with over's entries set on top (a new map).
func mergeMaps(base, over map[string]string) map[string]string {
	out := make(map[string]string, len(base)+len(over))
	for k, v := range base {
		out[k] = v
	}
	for k, v := range over {
		out[k] = v
	}
	return out
}

// listObjects lists each of lists with opts and returns all their items.
func listObjects(ctx context.Context, c client.Reader, opts []client.ListOption, lists ...client.ObjectList) ([]client.Object, error) {
	var objs []client.Object
	for _, l := range lists {
		if err := c.List(ctx, l, opts...); err != nil {
			return nil, err
		}
		items, err := meta.ExtractList(l)
		if err != nil {
			return nil, err
		}
		for _, it := range items {
			objs = append(objs, it.(client.Object))
		}
	}
	return objs, nil
}

// deleteControlled deletes the object of obj's kind named name in owner's
// namespace if it exists and owner controls it (an object of the same name
// that someone else made is left alone).
func deleteControlled(ctx context.Context, c client.Client, owner metav1.Object, obj client.Object, name string) error {
	if err := c.Get(ctx, client.ObjectKey{Namespace: owner.GetNamespace(), Name: name}, obj); err != nil {
		return client.IgnoreNotFound(err)
	}
	if !metav1.IsControlledBy(obj, owner) {
		return nil
	}
	return deleteUnlessReplaced(ctx, c, obj)
}

// deleteUnlessReplaced deletes obj, as read, unless the object of its name
// was replaced meanwhile (its UID differs).
func deleteUnlessReplaced(ctx context.Context, c client.Client, obj client.Object) error {
	return client.IgnoreNotFound(c.Delete(ctx, obj, client.Preconditions{UID: ptr.To(obj.GetUID())}))
}
