package kubewatch

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	typedcorev1 "k8s.io/client-go/kubernetes/typed/core/v1"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/envtest"

	"github.com/distcache/distcache/internal/ring"
	"github.com/distcache/distcache/internal/tenancy"
	"github.com/distcache/distcache/internal/testutil"
	"github.com/distcache/distcache/internal/testutil/logbuf"
	"github.com/distcache/distcache/internal/testutil/sharedapi"
)

// sharedAPIServer is the kube-apiserver the tests share, started by the
// first test that needs it and stopped by TestMain.
var sharedAPIServer = sharedapi.New()

func TestMain(m *testing.M) { os.Exit(sharedAPIServer.Main(m)) }

// apiServer returns the admin configuration of the shared kube-apiserver.
func apiServer(t *testing.T) *rest.Config {
	t.Helper()
	return sharedAPIServer.Env(t).Config
}

// createRing creates the ConfigMap cache-ring in ns, holding data.
func createRing(t *testing.T, cms typedcorev1.ConfigMapInterface, ns string, data map[string]string) *corev1.ConfigMap {
	t.Helper()
	cm, err := cms.Create(t.Context(), &corev1.ConfigMap{
		ObjectMeta: metav1.ObjectMeta{Name: "cache-ring", Namespace: ns},
		Data:       data,
	}, metav1.CreateOptions{})
	testutil.Must(t, err)
	return cm
}

// nodeUser makes a namespace with the ring ConfigMap's and tenants
// Secret's names, and a user allowed, like the operator's node Role, only
// get, list and watch on those two objects (by resourceNames). It returns
// the namespace, an admin clientset and the user's configuration.
func nodeUser(t *testing.T, ringName, tenantsName string) (string, kubernetes.Interface, *rest.Config) {
	t.Helper()
	admin := apiServer(t)
	cs, err := kubernetes.NewForConfig(admin)
	testutil.Must(t, err)
	ctx := t.Context()
	ns, err := cs.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{GenerateName: "kubewatch-"}}, metav1.CreateOptions{})
	testutil.Must(t, err)
	t.Cleanup(func() {
		_ = cs.CoreV1().Namespaces().Delete(context.Background(), ns.Name, metav1.DeleteOptions{})
	})
	user := "cachenode-" + ns.Name
	verbs := []string{"get", "list", "watch"}
	role := &rbacv1.Role{
		ObjectMeta: metav1.ObjectMeta{Name: "node", Namespace: ns.Name},
		Rules: []rbacv1.PolicyRule{
			{APIGroups: []string{""}, Resources: []string{"configmaps"}, ResourceNames: []string{ringName}, Verbs: verbs},
			{APIGroups: []string{""}, Resources: []string{"secrets"}, ResourceNames: []string{tenantsName}, Verbs: verbs},
		},
	}
	if _, err := cs.RbacV1().Roles(ns.Name).Create(ctx, role, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	rb := &rbacv1.RoleBinding{
		ObjectMeta: metav1.ObjectMeta{Name: "node", Namespace: ns.Name},
		RoleRef:    rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "Role", Name: "node"},
		Subjects:   []rbacv1.Subject{{Kind: rbacv1.UserKind, APIGroup: rbacv1.GroupName, Name: user}},
	}
	if _, err := cs.RbacV1().RoleBindings(ns.Name).Create(ctx, rb, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	u, err := sharedAPIServer.Env(t).AddUser(envtest.User{Name: user}, admin)
	testutil.Must(t, err)
	return ns.Name, cs, u.Config()
}

// ringDoc is a valid ring document of the given epoch and member count.
func ringDoc(t *testing.T, epoch int64, n int) string {
	t.Helper()
	spec := ring.Spec{
		Epoch: epoch, Zone: "zone-a",
		Hash: ring.HashParams{Algorithm: ring.AlgorithmRendezvousXXHash64, Seed: 7},
	}
	for i := range n {
		spec.Members = append(spec.Members, ring.Member{
			Name: fmt.Sprintf("cache-a-%d", i), Address: fmt.Sprintf("cache-a-%d.cache-a.ns.svc:8443", i),
			Ordinal: i, Weight: ring.DefaultWeight, State: ring.StateActive,
		})
	}
	b, err := json.Marshal(spec)
	testutil.Must(t, err)
	if _, err := ring.Parse(b); err != nil {
		t.Fatalf("test ring invalid: %v", err)
	}
	return string(b)
}

func epoch(h *ring.Holder) int64 {
	if r := h.Load(); r != nil {
		return r.Epoch()
	}
	return -1
}

func TestParseRef(t *testing.T) {
	for _, tc := range []struct {
		in   string
		want Ref
		err  bool
	}{
		{in: "distcache/cache-ring:zone-a.json", want: Ref{"distcache", "cache-ring", "zone-a.json"}},
		{in: "distcache/cache-ring", want: Ref{"distcache", "cache-ring", "ring.json"}},
		{in: "distcache/cache.tenants:tenants.yaml", want: Ref{"distcache", "cache.tenants", "tenants.yaml"}},
		{in: "cache-ring", err: true},
		{in: "/cache-ring", err: true},
		{in: "distcache/", err: true},
		{in: "Distcache/cache-ring", err: true},
		{in: "distcache/cache-ring:", err: true},
		{in: "distcache/cache-ring:a/b", err: true},
		{in: "distcache/a/b", err: true},
	} {
		got, err := ParseRef(tc.in, "ring.json")
		if tc.err {
			if err == nil {
				t.Errorf("ParseRef(%q) = %+v, want an error", tc.in, got)
			}
			continue
		}
		if err != nil || got != tc.want {
			t.Errorf("ParseRef(%q) = %+v, %v; want %+v", tc.in, got, err, tc.want)
		}
	}
}

// A value handed over is counted after its log line is written, so that
// whoever sees Updates move can read the line (issue 22). The informer is
// left out: update is called as its handler would call it.
func TestUpdateCountedAfterItsLogLine(t *testing.T) {
	w := &Watcher{
		opts: Options{Kind: ConfigMap, Ref: Ref{"ns", "cache-ring", "ring.json"}, Apply: func(data []byte) error {
			if string(data) == "bad" {
				return errors.New("refused")
			}
			return nil
		}},
		delivered: make(chan struct{}),
	}
	lines := &logbuf.StateLines{State: func() (string, bool) {
		ok, failed := w.Updates()
		return fmt.Sprintf("ok=%d failed=%d", ok, failed), true
	}}
	w.logger = lines.Logger()
	for i, data := range []map[string]string{{"ring.json": "good"}, {"ring.json": "bad"}, {"other.json": "good"}} {
		w.update(&corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{ResourceVersion: fmt.Sprint(i + 1)}, Data: data})
	}
	lines.Expect(t,
		"update applied: ok=0 failed=0",
		"update refused; keeping the configuration in force: ok=1 failed=0",
		"watched object has no such key; keeping the configuration in force: ok=1 failed=1",
	)
	if ok, failed := w.Updates(); ok != 1 || failed != 2 {
		t.Errorf("Updates() = %d, %d; want 1, 2", ok, failed)
	}
}

// TestRingFollowsConfigMap feeds a ring Holder from a ConfigMap watched as
// a user allowed only that object: new epochs are put in force, invalid and
// stale documents are refused and counted, and deleting the ConfigMap keeps
// the ring.
func TestRingFollowsConfigMap(t *testing.T) {
	ns, admin, userCfg := nodeUser(t, "cache-ring", "cache-tenants")
	ctx := t.Context()
	cms := admin.CoreV1().ConfigMaps(ns)
	cm := createRing(t, cms, ns, map[string]string{"zone-a.json": ringDoc(t, 1, 3), "zone-b.json": "not this zone's"})
	// Another ConfigMap in the namespace, which the user may not read: the
	// watch must not need it.
	if _, err := cms.Create(ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "other", Namespace: ns}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}

	// The node started from its mounted file, at epoch 1.
	h := &ring.Holder{}
	h.Store(mustParse(t, ringDoc(t, 1, 3)))
	logs := &logbuf.Buffer{}
	log := slog.New(slog.NewTextHandler(logs, &slog.HandlerOptions{Level: slog.LevelDebug}))
	u := ring.NewUpdater(h, "ring ConfigMap", log)
	w, err := Start(ctx, userCfg, Options{Kind: ConfigMap, Ref: Ref{ns, "cache-ring", "zone-a.json"}, Apply: u.Update, Logger: log})
	testutil.Must(t, err)
	testutil.WaitFor(t, "the first delivery", func() bool {
		select {
		case <-w.Delivered():
		default:
			return false
		}
		// Delivered is signalled as the value arrives; the counters
		// move once Apply has answered.
		ok, failed := w.Updates()
		return ok+failed == 1
	})
	if ok, failed := w.Updates(); ok != 1 || failed != 0 || epoch(h) != 1 {
		t.Fatalf("after the first delivery: updates ok=%d failed=%d, epoch %d; want 1, 0, 1", ok, failed, epoch(h))
	}

	update := func(doc string) {
		t.Helper()
		cm.Data["zone-a.json"] = doc
		if cm, err = cms.Update(ctx, cm, metav1.UpdateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	update(ringDoc(t, 2, 4))
	testutil.WaitFor(t, "epoch 2 in force", func() bool { return epoch(h) == 2 })
	if n := len(h.Load().Members()); n != 4 {
		t.Fatalf("ring in force has %d members, want 4", n)
	}

	update(`{"epoch": 3, "members": "truncated`)
	testutil.WaitFor(t, "the invalid document to be refused", func() bool { _, failed := w.Updates(); return failed == 1 })
	if epoch(h) != 2 {
		t.Fatalf("after an invalid document the epoch is %d, want 2", epoch(h))
	}
	if !strings.Contains(logs.String(), "ring ConfigMap invalid") {
		t.Errorf("no log of the invalid document:\n%s", logs.String())
	}

	update(ringDoc(t, 1, 2))
	testutil.WaitFor(t, "the stale document to be refused", func() bool { _, failed := w.Updates(); return failed == 2 })
	if epoch(h) != 2 {
		t.Fatalf("after a stale document the epoch is %d, want 2", epoch(h))
	}

	// A change to another key is not a new value of ours: nothing is handed over.
	cm.Data["zone-b.json"] = "still not ours"
	if cm, err = cms.Update(ctx, cm, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}

	if err := cms.Delete(ctx, "cache-ring", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	testutil.WaitFor(t, "the deletion to be seen", func() bool { return strings.Contains(logs.String(), "watched object deleted") })
	if epoch(h) != 2 || len(h.Load().Members()) != 4 {
		t.Fatalf("after the deletion the ring is epoch %d, want the last good one (2)", epoch(h))
	}
	if ok, failed := w.Updates(); ok != 2 || failed != 2 {
		t.Fatalf("updates ok=%d failed=%d, want 2 and 2", ok, failed)
	}

	createRing(t, cms, ns, map[string]string{"zone-a.json": ringDoc(t, 5, 3)})
	testutil.WaitFor(t, "the re-created ConfigMap's epoch 5 in force", func() bool { return epoch(h) == 5 })
	if strings.Contains(logs.String(), "forbidden") {
		t.Errorf("the watch was refused by RBAC at some point:\n%s", logs.String())
	}
}

func mustParse(t *testing.T, doc string) *ring.Ring {
	t.Helper()
	r, err := ring.Parse([]byte(doc))
	testutil.Must(t, err)
	return r
}

// TestTenantsFollowSecret feeds a tenancy Watcher, loaded from a file, from
// a Secret: a removed tenant is gone as soon as the Secret says so, an
// invalid version and a missing key are refused and counted, and a deleted
// Secret keeps the configuration.
func TestTenantsFollowSecret(t *testing.T) {
	ns, admin, userCfg := nodeUser(t, "cache-ring", "cache-tenants")
	ctx := t.Context()
	two := []byte("tenants:\n  - name: alpha\n    buckets: [bkt-a]\n  - name: beta\n    buckets: [bkt-b]\n")
	one := []byte("tenants:\n  - name: alpha\n    buckets: [bkt-a]\n")
	path := filepath.Join(t.TempDir(), "tenants.yaml")
	if err := os.WriteFile(path, two, 0o644); err != nil {
		t.Fatal(err)
	}
	logs := &logbuf.Buffer{}
	log := slog.New(slog.NewTextHandler(logs, nil))
	tenants, err := tenancy.Watch(ctx, path, log)
	testutil.Must(t, err)
	t.Cleanup(func() { _ = tenants.Close() })

	secrets := admin.CoreV1().Secrets(ns)
	sec, err := secrets.Create(ctx, &corev1.Secret{
		ObjectMeta: metav1.ObjectMeta{Name: "cache-tenants", Namespace: ns},
		Data:       map[string][]byte{"tenants.yaml": two},
	}, metav1.CreateOptions{})
	testutil.Must(t, err)
	w, err := Start(ctx, userCfg, Options{Kind: Secret, Ref: Ref{ns, "cache-tenants", "tenants.yaml"}, Apply: tenants.Update, Logger: log})
	testutil.Must(t, err)
	testutil.WaitFor(t, "the first delivery", func() bool { ok, _ := w.Updates(); return ok == 1 })
	if ok, failed := tenants.Reloads(); ok != 0 || failed != 0 {
		t.Fatalf("the Secret equal to the file reloaded the tenants (ok=%d failed=%d)", ok, failed)
	}

	has := func(name string) bool { _, ok := tenants.Current().Tenant(name); return ok }
	set := func(data map[string][]byte) {
		t.Helper()
		sec.Data = data
		if sec, err = secrets.Update(ctx, sec, metav1.UpdateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	set(map[string][]byte{"tenants.yaml": one})
	testutil.WaitFor(t, "beta to be removed", func() bool { return !has("beta") })
	if !has("alpha") {
		t.Fatal("alpha was removed too")
	}

	set(map[string][]byte{"tenants.yaml": []byte("tenants:\n  - name: alpha\n    buckets: [NOT_A_BUCKET]\n")})
	testutil.WaitFor(t, "the invalid version to be refused", func() bool { _, failed := w.Updates(); return failed == 1 })
	if _, failed := tenants.Reloads(); failed != 1 || !has("alpha") {
		t.Fatalf("after an invalid version: %d failed reloads, alpha present %v; want 1, true", failed, has("alpha"))
	}

	set(map[string][]byte{"other.yaml": one})
	testutil.WaitFor(t, "the missing key to be refused", func() bool { _, failed := w.Updates(); return failed == 2 })
	if !has("alpha") {
		t.Fatal("a Secret without the key emptied the tenants")
	}

	if err := secrets.Delete(ctx, "cache-tenants", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	testutil.WaitFor(t, "the deletion to be seen", func() bool { return strings.Contains(logs.String(), "watched object deleted") })
	if !has("alpha") || len(tenants.Current().Tenants) != 1 {
		t.Fatalf("after the deletion the tenants are %+v, want alpha only", tenants.Current().Tenants)
	}
}

// TestForbiddenObjectDeliversNothing watches a ConfigMap the user may not
// read: nothing is handed over, and the refusal is logged.
func TestForbiddenObjectDeliversNothing(t *testing.T) {
	ns, admin, userCfg := nodeUser(t, "cache-ring", "cache-tenants")
	ctx := t.Context()
	if _, err := admin.CoreV1().ConfigMaps(ns).Create(ctx, &corev1.ConfigMap{
		ObjectMeta: metav1.ObjectMeta{Name: "not-the-ring", Namespace: ns},
		Data:       map[string]string{"ring.json": ringDoc(t, 9, 1)},
	}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	logs := &logbuf.Buffer{}
	var applied sync.Mutex
	calls := 0
	w, err := Start(ctx, userCfg, Options{
		Kind: ConfigMap, Ref: Ref{ns, "not-the-ring", "ring.json"}, Logger: slog.New(slog.NewTextHandler(logs, nil)),
		Apply: func([]byte) error { applied.Lock(); calls++; applied.Unlock(); return nil },
	})
	testutil.Must(t, err)
	testutil.WaitFor(t, "the refusal to be logged", func() bool { return strings.Contains(logs.String(), "forbidden") })
	applied.Lock()
	defer applied.Unlock()
	select {
	case <-w.Delivered():
		t.Fatal("a forbidden object was delivered")
	default:
	}
	if calls != 0 {
		t.Fatalf("Apply called %d times", calls)
	}
}

// TestLostConnectionKeepsConfig cuts the connection to the API server (a
// TCP relay in between that refuses and drops connections): the ring stays
// while the API server cannot be reached, a change made meanwhile arrives
// once it can again (client-go re-lists).
func TestLostConnectionKeepsConfig(t *testing.T) {
	ns, admin, userCfg := nodeUser(t, "cache-ring", "cache-tenants")
	ctx := t.Context()
	cms := admin.CoreV1().ConfigMaps(ns)
	cm := createRing(t, cms, ns, map[string]string{"ring.json": ringDoc(t, 1, 3)})
	target, err := url.Parse(userCfg.Host)
	testutil.Must(t, err)
	relay := newRelay(t, target.Host)
	viaRelay := rest.CopyConfig(userCfg)
	viaRelay.Host = "https://" + relay.addr()

	h := &ring.Holder{}
	logs := &logbuf.Buffer{}
	log := slog.New(slog.NewTextHandler(logs, nil))
	u := ring.NewUpdater(h, "ring ConfigMap", log)
	w, err := Start(ctx, viaRelay, Options{Kind: ConfigMap, Ref: Ref{ns, "cache-ring", "ring.json"}, Apply: u.Update, Logger: log})
	testutil.Must(t, err)
	testutil.WaitFor(t, "epoch 1 in force", func() bool { return epoch(h) == 1 })

	relay.cut()
	cm.Data["ring.json"] = ringDoc(t, 2, 4)
	if _, err = cms.Update(ctx, cm, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	// The watch breaks; client-go retries and fails while the relay refuses.
	testutil.WaitFor(t, "a failed reconnection", func() bool { return relay.refusedCount() >= 1 })
	if epoch(h) != 1 || h.Load() == nil {
		t.Fatalf("while the API server is unreachable the epoch is %d, want 1", epoch(h))
	}
	relay.restore()
	// The holder has the new ring as Apply takes it; the counters move
	// when Apply returns.
	testutil.WaitFor(t, "the second update after reconnecting", func() bool { ok, failed := w.Updates(); return ok+failed == 2 })
	if epoch(h) != 2 {
		t.Fatalf("after reconnecting the epoch is %d, want 2", epoch(h))
	}
	if ok, failed := w.Updates(); ok != 2 || failed != 0 {
		t.Fatalf("updates ok=%d failed=%d, want 2 and 0", ok, failed)
	}
}

// relay forwards TCP connections to an address until cut: then it closes
// the connections it carries and accepts and closes new ones at once.
type relay struct {
	ln     net.Listener
	target string

	mu      sync.Mutex
	down    bool
	refused int
	conns   map[net.Conn]struct{}
}

func newRelay(t *testing.T, target string) *relay {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	testutil.Must(t, err)
	r := &relay{ln: ln, target: target, conns: map[net.Conn]struct{}{}}
	t.Cleanup(func() { _ = ln.Close(); r.cut() })
	go r.serve()
	return r
}

func (r *relay) addr() string { return r.ln.Addr().String() }

func (r *relay) serve() {
	for {
		c, err := r.ln.Accept()
		if err != nil {
			return
		}
		r.mu.Lock()
		if r.down {
			r.refused++
			r.mu.Unlock()
			_ = c.Close()
			continue
		}
		r.mu.Unlock()
		go r.carry(c)
	}
}

func (r *relay) carry(c net.Conn) {
	up, err := net.Dial("tcp", r.target)
	if err != nil {
		_ = c.Close()
		return
	}
	r.mu.Lock()
	if r.down {
		r.mu.Unlock()
		_ = c.Close()
		_ = up.Close()
		return
	}
	r.conns[c], r.conns[up] = struct{}{}, struct{}{}
	r.mu.Unlock()
	done := make(chan struct{}, 2)
	pipe := func(dst, src net.Conn) {
		_, _ = io.Copy(dst, src)
		done <- struct{}{}
	}
	go pipe(up, c)
	go pipe(c, up)
	<-done
	_ = c.Close()
	_ = up.Close()
	r.mu.Lock()
	delete(r.conns, c)
	delete(r.conns, up)
	r.mu.Unlock()
}

func (r *relay) cut() {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.down = true
	for c := range r.conns {
		_ = c.Close()
	}
}

func (r *relay) restore() {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.down = false
}

func (r *relay) refusedCount() int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.refused
}
