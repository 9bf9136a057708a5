package packet

import (
	"bytes"
	"fmt"
	"hash/crc32"
	"math/bits"
	"math/rand/v2"
	"os"
	"regexp"
	"runtime"
	"strconv"
	"testing"

	"github.com/stretchr/testify/require"
)

// xPowModP returns x^e mod P for the CRC-32/IEEE polynomial P, in normal
// (not reflected) form.
func xPowModP(e int) uint32 {
	r := uint64(1)
	for range e {
		r <<= 1
		if r&(1<<32) != 0 {
			r ^= 0x104C11DB7
		}
	}
	return uint32(r)
}

// TestFoldConstants derives every constant of crcfold_amd64.s from the
// polynomial: the pair for moving a lane D bits is
// reflect(x^(D+32) mod P) << 1, reflect(x^(D-32) mod P) << 1.
func TestFoldConstants(t *testing.T) {
	src, err := os.ReadFile("crcfold_amd64.s")
	require.NoError(t, err)
	re := regexp.MustCompile(`DATA fold(\d+)<>\+(\d+)\(SB\)/8, \$0x([0-9a-f]+)`)
	ms := re.FindAllStringSubmatch(string(src), -1)
	require.Len(t, ms, 4*8+3*2, "constants in crcfold_amd64.s")
	for _, m := range ms {
		d, _ := strconv.Atoi(m[1])
		off, _ := strconv.Atoi(m[2])
		got, err := strconv.ParseUint(m[3], 16, 64)
		require.NoError(t, err)
		e := d + 32
		if off%16 == 8 {
			e = d - 32
		}
		want := uint64(bits.Reverse32(xPowModP(e))) << 1
		require.Equal(t, want, got, "fold%d+%d", d, off)
	}
}

// xPow64DivP is the quotient of x^64 by P (33 bits), by long division.
func xPow64DivP() uint64 {
	const p = 0x104C11DB7
	var q uint64
	hi, lo := uint64(1), uint64(0) // x^64: bit 0 of hi
	for b := 64; b >= 32; b-- {
		var set bool
		if b == 64 {
			set = hi&1 != 0
		} else {
			set = lo>>b&1 != 0
		}
		if set {
			q |= 1 << (b - 32)
			lo ^= p << (b - 32)
			if b-32 > 31 {
				hi ^= p >> (64 - (b - 32))
			}
		}
	}
	return q
}

// TestReduceConstants derives the constants of foldAVX512's last step,
// the reduction of 16 bytes to the CRC register: x^96 and x^64 mod P
// reflected as the fold constants are, and Barrett's mu (x^64 div P) and
// P reflected over 33 bits.
func TestReduceConstants(t *testing.T) {
	src, err := os.ReadFile("crcfold_amd64.s")
	require.NoError(t, err)
	re := regexp.MustCompile(`DATA (reduce|barrett)<>\+(\d+)\(SB\)/8, \$0x([0-9a-f]+)`)
	reflect33 := func(v uint64) uint64 { return bits.Reverse64(v) >> 31 }
	want := map[string]uint64{
		"reduce+0":  uint64(bits.Reverse32(xPowModP(96))) << 1,
		"reduce+8":  uint64(bits.Reverse32(xPowModP(64))) << 1,
		"barrett+0": reflect33(xPow64DivP()),
		"barrett+8": reflect33(0x104C11DB7),
	}
	ms := re.FindAllStringSubmatch(string(src), -1)
	require.Len(t, ms, len(want), "constants in crcfold_amd64.s")
	for _, m := range ms {
		got, err := strconv.ParseUint(m[3], 16, 64)
		require.NoError(t, err)
		require.Equal(t, want[m[1]+"+"+m[2]], got, "%s+%s", m[1], m[2])
	}
}

// TestICRCUpdateMatchesStdlib compares ICRCUpdate with crc32.Update over
// every length to 4 KiB plus a few above (each block count, each tail),
// at unaligned offsets and random starting CRCs.
func TestICRCUpdateMatchesStdlib(t *testing.T) {
	if !hasFoldAVX512 {
		t.Logf("this CPU (%s) lacks AVX-512 VPCLMULQDQ: ICRCUpdate is crc32.Update here", runtime.GOARCH)
	}
	r := rand.New(rand.NewPCG(3, 4))
	buf := make([]byte, 64+66000)
	for i := range buf {
		buf[i] = byte(r.Uint32())
	}
	lengths := []int{65536, 65536 + 255, 9000, 8192, 4096 + 16 + 4}
	for n := 0; n <= 4200; n++ {
		lengths = append(lengths, n)
	}
	for _, n := range lengths {
		off := r.IntN(64)
		p := buf[off : off+n]
		seed := r.Uint32()
		require.Equal(t, crc32.Update(seed, crc32.IEEETable, p), ICRCUpdate(seed, p), "len %d off %d", n, off)
	}
}

// TestICRCUpdateEdges: all-zero and all-one blocks, and the seeds 0 and
// 0xFFFFFFFF, where a register mixed into the wrong lane or bit order
// shows.
func TestICRCUpdateEdges(t *testing.T) {
	for _, fill := range []byte{0x00, 0xFF, 0x80, 0x01} {
		p := make([]byte, 1024)
		for i := range p {
			p[i] = fill
		}
		for _, seed := range []uint32{0, 0xFFFFFFFF, 1, 0x80000000} {
			for _, n := range []int{256, 512, 768, 1024} {
				require.Equal(t, crc32.Update(seed, crc32.IEEETable, p[:n]), ICRCUpdate(seed, p[:n]),
					"fill %#x seed %#x len %d", fill, seed, n)
			}
		}
	}
}

// genericIEEE is a copy of crc32.IEEETable: crc32.Update runs its
// table-driven Go code for any table but IEEETable itself, so with this
// one it is a pure Go reference, independent of the standard library's
// assembly as well as of ours.
var genericIEEE = *crc32.IEEETable

// TestICRCUpdateEveryAlignment compares ICRCUpdate with the pure Go
// reference for every length from 0 to 300 and around the fold's block
// multiples, each at every start offset modulo 64 (a cache line, the
// widest load foldAVX512 makes), from a random register.
func TestICRCUpdateEveryAlignment(t *testing.T) {
	r := rand.New(rand.NewPCG(5, 6))
	buf := make([]byte, 64+1100)
	for i := range buf {
		buf[i] = byte(r.Uint32())
	}
	var lengths []int
	for n := 0; n <= 300; n++ {
		lengths = append(lengths, n)
	}
	for _, k := range []int{512, 768, 1024} {
		for n := k - 17; n <= k+17; n++ {
			lengths = append(lengths, n)
		}
	}
	for _, n := range lengths {
		for off := range 64 {
			p := buf[off : off+n]
			seed := r.Uint32()
			want := crc32.Update(seed, &genericIEEE, p)
			if got := ICRCUpdate(seed, p); got != want {
				t.Fatalf("len %d off %d seed %#x: ICRCUpdate %#x, want %#x", n, off, seed, got, want)
			}
		}
	}
}

// FuzzICRCUpdate: ICRCUpdate equals the pure Go reference and the
// standard library's crc32.Update for any bytes, register and start
// offset.
func FuzzICRCUpdate(f *testing.F) {
	f.Add(uint32(0), make([]byte, 256))
	f.Add(uint32(0xFFFFFFFF), make([]byte, 4096+16))
	f.Add(uint32(0x12345678), []byte("ICRC"))
	f.Fuzz(func(t *testing.T, seed uint32, b []byte) {
		for off := range min(len(b)+1, 64) {
			p := b[off:]
			got, want := ICRCUpdate(seed, p), crc32.Update(seed, &genericIEEE, p)
			if std := crc32.Update(seed, crc32.IEEETable, p); got != want || std != want {
				t.Fatalf("len %d off %d seed %#x: ICRCUpdate %#x, crc32.Update %#x, pure Go %#x", len(p), off, seed, got, std, want)
			}
		}
	})
}

// BenchmarkICRCUpdate compares ICRCUpdate with crc32.Update over payloads
// in cache: `go test -run '^$' -bench ICRCUpdate ./packet`.
func BenchmarkICRCUpdate(b *testing.B) {
	for _, n := range []int{12, 28, 44, 63, 64, 256, 1024, 4096, 4108, 65536} {
		p := make([]byte, n)
		for i := range p {
			p[i] = byte(i * 7)
		}
		b.Run(fmt.Sprintf("%d/stdlib", n), func(b *testing.B) {
			b.SetBytes(int64(n))
			var c uint32
			for b.Loop() {
				c = crc32.Update(c, crc32.IEEETable, p)
			}
		})
		b.Run(fmt.Sprintf("%d/small", n), func(b *testing.B) {
			b.SetBytes(int64(n))
			var c uint32
			for b.Loop() {
				c = updateSmall(c, p)
			}
		})
		b.Run(fmt.Sprintf("%d/icrc", n), func(b *testing.B) {
			b.SetBytes(int64(n))
			b.ReportAllocs()
			var c uint32
			for b.Loop() {
				c = ICRCUpdate(c, p)
			}
		})
	}
}

// TestICRCCopy: ICRCCopy returns ICRCUpdate's register and leaves an exact
// copy of src in dst, bytes past len(src) untouched, for lengths around
// the fold's block multiples and every source and destination offset
// modulo 64 that a packet or a memory region can have.
func TestICRCCopy(t *testing.T) { eachCopyPath(t, testICRCCopy) }

// eachCopyPath runs test once with ICRCCopy's built-in copy and, where the
// fold runs, once with the fold's copy (foldCopy: the race detector's
// builds use the built-in copy otherwise).
func eachCopyPath(t *testing.T, test func(*testing.T)) {
	fc := foldCopy
	t.Cleanup(func() { foldCopy = fc })
	modes := []bool{false}
	if hasFoldAVX512 {
		modes = append(modes, true)
	}
	for _, f := range modes {
		foldCopy = f
		t.Run(fmt.Sprint("fold=", f), test)
	}
}

func testICRCCopy(t *testing.T) {
	r := rand.New(rand.NewPCG(7, 8))
	src := make([]byte, 64+4200)
	for i := range src {
		src[i] = byte(r.Uint32())
	}
	dst := make([]byte, 64+4200+8)
	var lengths []int
	for _, k := range []int{0, 256, 512, 4096} {
		for n := max(k-3, 0); n <= k+3; n++ {
			lengths = append(lengths, n)
		}
	}
	lengths = append(lengths, 1, 100, 1000, 2040)
	for _, n := range lengths {
		for _, so := range []int{0, 4, 12, 28, 63} {
			for do := range 64 {
				for i := range dst {
					dst[i] = 0xA5
				}
				p := src[so : so+n]
				seed := r.Uint32()
				got := ICRCCopy(seed, dst[do:do+n+8], p)
				if want := crc32.Update(seed, &genericIEEE, p); got != want {
					t.Fatalf("len %d src off %d dst off %d: ICRCCopy %#x, want %#x", n, so, do, got, want)
				}
				if string(dst[do:do+n]) != string(p) {
					t.Fatalf("len %d src off %d dst off %d: the copy differs", n, so, do)
				}
				for i, b := range dst {
					if (i < do || i >= do+n) && b != 0xA5 {
						t.Fatalf("len %d dst off %d: byte %d outside the copy written", n, do, i)
					}
				}
			}
		}
	}
	require.Panics(t, func() { ICRCCopy(0, make([]byte, 3), make([]byte, 4)) }, "a dst shorter than src")
}

// FuzzICRCCopy: ICRCCopy copies any bytes exactly, writes nothing before
// or after them in the destination's buffer (its capacity reaches past
// them, as a packet buffer's does: the fold's assembly would not stop at a
// slice's length), and returns the pure Go reference's register, with the
// built-in copy and, where the fold runs, the fold's.
func FuzzICRCCopy(f *testing.F) {
	f.Add(uint32(0), make([]byte, 4096), uint8(4))
	f.Add(uint32(0x12345678), []byte("ICRC copy"), uint8(0))
	f.Add(uint32(7), bytes.Repeat([]byte{1, 2, 3}, 700), uint8(63))
	fc := foldCopy
	f.Cleanup(func() { foldCopy = fc })
	f.Fuzz(func(t *testing.T, seed uint32, b []byte, off uint8) {
		for _, fold := range []bool{false, hasFoldAVX512} {
			foldCopy = fold
			pre := int(off % 64)
			buf := bytes.Repeat([]byte{0xA5}, pre+len(b)+64)
			got := ICRCCopy(seed, buf[pre:pre+len(b)], b)
			if want := crc32.Update(seed, &genericIEEE, b); got != want {
				t.Fatalf("len %d fold %v: ICRCCopy %#x, want %#x", len(b), fold, got, want)
			}
			if string(buf[pre:pre+len(b)]) != string(b) {
				t.Fatalf("len %d fold %v: the copy differs", len(b), fold)
			}
			for i, x := range buf {
				if (i < pre || i >= pre+len(b)) && x != 0xA5 {
					t.Fatalf("len %d dst off %d fold %v: byte %d outside the copy written", len(b), pre, fold, i)
				}
			}
		}
	})
}

// BenchmarkICRCCopy compares ICRCCopy with a copy followed by ICRCUpdate,
// 4 KiB from an aligned source into a destination 4 bytes past an 8-byte
// boundary (a payload after a BTH), the source in cache or not (cold:
// walking 64 MiB): `go test -run '^$' -bench ICRCCopy ./packet`.
func BenchmarkICRCCopy(b *testing.B) {
	const n = 4096
	for _, cold := range []bool{false, true} {
		size := n
		if cold {
			size = 64 << 20
		}
		src := make([]byte, size)
		dst := make([]byte, n+64)
		for _, fused := range []bool{false, true} {
			b.Run(fmt.Sprintf("cold=%v/fused=%v", cold, fused), func(b *testing.B) {
				b.SetBytes(n)
				off := 0
				var crc uint32
				for b.Loop() {
					p := src[off : off+n]
					if fused {
						crc = ICRCCopy(crc, dst[4:], p)
					} else {
						copy(dst[4:], p)
						crc = ICRCUpdate(crc, dst[4:4+n])
					}
					off = (off + n) % size
				}
				_ = crc
			})
		}
	}
}
