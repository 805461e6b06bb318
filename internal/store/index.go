package store

// The index is the store's own accounting of every chunk on disk: key ->
// payload size, tenant and LRU position. It is what eviction, quotas, the
// disk bound and Stats work from; badger is only asked for bytes. It is
// rebuilt at Open from a key-only iteration. Not safe for concurrent use: the
// Store guards it with Store.mu.

const (
	lruGlobal = iota // all chunks, most recently used first
	lruTenant        // one tenant's chunks, most recently used first
	lruObject        // one object's chunks (any order), for DeleteObject
	numLists
)

type links struct{ prev, next *entry }

type entry struct {
	key   string // badger key
	obj   string // chunk prefix of the object (a prefix of key, shares its memory)
	t     *tenantState
	size  int64  // payload bytes
	gen   uint64 // incarnation, so a slow reader never acts on a newer entry
	links [numLists]links
}

// list is an intrusive doubly linked list over one of the entry's links.
type list struct {
	head, tail *entry
	which      int
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
}

func (l *list) moveToFront(e *entry) {
	if l.head != e {
		l.remove(e)
		l.pushFront(e)
	}
}

type tenantState struct {
	name     string
	bytes    int64 // payload bytes of indexed chunks
	chunks   int64
	reserved int64 // payload bytes of puts admitted but not yet indexed
	lru      list
}

type index struct {
	entries  map[string]*entry
	objects  map[string]*list
	tenants  map[string]*tenantState
	lru      list
	bytes    int64
	reserved int64
	nextGen  uint64
}

func newIndex() *index {
	return &index{
		entries: make(map[string]*entry),
		objects: make(map[string]*list),
		tenants: make(map[string]*tenantState),
		lru:     list{which: lruGlobal},
	}
}

func (x *index) tenant(name string) *tenantState {
	t := x.tenants[name]
	if t == nil {
		t = &tenantState{name: name, lru: list{which: lruTenant}}
		x.tenants[name] = t
	}
	return t
}

// dropTenantIfEmpty forgets a tenant with nothing indexed or reserved.
func (x *index) dropTenantIfEmpty(t *tenantState) {
	if t.chunks == 0 && t.reserved == 0 {
		delete(x.tenants, t.name)
	}
}

// add indexes a chunk as the most recently used one. key must not be present.
func (x *index) add(key string, prefixLen int, tenant string, size int64) *entry {
	x.nextGen++
	e := &entry{key: key, obj: key[:prefixLen], t: x.tenant(tenant), size: size, gen: x.nextGen}
	x.entries[key] = e
	x.lru.pushFront(e)
	e.t.lru.pushFront(e)
	ol := x.objects[e.obj]
	if ol == nil {
		ol = &list{which: lruObject}
		x.objects[e.obj] = ol
	}
	ol.pushFront(e)
	x.bytes += size
	e.t.bytes += size
	e.t.chunks++
	return e
}

func (x *index) remove(e *entry) {
	delete(x.entries, e.key)
	x.lru.remove(e)
	e.t.lru.remove(e)
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

func (x *index) touch(e *entry) {
	x.lru.moveToFront(e)
	e.t.lru.moveToFront(e)
}

// objectEntries returns the indexed chunks whose object prefix is obj.
func (x *index) objectEntries(obj string) []*entry {
	var out []*entry
	if ol := x.objects[obj]; ol != nil {
		for e := ol.head; e != nil; e = e.links[lruObject].next {
			out = append(out, e)
		}
	}
	return out
}
