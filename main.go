// Command manager is the distcache operator: it reconciles DistributedCache
// and CacheTenant objects into per-zone cache StatefulSets, ring ConfigMaps,
// certificates and monitoring (controllers/), in a controller-runtime
// manager with health probes, metrics and leader election.
package main

import (
	"flag"
	"fmt"
	"os"
	"time"

	versioncollector "github.com/prometheus/client_golang/prometheus/collectors/version"
	"github.com/prometheus/common/version"
	"k8s.io/apimachinery/pkg/runtime"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/healthz"
	"sigs.k8s.io/controller-runtime/pkg/log/zap"
	ctrlmetrics "sigs.k8s.io/controller-runtime/pkg/metrics"
	"sigs.k8s.io/controller-runtime/pkg/metrics/filters"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"

	"github.com/distcache/distcache/controllers"
)

func main() {
	var metricsAddr, probeAddr string
	var leaderElect bool
	var leaderElectionNamespace string
	var cacheNodeImage string
	var drainGrace, caRotationGrace time.Duration
	var printVersion, secureMetrics bool
	flag.BoolVar(&printVersion, "version", false, "print the version this binary was built as and exit")
	flag.DurationVar(&drainGrace, "ring-drain-grace", 2*time.Minute, "how long cache nodes being scaled away keep serving after the ring marking them draining is published (ConfigMap propagation plus warm handoff)")
	flag.DurationVar(&caRotationGrace, "ca-rotation-grace", controllers.DefaultCARotationGrace, "how long a CA rotation waits for kubelets to deliver changed certificate Secrets to every pod, before the new CA signs and before the old one is dropped")
	flag.StringVar(&cacheNodeImage, "cachenode-image", "ghcr.io/distcache/cachenode:latest", "cachenode image of caches without spec.image")
	flag.StringVar(&metricsAddr, "metrics-bind-address", ":8443", "address of the metrics endpoint (0: off)")
	flag.BoolVar(&secureMetrics, "metrics-secure", true, "serve the metrics over HTTPS (a self-signed certificate) and only to callers the API server authenticates (TokenReview) and authorizes for GET /metrics (SubjectAccessReview; the ClusterRole distcache-metrics-reader grants it); false: plain HTTP to anyone")
	flag.StringVar(&probeAddr, "health-probe-bind-address", ":8081", "address of /healthz and /readyz")
	flag.BoolVar(&leaderElect, "leader-elect", false, "enable leader election (run more than one replica)")
	flag.StringVar(&leaderElectionNamespace, "leader-election-namespace", "", "namespace of the leader election Lease; empty: the pod's own (in a cluster only)")
	opts := zap.Options{}
	opts.BindFlags(flag.CommandLine)
	flag.Parse()
	if printVersion {
		fmt.Println(version.Print("distcache-operator"))
		return
	}
	ctrl.SetLogger(zap.New(zap.UseFlagOptions(&opts)))
	log := ctrl.Log.WithName("setup")
	log.Info("distcache operator", "version", version.Version, "revision", version.GetRevision())
	ctrlmetrics.Registry.MustRegister(versioncollector.NewCollector("distcache"))

	scheme := runtime.NewScheme()
	if err := controllers.AddToScheme(scheme); err != nil {
		log.Error(err, "building scheme")
		os.Exit(1)
	}
	cfg := ctrl.GetConfigOrDie()
	byObject, err := controllers.ManagerCacheOptions(cfg)
	if err != nil {
		log.Error(err, "looking up the prometheus-operator's CRDs")
		os.Exit(1)
	}
	metricsOpts := metricsserver.Options{BindAddress: metricsAddr, SecureServing: secureMetrics}
	if secureMetrics {
		metricsOpts.FilterProvider = filters.WithAuthenticationAndAuthorization
	}
	mgr, err := ctrl.NewManager(cfg, ctrl.Options{
		Scheme:                  scheme,
		Cache:                   cache.Options{ByObject: byObject},
		Metrics:                 metricsOpts,
		HealthProbeBindAddress:  probeAddr,
		LeaderElection:          leaderElect,
		LeaderElectionID:        "distcache-operator.distcache.io",
		LeaderElectionNamespace: leaderElectionNamespace,
		// Hand the lease over at once when stopped (an upgrade's old pod):
		// safe because the process exits as soon as the manager returns.
		LeaderElectionReleaseOnCancel: true,
	})
	if err != nil {
		log.Error(err, "creating manager")
		os.Exit(1)
	}
	if err := controllers.SetupWithManager(mgr, controllers.Options{
		CacheNodeImage: cacheNodeImage, DrainGrace: drainGrace, CARotationGrace: caRotationGrace, Version: version.Version,
		Metrics: ctrlmetrics.Registry,
	}); err != nil {
		log.Error(err, "setting up the controllers")
		os.Exit(1)
	}
	if err := mgr.AddHealthzCheck("healthz", healthz.Ping); err != nil {
		log.Error(err, "adding health check")
		os.Exit(1)
	}
	if err := mgr.AddReadyzCheck("readyz", healthz.Ping); err != nil {
		log.Error(err, "adding ready check")
		os.Exit(1)
	}
	log.Info("starting manager")
	if err := mgr.Start(ctrl.SetupSignalHandler()); err != nil {
		log.Error(err, "manager exited")
		os.Exit(1)
	}
}
