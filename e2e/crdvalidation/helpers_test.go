package crdvalidation_test

import (
	"context"
	"errors"
	"fmt"
	"io"
	"strings"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/yaml"
)

// A minimal valid DistributedCache and CacheTenant; the tables below patch
// them to make one thing wrong at a time.
const (
	baseCache = `
apiVersion: cache.distcache.io/v1alpha1
kind: DistributedCache
metadata:
  generateName: cache-
spec:
  zones:
  - name: zone-a
  storage:
    hostPath:
      path: /mnt/nvme/distcache
`
	baseTenant = `
apiVersion: cache.distcache.io/v1alpha1
kind: CacheTenant
metadata:
  generateName: team-
spec:
  cacheRef:
    namespace: distcache
    name: analytics
  buckets: [team-data]
`
)

// newNamespace creates a namespace for one spec. envtest runs no namespace
// controller, so it is left behind; the control plane goes at the end.
func newNamespace(ctx context.Context) string {
	ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{GenerateName: "crdvalidation-"}}
	Expect(k8sClient.Create(ctx, ns)).To(Succeed())
	return ns.Name
}

// ensureNamespace creates the namespace name unless it exists.
func ensureNamespace(ctx context.Context, name string) {
	ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: name}}
	if err := k8sClient.Create(ctx, ns); !apierrors.IsAlreadyExists(err) {
		Expect(err).NotTo(HaveOccurred())
	}
}

// object is base with the YAML merge patch (RFC 7386: maps merge, anything
// else replaces, null deletes) applied, in namespace ns.
func object(base, patch, ns string) *unstructured.Unstructured {
	GinkgoHelper()
	var obj, p map[string]any
	Expect(yaml.Unmarshal([]byte(base), &obj)).To(Succeed())
	Expect(yaml.Unmarshal([]byte(patch), &p)).To(Succeed())
	u := &unstructured.Unstructured{Object: mergePatch(obj, p)}
	u.SetNamespace(ns)
	return u
}

func mergePatch(dst, patch map[string]any) map[string]any {
	if dst == nil {
		dst = map[string]any{}
	}
	for k, v := range patch {
		switch v := v.(type) {
		case nil:
			delete(dst, k)
		case map[string]any:
			d, _ := dst[k].(map[string]any)
			dst[k] = mergePatch(d, v)
		default:
			dst[k] = v
		}
	}
	return dst
}

// mergePatchJSON converts a YAML merge patch to the JSON the API takes.
func mergePatchJSON(patch string) client.Patch {
	GinkgoHelper()
	data, err := yaml.YAMLToJSON([]byte(patch))
	Expect(err).NotTo(HaveOccurred())
	return client.RawPatch("application/merge-patch+json", data)
}

// createExpectingRefusal creates obj, which the API server must refuse as
// invalid, naming field. If it was accepted after all, it is deleted again.
func createExpectingRefusal(ctx context.Context, obj client.Object, field, fragment string, opts ...client.CreateOption) {
	GinkgoHelper()
	err := k8sClient.Create(ctx, obj, opts...)
	if err == nil {
		Expect(k8sClient.Delete(ctx, obj)).To(Succeed())
	}
	expectInvalid(err, field, fragment)
}

// expectInvalid asserts err is the API server's 422 Invalid, that its text
// names field, and that one of its causes is about field with a message
// containing fragment. A rule on the whole object (metadata.name) has no
// field of its own; its message starts with the field it is about.
func expectInvalid(err error, field, fragment string) {
	GinkgoHelper()
	Expect(err).To(HaveOccurred(), "the API server accepted it")
	Expect(apierrors.IsInvalid(err)).To(BeTrue(), "want 422 Invalid, got %v", err)
	Expect(err.Error()).To(ContainSubstring(field))
	var status apierrors.APIStatus
	Expect(errors.As(err, &status)).To(BeTrue())
	details := status.Status().Details
	Expect(details).NotTo(BeNil(), "no details in %v", err)
	for _, c := range details.Causes {
		// A rule that fails to evaluate (a missing has() guard, a bad
		// conversion) refuses the object too, but with a message nobody can act on.
		Expect(c.Message).NotTo(Or(ContainSubstring("evaluating rule"), ContainSubstring("no such key"), ContainSubstring("no such overload")),
			"a validation rule failed to evaluate: %s: %s", c.Field, c.Message)
	}
	var causes []string
	for _, c := range details.Causes {
		causes = append(causes, fmt.Sprintf("%s: %s", c.Field, c.Message))
		if (c.Field == field || (c.Field == "<nil>" && strings.HasPrefix(c.Message, "Invalid value: "+field))) &&
			strings.Contains(c.Message, fragment) {
			return
		}
	}
	Fail(fmt.Sprintf("no cause on %q mentioning %q; causes:\n  %s", field, fragment, strings.Join(causes, "\n  ")))
}

func readAll(r io.Reader) string {
	if r == nil {
		return ""
	}
	b, _ := io.ReadAll(r)
	return string(b)
}

func int32p(v int32) *int32 { return &v }
