package node

import "github.com/distcache/distcache/internal/store"

// chunkBufs recycles the whole-chunk buffers of write-throughs that no
// store keeps: those stored on disk only (storeChunk), those handed to
// their owners (once the owner has them and the transport no longer reads
// them) and those of uncached writes. A fresh buffer costs a page fault
// per page written: in B5 runs of 16 MiB PUTs the collector's copy into
// fresh chunks was 3-17% of the process's CPU, where a reused buffer costs
// only the copy. It keeps at most keep buffers; the rest are left to the
// garbage collector.
type chunkBufs struct {
	size int64
	free chan store.Value
}

// keptChunkBufs bounds the buffers a node keeps for reuse (32 MiB of
// 4 MiB chunks): enough for the chunks of a few writes in flight.
const keptChunkBufs = 8

func newChunkBufs(size int64, keep int) *chunkBufs {
	return &chunkBufs{size: size, free: make(chan store.Value, max(keep, 0))}
}

// get returns a Value of one chunk's payload, its bytes not cleared.
func (b *chunkBufs) get() store.Value {
	select {
	case v := <-b.free:
		return v
	default:
		return store.NewValue(int(b.size))
	}
}

// put takes back v, which nothing may read or write from now on; values
// of another size are left alone.
func (b *chunkBufs) put(v store.Value) {
	if b == nil || int64(len(v.Payload())) != b.size {
		return
	}
	select {
	case b.free <- v:
	default:
	}
}

// collector cuts a write-through body into chunks as it streams to S3, keeping
// at most limit bytes; chunks past the limit are dropped and fill on read.
// Each chunk is collected into a store.Value of the size it ends up with
// when the body's length is known (expect >= 0): a 10 KiB body takes 10 KiB,
// not a chunk's worth of zeroed memory, and the store keeps the values
// without copying them.
type collector struct {
	size   int64
	limit  int64
	expect int64 // the body's length; -1 when unknown
	total  int64
	full   []store.Value
	cur    store.Value
	n      int // bytes of cur's payload filled
	open   bool
	capped bool
	bufs   *chunkBufs // whole chunks come from there; nil: fresh ones
}

func newCollector(chunkSize, limit, expect int64, bufs *chunkBufs) *collector {
	return &collector{size: chunkSize, limit: limit, expect: expect, bufs: bufs}
}

// newValue is a Value for n payload bytes, from bufs when n is a chunk.
func (c *collector) newValue(n int64) store.Value {
	if n == c.size && c.bufs != nil {
		return c.bufs.get()
	}
	return store.NewValue(int(n))
}

func (c *collector) Write(p []byte) (int, error) {
	n := len(p)
	for len(p) > 0 && !c.capped {
		if !c.open {
			if int64(len(c.full)+1)*c.size > c.limit {
				c.capped = true
				break
			}
			want := c.size
			if left := c.expect - c.total; c.expect >= 0 && left > 0 && left < want {
				want = left
			}
			c.cur, c.n, c.open = c.newValue(want), 0, true
		}
		dst := c.cur.Payload()
		if c.n == len(dst) { // the body is longer than expected: a chunk's worth
			grown := c.newValue(c.size)
			copy(grown.Payload(), dst)
			c.cur, dst = grown, grown.Payload()
		}
		k := copy(dst[c.n:], p)
		c.n += k
		c.total += int64(k)
		p = p[k:]
		if int64(c.n) == c.size {
			c.full = append(c.full, c.cur)
			c.open = false
		}
	}
	c.total += int64(len(p))
	return n, nil
}

// chunks returns the leading chunks collected, in order. The final partial
// chunk is included only when nothing was dropped.
func (c *collector) chunks() []store.Value {
	if c.capped || !c.open || c.n == 0 {
		return c.full
	}
	last := c.cur
	if c.n < len(last.Payload()) { // shorter than expected
		last = store.NewValue(c.n)
		copy(last.Payload(), c.cur.Payload()[:c.n])
	}
	return append(c.full, last)
}

// recycle gives every whole chunk collected back to bufs: for a write none
// of whose chunks is cached, once nothing writes into them any more.
func (c *collector) recycle() {
	for _, v := range c.full {
		c.bufs.put(v)
	}
	if c.open {
		c.bufs.put(c.cur)
	}
	c.full, c.open = nil, false
}
