package controllers

import (
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"sigs.k8s.io/yaml"

	cachev1alpha1 "github.com/distcache/distcache/api/v1alpha1"
	"github.com/distcache/distcache/internal/testutil/repo"
)

// A model of NetworkPolicy ingress for pods addressed by labels, enough for
// the samples (pod and namespace selectors, TCP ports by number or name; no
// ipBlock peers): whether a connection from one pod to another's port is
// admitted, given the policies of the destination's namespace.

// netPod is a pod and the labels of its namespace.
type netPod struct {
	name, namespace  string
	labels, nsLabels map[string]string
	ports            []corev1.ContainerPort // the destination's, for named ports
}

func selects(t *testing.T, sel *metav1.LabelSelector, l map[string]string) bool {
	t.Helper()
	s, err := metav1.LabelSelectorAsSelector(sel)
	if err != nil {
		t.Fatalf("selector %v: %v", sel, err)
	}
	return s.Matches(labels.Set(l))
}

// policySelects: the policy applies to ingress to dst.
func policySelects(t *testing.T, np *networkingv1.NetworkPolicy, dst netPod) bool {
	t.Helper()
	ingress := len(np.Spec.PolicyTypes) == 0
	for _, pt := range np.Spec.PolicyTypes {
		ingress = ingress || pt == networkingv1.PolicyTypeIngress
	}
	return ingress && np.Namespace == dst.namespace && selects(t, &np.Spec.PodSelector, dst.labels)
}

func peerMatches(t *testing.T, np *networkingv1.NetworkPolicy, peer networkingv1.NetworkPolicyPeer, src netPod) bool {
	t.Helper()
	if peer.IPBlock != nil {
		t.Fatalf("policy %s: the model has no ipBlock peers", np.Name)
	}
	if peer.NamespaceSelector == nil && src.namespace != np.Namespace {
		return false
	}
	if peer.NamespaceSelector != nil && !selects(t, peer.NamespaceSelector, src.nsLabels) {
		return false
	}
	return peer.PodSelector == nil || selects(t, peer.PodSelector, src.labels)
}

func portMatches(p networkingv1.NetworkPolicyPort, dst netPod, port int32) bool {
	if p.Protocol != nil && *p.Protocol != corev1.ProtocolTCP {
		return false
	}
	if p.Port == nil {
		return true
	}
	if p.Port.StrVal != "" {
		for _, cp := range dst.ports {
			if cp.Name == p.Port.StrVal && cp.ContainerPort == port {
				return true
			}
		}
		return false
	}
	end := p.Port.IntVal
	if p.EndPort != nil {
		end = *p.EndPort
	}
	return port >= p.Port.IntVal && port <= end
}

// admitted: a TCP connection from src to dst's port passes the policies
// (no policy selecting dst admits everything).
func admitted(t *testing.T, policies []*networkingv1.NetworkPolicy, src, dst netPod, port int32) bool {
	t.Helper()
	selected := false
	for _, np := range policies {
		if !policySelects(t, np, dst) {
			continue
		}
		selected = true
		for _, rule := range np.Spec.Ingress {
			from := len(rule.From) == 0
			for _, peer := range rule.From {
				from = from || peerMatches(t, np, peer, src)
			}
			ports := len(rule.Ports) == 0
			for _, p := range rule.Ports {
				ports = ports || portMatches(p, dst, port)
			}
			if from && ports {
				return true
			}
		}
	}
	return !selected
}

// readSample decodes a YAML file of the repository into obj.
func readSample(t *testing.T, obj any, path ...string) {
	t.Helper()
	root, err := repo.Root()
	if err != nil {
		t.Fatal(err)
	}
	b, err := os.ReadFile(filepath.Join(append([]string{root}, path...)...))
	if err != nil {
		t.Fatal(err)
	}
	if err := yaml.UnmarshalStrict(b, obj); err != nil {
		t.Fatalf("%s: %v", filepath.Join(path...), err)
	}
}

// TestNetworkPolicySamples checks config/samples/networkpolicy against the
// pods the operator builds for the sample cache and tenant (and the
// gateway sidecar of config/samples/sidecar): the nodes' mTLS port admits
// the cache's gateways and its own nodes only, the metrics port
// Prometheus and the operator only.
func TestNetworkPolicySamples(t *testing.T) {
	var kustomization struct {
		APIVersion string   `json:"apiVersion"`
		Kind       string   `json:"kind"`
		Resources  []string `json:"resources"`
	}
	readSample(t, &kustomization, "config", "samples", "networkpolicy", "kustomization.yaml")
	var policies []*networkingv1.NetworkPolicy
	for _, f := range kustomization.Resources {
		np := &networkingv1.NetworkPolicy{}
		readSample(t, np, "config", "samples", "networkpolicy", f)
		policies = append(policies, np)
	}
	if len(policies) == 0 {
		t.Fatal("no NetworkPolicy in config/samples/networkpolicy")
	}

	dc := &cachev1alpha1.DistributedCache{}
	readSample(t, dc, "config", "samples", "cache_v1alpha1_distributedcache.yaml")
	tenant := &cachev1alpha1.CacheTenant{}
	readSample(t, tenant, "config", "samples", "cache_v1alpha1_cachetenant.yaml")
	sidecar := &appsv1.StatefulSet{}
	root, err := repo.Root()
	if err != nil {
		t.Fatal(err)
	}
	sidecarYAML, err := os.ReadFile(filepath.Join(root, "config", "samples", "sidecar", "clickhouse.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	for _, doc := range splitYAML(sidecarYAML) {
		var meta metav1.TypeMeta
		if err := yaml.Unmarshal(doc, &meta); err == nil && meta.Kind == "StatefulSet" {
			if err := yaml.Unmarshal(doc, sidecar); err != nil {
				t.Fatal(err)
			}
		}
	}
	if sidecar.Name == "" || sidecar.Namespace != tenant.Namespace {
		t.Fatalf("no StatefulSet of the tenant's namespace in config/samples/sidecar/clickhouse.yaml: %q/%q", sidecar.Namespace, sidecar.Name)
	}

	ns := func(name string, l map[string]string) map[string]string {
		out := map[string]string{"kubernetes.io/metadata.name": name} // set by the API server
		for k, v := range l {
			out[k] = v
		}
		return out
	}
	cacheNS := ns(dc.Namespace, nil)
	tenantNS := ns(tenant.Namespace, dc.Spec.TenantNamespaceSelector.MatchLabels)
	pod := func(name, namespace string, nsLabels map[string]string, tmpl corev1.PodTemplateSpec) netPod {
		var ports []corev1.ContainerPort
		for _, c := range append(tmpl.Spec.InitContainers, tmpl.Spec.Containers...) {
			ports = append(ports, c.Ports...)
		}
		return netPod{name: name, namespace: namespace, labels: tmpl.Labels, nsLabels: nsLabels, ports: ports}
	}
	var nodes []netPod
	for _, z := range dc.Spec.Zones {
		sts := buildStatefulSet(dc, z.Name, "img", "h")
		nodes = append(nodes, pod(sts.Name+"-0", dc.Namespace, cacheNS, sts.Spec.Template))
	}
	gateway := func(tn *cachev1alpha1.CacheTenant, nsLabels map[string]string) netPod {
		d := buildGatewayDeployment(tn, dc, dc.Spec.Zones[0].Name, "img", "h")
		return pod(d.Name+"-x", tn.Namespace, nsLabels, d.Spec.Template)
	}
	otherCache := tenant.DeepCopy()
	otherCache.Name, otherCache.Spec.CacheRef.Name = "other", "other"
	stranger := tenant.DeepCopy()
	stranger.Namespace = "not-a-tenant"
	prometheus := func(namespace string) netPod {
		return netPod{name: "prometheus-0", namespace: namespace, nsLabels: ns(namespace, nil),
			labels: map[string]string{"app.kubernetes.io/name": "prometheus"}}
	}

	operator := func(namespace string) netPod {
		return netPod{name: "distcache-controller-manager-x", namespace: namespace, nsLabels: ns(namespace, nil),
			labels: map[string]string{"app.kubernetes.io/name": "distcache", "control-plane": "controller-manager"}}
	}

	api, metrics := int32(APIPort), int32(MetricsPort)
	// Every node's ports are the ones the policy names.
	for _, n := range nodes {
		for name, want := range map[string]int32{"api": api, "metrics": metrics} {
			found := false
			for _, p := range n.ports {
				found = found || p.Name == name && p.ContainerPort == want
			}
			if !found {
				t.Fatalf("node %s has no port %s=%d: %v", n.name, name, want, n.ports)
			}
		}
	}
	type verdict struct {
		src  netPod
		port int32
		want bool
	}
	var cases []verdict
	for _, p := range []int32{api, metrics} {
		cases = append(cases,
			verdict{gateway(tenant, tenantNS), p, p == api},
			verdict{pod("clickhouse-eu-west-1a-0", sidecar.Namespace, tenantNS, sidecar.Spec.Template), p, p == api},
			verdict{nodes[1], p, p == api},
			verdict{nodes[0], p, p == api},
			verdict{prometheus("monitoring"), p, p == metrics},
			// The operator asks leaving pods what they still hold.
			verdict{operator("distcache-system"), p, p == metrics},
			// Nothing else: another pod of the tenant's namespace, a
			// gateway of another cache there, this cache's gateway in a
			// namespace its tenantNamespaceSelector does not admit, a
			// Prometheus elsewhere, any pod of the cache's namespace.
			verdict{netPod{name: "clickhouse-server-0", namespace: tenant.Namespace, nsLabels: tenantNS,
				labels: map[string]string{"app.kubernetes.io/name": "clickhouse"}}, p, false},
			verdict{gateway(otherCache, tenantNS), p, false},
			verdict{gateway(stranger, ns(stranger.Namespace, nil)), p, false},
			verdict{prometheus("default"), p, false},
			verdict{operator("default"), p, false},
			verdict{netPod{name: "debug", namespace: dc.Namespace, nsLabels: cacheNS, labels: map[string]string{"run": "debug"}}, p, false},
		)
	}
	for _, dst := range nodes {
		for _, c := range cases {
			t.Run(fmt.Sprintf("%s/%s to %s:%d", c.src.namespace, c.src.name, dst.name, c.port), func(t *testing.T) {
				if got := admitted(t, policies, c.src, dst, c.port); got != c.want {
					t.Errorf("admitted %v, want %v (source labels %v, namespace labels %v)", got, c.want, c.src.labels, c.src.nsLabels)
				}
			})
		}
	}
	// The policies select the cache's nodes and nothing the operator runs
	// for tenants.
	for _, gw := range []netPod{gateway(tenant, tenantNS)} {
		for _, np := range policies {
			if policySelects(t, np, gw) {
				t.Errorf("policy %s selects the gateway %s", np.Name, gw.name)
			}
		}
	}
}

var regexpDocSep = regexp.MustCompile(`(?m)^---\s*$`)

// splitYAML splits a multi-document YAML file.
func splitYAML(b []byte) [][]byte {
	var out [][]byte
	for _, doc := range regexpDocSep.Split(string(b), -1) {
		out = append(out, []byte(doc))
	}
	return out
}
