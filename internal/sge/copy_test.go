package sge

import (
	"bytes"
	"fmt"
	"math/rand/v2"
	"testing"
	"unsafe"

	"github.com/stretchr/testify/require"
)

// TestCopy: Copy copies min(len(dst), len(src)) bytes and nothing past
// them, through each of its paths: the vector loop with its tail (when this
// processor has it), the pieces for a misaligned source into a 16-byte
// aligned destination, and the built-in copy.
func TestCopy(t *testing.T) {
	vec := hasCopyAVX2
	t.Cleanup(func() { hasCopyAVX2 = vec })
	modes := []bool{false}
	if canCopyAVX2 {
		modes = append(modes, true)
	}
	for _, v := range modes {
		hasCopyAVX2 = v
		t.Run(fmt.Sprint("vector=", v), testCopy)
	}
}

func testCopy(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	src := make([]byte, 3*copyPiece+64)
	for i := range src {
		src[i] = byte(rng.Uint32())
	}
	split := 0  // cases that take Copy's pieces (a misaligned source, a 16-byte aligned destination)
	vector := 0 // cases that take the vector loop (a 32-byte aligned destination)
	t.Cleanup(func() {
		require.NotZero(t, split, "no case exercised the split copy")
		if hasCopyAVX2 {
			require.NotZero(t, vector, "no case exercised the vector loop")
		}
	})
	for _, tc := range []struct{ n, srcOff, dstOff, dstLen int }{
		{0, 0, 0, 0}, {1, 4, 0, 1}, {copyPiece, 4, 0, copyPiece},
		{copyPiece + 1, 4, 0, copyPiece + 1}, {4096, 12, 0, 4096},
		{4096, 0, 12, 4096}, {4096, 8, 0, 4096}, {4096, 4, 16, 4096}, {2 * copyPiece, 28, 3, 2 * copyPiece},
		{255, 4, 0, 255}, {256, 4, 0, 256}, {300, 12, 5, 300}, {4097, 4, 0, 4097}, {383, 0, 1, 383},
		// One byte in the last piece of a split copy.
		{2*copyPiece + 1, 4, 0, 2*copyPiece + 1}, {3*copyPiece + 1, 4, 0, 3*copyPiece + 1},
		{3 * copyPiece, 4, 0, 5000}, // dst shorter: copies len(dst)
		{100, 4, 0, 4000},           // src shorter
		{1000, 4, 0, 4000},          // src shorter, above copyVecMin
	} {
		t.Run(fmt.Sprintf("%+v", tc), func(t *testing.T) {
			s := src[tc.srcOff : tc.srcOff+tc.n]
			buf := aligned64(tc.dstOff + tc.dstLen + 8)
			dst := buf[tc.dstOff : tc.dstOff+tc.dstLen]
			want := min(len(s), len(dst))
			if hasCopyAVX2 && want >= copyVecMin && tc.dstOff%32 == 0 {
				vector++
			}
			if want >= 2048 && (!hasCopyAVX2 || tc.dstOff%32 != 0) && uintptr(unsafe.Pointer(unsafe.SliceData(dst)))&15 == 0 && uintptr(unsafe.Pointer(unsafe.SliceData(s)))&7 != 0 {
				split++
			}
			require.Equal(t, want, Copy(dst, s))
			require.True(t, bytes.Equal(s[:want], dst[:want]))
			require.True(t, bytes.Equal(make([]byte, len(buf)-tc.dstOff-want), buf[tc.dstOff+want:]), "wrote past the copied bytes")
		})
	}
}

// aligned64 returns n zero bytes starting on a 64-byte boundary.
func aligned64(n int) []byte {
	b := make([]byte, n+64)
	off := int(-uintptr(unsafe.Pointer(unsafe.SliceData(b))) & 63)
	return b[off : off+n]
}

// BenchmarkCopy4K copies 4 KiB between a datagram buffer and an aligned
// region, with Copy and with the built-in copy: in = from a payload after
// a 12-byte BTH into the region (WRITE and SEND placement), out = from the
// region to a payload after a BTH (READ responses, requests), out16 = to
// one after 16 bytes of headers (READ FIRST and LAST with their AETH).
func BenchmarkCopy4K(b *testing.B) {
	region := make([]byte, 64<<10)
	bufs := make([][]byte, 16)
	for i := range bufs {
		bufs[i] = make([]byte, 4224)
	}
	for _, c := range []struct {
		name string
		f    func(d, s []byte) int
	}{{"sge.Copy", Copy}, {"builtin", func(d, s []byte) int { return copy(d, s) }}} {
		for _, dir := range []string{"in", "out", "out16"} {
			b.Run(c.name+"/"+dir, func(b *testing.B) {
				b.SetBytes(4096)
				for i := 0; b.Loop(); i++ {
					j := i % len(bufs)
					r := region[j*4096 : j*4096+4096]
					switch dir {
					case "in":
						c.f(r, bufs[j][12:])
					case "out":
						c.f(bufs[j][12:], r)
					default:
						c.f(bufs[j][16:], r)
					}
				}
			})
		}
	}
}

// BenchmarkCopy4KCold is BenchmarkCopy4K/in with the region 8 MiB long
// and walked through, as rxe's in-process benchmarks do: the destination
// is mostly not in the caches.
func BenchmarkCopy4KCold(b *testing.B) {
	region := make([]byte, 8<<20)
	buf := make([]byte, 4224)
	for _, c := range []struct {
		name string
		f    func(d, s []byte) int
	}{{"sge.Copy", Copy}, {"builtin", func(d, s []byte) int { return copy(d, s) }}} {
		b.Run(c.name, func(b *testing.B) {
			b.SetBytes(4096)
			slots := len(region) / 4096
			for i := 0; b.Loop(); i++ {
				j := i % slots
				c.f(region[j*4096:j*4096+4096], buf[12:])
			}
		})
	}
}

// FuzzCopy: Copy equals the built-in copy for any lengths and offsets,
// and writes nothing past the bytes it copies.
func FuzzCopy(f *testing.F) {
	f.Add(uint16(4096), uint16(4096), uint8(4), uint8(0))
	f.Add(uint16(300), uint16(5000), uint8(0), uint8(3))
	f.Fuzz(func(t *testing.T, ns, nd uint16, so, do uint8) {
		src := make([]byte, int(ns%9000)+int(so%64))
		for i := range src {
			src[i] = byte(i*13 + 1)
		}
		s := src[so%64:]
		buf := aligned64(int(nd%9000) + int(do%64) + 64)
		d := buf[do%64 : int(do%64)+int(nd%9000)]
		n := Copy(d, s)
		want := min(len(s), len(d))
		if n != want || !bytes.Equal(d[:n], s[:n]) {
			t.Fatalf("Copy of %d into %d: %d bytes, equal %v", len(s), len(d), n, bytes.Equal(d[:n], s[:n]))
		}
		for i, b := range buf {
			if (i < int(do%64) || i >= int(do%64)+n) && b != 0 {
				t.Fatalf("byte %d outside the copy written", i)
			}
		}
	})
}
