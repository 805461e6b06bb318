package deploy_test

import (
	"bytes"
	"context"
	"crypto/tls"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"slices"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	"github.com/onsi/gomega/gexec"
	appsv1 "k8s.io/api/apps/v1"
	authenticationv1 "k8s.io/api/authentication/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	cachev1alpha1 "github.com/distcache/distcache/api/v1alpha1"
	"github.com/distcache/distcache/internal/freeport"
)

func freeAddr() string {
	GinkgoHelper()
	addr, err := freeport.Next()
	Expect(err).NotTo(HaveOccurred())
	return addr
}

func objectMeta(namespace, name string, labels map[string]string) metav1.ObjectMeta {
	return metav1.ObjectMeta{Namespace: namespace, Name: name, Labels: labels}
}

// httpGet returns the status and body of GET url.
func httpGet(ctx context.Context, url string) (int, string, error) {
	return httpGetAs(ctx, url, "")
}

// metricsClient speaks HTTPS to the manager's metrics endpoint, whose
// certificate controller-runtime makes up itself.
var metricsClient = &http.Client{Transport: &http.Transport{TLSClientConfig: &tls.Config{InsecureSkipVerify: true}}}

// httpGetAs GETs url, with token as its bearer token when not empty (over
// HTTPS without verifying the server's certificate).
func httpGetAs(ctx context.Context, url, token string) (int, string, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return 0, "", err
	}
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	resp, err := metricsClient.Do(req)
	if err != nil {
		return 0, "", err
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	return resp.StatusCode, string(body), err
}

// refused reports whether the manager logged an RBAC refusal: informers
// that may not list or watch, status or event writes that are refused all
// log the API server's "... is forbidden: User ...".
func refused(session *gexec.Session) bool {
	return bytes.Contains(session.Err.Contents(), []byte("forbidden")) ||
		bytes.Contains(session.Out.Contents(), []byte("forbidden"))
}

// stopIfBroken ends an Eventually that cannot succeed any more: the manager
// is gone, or RBAC refused it something.
func stopIfBroken(session *gexec.Session) {
	if code := session.ExitCode(); code != -1 {
		StopTrying(fmt.Sprintf("the manager exited with status %d", code)).Now()
	}
	if refused(session) {
		StopTrying("the manager was refused by RBAC (its log above says what)").Now()
	}
}

// runManagerAsDeployed starts the manager binary the way the Deployment's
// pod would run it, with the ServiceAccount's identity, and checks that it
// becomes ready and reconciles the sample cache (applied before) into
// StatefulSets of CACHENODE_IMG, without a single RBAC refusal.
//
// Two differences from the pod, both for running outside a cluster: the
// metrics and probe addresses are moved to free loopback ports (a later flag
// wins), and --leader-elect is left out: main.go takes the Lease's namespace
// from the pod's ServiceAccount mount, which does not exist here (the
// Lease's RBAC is checked above with SubjectAccessReviews).
func runManagerAsDeployed(ctx context.Context) {
	GinkgoHelper()
	dep := &appsv1.Deployment{}
	Expect(k8sClient.Get(ctx, types.NamespacedName{Namespace: systemNamespace, Name: deploymentName}, dep)).To(Succeed())
	c := dep.Spec.Template.Spec.Containers[0]

	args := slices.DeleteFunc(expandArgs(c), func(a string) bool { return a == "--leader-elect" })
	metricsAddr, probeAddr := freeAddr(), freeAddr()
	args = append(args, "--metrics-bind-address="+metricsAddr, "--health-probe-bind-address="+probeAddr)

	user, groups := serviceAccountUser(systemNamespace, dep.Spec.Template.Spec.ServiceAccountName)
	kubeconfig := userKubeconfig(user, groups...)

	By("building the manager (main.go)")
	bin, err := gexec.Build("github.com/distcache/distcache")
	Expect(err).NotTo(HaveOccurred())

	cmd := exec.Command(bin, args...)
	cmd.Env = append(os.Environ(), "KUBECONFIG="+kubeconfig)
	for _, e := range c.Env {
		cmd.Env = append(cmd.Env, e.Name+"="+e.Value)
	}
	session, err := gexec.Start(cmd, GinkgoWriter, GinkgoWriter)
	Expect(err).NotTo(HaveOccurred())
	DeferCleanup(func() {
		session.Terminate()
		Eventually(session, 30*time.Second).Should(gexec.Exit())
	})

	By("becoming ready on the readiness probe's path")
	Eventually(func(g Gomega) {
		stopIfBroken(session)
		code, body, err := httpGet(ctx, "http://"+probeAddr+"/readyz")
		g.Expect(err).NotTo(HaveOccurred())
		g.Expect(code).To(Equal(http.StatusOK), body)
	}).WithContext(ctx).Should(Succeed())

	By("reconciling the sample cache into a StatefulSet per zone running CACHENODE_IMG")
	var dcs cachev1alpha1.DistributedCacheList
	Expect(k8sClient.List(ctx, &dcs)).To(Succeed())
	Expect(dcs.Items).To(HaveLen(1))
	dc := &dcs.Items[0]
	Expect(dc.Spec.Image).To(BeEmpty(), "the sample uses the operator's --cachenode-image")
	for _, zone := range dc.Spec.Zones {
		Eventually(func(g Gomega) {
			stopIfBroken(session)
			sts := &appsv1.StatefulSet{}
			g.Expect(k8sClient.Get(ctx, types.NamespacedName{Namespace: dc.Namespace, Name: dc.Name + "-" + zone.Name}, sts)).To(Succeed())
			g.Expect(sts.Spec.Template.Spec.Containers).NotTo(BeEmpty())
			g.Expect(sts.Spec.Template.Spec.Containers[0].Image).To(Equal(testCacheNodeIMG))
		}).WithContext(ctx).Should(Succeed(), "zone %s", zone.Name)
	}
	Eventually(func(g Gomega) {
		got := &cachev1alpha1.DistributedCache{}
		g.Expect(k8sClient.Get(ctx, client.ObjectKeyFromObject(dc), got)).To(Succeed())
		g.Expect(got.Status.ObservedGeneration).To(Equal(got.Generation))
	}).WithContext(ctx).Should(Succeed(), "status written through distributedcaches/status")

	By("serving its metrics over HTTPS only to callers allowed to read them")
	reader, stranger := serviceAccountToken(ctx, "metrics-scraper", "distcache-metrics-reader"), serviceAccountToken(ctx, "stranger", "")
	url := "https://" + metricsAddr + "/metrics"
	Eventually(func(g Gomega) {
		code, body, err := httpGetAs(ctx, url, reader)
		g.Expect(err).NotTo(HaveOccurred())
		g.Expect(code).To(Equal(http.StatusOK), body)
		g.Expect(body).To(ContainSubstring(`controller_runtime_reconcile_total{controller="distributedcache"`))
		g.Expect(body).To(ContainSubstring(`distcache_build_info{`))
	}).WithContext(ctx).Should(Succeed())
	for who, want := range map[string]int{"": http.StatusUnauthorized, stranger: http.StatusForbidden} {
		code, _, err := httpGetAs(ctx, url, who)
		Expect(err).NotTo(HaveOccurred())
		Expect(code).To(Equal(want), "a caller with token %t and no role", who != "")
	}

	By("never being refused by RBAC")
	Expect(refused(session)).To(BeFalse(), "the manager's log above has an RBAC refusal")
}

// serviceAccountToken makes a ServiceAccount in the operator's namespace,
// binds it to clusterRole unless that is empty, and returns a token of it
// (TokenRequest), as a Prometheus in the cluster would present.
func serviceAccountToken(ctx context.Context, name, clusterRole string) string {
	GinkgoHelper()
	sa := &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Namespace: systemNamespace, Name: name}}
	Expect(k8sClient.Create(ctx, sa)).To(Succeed())
	if clusterRole != "" {
		Expect(k8sClient.Create(ctx, &rbacv1.ClusterRoleBinding{
			ObjectMeta: metav1.ObjectMeta{Name: name},
			RoleRef:    rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: clusterRole},
			Subjects:   []rbacv1.Subject{{Kind: rbacv1.ServiceAccountKind, Namespace: systemNamespace, Name: name}},
		})).To(Succeed())
	}
	tr := &authenticationv1.TokenRequest{Spec: authenticationv1.TokenRequestSpec{ExpirationSeconds: ptr.To[int64](600)}}
	Expect(k8sClient.SubResource("token").Create(ctx, sa, tr)).To(Succeed())
	Expect(tr.Status.Token).NotTo(BeEmpty())
	return tr.Status.Token
}
