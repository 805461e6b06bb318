package writeback

import "container/heap"

// minHeap is a container/heap of T, the item that comes first on top; its
// zero value is empty and ready. (Before is exported although the types
// are not: staticcheck takes an unexported method used only through a
// type parameter's constraint for unused.)
type minHeap[T interface{ Before(T) bool }] []T

func (h minHeap[T]) Len() int           { return len(h) }
func (h minHeap[T]) Less(a, b int) bool { return h[a].Before(h[b]) }
func (h minHeap[T]) Swap(a, b int)      { h[a], h[b] = h[b], h[a] }
func (h *minHeap[T]) Push(x any)        { *h = append(*h, x.(T)) }
func (h *minHeap[T]) Pop() any {
	old := *h
	x := old[len(old)-1]
	*h = old[:len(old)-1]
	return x
}

// push adds x; pop takes the first item (the heap must not be empty).
func (h *minHeap[T]) push(x T) { heap.Push(h, x) }
func (h *minHeap[T]) pop() T   { return heap.Pop(h).(T) }
