package kubectlplugin

import (
	"context"
	"fmt"
	"slices"
	"strconv"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	cachev1alpha1 "github.com/distcache/distcache/api/v1alpha1"
	"github.com/distcache/distcache/internal/chunk"
	"github.com/distcache/distcache/internal/ring"
)

// DefaultSamples is how many chunk ids `ring` places to measure each
// member's share (--samples): a share measured over n ids is within about
// 1/sqrt(n) (0.4% for 65536) of the share of real chunks.
const DefaultSamples = 1 << 16

// CacheRing is `kubectl distcache ring` of one cache.
type CacheRing struct {
	Namespace string     `json:"namespace"`
	Name      string     `json:"name"`
	Zones     []ZoneRing `json:"zones"`
}

// ZoneRing is one zone's published ring and how it places chunks.
type ZoneRing struct {
	Zone      string       `json:"zone"`
	Error     string       `json:"error,omitempty"`
	Epoch     int64        `json:"epoch"`
	Published *metav1.Time `json:"published,omitempty"`
	Algorithm string       `json:"algorithm,omitempty"`
	Seed      uint64       `json:"seed"`
	Members   []RingMember `json:"members,omitempty"`
	// PreviousEpoch is the epoch of the membership kept for warm handoff
	// (0: none); MovedShare the share of chunks whose owner differs from
	// that epoch's, measured over Samples chunk ids.
	PreviousEpoch int64    `json:"previousEpoch,omitempty"`
	MovedShare    *float64 `json:"movedShare,omitempty"`
	Samples       int      `json:"samples"`
}

// RingMember is a member and its share of the zone's chunks.
type RingMember struct {
	Name    string     `json:"name"`
	Ordinal int        `json:"ordinal"`
	Address string     `json:"address"`
	Weight  int        `json:"weight"`
	State   ring.State `json:"state"`
	// ExpectedShare is its weight over the active members' weights (what
	// weighted rendezvous hashing gives it on average; 0 when draining),
	// SampledShare the share of the sampled chunk ids it owns.
	ExpectedShare float64 `json:"expectedShare"`
	SampledShare  float64 `json:"sampledShare"`
}

// collectRings reads the caches' ring ConfigMaps; zone, if set, keeps that
// zone only.
func collectRings(ctx context.Context, cl client.Client, caches []cachev1alpha1.DistributedCache, zone string, samples int) ([]CacheRing, error) {
	var out []CacheRing
	for i := range caches {
		dc := &caches[i]
		zones := zoneNames(dc)
		if zone != "" {
			if !slices.Contains(zones, zone) {
				return nil, fmt.Errorf("DistributedCache %s/%s has no zone %q (zones: %v)", dc.Namespace, dc.Name, zone, zones)
			}
			zones = []string{zone}
		}
		cm, err := ringConfigMap(ctx, cl, dc)
		if err != nil {
			return nil, err
		}
		cr := CacheRing{Namespace: dc.Namespace, Name: dc.Name}
		for _, z := range zones {
			r, at, err := publishedRing(cm, z)
			if err != nil {
				cr.Zones = append(cr.Zones, ZoneRing{Zone: z, Error: err.Error()})
				continue
			}
			zr := buildZoneRing(r, samples)
			zr.Zone, zr.Published = z, at
			cr.Zones = append(cr.Zones, zr)
		}
		out = append(out, cr)
	}
	return out, nil
}

// buildZoneRing lists r's members with their shares: the expected one from
// the weights and the one measured by placing samples synthetic chunk ids
// with r itself (the placement the nodes and gateways use).
func buildZoneRing(r *ring.Ring, samples int) ZoneRing {
	spec := r.Spec()
	zr := ZoneRing{Zone: spec.Zone, Epoch: spec.Epoch, Algorithm: spec.Hash.Algorithm, Seed: spec.Hash.Seed, Samples: samples}
	total := 0
	for _, m := range spec.Members {
		if m.State == ring.StateActive {
			total += m.Weight
		}
	}
	owned := map[string]int{}
	moved := 0
	for i := range samples {
		id := sampleChunk(i)
		owned[r.Owner(id).Name]++
		if _, ok := r.PreviousOwner(id); ok {
			moved++
		}
	}
	for _, m := range spec.Members {
		rm := RingMember{Name: m.Name, Ordinal: m.Ordinal, Address: m.Address, Weight: m.Weight, State: m.State}
		if m.State == ring.StateActive && total > 0 {
			rm.ExpectedShare = float64(m.Weight) / float64(total)
		}
		if samples > 0 {
			rm.SampledShare = float64(owned[m.Name]) / float64(samples)
		}
		zr.Members = append(zr.Members, rm)
	}
	if spec.Previous != nil {
		zr.PreviousEpoch = spec.Previous.Epoch
		if samples > 0 {
			v := float64(moved) / float64(samples)
			zr.MovedShare = &v
		}
	}
	return zr
}

// sampleChunk is the i-th synthetic chunk id: 4 MiB chunks of 64 MiB
// objects, 16 per object.
func sampleChunk(i int) chunk.ID {
	return chunk.ID{
		Object: chunk.Object{Tenant: "kubectl-distcache", Bucket: "samples", Key: "object-" + strconv.Itoa(i/16)},
		ETag:   `"sample"`, Size: 4 << 20, Index: int64(i % 16),
	}
}
