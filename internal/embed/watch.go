package embed

import (
	"context"
	"fmt"
	"log/slog"
	"sync"

	"github.com/prometheus/client_golang/prometheus"
	"k8s.io/client-go/rest"

	"github.com/distcache/distcache/internal/kubewatch"
	"github.com/distcache/distcache/internal/metrics"
	"github.com/distcache/distcache/internal/ring"
	"github.com/distcache/distcache/internal/tenancy"
)

// With NodeConfig.RingConfigMap and TenantsSecret a node follows its ring
// and tenants through the API server, which delivers a change within about
// a second, where the kubelet refreshes the mounted files only every
// minute or so. The mounted file stays the start value and is watched as
// before until the API server first delivers the object; then the file
// watch stops, so that the kubelet's late copy of an older version can
// never replace a newer one, and the API watch is the only source. A lost
// connection to the API server hands nothing over (client-go re-lists with
// back-off), and a deleted object or an invalid version is logged and
// counted: the configuration in force stays.

// watchRingFile loads the ring file and keeps a new holder current with
// it. stopFile stops watching the file (the ring stays) and waits until
// the file watch has exited.
func watchRingFile(ctx context.Context, path string, log *slog.Logger) (h *ring.Holder, stopFile func(), err error) {
	r, err := ring.LoadFile(path)
	if err != nil {
		return nil, nil, fmt.Errorf("ring: %w", err)
	}
	h = &ring.Holder{}
	h.Store(r)
	fileCtx, cancelFile := context.WithCancel(ctx)
	fileDone := make(chan struct{})
	go func() {
		defer close(fileDone)
		if err := ring.WatchFile(fileCtx, path, h, log); err != nil && fileCtx.Err() == nil {
			log.Error("ring watch stopped", "err", err)
		}
	}()
	return h, func() { cancelFile(); <-fileDone }, nil
}

// followRingEpoch keeps the ring epoch gauge at the epoch of the ring in
// h, and logs each change, until ctx ends.
func followRingEpoch(ctx context.Context, h *ring.Holder, m *metrics.Node, log *slog.Logger) {
	// Take Changed before Load (ring.Holder), so a change landing between
	// the two is not missed until the next one.
	changed := h.Changed()
	if r := h.Load(); r != nil {
		m.RingEpoch.Set(float64(r.Epoch()))
	}
	go func() {
		for {
			select {
			case <-ctx.Done():
				return
			case <-changed:
			}
			changed = h.Changed()
			r := h.Load()
			m.RingEpoch.Set(float64(r.Epoch()))
			log.Info("ring changed", "epoch", r.Epoch(), "members", len(r.Members()))
		}
	}()
}

// watchRingConfigMap feeds the ring document in the ConfigMap ref into h
// with the ring file's rules (valid and a higher epoch, else ignored).
// stopFile stops the ring file's watch.
func watchRingConfigMap(ctx context.Context, kube *rest.Config, ref kubewatch.Ref, h *ring.Holder, stopFile func(),
	reg prometheus.Registerer, log *slog.Logger) error {
	log = log.With("source", "api")
	u := ring.NewUpdater(h, "ring ConfigMap", log.With("configmap", ref.String()))
	return followFromAPI(ctx, kube, kubewatch.ConfigMap, ref, u.Update, func() {
		stopFile()
		log.Info("ring ConfigMap delivered by the API server; the ring file is no longer watched")
	}, reg, "ring", log)
}

// watchTenantsSecret feeds the tenants configuration in the Secret ref into
// tenants, whose file watch it stops at the first delivery.
func watchTenantsSecret(ctx context.Context, kube *rest.Config, ref kubewatch.Ref, tenants *tenancy.Watcher, file string,
	reg prometheus.Registerer, log *slog.Logger) error {
	log = log.With("source", "api")
	return followFromAPI(ctx, kube, kubewatch.Secret, ref, tenants.Update, func() {
		_ = tenants.Close()
		log.Info("tenants Secret delivered by the API server; the tenants file is no longer watched", "path", file)
	}, reg, "tenants", log)
}

// followFromAPI feeds the key of the object ref into apply as the API
// server delivers it. The first delivery calls handOver first (which stops
// the watch of the mounted file that gave the start value); the updates
// are counted as distcache_api_watch_updates_total{object=name}.
func followFromAPI(ctx context.Context, kube *rest.Config, kind kubewatch.Kind, ref kubewatch.Ref, apply func([]byte) error,
	handOver func(), reg prometheus.Registerer, name string, log *slog.Logger) error {
	var once sync.Once
	w, err := kubewatch.Start(ctx, kube, kubewatch.Options{
		Kind: kind, Ref: ref, Logger: log,
		Apply: func(data []byte) error {
			once.Do(handOver)
			return apply(data)
		},
	})
	if err != nil {
		return err
	}
	metrics.RegisterAPIWatch(reg, name, w.Updates)
	return nil
}
