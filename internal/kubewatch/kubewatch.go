// Package kubewatch follows one key of one ConfigMap or Secret through the
// Kubernetes API server and hands every new value to the caller.
//
// A cache node uses it for its zone's ring document and for its tenants
// file: the kubelet refreshes ConfigMap and Secret volumes only every minute
// or so, while a watch delivers a change about as soon as it is written.
//
// The watch is restricted to the one object (a field selector on
// metadata.name in its namespace), so the node needs get, list and watch on
// that object only, which RBAC can grant by resourceNames. client-go lists
// and then watches, and after a lost connection re-lists with back-off; in
// between nothing is handed over, so the caller keeps what it has. A deleted
// object or a missing key is logged and hands nothing over either: losing
// the API server, or the object, never empties the caller's configuration.
package kubewatch

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"strings"
	"sync"
	"sync/atomic"

	"github.com/go-logr/logr"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/serializer"
	"k8s.io/apimachinery/pkg/util/validation"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/tools/clientcmd"
	"k8s.io/klog/v2"
)

// Kind is the kind of the object watched.
type Kind string

// The kinds that can be watched.
const (
	ConfigMap Kind = "ConfigMap"
	Secret    Kind = "Secret"
)

// Ref names one key of one object: namespace/name:key.
type Ref struct {
	Namespace, Name, Key string
}

func (r Ref) String() string { return r.Namespace + "/" + r.Name + ":" + r.Key }

// ParseRef parses "namespace/name[:key]"; the key is defaultKey when left
// out.
func ParseRef(s, defaultKey string) (Ref, error) {
	nsName, key, hasKey := strings.Cut(s, ":")
	if !hasKey {
		key = defaultKey
	}
	ns, name, ok := strings.Cut(nsName, "/")
	if !ok {
		return Ref{}, fmt.Errorf("%q is not namespace/name[:key]", s)
	}
	var errs []error
	for _, e := range validation.IsDNS1123Label(ns) {
		errs = append(errs, fmt.Errorf("namespace %q: %s", ns, e))
	}
	for _, e := range validation.IsDNS1123Subdomain(name) {
		errs = append(errs, fmt.Errorf("name %q: %s", name, e))
	}
	for _, e := range validation.IsConfigMapKey(key) {
		errs = append(errs, fmt.Errorf("key %q: %s", key, e))
	}
	if err := errors.Join(errs...); err != nil {
		return Ref{}, fmt.Errorf("%q: %w", s, err)
	}
	return Ref{Namespace: ns, Name: name, Key: key}, nil
}

// RESTConfig is the client configuration of the process: the kubeconfig
// file named by $KUBECONFIG when set (tests, running outside the cluster),
// otherwise the pod's service account (in-cluster).
func RESTConfig() (*rest.Config, error) {
	if path := os.Getenv(clientcmd.RecommendedConfigPathEnvVar); path != "" {
		cfg, err := clientcmd.BuildConfigFromFlags("", path)
		if err != nil {
			return nil, fmt.Errorf("kubewatch: $%s: %w", clientcmd.RecommendedConfigPathEnvVar, err)
		}
		return cfg, nil
	}
	cfg, err := rest.InClusterConfig()
	if err != nil {
		return nil, fmt.Errorf("kubewatch: in-cluster config (set $%s outside a cluster): %w", clientcmd.RecommendedConfigPathEnvVar, err)
	}
	return cfg, nil
}

// Options configure a Watcher.
type Options struct {
	Kind Kind
	Ref  Ref
	// Apply is handed the key's value each time it differs from the value
	// last handed over (whether Apply took that one or not). It returns an
	// error when it keeps what it had; the value is not handed again until
	// it changes. Calls never overlap. Required.
	Apply func(data []byte) error
	// Logger gets the watch's own logs and client-go's; nil discards them.
	Logger *slog.Logger
}

// Watcher follows one key of one object. Its counters say how many values
// were handed over and taken or refused.
type Watcher struct {
	opts   Options
	logger *slog.Logger

	ok, failed atomic.Uint64
	delivered  chan struct{}
	once       sync.Once
	done       chan struct{}

	// Owned by the informer's handler goroutine.
	seen    bool
	lastSum [sha256.Size]byte
	lastHad bool
}

// Start begins watching and returns at once; the watch runs until ctx is
// done (Done is closed then). It fails only on a bad configuration, never
// because the API server cannot be reached: client-go keeps trying.
func Start(ctx context.Context, cfg *rest.Config, opts Options) (*Watcher, error) {
	if opts.Apply == nil {
		return nil, errors.New("kubewatch: Options.Apply is nil")
	}
	var resource string
	var obj runtime.Object
	switch opts.Kind {
	case ConfigMap:
		resource, obj = "configmaps", &corev1.ConfigMap{}
	case Secret:
		resource, obj = "secrets", &corev1.Secret{}
	default:
		return nil, fmt.Errorf("kubewatch: unknown kind %q", opts.Kind)
	}
	if opts.Logger == nil {
		opts.Logger = slog.New(slog.DiscardHandler)
	}
	cfg = rest.CopyConfig(cfg)
	if cfg.UserAgent == "" {
		cfg.UserAgent = "distcache-cachenode"
	}
	c, err := coreClient(cfg)
	if err != nil {
		return nil, fmt.Errorf("kubewatch: %w", err)
	}
	w := &Watcher{
		opts:      opts,
		logger:    opts.Logger.With("kind", string(opts.Kind), "object", opts.Ref.Namespace+"/"+opts.Ref.Name, "key", opts.Ref.Key),
		delivered: make(chan struct{}),
		done:      make(chan struct{}),
	}
	name := fields.OneTermEqualSelector("metadata.name", opts.Ref.Name).String()
	lw := cache.NewFilteredListWatchFromClient(c, resource, opts.Ref.Namespace, func(o *metav1.ListOptions) {
		o.FieldSelector = name
	})
	klogger := logr.FromSlogHandler(w.logger.Handler())
	_, informer := cache.NewInformerWithOptions(cache.InformerOptions{
		Logger:        &klogger,
		ListerWatcher: lw,
		ObjectType:    obj,
		Handler: cache.ResourceEventHandlerFuncs{
			AddFunc:    func(o any) { w.update(o) },
			UpdateFunc: func(_, o any) { w.update(o) },
			DeleteFunc: func(any) {
				w.logger.Warn("watched object deleted; keeping the configuration in force")
			},
		},
	})
	go func() {
		defer close(w.done)
		informer.RunWithContext(klog.NewContext(ctx, klogger))
	}()
	w.logger.Info("watching through the API server", "host", cfg.Host)
	return w, nil
}

// coreClient is a REST client of the core API group (/api/v1) that decodes
// its kinds. It stands in for client-go's typed clientset, which would
// double the size of the cachenode binary for the two kinds read here.
func coreClient(cfg *rest.Config) (*rest.RESTClient, error) {
	scheme := runtime.NewScheme()
	if err := corev1.AddToScheme(scheme); err != nil {
		return nil, err
	}
	cfg.APIPath = "/api"
	cfg.GroupVersion = &corev1.SchemeGroupVersion
	cfg.NegotiatedSerializer = serializer.NewCodecFactory(scheme).WithoutConversion()
	return rest.RESTClientFor(cfg)
}

// Delivered is closed when the API server has delivered the object for the
// first time (before that value is handed to Apply).
func (w *Watcher) Delivered() <-chan struct{} { return w.delivered }

// Done is closed when the watch has stopped (its context is done).
func (w *Watcher) Done() <-chan struct{} { return w.done }

// Updates returns how many values Apply took and how many it refused (a
// missing key counts as refused). A value is counted last: once a count has
// moved, Apply has returned for that value and the watch's log line about
// it is written.
func (w *Watcher) Updates() (ok, failed uint64) { return w.ok.Load(), w.failed.Load() }

// update hands the key's value of the object o to Apply if it changed,
// then logs the outcome and only then counts it (see Updates).
func (w *Watcher) update(o any) {
	data, had, rv := w.value(o)
	w.once.Do(func() { close(w.delivered) })
	sum := sha256.Sum256(data)
	if w.seen && had == w.lastHad && sum == w.lastSum {
		return
	}
	w.seen, w.lastHad, w.lastSum = true, had, sum
	short := hex.EncodeToString(sum[:6])
	if !had {
		w.logger.Error("watched object has no such key; keeping the configuration in force", "resourceVersion", rv)
		w.failed.Add(1)
		return
	}
	if err := w.opts.Apply(data); err != nil {
		w.logger.Warn("update refused; keeping the configuration in force", "resourceVersion", rv, "sha256", short, "err", err)
		w.failed.Add(1)
		return
	}
	w.logger.Info("update applied", "resourceVersion", rv, "sha256", short)
	w.ok.Add(1)
}

// value is the watched key's value in o, whether o has it, and o's
// resourceVersion.
func (w *Watcher) value(o any) (data []byte, had bool, rv string) {
	key := w.opts.Ref.Key
	switch o := o.(type) {
	case *corev1.ConfigMap:
		if s, ok := o.Data[key]; ok {
			return []byte(s), true, o.ResourceVersion
		}
		b, ok := o.BinaryData[key]
		return b, ok, o.ResourceVersion
	case *corev1.Secret:
		b, ok := o.Data[key]
		return b, ok, o.ResourceVersion
	}
	return nil, false, ""
}
