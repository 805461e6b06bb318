package hitratio

import (
	"github.com/dgraph-io/ristretto/v2"
)

// Simulated caches: byte-capacity caches over the trace's chunk numbers, with
// the same accounting as the store's index (payload bytes, evict until the
// new chunk fits). A read that misses inserts the chunk, as the node does
// after fetching it from S3.

type cache interface {
	get(k int32) bool
	put(k int32, size int64)
}

// simulate replays t against c and counts the requests after the warm-up.
func simulate(t *trace, c cache) result {
	var r result
	for i, k := range t.reqs {
		hit := c.get(k)
		if !hit {
			c.put(k, int64(t.chunks[k].size))
		}
		if i >= t.warmup {
			r.add(int64(t.chunks[k].size), hit)
		}
	}
	return r
}

const none = -1

// lists are intrusive doubly linked lists over dense chunk numbers; a chunk
// is in at most one list of a given lists value.
type lists struct {
	prev, next []int32
	size       []int64
}

func newLists(n int) *lists {
	l := &lists{prev: make([]int32, n), next: make([]int32, n), size: make([]int64, n)}
	return l
}

type dlist struct {
	l          *lists
	head, tail int32
	bytes      int64
}

func (l *lists) list() *dlist { return &dlist{l: l, head: none, tail: none} }

func (d *dlist) pushFront(k int32, size int64) {
	d.l.size[k] = size
	d.l.prev[k], d.l.next[k] = none, d.head
	if d.head != none {
		d.l.prev[d.head] = k
	} else {
		d.tail = k
	}
	d.head = k
	d.bytes += size
}

func (d *dlist) remove(k int32) {
	p, n := d.l.prev[k], d.l.next[k]
	if p != none {
		d.l.next[p] = n
	} else {
		d.head = n
	}
	if n != none {
		d.l.prev[n] = p
	} else {
		d.tail = p
	}
	d.bytes -= d.l.size[k]
}

// queue holds chunks up to capacity bytes, new ones at the head, victims
// taken from the tail.
type queue struct {
	capacity int64
	in       []bool
	q        *dlist
}

func newQueue(n int, capacity int64) queue {
	return queue{capacity: capacity, in: make([]bool, n), q: newLists(n).list()}
}

// insert puts chunk k at the head once the victims from the tail make room
// for it, and reports whether it did (not when k alone exceeds the
// capacity). A victim that spare, when not nil, reports true for goes back
// to the head instead.
func (c *queue) insert(k int32, size int64, spare func(v int32) bool) bool {
	if size > c.capacity {
		return false
	}
	for c.q.bytes+size > c.capacity {
		v := c.q.tail
		c.q.remove(v)
		if spare != nil && spare(v) {
			c.q.pushFront(v, c.q.l.size[v])
			continue
		}
		c.in[v] = false
	}
	c.q.pushFront(k, size)
	c.in[k] = true
	return true
}

// lru is plain byte-capacity LRU: the old store's policy.
type lru struct{ queue }

func newLRU(n int, capacity int64) *lru { return &lru{newQueue(n, capacity)} }

func (c *lru) get(k int32) bool {
	if !c.in[k] {
		return false
	}
	size := c.q.l.size[k]
	c.q.remove(k)
	c.q.pushFront(k, size)
	return true
}

func (c *lru) put(k int32, size int64) { c.insert(k, size, nil) }

// clock is FIFO with reinsertion and a 2-bit frequency (CLOCK): a victim
// that was read since it was last passed over goes back to the head with
// its count decremented.
type clock struct {
	queue
	freq []uint8
}

func newClock(n int, capacity int64) *clock {
	return &clock{queue: newQueue(n, capacity), freq: make([]uint8, n)}
}

func (c *clock) get(k int32) bool {
	if !c.in[k] {
		return false
	}
	c.freq[k] = min(c.freq[k]+1, 3)
	return true
}

func (c *clock) put(k int32, size int64) {
	if c.insert(k, size, c.passOver) {
		c.freq[k] = 0
	}
}

// passOver spares victim v while its count lasts.
func (c *clock) passOver(v int32) bool {
	if c.freq[v] > 0 {
		c.freq[v]--
		return true
	}
	return false
}

// slru is segmented LRU: new chunks enter a probationary segment, a hit
// there promotes to the protected segment (protectedShare of the capacity),
// whose overflow goes back to probation; victims come from probation.
type slru struct {
	capacity, protectedCap int64
	where                  []uint8 // 0 absent, 1 probation, 2 protected
	prob, prot             *dlist
}

func newSLRU(n int, capacity int64, protectedShare float64) *slru {
	l := newLists(n)
	return &slru{capacity: capacity, protectedCap: int64(protectedShare * float64(capacity)), where: make([]uint8, n), prob: l.list(), prot: l.list()}
}

func (c *slru) get(k int32) bool {
	size := c.prob.l.size[k]
	switch c.where[k] {
	case 1:
		c.prob.remove(k)
		c.prot.pushFront(k, size)
		c.where[k] = 2
		for c.prot.bytes > c.protectedCap {
			v := c.prot.tail
			c.prot.remove(v)
			c.prob.pushFront(v, c.prob.l.size[v])
			c.where[v] = 1
		}
		return true
	case 2:
		c.prot.remove(k)
		c.prot.pushFront(k, size)
		return true
	}
	return false
}

func (c *slru) put(k int32, size int64) {
	if size > c.capacity {
		return
	}
	for c.prob.bytes+c.prot.bytes+size > c.capacity {
		q := c.prob
		if q.tail == none {
			q = c.prot
		}
		v := q.tail
		q.remove(v)
		c.where[v] = 0
	}
	c.prob.pushFront(k, size)
	c.where[k] = 1
}

// s3fifo is S3-FIFO (Yang et al., SOSP 2023) over bytes: a small FIFO
// (smallShare of the capacity) that new chunks enter, a main FIFO with
// reinsertion (2-bit frequency), and a ghost FIFO remembering chunks evicted
// from the small queue unread (as much as the main queue holds). A chunk
// read promote times while in the small queue moves to main when it
// reaches the small queue's tail; a chunk found in the ghost enters main
// directly.
type s3fifo struct {
	capacity, smallCap int64
	promote            uint8
	where              []uint8 // 0 absent, 1 small, 2 main
	freq               []uint8
	small, main        *dlist
	ghost              *ghost
}

func newS3FIFO(n int, capacity int64, smallShare float64, promote uint8) *s3fifo {
	l := newLists(n)
	small := int64(smallShare * float64(capacity))
	return &s3fifo{
		capacity: capacity, smallCap: small, promote: promote,
		where: make([]uint8, n), freq: make([]uint8, n),
		small: l.list(), main: l.list(), ghost: newGhost(n, capacity-small),
	}
}

func (c *s3fifo) get(k int32) bool {
	if c.where[k] == 0 {
		return false
	}
	c.freq[k] = min(c.freq[k]+1, 3)
	return true
}

func (c *s3fifo) put(k int32, size int64) {
	if size > c.capacity {
		return
	}
	for c.small.bytes+c.main.bytes+size > c.capacity {
		c.evict()
	}
	c.freq[k] = 0
	if c.ghost.take(k) {
		c.main.pushFront(k, size)
		c.where[k] = 2
		return
	}
	c.small.pushFront(k, size)
	c.where[k] = 1
}

func (c *s3fifo) evict() {
	for {
		if c.small.bytes > c.smallCap || c.main.tail == none {
			v := c.small.tail
			size := c.small.l.size[v]
			c.small.remove(v)
			if c.freq[v] >= c.promote {
				c.freq[v] = 0
				c.main.pushFront(v, size)
				c.where[v] = 2
				continue
			}
			c.where[v] = 0
			c.ghost.add(v, size)
			return
		}
		v := c.main.tail
		size := c.main.l.size[v]
		c.main.remove(v)
		if c.freq[v] > 0 {
			c.freq[v]--
			c.main.pushFront(v, size)
			continue
		}
		c.where[v] = 0
		return
	}
}

// ghost is a byte-bounded FIFO of chunk numbers.
type ghost struct {
	capacity int64
	bytes    int64
	seq      int64
	slot     []int64 // seq of k's live slot in q, 0 if k is not remembered
	q        []ghostSlot
}

type ghostSlot struct {
	k    int32
	seq  int64
	size int64
}

func newGhost(n int, capacity int64) *ghost {
	return &ghost{capacity: capacity, slot: make([]int64, n)}
}

func (g *ghost) add(k int32, size int64) {
	g.seq++
	g.slot[k] = g.seq
	g.q = append(g.q, ghostSlot{k, g.seq, size})
	g.bytes += size
	for g.bytes > g.capacity && len(g.q) > 0 {
		s := g.q[0]
		if g.slot[s.k] == s.seq {
			g.slot[s.k] = 0
		}
		g.bytes -= s.size
		g.q = g.q[1:]
	}
}

// take reports whether k is remembered and forgets it (its slot still
// counts until it leaves the queue).
func (g *ghost) take(k int32) bool {
	if g.slot[k] == 0 {
		return false
	}
	g.slot[k] = 0
	return true
}

// tinyLFU is the ristretto library (TinyLFU admission, sampled LFU
// eviction) configured as the store configures its RAM tier.
type tinyLFU struct {
	c *ristretto.Cache[int32, struct{}]
}

func newRistretto(capacity int64, numCounters int64) (*tinyLFU, error) {
	c, err := ristretto.NewCache(&ristretto.Config[int32, struct{}]{
		NumCounters:        numCounters,
		MaxCost:            capacity,
		BufferItems:        64,
		IgnoreInternalCost: true,
	})
	if err != nil {
		return nil, err
	}
	return &tinyLFU{c: c}, nil
}

func (c *tinyLFU) get(k int32) bool {
	_, ok := c.c.Get(k)
	return ok
}

func (c *tinyLFU) put(k int32, size int64) {
	c.c.Set(k, struct{}{}, size)
	c.c.Wait() // apply the set now, so the replay is sequential
}

func (c *tinyLFU) close() { c.c.Close() }
