// Package kubectlplugin is `kubectl distcache` (cmd/kubectl-distcache): it
// reads DistributedCaches, their ring ConfigMaps, their node pods and the
// nodes' metrics, and CacheTenants with their certificate Secrets, and
// prints what a platform engineer asks first: is the cache ready, which
// nodes are in the ring, who owns what share, how well it hits, how full
// it is, when a tenant's certificate expires and where its endpoint is.
//
// Invariants:
//   - Read-only: nothing is ever written to the cluster.
//   - Everything goes through the API server with the user's kubeconfig and
//     kubectl's flags (genericclioptions): a node's /metrics is read through
//     the pod proxy (pods/proxy get on the cache's namespace), so no
//     port-forward and no route to the pods is needed.
//   - What cannot be read (a node's metrics, a Secret the user may not get)
//     is reported beside the rest, never fatal to the report.
//   - Each command reads (collect*) and then computes (build*, pure); the
//     computations are table-tested and the reads run against a real
//     kube-apiserver (envtest) and the local cluster (e2e/cluster).
package kubectlplugin

import (
	"context"
	"fmt"
	"strings"

	"github.com/prometheus/common/version"
	"github.com/spf13/cobra"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/cli-runtime/pkg/genericclioptions"
	"k8s.io/cli-runtime/pkg/genericiooptions"
	"k8s.io/client-go/kubernetes"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"sigs.k8s.io/controller-runtime/pkg/client"

	cachev1alpha1 "github.com/distcache/distcache/api/v1alpha1"
)

// Option changes how NewCommand's commands read the cluster.
type Option func(*options)

// WithScraper reads the nodes' metrics with s instead of through the API
// server's pod proxy.
func WithScraper(s Scraper) Option { return func(o *options) { o.scraper = s } }

type options struct {
	flags *genericclioptions.ConfigFlags
	genericiooptions.IOStreams
	output        string
	allNamespaces bool
	scraper       Scraper
}

// NewCommand is the `kubectl distcache` command tree.
func NewCommand(streams genericiooptions.IOStreams, opts ...Option) *cobra.Command {
	o := &options{flags: genericclioptions.NewConfigFlags(true), IOStreams: streams}
	for _, opt := range opts {
		opt(o)
	}
	root := &cobra.Command{
		Use:   "kubectl-distcache",
		Short: "Inspect distcache caches, rings and tenants",
		Long: "kubectl distcache shows the state of distcache's DistributedCaches and CacheTenants: " +
			"zones, nodes, ring membership and shares, hit ratios, store use, tenants' quotas, " +
			"certificates and endpoints. It only reads, through the API server.",
		SilenceUsage: true,
		Annotations: map[string]string{
			cobra.CommandDisplayNameAnnotation: "kubectl distcache",
		},
	}
	root.SetIn(streams.In)
	root.SetOut(streams.Out)
	root.SetErr(streams.ErrOut)
	o.flags.AddFlags(root.PersistentFlags())
	root.PersistentFlags().StringVarP(&o.output, "output", "o", "", "Output format: json or yaml (default: tables)")
	root.AddCommand(o.statusCommand(), o.ringCommand(), o.tenantsCommand(), versionCommand(streams))
	return root
}

func (o *options) statusCommand() *cobra.Command {
	cmd := &cobra.Command{
		Use:   "status [CACHE...]",
		Short: "Show caches: conditions, zones, nodes, ring epochs, hit ratio and store use",
		Long: "status shows each DistributedCache (all of the namespace's without a name): its conditions and operator version, " +
			"and per zone its ring and nodes, with each node's ring state, readiness, ring epoch, hit ratio, " +
			"bytes read by tier (RAM, disk, S3) and RAM and disk use, read from the nodes' metrics through the API server. " +
			"Counters are since each node started.",
		Example: "  kubectl distcache status -n distcache\n  kubectl distcache status demo -n distcache -o json",
		RunE: o.run(nil, func(ctx context.Context, cl client.Client, scr Scraper, args []string) error {
			caches, err := o.caches(ctx, cl, args)
			if err != nil || len(caches) == 0 {
				return err
			}
			st, err := collectStatus(ctx, cl, scr, caches)
			if err != nil {
				return err
			}
			return o.print(StatusReport{Caches: st}, func() error { return printStatus(o.Out, st) })
		}),
	}
	cmd.Flags().BoolVarP(&o.allNamespaces, "all-namespaces", "A", false, "Every namespace's caches")
	return cmd
}

func (o *options) ringCommand() *cobra.Command {
	var (
		zone    string
		samples int
	)
	cmd := &cobra.Command{
		Use:   "ring [CACHE...]",
		Short: "Show each zone's published ring: members, weights, states and their shares of the chunks",
		Long: "ring shows the ring documents the operator publishes in the cache's ring ConfigMap: epoch, hashing, " +
			"and each member's weight, state (active or draining) and share of the chunks, expected from the weights and " +
			"measured by placing --samples chunk ids with the ring itself; and how many chunks changed owner since the previous epoch.",
		Example: "  kubectl distcache ring demo -n distcache --zone zone-a",
		RunE: o.run(func() error {
			if samples < 0 || samples > 1<<24 {
				return fmt.Errorf("--samples must be between 0 and %d", 1<<24)
			}
			return nil
		}, func(ctx context.Context, cl client.Client, _ Scraper, args []string) error {
			caches, err := o.caches(ctx, cl, args)
			if err != nil || len(caches) == 0 {
				return err
			}
			rings, err := collectRings(ctx, cl, caches, zone, samples)
			if err != nil {
				return err
			}
			return o.print(RingReport{Caches: rings}, func() error { return printRings(o.Out, rings) })
		}),
	}
	cmd.Flags().BoolVarP(&o.allNamespaces, "all-namespaces", "A", false, "Every namespace's caches")
	cmd.Flags().StringVar(&zone, "zone", "", "Only this zone")
	cmd.Flags().IntVar(&samples, "samples", DefaultSamples, "Chunk ids to place to measure the shares (0: expected shares only)")
	return cmd
}

func (o *options) tenantsCommand() *cobra.Command {
	var cache string
	cmd := &cobra.Command{
		Use:   "tenants [TENANT...]",
		Short: "Show CacheTenants: cache, buckets, quota use, certificate expiry and gateway endpoint",
		Long: "tenants shows each CacheTenant (all of the namespace's without a name): its cache and buckets, " +
			"its quota and the most any node of the cache holds of its data (from the nodes' metrics), " +
			"when its client certificate expires (read from the certificate Secret) and its gateways' S3 endpoint.",
		Example: "  kubectl distcache tenants -A\n  kubectl distcache tenants -n analytics --cache distcache/demo -o yaml",
		RunE: o.run(nil, func(ctx context.Context, cl client.Client, scr Scraper, args []string) error {
			tenants, err := o.tenants(ctx, cl, args, cache)
			if err != nil || len(tenants) == 0 {
				return err
			}
			ts := collectTenants(ctx, cl, scr, tenants)
			return o.print(TenantsReport{Tenants: ts}, func() error { return printTenants(o.Out, ts) })
		}),
	}
	cmd.Flags().BoolVarP(&o.allNamespaces, "all-namespaces", "A", false, "Every namespace's tenants")
	cmd.Flags().StringVar(&cache, "cache", "", "Only the tenants of this cache (NAME or NAMESPACE/NAME)")
	return cmd
}

func versionCommand(streams genericiooptions.IOStreams) *cobra.Command {
	return &cobra.Command{
		Use:   "version",
		Short: "Print the plugin's version",
		Args:  cobra.NoArgs,
		Run: func(*cobra.Command, []string) {
			fmt.Fprintln(streams.Out, version.Print("kubectl-distcache"))
		},
	}
}

// run is a command's RunE: it checks the flags (--output, then check's own
// when there is one), makes the clients and hands them to report with the
// command's arguments.
func (o *options) run(check func() error, report func(ctx context.Context, cl client.Client, scr Scraper, args []string) error) func(*cobra.Command, []string) error {
	return func(cmd *cobra.Command, args []string) error {
		if err := o.validate(); err != nil {
			return err
		}
		if check != nil {
			if err := check(); err != nil {
				return err
			}
		}
		cl, scr, err := o.clients()
		if err != nil {
			return err
		}
		return report(cmd.Context(), cl, scr, args)
	}
}

func (o *options) validate() error {
	switch o.output {
	case "", "json", "yaml":
		return nil
	}
	return fmt.Errorf("--output %q: must be json or yaml (or empty for tables)", o.output)
}

// clients are the API client and the metrics scraper of the kubeconfig the
// flags select.
func (o *options) clients() (client.Client, Scraper, error) {
	cfg, err := o.flags.ToRESTConfig()
	if err != nil {
		return nil, nil, err
	}
	scheme := runtime.NewScheme()
	if err := clientgoscheme.AddToScheme(scheme); err != nil {
		return nil, nil, err
	}
	if err := cachev1alpha1.AddToScheme(scheme); err != nil {
		return nil, nil, err
	}
	cl, err := client.New(cfg, client.Options{Scheme: scheme})
	if err != nil {
		return nil, nil, err
	}
	if o.scraper != nil {
		return cl, o.scraper, nil
	}
	kube, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		return nil, nil, err
	}
	return cl, proxyScraper{kube: kube}, nil
}

// namespace is -n, else the kubeconfig context's namespace, else default.
func (o *options) namespace() (string, error) {
	ns, _, err := o.flags.ToRawKubeConfigLoader().Namespace()
	return ns, err
}

// caches are the named caches of the namespace, or all of them (of every
// namespace with -A). None found is not an error: it is said on stderr.
func (o *options) caches(ctx context.Context, cl client.Client, names []string) ([]cachev1alpha1.DistributedCache, error) {
	ns, err := o.namespace()
	if err != nil {
		return nil, err
	}
	if len(names) > 0 {
		if o.allNamespaces {
			return nil, fmt.Errorf("a cache name cannot be given with --all-namespaces")
		}
		out := make([]cachev1alpha1.DistributedCache, len(names))
		for i, name := range names {
			if err := cl.Get(ctx, client.ObjectKey{Namespace: ns, Name: name}, &out[i]); err != nil {
				return nil, fmt.Errorf("DistributedCache %s/%s: %w", ns, name, err)
			}
		}
		return out, nil
	}
	var list cachev1alpha1.DistributedCacheList
	if err := cl.List(ctx, &list, o.listIn(ns)...); err != nil {
		return nil, fmt.Errorf("list DistributedCaches: %w", err)
	}
	if len(list.Items) == 0 {
		o.nothingFound("DistributedCaches", ns)
	}
	return list.Items, nil
}

// listIn is the List options of a listing of namespace ns, or of every
// namespace with -A.
func (o *options) listIn(ns string) []client.ListOption {
	if o.allNamespaces {
		return nil
	}
	return []client.ListOption{client.InNamespace(ns)}
}

// tenants are the named tenants of the namespace, or all of them (of every
// namespace with -A), of the cache given as NAME or NAMESPACE/NAME if any.
func (o *options) tenants(ctx context.Context, cl client.Client, names []string, cache string) ([]cachev1alpha1.CacheTenant, error) {
	ns, err := o.namespace()
	if err != nil {
		return nil, err
	}
	var tenants []cachev1alpha1.CacheTenant
	if len(names) > 0 {
		if o.allNamespaces {
			return nil, fmt.Errorf("a tenant name cannot be given with --all-namespaces")
		}
		tenants = make([]cachev1alpha1.CacheTenant, len(names))
		for i, name := range names {
			if err := cl.Get(ctx, client.ObjectKey{Namespace: ns, Name: name}, &tenants[i]); err != nil {
				return nil, fmt.Errorf("CacheTenant %s/%s: %w", ns, name, err)
			}
		}
	} else {
		var list cachev1alpha1.CacheTenantList
		if err := cl.List(ctx, &list, o.listIn(ns)...); err != nil {
			return nil, fmt.Errorf("list CacheTenants: %w", err)
		}
		tenants = list.Items
	}
	if cache != "" {
		kept := tenants[:0]
		for _, t := range tenants {
			if cacheMatches(t.Spec.CacheRef, cache) {
				kept = append(kept, t)
			}
		}
		tenants = kept
	}
	if len(tenants) == 0 && len(names) == 0 {
		o.nothingFound("CacheTenants", ns)
	}
	return tenants, nil
}

// cacheMatches says whether ref is the cache given as NAME or
// NAMESPACE/NAME.
func cacheMatches(ref cachev1alpha1.CacheReference, cache string) bool {
	if ns, name, ok := strings.Cut(cache, "/"); ok {
		return ref.Namespace == ns && ref.Name == name
	}
	return ref.Name == cache
}

// nothingFound says, as kubectl get does, that a listing was empty; with
// -o json or yaml the empty report is printed too.
func (o *options) nothingFound(kind, ns string) {
	if o.allNamespaces {
		fmt.Fprintf(o.ErrOut, "No %s found.\n", kind)
	} else {
		fmt.Fprintf(o.ErrOut, "No %s found in namespace %s.\n", kind, ns)
	}
	if o.output != "" {
		var empty any = StatusReport{Caches: []CacheStatus{}}
		if kind == "CacheTenants" {
			empty = TenantsReport{Tenants: []TenantStatus{}}
		}
		_ = o.print(empty, nil)
	}
}
