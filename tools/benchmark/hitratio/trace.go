package hitratio

import (
	"math"
	"math/rand/v2"
	"sort"
)

// A trace is a sequence of chunk reads. Chunks belong to objects of varied
// sizes cut into fixed-size chunks, so the last chunk of most objects is
// partial and the byte hit ratio differs from the chunk hit ratio.

// chunkRef is one chunk of the trace's universe.
type chunkRef struct {
	obj   int32 // object number
	index int32 // chunk index within the object
	size  int32 // payload bytes (chunkSize, or less for an object's last chunk)
}

// trace is a replayable read sequence over a universe of chunks.
type trace struct {
	name      string
	chunks    []chunkRef // the universe; reqs index into it
	reqs      []int32
	warmup    int   // the first warmup requests are not counted
	workBytes int64 // bytes of the chunks the trace reads at least once
	hotBytes  int64 // bytes of the Zipf-distributed part of the universe
}

// objectSizes draws object sizes until their sum reaches total: log-uniform
// between chunkSize/4 and 16*chunkSize, so objects span one to sixteen chunks
// and most have a partial last chunk.
func objectSizes(rng *rand.Rand, chunkSize, total int64) []int64 {
	lo, hi := math.Log(float64(chunkSize)/4), math.Log(16*float64(chunkSize))
	var sizes []int64
	for sum := int64(0); sum < total; {
		n := int64(math.Exp(lo + rng.Float64()*(hi-lo)))
		sizes = append(sizes, n)
		sum += n
	}
	return sizes
}

// appendObjects adds the chunks of objects of the given sizes to the
// universe, numbering the objects from firstObj, and returns the new chunks'
// positions.
func appendObjects(u []chunkRef, firstObj int, sizes []int64, chunkSize int64) ([]chunkRef, []int32) {
	var pos []int32
	for i, n := range sizes {
		for idx := int64(0); idx*chunkSize < n; idx++ {
			pos = append(pos, int32(len(u)))
			u = append(u, chunkRef{obj: int32(firstObj + i), index: int32(idx), size: int32(min(chunkSize, n-idx*chunkSize))})
		}
	}
	return u, pos
}

// zipf samples ranks 0..n-1 with P(k) proportional to 1/(k+1)^s; unlike
// math/rand's Zipf it accepts s <= 1.
type zipf struct {
	cdf []float64
	rng *rand.Rand
}

func newZipf(rng *rand.Rand, n int, s float64) *zipf {
	cdf := make([]float64, n)
	var sum float64
	for k := range n {
		sum += 1 / math.Pow(float64(k+1), s)
		cdf[k] = sum
	}
	for k := range cdf {
		cdf[k] /= sum
	}
	return &zipf{cdf: cdf, rng: rng}
}

func (z *zipf) next() int {
	return min(sort.SearchFloat64s(z.cdf, z.rng.Float64()), len(z.cdf)-1)
}

// traceSpec describes a trace to generate.
type traceSpec struct {
	name      string
	s         float64 // Zipf exponent
	chunkSize int64
	hotBytes  int64 // bytes of the Zipf-distributed objects
	requests  int   // Zipf requests (scans come on top)
	warmup    float64
	// Scans: after every scanEvery Zipf requests, one scan reads scanBytes
	// of objects never read before, every chunk once and in order (a full
	// table scan of cold data). 0 for none.
	scanEvery int
	scanBytes int64
	seed      uint64
}

// genTrace builds the trace: Zipf requests over the chunks of the hot
// objects, popularity ranks assigned to chunks at random, interleaved with
// the scans.
func genTrace(sp traceSpec) *trace {
	rng := rand.New(rand.NewPCG(sp.seed, 0x6869747261746f))
	u, hot := appendObjects(nil, 0, objectSizes(rng, sp.chunkSize, sp.hotBytes), sp.chunkSize)
	rng.Shuffle(len(hot), func(i, j int) { hot[i], hot[j] = hot[j], hot[i] })
	nextObj := int(u[len(u)-1].obj) + 1
	z := newZipf(rng, len(hot), sp.s)
	t := &trace{name: sp.name}
	seen := make([]bool, len(u))
	for i := range sp.requests {
		if sp.scanEvery > 0 && i > 0 && i%sp.scanEvery == 0 {
			sizes := objectSizes(rng, sp.chunkSize, sp.scanBytes)
			var scan []int32
			u, scan = appendObjects(u, nextObj, sizes, sp.chunkSize)
			nextObj += len(sizes)
			t.reqs = append(t.reqs, scan...)
		}
		t.reqs = append(t.reqs, hot[z.next()])
	}
	seen = append(seen, make([]bool, len(u)-len(seen))...)
	for _, c := range t.reqs {
		if !seen[c] {
			seen[c] = true
			t.workBytes += int64(u[c].size)
		}
	}
	for _, c := range hot {
		t.hotBytes += int64(u[c].size)
	}
	t.chunks = u
	t.warmup = int(sp.warmup * float64(len(t.reqs)))
	return t
}

// result is a hit count of one replay, over the counted requests.
type result struct {
	reqs, hits           int64
	bytes, hitBytes      int64
	ramHits, ramHitBytes int64 // real store only: hits served by the RAM tier
}

func (r *result) add(size int64, hit bool) {
	r.reqs++
	r.bytes += size
	if hit {
		r.hits++
		r.hitBytes += size
	}
}

// byteRatio is the byte hit ratio; chunkRatio the chunk (object) hit ratio.
func (r result) byteRatio() float64  { return ratio(r.hitBytes, r.bytes) }
func (r result) chunkRatio() float64 { return ratio(r.hits, r.reqs) }
func (r result) ramByteRatio() float64 {
	return ratio(r.ramHitBytes, r.bytes)
}

func ratio(a, b int64) float64 {
	if b == 0 {
		return 0
	}
	return float64(a) / float64(b)
}
