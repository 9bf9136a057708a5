// Package ring provides Ring, the bounded FIFO queue that the send queue,
// the responder's output queue, the receive queues and the completion
// queues are built on: a circular buffer that starts empty and doubles,
// up to its bound, only when it must hold more elements than ever before.
// An idle queue costs no memory, and a steady stream of pushes and pops
// allocates nothing.
//
// A slot keeps what its last element left in it: Push returns the slot as
// it is, so an element that owns buffers (an SGE list, inline data) reuses
// them, and a new buffer's empty slots can be given theirs by the Fresh
// function at growth. A Ring is not safe for concurrent use.
package ring

// MinSlots is the number of slots of a ring's first buffer (fewer if the
// bound is lower).
const MinSlots = 4

// Ring is a FIFO queue of at most Max elements of type T. The zero value is
// an empty ring with bound 0; Init sets the bound.
type Ring[T any] struct {
	buf     []T
	head, n int
	max     int
	fresh   func([]T)
}

// Init empties r and sets its bound to max (negative counts as 0) and the
// function that prepares the empty slots of each new buffer (nil: none).
// It allocates nothing.
func (r *Ring[T]) Init(max int, fresh func(slots []T)) {
	*r = Ring[T]{max: max0(max), fresh: fresh}
}

func max0(n int) int { return max(n, 0) }

// Len returns the number of elements.
func (r *Ring[T]) Len() int { return r.n }

// Max returns the bound.
func (r *Ring[T]) Max() int { return r.max }

// Free returns how many more elements fit: Max - Len.
func (r *Ring[T]) Free() int { return r.max - r.n }

// Slots returns the number of slots allocated, at most Max.
func (r *Ring[T]) Slots() int { return len(r.buf) }

// At returns element i, 0 being the oldest. It panics unless 0 <= i < Len.
func (r *Ring[T]) At(i int) *T {
	if uint(i) >= uint(r.n) {
		panic("ring: index out of range")
	}
	j := r.head + i
	if j >= len(r.buf) {
		j -= len(r.buf)
	}
	return &r.buf[j]
}

// Front returns the oldest element. It panics if the ring is empty.
func (r *Ring[T]) Front() *T { return r.At(0) }

// Back returns the newest element. It panics if the ring is empty.
func (r *Ring[T]) Back() *T { return r.At(r.n - 1) }

// Push appends an element and returns its slot, holding whatever the
// slot's previous element left there (or what Fresh gave it); the caller
// sets every field that matters. It returns nil if the ring holds Max
// elements. It allocates only when the ring holds more elements than ever
// before.
func (r *Ring[T]) Push() *T {
	if r.n == r.max {
		return nil
	}
	if r.n == len(r.buf) {
		r.relayout(min(r.max, max(MinSlots, 2*len(r.buf))))
	}
	r.n++
	return r.At(r.n - 1)
}

// Pop removes the oldest element; its slot keeps its contents for reuse. It
// panics if the ring is empty.
func (r *Ring[T]) Pop() {
	if r.n == 0 {
		panic("ring: Pop of an empty ring")
	}
	r.head++
	if r.head == len(r.buf) {
		r.head = 0
	}
	r.n--
}

// Truncate keeps the n oldest elements and drops the rest (nothing if n >=
// Len).
func (r *Ring[T]) Truncate(n int) { r.n = min(r.n, max0(n)) }

// Clear drops every element.
func (r *Ring[T]) Clear() { r.head, r.n = 0, 0 }

// SetMax changes the bound to max, which must not be below Len; it reports
// false, changing nothing, if it is. A buffer longer than the new bound is
// replaced by one of exactly max slots; a shorter one grows later, as
// needed.
func (r *Ring[T]) SetMax(max int) bool {
	if max < r.n {
		return false
	}
	r.max = max
	if len(r.buf) > max {
		r.relayout(max)
	}
	return true
}

// relayout moves the elements, oldest first, to the front of a new buffer
// of size slots and hands the remaining slots to fresh. The old buffer is
// never written again, so a pointer into it stays valid for reading.
func (r *Ring[T]) relayout(size int) {
	buf := make([]T, size)
	for i := range r.n {
		buf[i] = *r.At(i)
	}
	if r.fresh != nil && r.n < size {
		r.fresh(buf[r.n:])
	}
	r.buf, r.head = buf, 0
}
