package node

import "github.com/distcache/distcache/internal/store"

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
}

func newCollector(chunkSize, limit, expect int64) *collector {
	return &collector{size: chunkSize, limit: limit, expect: expect}
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
			c.cur, c.n, c.open = store.NewValue(int(want)), 0, true
		}
		dst := c.cur.Payload()
		if c.n == len(dst) { // the body is longer than expected: a chunk's worth
			grown := store.NewValue(int(c.size))
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
