package embed

import (
	"context"
	"errors"
	"fmt"
	"log/slog"

	"github.com/prometheus/client_golang/prometheus"
	"k8s.io/client-go/rest"

	"github.com/distcache/distcache/internal/filewatch"
	"github.com/distcache/distcache/internal/kubewatch"
	"github.com/distcache/distcache/internal/node"
	"github.com/distcache/distcache/internal/ring"
)

// With CrossZone OnMiss (--cross-zone=OnMiss) a node asks, on a miss, the
// chunk's owner in each other zone of the cache before S3, so it needs
// those zones' rings. In Kubernetes they are the other keys (<zone>.json)
// of the ring ConfigMap whose own key RingConfigMap (--ring-configmap)
// names: the node follows the key of each zone in Zones (--zones) through
// the API server. Nodes run by hand give the documents as files,
// ZoneRingFiles (--zone-ring-files zone=path), which are watched like the
// ring file (and are the start values when the API server follows the
// same zones). A document is put in force only if it
// names the zone it stands for; a zone whose ring is missing, invalid or
// unreachable is skipped, never fatal.

// zoneRingSource is where one other zone's ring comes from: a file, a key
// of the ring ConfigMap, or both (the file until the API server delivers).
type zoneRingSource struct {
	zone string
	file string
	ref  *kubewatch.Ref
}

// zoneRingKey is the ring ConfigMap's key holding zone's ring document
// (the operator's layout).
func zoneRingKey(zone string) string { return zone + ".json" }

// ZoneRingFile is the ring document of another zone, given as a file
// (--zone-ring-files zone=path).
type ZoneRingFile struct{ Zone, Path string }

// zoneRingSources lists where the rings of the zones of --zones and
// --zone-ring-files (files, in order) come from, leaving out the node's
// own zone: ownZone (the zone its ring names), or the zone whose key
// ringRef names. Without ringRef (no --ring-configmap) every other zone
// needs a file.
func zoneRingSources(zones []string, files []ZoneRingFile, ringRef kubewatch.Ref, ownZone string) ([]zoneRingSource, error) {
	var out []zoneRingSource
	seen := map[string]bool{}
	fileOf := map[string]string{}
	all := append([]string(nil), zones...)
	for _, f := range files {
		fileOf[f.Zone] = f.Path
		all = append(all, f.Zone)
	}
	for _, zone := range all {
		if seen[zone] || zone == ownZone || ringRef.Name != "" && zoneRingKey(zone) == ringRef.Key {
			continue
		}
		seen[zone] = true
		src := zoneRingSource{zone: zone, file: fileOf[zone]}
		if ringRef.Name != "" {
			ref, err := kubewatch.ParseRef(ringRef.Namespace+"/"+ringRef.Name+":"+zoneRingKey(zone), "")
			if err != nil {
				return nil, fmt.Errorf("zone %q: %w", zone, err)
			}
			src.ref = &ref
		}
		if src.file == "" && src.ref == nil {
			return nil, fmt.Errorf("zone %q has no ring: give --zone-ring-files %s=PATH, or --ring-configmap to follow its key %s",
				zone, zone, zoneRingKey(zone))
		}
		out = append(out, src)
	}
	return out, nil
}

// errWrongZone is a ring document that names another zone than the one it
// was given for.
var errWrongZone = errors.New("ring document of another zone")

// updateError is an error of ring.Updater, which logs its own.
type updateError struct{ error }

func (e updateError) Unwrap() error { return e.error }

// followZoneRings keeps zones current with the other zones' rings.
func followZoneRings(ctx context.Context, kube *rest.Config, srcs []zoneRingSource, zones *node.ZoneRings,
	reg prometheus.Registerer, log *slog.Logger) error {
	for _, src := range srcs {
		if err := followZoneRing(ctx, kube, src, zones.Holder(src.zone), reg, log.With("zone", src.zone)); err != nil {
			return err
		}
	}
	return nil
}

// followZoneRing feeds one zone's ring into h from its file and/or its key
// of the ring ConfigMap; the file stops being watched when the API server
// first delivers the key, as for the node's own ring.
func followZoneRing(ctx context.Context, kube *rest.Config, src zoneRingSource, h *ring.Holder,
	reg prometheus.Registerer, log *slog.Logger) error {
	u := ring.NewUpdater(h, "ring of zone "+src.zone, log)
	apply := func(data []byte) error {
		r, err := ring.Parse(data)
		if err == nil && r.Zone() != src.zone {
			return fmt.Errorf("%w: it names zone %q, not %q; ignored", errWrongZone, r.Zone(), src.zone)
		}
		if err := u.Update(data); err != nil {
			return updateError{err}
		}
		return nil
	}
	stopFile := func() {}
	if src.file != "" {
		report := func(err error) {
			if !errors.As(err, new(updateError)) {
				log.Warn("ring file of another zone not applied; keeping the ring in force", "path", src.file, "err", err)
			}
		}
		fw, err := filewatch.New(src.file, filewatch.Options{Apply: apply, OnError: report, Logger: log})
		if err != nil {
			return fmt.Errorf("--zone-ring-files %s: %w", src.zone, err)
		}
		if err := fw.Load(); err != nil {
			report(err) // a zone's ring is never fatal: it may come later
		}
		fileCtx, cancel := context.WithCancel(ctx)
		done := make(chan struct{})
		go func() { defer close(done); fw.Run(fileCtx) }()
		stopFile = func() { cancel(); <-done }
	}
	if src.ref == nil {
		return nil
	}
	apiLog := log.With("source", "api", "configmap", src.ref.String())
	// kubewatch logs a refusal of apply.
	return followFromAPI(ctx, kube, kubewatch.ConfigMap, *src.ref, apply, func() {
		stopFile()
		if src.file != "" {
			apiLog.Info("ring of another zone delivered by the API server; its file is no longer watched")
		}
	}, reg, "ring-"+src.zone, apiLog)
}
