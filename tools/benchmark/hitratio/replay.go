package hitratio

import (
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"log/slog"
	"strconv"
	"time"

	"github.com/distcache/distcache/internal/chunk"
	"github.com/distcache/distcache/internal/store"
)

// storeRun is one replay of a trace against the real store.
type storeRun struct {
	result
	meanLive   float64 // mean live payload bytes over the counted requests (sampled)
	liveTarget int64   // LiveFraction * DiskBytes
	rejected   uint64  // puts refused with ErrNoSpace
	evictions  uint64
	took       time.Duration
}

// replayStore replays t against a real store (RAM tier + badger in dir) the
// way a cache node serves reads: GetChunk, and on a miss PutChunk of the
// bytes "fetched from S3". Every hit is checked byte for byte.
func replayStore(ctx context.Context, dir string, t *trace, chunkSize, diskBytes, ramBytes int64, policy store.Eviction) (storeRun, error) {
	st, err := store.Open(store.Options{
		Dir:       dir,
		DiskBytes: diskBytes,
		RAMBytes:  ramBytes,
		Eviction:  policy,
		Logger:    slog.New(slog.DiscardHandler),
	})
	if err != nil {
		return storeRun{}, err
	}
	defer st.Close()
	run := storeRun{liveTarget: int64(store.DefaultLiveFraction * float64(diskBytes))}
	start := time.Now()
	want := make([]byte, chunkSize)
	var liveSum float64
	var liveN int
	for i, k := range t.reqs {
		if i%1024 == 0 {
			if err := ctx.Err(); err != nil {
				return run, err
			}
		}
		c := t.chunks[k]
		id := chunkID(c, chunkSize)
		p := fillPayload(want[:c.size], c)
		got, tier, err := st.GetChunk(id)
		hit := err == nil
		switch {
		case hit:
			if !bytes.Equal(got, p) {
				return run, fmt.Errorf("request %d: chunk %v: %d bytes read differ from the %d stored", i, id, len(got), len(p))
			}
		case errors.Is(err, store.ErrNotFound):
			if err := st.PutChunk(id, p); err != nil && !errors.Is(err, store.ErrNoSpace) {
				return run, fmt.Errorf("request %d: put %v: %w", i, id, err)
			}
		default:
			return run, fmt.Errorf("request %d: get %v: %w", i, id, err)
		}
		if i < t.warmup {
			continue
		}
		run.add(int64(c.size), hit)
		if hit && tier == store.TierRAM {
			run.ramHits++
			run.ramHitBytes += int64(c.size)
		}
		if i%64 == 0 {
			liveSum += float64(st.Stats().DiskBytes)
			liveN++
		}
	}
	run.took = time.Since(start)
	s := st.Stats()
	run.rejected, run.evictions = s.Rejected, s.Evictions
	if s.ChecksumFailures != 0 || s.Errors != 0 {
		return run, fmt.Errorf("store reported %d checksum failures and %d errors", s.ChecksumFailures, s.Errors)
	}
	if liveN > 0 {
		run.meanLive = liveSum / float64(liveN)
	}
	return run, st.Close()
}

func chunkID(c chunkRef, chunkSize int64) chunk.ID {
	return chunk.ID{
		Object: chunk.Object{Tenant: "bench", Bucket: "table", Key: "part-" + strconv.Itoa(int(c.obj)) + ".bin"},
		ETag:   "e1",
		Size:   chunkSize,
		Index:  int64(c.index),
	}
}

// payloadPool is random bytes that chunk payloads are cut from.
var payloadPool = func() []byte {
	b := make([]byte, 1<<20+4096)
	x := uint64(0x9E3779B97F4A7C15)
	for i := 0; i+8 <= len(b); i += 8 {
		x ^= x << 13
		x ^= x >> 7
		x ^= x << 17
		binary.LittleEndian.PutUint64(b[i:], x)
	}
	return b
}()

// fillPayload writes the chunk's deterministic bytes into b (len(b) is the
// chunk's size, at most 1 MiB): a window of the pool chosen by the chunk,
// stamped with the chunk's object and index, so chunks never share bytes
// at the same offsets.
func fillPayload(b []byte, c chunkRef) []byte {
	off := (int(c.obj)*7919 + int(c.index)*104729) % 4096
	copy(b, payloadPool[off:off+len(b)])
	if len(b) >= 8 {
		binary.LittleEndian.PutUint32(b, uint32(c.obj))
		binary.LittleEndian.PutUint32(b[4:], uint32(c.index))
	}
	return b
}
