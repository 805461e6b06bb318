package slab

import (
	"testing"
	"unsafe"
)

func TestBuffersAreDistinctAndBounded(t *testing.T) {
	const size = 4 << 20
	p := New(size, 2*blockBytes)
	seen := map[uintptr]bool{}
	var got [][]byte
	for {
		b, ok := p.Get()
		if !ok {
			break
		}
		if len(b) != size || cap(b) != size {
			t.Fatalf("buffer of len %d cap %d, want %d", len(b), cap(b), size)
		}
		addr := uintptr(unsafe.Pointer(&b[0]))
		if seen[addr] {
			t.Fatalf("buffer at %#x handed out twice", addr)
		}
		seen[addr] = true
		got = append(got, b)
	}
	if want := 2 * blockBytes / size; len(got) != want {
		t.Fatalf("%d buffers before the bound, want %d", len(got), want)
	}
	if inUse, refused := p.Stats(); inUse != len(got) || refused != 1 {
		t.Fatalf("Stats = %d in use, %d refused; want %d, 1", inUse, refused, len(got))
	}
	if p.Bytes() != 2*blockBytes {
		t.Fatalf("Bytes = %d, want %d", p.Bytes(), 2*blockBytes)
	}
	// Writing every buffer whole must not touch another.
	for i, b := range got {
		for j := range b {
			b[j] = byte(i)
		}
	}
	for i, b := range got {
		for j := 0; j < len(b); j += 4093 {
			if b[j] != byte(i) {
				t.Fatalf("buffer %d byte %d = %d: buffers overlap", i, j, b[j])
			}
		}
	}
	p.Put(got[3][:100]) // any length of it
	b, ok := p.Get()
	if !ok || &b[0] != &got[3][0] || len(b) != size {
		t.Fatalf("Get after Put: ok %v, len %d, same buffer %v", ok, len(b), ok && &b[0] == &got[3][0])
	}
	if _, ok := p.Get(); ok {
		t.Fatal("a buffer beyond the bound")
	}
	for _, b := range got {
		p.Put(b)
	}
	if inUse, _ := p.Stats(); inUse != 0 {
		t.Fatalf("%d in use after every buffer was put back", inUse)
	}
}

func TestPrefaultGrowsToTheBound(t *testing.T) {
	p := New(1<<20, blockBytes+1)
	if p.Bytes() != 0 {
		t.Fatalf("a new pool holds %d bytes, want 0 (blocks are made as needed)", p.Bytes())
	}
	p.Prefault()
	if want := int64(blockBytes + 1<<20); p.Bytes() != want {
		t.Fatalf("after Prefault the pool holds %d bytes, want its bound rounded up to a whole buffer (%d)", p.Bytes(), want)
	}
	if inUse, _ := p.Stats(); inUse != 0 {
		t.Fatalf("%d buffers in use after Prefault", inUse)
	}
}

func TestSizesLargerThanABlock(t *testing.T) {
	p := New(blockBytes+1, blockBytes+1)
	b, ok := p.Get()
	if !ok || len(b) != blockBytes+1 {
		t.Fatalf("ok %v len %d", ok, len(b))
	}
	if _, ok := p.Get(); ok {
		t.Fatal("a second buffer beyond the bound")
	}
}

func TestPutOfAForeignBufferPanics(t *testing.T) {
	p := New(4096, 1<<20)
	defer func() {
		if recover() == nil {
			t.Fatal("Put of a buffer of another size did not panic")
		}
	}()
	p.Put(make([]byte, 100))
}

func TestNilPool(t *testing.T) {
	for _, p := range []*Pool{New(0, 1<<20), New(4096, 0)} {
		if p != nil {
			t.Fatal("New with a zero size or bound returned a pool")
		}
		if _, ok := p.Get(); ok || p.Bytes() != 0 || p.Size() != 0 {
			t.Fatal("a nil pool handed something out")
		}
	}
}

// BenchmarkFill compares filling 4 MiB pages into fresh memory (what a
// cache that allocates its pages does) with filling the buffers of a pool
// that is already faulted in and reuses them.
func BenchmarkFill(b *testing.B) {
	const size = 4 << 20
	src := make([]byte, size)
	b.Run("fresh", func(b *testing.B) {
		b.SetBytes(size)
		keep := make([][]byte, 0, 64)
		for b.Loop() {
			buf := make([]byte, size)
			copy(buf, src)
			if keep = append(keep, buf); len(keep) == cap(keep) {
				keep = keep[:0] // a bounded cache: old pages go to the collector
			}
		}
	})
	b.Run("pool", func(b *testing.B) {
		b.SetBytes(size)
		p := New(size, 64*size)
		p.Prefault() // a pool in use: its memory is faulted in once, not per fill
		keep := make([][]byte, 0, 64)
		for b.Loop() {
			buf, ok := p.Get()
			if !ok {
				b.Fatal("pool empty")
			}
			copy(buf, src)
			if keep = append(keep, buf); len(keep) == cap(keep) {
				for _, k := range keep {
					p.Put(k)
				}
				keep = keep[:0]
			}
		}
	})
}
