// Package slab hands out equal-size buffers carved from large blocks of
// memory that are faulted in whole when a block is made and reused once
// they are given back.
//
// A RAM cache that fills fresh buffers pays a page fault for every 4 KiB
// it writes, again for every page it refills once the garbage collector
// has returned evicted pages to the kernel: on the VMs measured here,
// filling a 4 MiB page of fresh memory took 7 ms, of a reused buffer 0.3
// ms (BenchmarkFill). A Pool faults a block in with one system call and
// then only recycles; the client's page cache takes its pages from one,
// and can fault all of it in at start (Pool.Prefault).
//
// Huge pages are not asked for: on these VMs, MADV_HUGEPAGE made faulting
// 1.25 GiB in cost 2.5-3.5 CPU-seconds of compaction instead of 0.5-1.2.
package slab

import "sync"

// blockBytes is the memory a Pool faults in at once: large enough that
// growing is rare, small enough that a Pool that is used a little holds
// little.
const blockBytes = 64 << 20

// Pool is a bounded set of buffers of Size bytes. It grows a block at a
// time (the last one smaller, to end at the bound) and never shrinks; the
// garbage collector frees the blocks once neither the Pool nor any buffer
// of it is referenced. It is safe for concurrent use.
type Pool struct {
	size     int
	perBlock int
	most     int // buffers at the bound

	mu      sync.Mutex
	free    [][]byte
	made    int   // buffers made
	refused int64 // Gets that found the pool at its bound
}

// New returns a Pool of buffers of size bytes holding at most maxBytes
// (rounded up to a whole buffer), or nil when size or maxBytes is not
// positive: a nil Pool hands out nothing.
func New(size int, maxBytes int64) *Pool {
	if size <= 0 || maxBytes <= 0 {
		return nil
	}
	return &Pool{size: size, perBlock: max(blockBytes/size, 1), most: int((maxBytes + int64(size) - 1) / int64(size))}
}

// Size is the length of every buffer of the Pool.
func (p *Pool) Size() int {
	if p == nil {
		return 0
	}
	return p.size
}

// Get returns a buffer of Size bytes (its contents are whatever its last
// user left), or false when every buffer the Pool may hold is handed out.
func (p *Pool) Get() ([]byte, bool) {
	if p == nil {
		return nil, false
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	if len(p.free) == 0 && p.made < p.most {
		p.grow()
	}
	if len(p.free) == 0 {
		p.refused++
		return nil, false
	}
	b := p.free[len(p.free)-1]
	p.free = p.free[:len(p.free)-1]
	return b, true
}

// Put gives back a buffer Get returned (any length of it); nothing may
// read or write it afterwards.
func (p *Pool) Put(b []byte) {
	if p == nil || cap(b) != p.size {
		panic("slab: Put of a buffer that is not the pool's")
	}
	p.mu.Lock()
	p.free = append(p.free, b[:p.size])
	p.mu.Unlock()
}

// Bytes is the memory the Pool holds, handed out or free.
func (p *Pool) Bytes() int64 {
	if p == nil {
		return 0
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	return int64(p.made) * int64(p.size)
}

// Stats says how many buffers are handed out now, and how many Gets found
// every buffer handed out.
func (p *Pool) Stats() (inUse int, refused int64) {
	if p == nil {
		return 0, 0
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.made - len(p.free), p.refused
}

// Prefault grows the Pool to its bound now, so that no Get waits for a
// block to be faulted in.
func (p *Pool) Prefault() {
	if p == nil {
		return
	}
	for {
		p.mu.Lock()
		if p.made >= p.most {
			p.mu.Unlock()
			return
		}
		p.grow()
		p.mu.Unlock()
	}
}

// grow makes a block and frees its buffers. p.mu is held: Gets wait for
// the block rather than fall back to fresh memory.
func (p *Pool) grow() {
	k := min(p.perBlock, p.most-p.made)
	block := make([]byte, k*p.size)
	prefault(block)
	for i := 0; i < k; i++ {
		p.free = append(p.free, block[i*p.size:(i+1)*p.size:(i+1)*p.size])
	}
	p.made += k
}

// touch writes one byte per 4 KiB page of b, faulting it in.
func touch(b []byte) {
	for i := 0; i < len(b); i += 4096 {
		b[i] = 0
	}
}
