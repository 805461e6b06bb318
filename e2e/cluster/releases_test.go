package cluster_test

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/distcache/distcache/internal/testutil/kubetest"
)

// Releases built from this tree by `make release`'s script (hack/release.sh)
// for the upgrade specs: the install manifest, the Helm chart and the two
// images of one version, for this machine's platform only, with the images
// named distcache.local/{operator,cachenode}:vX.Y.Z (IMAGE_REPO), which
// hack/cluster.sh import loads into every node's containerd under that
// name. The manifest and the chart are then the release's own, unedited.

// releaseImageRepo is the IMAGE_REPO the specs' releases are built with.
const releaseImageRepo = "distcache.local"

// releaseInputs are the paths a release is built from (binaries, images,
// manifest, chart). A change under them, committed or not, means a rebuild.
var releaseInputs = []string{".ko.yaml", "go.mod", "go.sum", "main.go", "api", "cachenode", "charts", "cmd",
	"config", "controllers", "hack", "internal", "pkg"}

// release is one version's release directory.
type release struct {
	version  string // x.y.z
	dir      string
	manifest string // distcache-X.Y.Z.yaml
	chart    string // distcache-X.Y.Z.tgz
	images   []string
}

func (r release) tag() string            { return "v" + r.version }
func (r release) operatorImage() string  { return releaseImageRepo + "/operator:" + r.tag() }
func (r release) cachenodeImage() string { return releaseImageRepo + "/cachenode:" + r.tag() }

// releaseSourceDigest hashes releaseInputs as they are in the working tree:
// the committed tree, the uncommitted changes and the untracked files.
func releaseSourceDigest(ctx context.Context) string {
	GinkgoHelper()
	h := sha256.New()
	git := func(args ...string) string {
		out, err := run(ctx, nil, nil, "git", args...)
		Expect(err).NotTo(HaveOccurred())
		return out
	}
	h.Write([]byte(git(append([]string{"ls-tree", "-r", "HEAD", "--"}, releaseInputs...)...)))
	h.Write([]byte(git(append([]string{"diff", "HEAD", "--"}, releaseInputs...)...)))
	for name := range strings.FieldsSeq(git(append([]string{"ls-files", "--others", "--exclude-standard", "--"}, releaseInputs...)...)) {
		data, err := os.ReadFile(filepath.Join(root, name))
		if err != nil {
			continue // removed meanwhile
		}
		fmt.Fprintf(h, "%s %x\n", name, sha256.Sum256(data))
	}
	return hex.EncodeToString(h.Sum(nil))[:16]
}

// buildRelease returns version's release in bin/releases/VERSION, built by
// hack/release.sh unless the directory already holds one built from the same
// sources (its .source file). It says whether it built.
func buildRelease(ctx context.Context, version, digest string) (release, bool) {
	GinkgoHelper()
	dir := filepath.Join(root, "bin", "releases", version)
	r := release{
		version:  version,
		dir:      dir,
		manifest: filepath.Join(dir, "distcache-"+version+".yaml"),
		chart:    filepath.Join(dir, "distcache-"+version+".tgz"),
		images: []string{
			filepath.Join(dir, "images", "distcache-operator-"+version+".oci.tar"),
			filepath.Join(dir, "images", "distcache-cachenode-"+version+".oci.tar"),
		},
	}
	stamp := filepath.Join(dir, ".source")
	if got, err := os.ReadFile(stamp); err == nil && strings.TrimSpace(string(got)) == digest {
		complete := true
		for _, f := range append([]string{r.manifest, r.chart}, r.images...) {
			if _, err := os.Stat(f); err != nil {
				complete = false
			}
		}
		if complete {
			return r, false
		}
	}
	runHackEnv(ctx, []string{"VERSION=" + version, "DIST=" + dir, "IMAGE_REPO=" + releaseImageRepo,
		"PLATFORMS=linux/" + runtime.GOARCH}, "release.sh")
	Expect(os.WriteFile(stamp, []byte(digest+"\n"), 0o644)).To(Succeed())
	return r, true
}

// deleteOperator removes what r's install manifest installs except its
// CRDs (so every cache and tenant stays) and its namespace: the operator
// is gone, its caches keep running. It waits until no operator pod is left.
// The suite's own operator (make deploy's) has the same names, so this
// removes it as well.
func deleteOperator(ctx context.Context, r release) {
	GinkgoHelper()
	data, err := os.ReadFile(r.manifest)
	Expect(err).NotTo(HaveOccurred())
	var b bytes.Buffer
	for _, obj := range kubetest.Decode(data) {
		if obj.GetKind() == "CustomResourceDefinition" || obj.GetKind() == "Namespace" {
			continue
		}
		y, err := obj.MarshalJSON()
		Expect(err).NotTo(HaveOccurred())
		b.Write(y)
		b.WriteString("\n")
	}
	kubectlIn(ctx, b.Bytes(), "delete", "--ignore-not-found", "--wait=true", "-f", "-")
	Eventually(ctx, func(g Gomega) {
		var pods corev1.PodList
		g.Expect(k8sClient.List(ctx, &pods, client.InNamespace(operatorNamespace),
			client.MatchingLabels{"control-plane": "controller-manager"})).To(Succeed())
		g.Expect(podNames(pods.Items)).To(BeEmpty(), "operator pods left")
	}).WithTimeout(timeout).Should(Succeed())
}

// operatorRolledOut waits until the operator Deployment runs image only:
// every replica updated and available, no pod of an older ReplicaSet left.
func operatorRolledOut(ctx context.Context, image string) {
	GinkgoHelper()
	Eventually(ctx, func(g Gomega) {
		var d appsv1.Deployment
		g.Expect(k8sClient.Get(ctx, key(operatorNamespace, operatorDeployment), &d)).To(Succeed())
		g.Expect(d.Spec.Template.Spec.Containers[0].Image).To(Equal(image))
		g.Expect(d.Status.ObservedGeneration).To(Equal(d.Generation))
		g.Expect(d.Status.UpdatedReplicas).To(Equal(*d.Spec.Replicas))
		g.Expect(d.Status.AvailableReplicas).To(Equal(*d.Spec.Replicas))
		var pods corev1.PodList
		g.Expect(k8sClient.List(ctx, &pods, client.InNamespace(operatorNamespace),
			client.MatchingLabels{"control-plane": "controller-manager"})).To(Succeed())
		g.Expect(pods.Items).To(HaveLen(int(*d.Spec.Replicas)), "operator pods")
		for _, p := range pods.Items {
			g.Expect(p.Spec.Containers[0].Image).To(Equal(image), "operator pod %s", p.Name)
		}
	}).WithTimeout(rolloutTimeout).Should(Succeed(), "the operator runs %s", image)
}

// helmIn runs bin/helm against the cluster with a Helm home of the spec's
// own, bounded by a few minutes.
func helmIn(ctx context.Context, home string, args ...string) (string, error) {
	ctx, cancel := context.WithTimeout(ctx, 2*commandTimeout+time.Minute)
	defer cancel()
	fmt.Fprintf(GinkgoWriter, "$ helm %s\n", strings.Join(args, " "))
	return run(ctx, []string{"KUBECONFIG=" + kubeconfig, "HELM_CACHE_HOME=" + filepath.Join(home, "cache"),
		"HELM_CONFIG_HOME=" + filepath.Join(home, "config"), "HELM_DATA_HOME=" + filepath.Join(home, "data")},
		nil, filepath.Join(root, "bin", "helm"), args...)
}
