package controllers

import (
	"errors"
	"maps"
	"time"

	monitoringv1 "github.com/prometheus-operator/prometheus-operator/pkg/apis/monitoring/v1"
	"github.com/prometheus/client_golang/prometheus"
	"k8s.io/apimachinery/pkg/runtime"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/rest"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"

	cachev1alpha1 "github.com/distcache/distcache/api/v1alpha1"
)

// The one place the operator is wired together, for main.go and the test
// suites that run it in-process.

// The operator's metrics endpoint (main.go, --metrics-secure) asks the API
// server who a caller is and whether it may GET /metrics.
// +kubebuilder:rbac:groups=authentication.k8s.io,resources=tokenreviews,verbs=create
// +kubebuilder:rbac:groups=authorization.k8s.io,resources=subjectaccessreviews,verbs=create

// AddToScheme registers every kind the operator reads or writes.
func AddToScheme(s *runtime.Scheme) error {
	return errors.Join(clientgoscheme.AddToScheme(s), cachev1alpha1.AddToScheme(s), monitoringv1.AddToScheme(s))
}

// ManagerCacheOptions are CacheOptions plus MonitoringCacheOptions: the
// manager caches only the objects the operator manages, of the
// prometheus-operator's kinds only those installed now.
func ManagerCacheOptions(cfg *rest.Config) (map[client.Object]cache.ByObject, error) {
	byObject := CacheOptions()
	monitoring, err := MonitoringCacheOptions(cfg)
	if err != nil {
		return nil, err
	}
	maps.Copy(byObject, monitoring)
	return byObject, nil
}

// Options configure the reconcilers.
type Options struct {
	// CacheNodeImage is the cachenode image of caches without spec.image.
	CacheNodeImage string
	// DrainGrace: see DistributedCacheReconciler.DrainGrace.
	DrainGrace time.Duration
	// HeldProber: see DistributedCacheReconciler.HeldProber.
	HeldProber HeldProber
	// UnansweredDrainTimeout: see
	// DistributedCacheReconciler.UnansweredDrainTimeout.
	UnansweredDrainTimeout time.Duration
	// CARotationGrace: see DistributedCacheReconciler.CARotationGrace.
	CARotationGrace time.Duration
	// Now is the clock; nil: time.Now.
	Now func() time.Time
	// Version is the operator's version, reported in each cache's
	// status.operatorVersion.
	Version string
	// Metrics is where the operator's own metrics about the caches go
	// (distributedcache_metrics.go): controller-runtime's registry in
	// main.go; nil: not registered.
	Metrics prometheus.Registerer
}

// SetupWithManager registers the DistributedCache and CacheTenant
// reconcilers with mgr, and the operator's metrics with o.Metrics.
func SetupWithManager(mgr ctrl.Manager, o Options) error {
	if o.Metrics != nil {
		if err := o.Metrics.Register(newCachePodsCollector(mgr.GetCache(), mgr.Elected())); err != nil {
			return err
		}
	}
	if err := (&DistributedCacheReconciler{
		Client:                 mgr.GetClient(),
		APIReader:              mgr.GetAPIReader(),
		Scheme:                 mgr.GetScheme(),
		Recorder:               mgr.GetEventRecorder("distributedcache-controller"),
		CacheNodeImage:         o.CacheNodeImage,
		DrainGrace:             o.DrainGrace,
		HeldProber:             o.HeldProber,
		UnansweredDrainTimeout: o.UnansweredDrainTimeout,
		CARotationGrace:        o.CARotationGrace,
		Now:                    o.Now,
		Version:                o.Version,
	}).SetupWithManager(mgr); err != nil {
		return err
	}
	return (&CacheTenantReconciler{
		Client:         mgr.GetClient(),
		APIReader:      mgr.GetAPIReader(),
		Scheme:         mgr.GetScheme(),
		Recorder:       mgr.GetEventRecorder("cachetenant-controller"),
		CacheNodeImage: o.CacheNodeImage,
		Now:            o.Now,
	}).SetupWithManager(mgr)
}
