package ring

import (
	"fmt"
	"testing"

	"github.com/stretchr/testify/require"
)

// TestGrowsAndWraps fills a ring whose head is at an offset up to its
// bound, so that it grows (from nothing) and wraps under queued elements,
// and checks that they come out in order and that a full ring refuses.
func TestGrowsAndWraps(t *testing.T) {
	for _, bound := range []int{1, 3, 5, 64, 80} {
		t.Run(fmt.Sprint(bound), func(t *testing.T) {
			var r Ring[int]
			r.Init(bound, nil)
			require.Zero(t, r.Slots(), "nothing allocated before the first push")
			next, want := 0, 0
			for range 3 {
				for range (bound + 1) / 2 {
					*r.Push() = next
					next++
				}
				for range r.Len() / 2 {
					require.Equal(t, want, *r.Front())
					r.Pop()
					want++
				}
				for r.Free() > 0 {
					*r.Push() = next
					next++
				}
				require.Nil(t, r.Push(), "a full ring refuses")
				require.Equal(t, bound, r.Slots())
				require.Equal(t, next-1, *r.Back())
				for i := range r.Len() {
					require.Equal(t, want+i, *r.At(i))
				}
				for r.Len() > 0 {
					require.Equal(t, want, *r.Front())
					r.Pop()
					want++
				}
			}
			require.Equal(t, next, want)
		})
	}
}

// TestSlotsKeepTheirBuffers checks that a slot's contents survive Pop (an
// element's buffers are reused) and growth, and that Fresh prepares every
// empty slot of a new buffer exactly once.
func TestSlotsKeepTheirBuffers(t *testing.T) {
	type elem struct{ buf []byte }
	var r Ring[elem]
	prepared := 0
	r.Init(16, func(s []elem) {
		for i := range s {
			require.Nil(t, s[i].buf, "a fresh slot is empty")
			s[i].buf = make([]byte, 0, 8)
			prepared++
		}
	})
	for i := range 16 {
		e := r.Push()
		require.NotNil(t, e.buf, "every slot was prepared")
		e.buf = append(e.buf[:0], byte(i))
	}
	require.Equal(t, 16, prepared)
	for i := range 16 {
		require.Equal(t, []byte{byte(i)}, r.Front().buf)
		r.Pop()
	}
	allocs := testing.AllocsPerRun(100, func() {
		e := r.Push()
		e.buf = append(e.buf[:0], 1, 2, 3)
		r.Pop()
	})
	require.Zero(t, allocs, "a steady stream allocates nothing")
	require.Equal(t, 16, prepared, "no slot prepared twice")
}

// TestSetMax shrinks and grows the bound under queued elements.
func TestSetMax(t *testing.T) {
	var r Ring[int]
	r.Init(8, nil)
	for i := range 6 {
		*r.Push() = i
	}
	r.Pop()
	require.False(t, r.SetMax(4), "below the queued elements")
	require.Equal(t, 8, r.Max())
	require.True(t, r.SetMax(5))
	require.Equal(t, 5, r.Slots())
	require.Nil(t, r.Push())
	require.True(t, r.SetMax(20))
	*r.Push() = 6
	for want := 1; r.Len() > 0; want++ {
		require.Equal(t, want, *r.Front())
		r.Pop()
	}
}

// TestTruncateAndClear drops elements from the back and all of them.
func TestTruncateAndClear(t *testing.T) {
	var r Ring[int]
	r.Init(4, nil)
	for i := range 4 {
		*r.Push() = i
	}
	r.Truncate(9)
	require.Equal(t, 4, r.Len())
	r.Truncate(1)
	require.Equal(t, 1, r.Len())
	require.Equal(t, 0, *r.Back())
	*r.Push() = 7
	require.Equal(t, 7, *r.Back())
	r.Clear()
	require.Zero(t, r.Len())
	require.Panics(t, func() { r.Pop() })
	require.Panics(t, func() { r.Front() })
}

// FuzzRing runs a sequence of operations, one per input byte, against a
// ring and a plain slice: the ring always holds the slice's elements in
// order, never more than its bound, and never more slots than the bound.
func FuzzRing(f *testing.F) {
	f.Add(uint8(5), []byte{0, 0, 0, 1, 0, 0, 0, 0, 0, 1, 1, 2, 3})
	f.Add(uint8(1), []byte{0, 0, 1, 1, 0})
	f.Add(uint8(64), []byte{0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 4, 0, 5, 0})
	f.Add(uint8(4), []byte{0, 0, 0, 0, 2, 2, 0, 0, 2, 0}) // the elements wrap around the buffer's end
	f.Fuzz(func(t *testing.T, bound uint8, ops []byte) {
		var r Ring[int]
		r.Init(int(bound), nil)
		var model []int
		next := 0
		for _, op := range ops {
			switch op % 6 {
			case 0, 1: // push (twice as likely)
				e := r.Push()
				if len(model) == int(bound) {
					require.Nil(t, e)
					continue
				}
				require.NotNil(t, e)
				*e = next
				model = append(model, next)
				next++
			case 2:
				if len(model) == 0 {
					require.Panics(t, r.Pop)
					continue
				}
				r.Pop()
				model = model[1:]
			case 3:
				n := int(op>>3) % (len(model) + 2)
				r.Truncate(n)
				model = model[:min(n, len(model))]
			case 4:
				m := int(op >> 2)
				ok := r.SetMax(m)
				require.Equal(t, m >= len(model), ok)
				if ok {
					bound = uint8(m)
				}
			case 5:
				r.Clear()
				model = model[:0]
			}
			// Plain comparisons, not testify: its stack walk per call
			// (t.Helper) would outweigh the checks, which run for every
			// element after every op.
			if r.Len() != len(model) || r.Free() != int(bound)-len(model) || r.Slots() > int(bound) {
				t.Fatalf("op %#x: Len %d Free %d Slots %d; model holds %d, bound %d", op, r.Len(), r.Free(), r.Slots(), len(model), bound)
			}
			for i, v := range model {
				if got := *r.At(i); got != v {
					t.Fatalf("op %#x: At(%d) = %d, want %d", op, i, got, v)
				}
			}
		}
	})
}

// TestGrowthDoubles: the first buffer has MinSlots slots (fewer under a
// lower bound) and each later one twice as many, up to the bound; a ring
// grows only when it must hold more elements than its buffer has slots.
func TestGrowthDoubles(t *testing.T) {
	for _, bound := range []int{1, 3, 4, 5, 20, 64} {
		t.Run(fmt.Sprint(bound), func(t *testing.T) {
			var r Ring[int]
			r.Init(bound, nil)
			for n := 1; n <= bound; n++ {
				*r.Push() = n
				want := MinSlots
				for want < n {
					want *= 2
				}
				require.Equal(t, min(want, bound), r.Slots(), "after %d pushes", n)
			}
		})
	}
}

// TestNegativeCounts: a negative bound given to Init counts as 0, and
// Truncate to a negative count keeps nothing.
func TestNegativeCounts(t *testing.T) {
	var r Ring[int]
	r.Init(-3, nil)
	require.Zero(t, r.Max())
	require.Zero(t, r.Free())
	require.Nil(t, r.Push())

	r.Init(4, nil)
	*r.Push() = 1
	*r.Push() = 2
	r.Truncate(-1)
	require.Zero(t, r.Len())
	require.Equal(t, 4, r.Free())
}

// TestInitEmpties: Init on a ring holding elements empties it and sets the
// new bound and Fresh function.
func TestInitEmpties(t *testing.T) {
	var r Ring[int]
	r.Init(8, nil)
	for i := range 5 {
		*r.Push() = i
	}
	r.Pop()
	fresh := 0
	r.Init(2, func(s []int) { fresh += len(s) })
	require.Zero(t, r.Len())
	require.Equal(t, 2, r.Max())
	require.Equal(t, 2, r.Free())
	*r.Push() = 7
	require.Equal(t, 7, *r.Front())
	require.Equal(t, 7, *r.Back())
	require.Equal(t, 2, fresh, "the new Fresh prepares the new buffer")
}

// TestSetMaxKeepsBuffer: SetMax to a bound no shorter than the buffer
// keeps it (only a buffer longer than the new bound is replaced), so it
// allocates nothing and the elements stay in their slots.
func TestSetMaxKeepsBuffer(t *testing.T) {
	var r Ring[int]
	r.Init(8, nil)
	for i := range 8 {
		*r.Push() = i
	}
	front := r.Front()
	ok := true
	allocs := testing.AllocsPerRun(10, func() {
		ok = r.SetMax(8) && r.SetMax(16) && ok
	})
	require.True(t, ok)
	require.Zero(t, allocs)
	require.Same(t, front, r.Front())
	require.Equal(t, 8, r.Slots())
}
