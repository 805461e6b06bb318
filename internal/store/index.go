package store

import "hash/maphash"

// The index is the store's own accounting of every chunk on disk: key ->
// payload size, tenant and position in the eviction queues. It is what
// eviction, quotas, the disk bound and Stats work from; badger is only asked
// for bytes. It is rebuilt at Open from a key-only iteration. Not safe for
// concurrent use: the Store guards it with Store.mu.
//
// Eviction (EvictS3FIFO, the default) is S3-FIFO (Yang et al., "FIFO queues
// are all you need for cache eviction", SOSP 2023), over payload bytes:
//
//   - a new chunk enters the small queue (a FIFO of about a tenth of the
//     capacity), unless the ghost remembers it: then it enters main;
//   - a read only bumps the chunk's 2-bit frequency; nothing moves, so a hit
//     costs no list surgery;
//   - while the small queue holds more than its share, victims come from its
//     tail: a chunk read while it was there moves to main (frequency reset),
//     one that was not is evicted and its key hash goes to the ghost;
//   - otherwise victims come from main's tail: a chunk read since it was
//     last passed goes back to the head with its frequency decremented
//     (CLOCK), one that was not is evicted.
//
// A scan (every chunk read once) only ever cycles through the small queue,
// so it does not flush the chunks that are read repeatedly, which plain LRU
// does (TestScanKeepsHotSet; docs/benchmarks.md, B4, measures both). Every
// put is stored (no admission filter): a write-through chunk enters the small
// queue like a fetched one and stays if it is read before it leaves it.
//
// EvictLRU is the previous policy, plain LRU, kept for comparison.
//
// Quotas evict within a tenant with CLOCK over the tenant's chunks in
// insertion order (a second 2-bit count, so the global policy and the
// quota do not consume each other's reads); under EvictLRU it is the
// tenant's LRU.
//
// After a restart the chunks are indexed in badger version order (write
// order) into the main queue with no reads recorded: eviction starts with
// the oldest.

// Eviction names the disk tier's eviction policy.
type Eviction string

const (
	EvictS3FIFO Eviction = "s3fifo" // the default: scan-resistant
	EvictLRU    Eviction = "lru"    // plain least recently used
)

const (
	linkQueue  = iota // the eviction queue the entry is in (small or main)
	linkTenant        // one tenant's chunks
	linkObject        // one object's chunks (any order), for DeleteObject
	numLinks
)

const (
	queueSmall = iota
	queueMain
)

const (
	maxFreq        = 3    // 2-bit frequency counters
	smallShare     = 0.1  // of the capacity, for the small queue
	minGhostChunks = 1024 // the ghost may remember at least this many chunks
)

type links struct{ prev, next *entry }

type entry struct {
	key   string // badger key
	obj   string // chunk prefix of the object (a prefix of key, shares its memory)
	t     *tenantUsage
	size  int64  // payload bytes
	gen   uint64 // incarnation, so a slow reader never acts on a newer entry
	parts int    // part entries on disk besides the chunk key's (value.go)
	queue uint8  // queueSmall or queueMain
	freq  uint8  // reads not yet consumed by the global policy (S3-FIFO)
	tfreq uint8  // reads not yet consumed by quota eviction (S3-FIFO)
	links [numLinks]links
}

// list is an intrusive doubly linked list over one of the entry's links,
// head first; it sums its entries' sizes.
type list struct {
	head, tail *entry
	which      int
	bytes      int64
}

func (l *list) pushFront(e *entry) {
	ln := &e.links[l.which]
	ln.prev, ln.next = nil, l.head
	if l.head != nil {
		l.head.links[l.which].prev = e
	} else {
		l.tail = e
	}
	l.head = e
	l.bytes += e.size
}

func (l *list) remove(e *entry) {
	ln := &e.links[l.which]
	if ln.prev != nil {
		ln.prev.links[l.which].next = ln.next
	} else {
		l.head = ln.next
	}
	if ln.next != nil {
		ln.next.links[l.which].prev = ln.prev
	} else {
		l.tail = ln.prev
	}
	ln.prev, ln.next = nil, nil
	l.bytes -= e.size
}

func (l *list) moveToFront(e *entry) {
	if l.head != e {
		l.remove(e)
		l.pushFront(e)
	}
}

// tenantUsage is what one tenant's chunks take in the store (for its
// quota) and the queue its quota evicts from.
type tenantUsage struct {
	name     string
	bytes    int64 // payload bytes of indexed chunks
	chunks   int64
	reserved int64 // payload bytes of puts admitted but not yet indexed
	chunksQ  list  // the tenant's chunks, for quota eviction
}

type index struct {
	policy   Eviction
	smallCap int64 // bytes the small queue may hold before it yields victims

	entries  map[string]*entry
	objects  map[string]*list
	tenants  map[string]*tenantUsage
	small    list // S3-FIFO only
	main     list // every entry under EvictLRU
	ghost    ghost
	bytes    int64
	reserved int64
	nextGen  uint64
}

// newIndex returns an empty index for a store whose live bytes are bounded
// by capacity.
func newIndex(policy Eviction, capacity int64) *index {
	small := int64(smallShare * float64(capacity))
	return &index{
		policy:   policy,
		smallCap: small,
		entries:  make(map[string]*entry),
		objects:  make(map[string]*list),
		tenants:  make(map[string]*tenantUsage),
		small:    list{which: linkQueue},
		main:     list{which: linkQueue},
		ghost:    ghost{seed: maphash.MakeSeed(), capacity: capacity - small, live: make(map[uint64]uint64)},
	}
}

func (x *index) tenant(name string) *tenantUsage {
	t := x.tenants[name]
	if t == nil {
		t = &tenantUsage{name: name, chunksQ: list{which: linkTenant}}
		x.tenants[name] = t
	}
	return t
}

// dropTenantIfEmpty forgets a tenant with nothing indexed or reserved.
func (x *index) dropTenantIfEmpty(t *tenantUsage) {
	if t.chunks == 0 && t.reserved == 0 {
		delete(x.tenants, t.name)
	}
}

// add indexes a newly stored chunk: into the small queue, or into main if
// the ghost remembers it (or under EvictLRU). key must not be present.
func (x *index) add(key string, prefixLen int, tenant string, size int64) *entry {
	q := &x.small
	if x.policy == EvictLRU || x.ghost.take(key) {
		q = &x.main
	}
	return x.insert(q, key, prefixLen, tenant, size)
}

// restore indexes a chunk found on disk at Open, into main. Call it in
// write order, oldest first.
func (x *index) restore(key string, prefixLen int, tenant string, size int64) *entry {
	return x.insert(&x.main, key, prefixLen, tenant, size)
}

func (x *index) insert(q *list, key string, prefixLen int, tenant string, size int64) *entry {
	x.nextGen++
	e := &entry{key: key, obj: key[:prefixLen], t: x.tenant(tenant), size: size, gen: x.nextGen}
	if q == &x.main {
		e.queue = queueMain
	}
	x.entries[key] = e
	q.pushFront(e)
	e.t.chunksQ.pushFront(e)
	ol := x.objects[e.obj]
	if ol == nil {
		ol = &list{which: linkObject}
		x.objects[e.obj] = ol
	}
	ol.pushFront(e)
	x.bytes += size
	e.t.bytes += size
	e.t.chunks++
	return e
}

func (x *index) queue(e *entry) *list {
	if e.queue == queueSmall {
		return &x.small
	}
	return &x.main
}

// remove unindexes e (evicted, deleted or replaced).
func (x *index) remove(e *entry) {
	delete(x.entries, e.key)
	x.queue(e).remove(e)
	e.t.chunksQ.remove(e)
	if ol := x.objects[e.obj]; ol != nil {
		ol.remove(e)
		if ol.head == nil {
			delete(x.objects, e.obj)
		}
	}
	x.bytes -= e.size
	e.t.bytes -= e.size
	e.t.chunks--
	x.dropTenantIfEmpty(e.t)
}

// touch records a read (or a put of a chunk already stored).
func (x *index) touch(e *entry) {
	if x.policy == EvictLRU {
		x.main.moveToFront(e)
		e.t.chunksQ.moveToFront(e)
		return
	}
	e.freq = min(e.freq+1, maxFreq)
	e.tfreq = min(e.tfreq+1, maxFreq)
}

// victim picks the next chunk to evict, nil if none is indexed. The caller
// must remove it (Store.popLocked). Under S3-FIFO it may first move chunks
// between and within the queues, and remembers a chunk evicted from the
// small queue in the ghost.
func (x *index) victim() *entry {
	if x.policy == EvictLRU {
		return x.main.tail
	}
	for {
		if x.small.tail != nil && (x.small.bytes > x.smallCap || x.main.tail == nil) {
			e := x.small.tail
			if e.freq == 0 {
				x.ghost.add(e.key, e.size, len(x.entries))
				return e
			}
			x.small.remove(e)
			e.queue, e.freq = queueMain, 0
			x.main.pushFront(e)
			continue
		}
		e := x.main.tail
		if e == nil || e.freq == 0 {
			return e
		}
		e.freq--
		x.main.moveToFront(e)
	}
}

// tenantVictim picks the next chunk of t to evict for its quota, nil if it
// has none. The caller must remove it.
func (x *index) tenantVictim(t *tenantUsage) *entry {
	for {
		e := t.chunksQ.tail
		if e == nil || e.tfreq == 0 {
			return e
		}
		e.tfreq--
		t.chunksQ.moveToFront(e)
	}
}

// objectEntries returns the indexed chunks whose object prefix is obj.
func (x *index) objectEntries(obj string) []*entry {
	var out []*entry
	if ol := x.objects[obj]; ol != nil {
		for e := ol.head; e != nil; e = e.links[linkObject].next {
			out = append(out, e)
		}
	}
	return out
}

// ghost remembers the key hashes of chunks evicted from the small queue
// unread, FIFO, up to capacity payload bytes (what the main queue holds) and
// no more entries than the index (at least minGhostChunks), so it never
// costs more memory than the index.
type ghost struct {
	seed     maphash.Seed
	capacity int64
	bytes    int64
	seq      uint64
	live     map[uint64]uint64 // key hash -> seq of its slot in q
	q        []ghostSlot       // oldest first, from head
	head     int
}

type ghostSlot struct {
	hash, seq uint64
	size      int64
}

func (g *ghost) add(key string, size int64, indexed int) {
	h := maphash.String(g.seed, key)
	g.seq++
	g.live[h] = g.seq
	g.q = append(g.q, ghostSlot{h, g.seq, size})
	g.bytes += size
	for g.head < len(g.q) && (g.bytes > g.capacity || len(g.q)-g.head > max(indexed, minGhostChunks)) {
		s := g.q[g.head]
		if g.live[s.hash] == s.seq {
			delete(g.live, s.hash)
		}
		g.bytes -= s.size
		g.q[g.head] = ghostSlot{}
		g.head++
	}
	if g.head > len(g.q)/2 && g.head > 64 {
		g.q = append(g.q[:0], g.q[g.head:]...)
		g.head = 0
	}
}

// take reports whether the ghost remembers key, and forgets it.
func (g *ghost) take(key string) bool {
	if len(g.live) == 0 {
		return false
	}
	h := maphash.String(g.seed, key)
	if _, ok := g.live[h]; !ok {
		return false
	}
	delete(g.live, h)
	return true
}
