package netdev

import (
	"net/netip"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// sizedRun is one Message per size, all to to, each filled with its index.
func sizedRun(to netip.AddrPort, sizes ...int) []Message {
	ms := make([]Message, len(sizes))
	for i, n := range sizes {
		buf := make([]byte, n)
		for j := range buf {
			buf[j] = byte(i)
		}
		ms[i] = Message{Buf: buf, N: n, Addr: to}
	}
	return ms
}

// repeatSizes is count copies of size, then the sizes in tail.
func repeatSizes(count, size int, tail ...int) []int {
	s := make([]int, 0, count+len(tail))
	for range count {
		s = append(s, size)
	}
	return append(s, tail...)
}

// TestRunLength checks the limits of one GSO send (runLength): every
// datagram but the last has the first one's size (UDP_SEGMENT splits the
// buffer at that size, so a longer datagram would be cut in two and a
// shorter one would take bytes of the next), at most maxGSOSegments
// datagrams (the kernel's UDP_MAX_SEGMENTS), at most maxGSOBytes of
// payload, and at most gsoMax bytes with 42 bytes of headers per IPv4
// datagram: gsoWireMax, or less after a refused buffer (shrinkGSO).
func TestRunLength(t *testing.T) {
	to := netip.MustParseAddrPort("127.0.0.1:4792")
	tests := []struct {
		name   string
		sizes  []int
		limit  int
		want   int
		gsoMax int // 0: maxGSOBytes
	}{
		{"equal sizes", repeatSizes(10, 100), 10, 10, 0},
		{"limit", repeatSizes(10, 100), 4, 4, 0},
		{"a longer datagram starts a new run", []int{100, 101, 100}, 3, 1, 0},
		{"a shorter datagram ends the run", []int{100, 100, 99, 99}, 4, 3, 0},
		{"one byte shorter ends it too", []int{100, 99, 99}, 3, 2, 0},
		{"an empty first datagram runs alone", []int{0, 0}, 2, 1, 0},
		{"an empty datagram is not in a run", []int{100, 0}, 2, 1, 0},
		{"at most maxGSOSegments", repeatSizes(100, 10), 100, maxGSOSegments, 0},
		{"maxGSOBytes exactly", repeatSizes(63, 1024, maxGSOBytes-63*1024), 64, 64, 1 << 20},
		{"one byte beyond maxGSOBytes", repeatSizes(63, 1024, maxGSOBytes-63*1024+1), 64, 63, 1 << 20},
		{"gsoWireMax with headers", repeatSizes(64, 1082), 64, gsoWireMax / (1082 + 42), 0},
		{"gsoWireMax exactly", repeatSizes(64, 1000), 64, 63, 63 * 1042},
		{"gsoMax shrunk", repeatSizes(10, 4128), 10, 3, 4*4170 - 1},
		{"gsoMax exactly", repeatSizes(10, 4128), 10, 4, 4 * 4170},
		{"gsoMax below one datagram still sends it", repeatSizes(10, 4128), 10, 1, 100},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			c := &UDPConn{local: netip.MustParseAddrPort("127.0.0.1:4791"), gsoMax: gsoWireMax}
			if tc.gsoMax > 0 {
				c.gsoMax = tc.gsoMax
			}
			require.Equal(t, tc.want, c.runLength(sizedRun(to, tc.sizes...), tc.limit))
		})
	}
}

// TestGSORunBoundaries sends batches whose sizes end or break a run and
// checks that every datagram arrives with its own length and bytes: a run
// that took a longer datagram, or a datagram after a shorter one, would
// arrive cut at other boundaries.
func TestGSORunBoundaries(t *testing.T) {
	tests := []struct {
		name  string
		sizes []int
	}{
		{"longer after equal", []int{100, 100, 101}},
		{"longer second", []int{100, 101}},
		{"shorter then equal", []int{100, 99, 99}},
		{"shorter then longer", []int{100, 50, 100, 100}},
	}
	for _, fam := range families {
		for _, tc := range tests {
			t.Run(fam.name+"/"+tc.name, func(t *testing.T) {
				if fam.needsIPv6 {
					skipNoIPv6(t)
				}
				tx := listen(t, fam.lo, Options{RewriteIPv4ID: keepID})
				rx := listen(t, fam.lo, Options{})
				require.True(t, tx.gso.Load(), "UDP_SEGMENT unavailable")
				ms := sizedRun(rx.LocalAddr(), tc.sizes...)
				n, err := tx.WriteBatch(ms)
				require.NoError(t, err)
				require.Equal(t, len(ms), n)
				got := readN(t, rx, len(ms))
				require.Len(t, got, len(ms))
				for i, r := range got {
					require.Equal(t, ms[i].Buf, r.data, "datagram %d", i)
				}
				require.Equal(t, uint64(len(ms)), rx.Stats().PacketsReceived, "no extra datagrams")
			})
		}
	}
}

// TestGROSlicesCapped: a datagram split out of a GRO buffer has len and
// cap N (Message), so that appending to it cannot overwrite the next
// datagram of the buffer.
func TestGROSlicesCapped(t *testing.T) {
	tx := listen(t, lo4, Options{RewriteIPv4ID: keepID})
	rx := listen(t, lo4, Options{})
	require.True(t, rx.GRO(), "UDP_GRO unavailable")
	ms := gsoRun(rx.LocalAddr(), 8, 500)
	_, err := tx.WriteBatch(ms)
	require.NoError(t, err)
	msgs := newMsgs(rx.BatchSize(), 9000)
	got := 0
	for got < len(ms) {
		n, err := rx.ReadBatch(msgs)
		require.NoError(t, err)
		for _, m := range msgs[:n] {
			require.Equal(t, 500, m.N)
			require.Equal(t, m.N, cap(m.Buf), "datagram %d", got)
			got++
		}
	}
	require.Equal(t, uint64(1), rx.Stats().GROBuffers)
}

// TestGROEntries: a GRO reader receives into at most 8 buffers of 64 KiB
// per recvmmsg (512 KiB per socket), and fewer for smaller batches.
func TestGROEntries(t *testing.T) {
	for _, tc := range []struct{ batch, want int }{{1, 1}, {7, 7}, {8, 8}, {64, 8}, {MaxBatchSize, 8}} {
		require.Equal(t, tc.want, groEntries(tc.batch), "batch %d", tc.batch)
		c := listen(t, lo4, Options{BatchSize: tc.batch})
		if c.GRO() {
			require.Len(t, c.rx.hdrs, tc.want, "batch %d", tc.batch)
			require.Len(t, c.grx.bufs, tc.want, "batch %d", tc.batch)
		}
	}
}

// TestV6SocketRefusesMappedDestination: an IPv6 socket is IPV6_V6ONLY, so
// an IPv4-mapped destination is an invalid message, as an IPv4 one is.
func TestV6SocketRefusesMappedDestination(t *testing.T) {
	skipNoIPv6(t)
	tx := listen(t, lo6, Options{})
	for _, to := range []string{"[::ffff:127.0.0.1]:9", "127.0.0.1:9"} {
		n, err := tx.WriteBatch([]Message{{Buf: []byte("x"), N: 1, Addr: netip.MustParseAddrPort(to)}})
		require.ErrorIs(t, err, ErrInvalidMessage, to)
		require.Zero(t, n)
	}
}

// TestGSOBoundShrinksAndRegrows drives shrinkGSO and growGSO on a clock of
// the test's: a refused buffer halves the bound (never below its first
// datagram), buffers sent within gsoRegrow of the last change leave it, and
// one sent later doubles it, up to maxGSOBytes.
func TestGSOBoundShrinksAndRegrows(t *testing.T) {
	now := time.Unix(1000, 0)
	c := &UDPConn{gsoMax: gsoWireMax, now: func() time.Time { return now }}
	to := netip.MustParseAddrPort("127.0.0.1:4792")
	const wire = 4128 + 42 // a datagram with its Ethernet, IPv4 and UDP headers
	c.shrinkGSO(sizedRun(to, repeatSizes(15, 4128)...))
	require.Equal(t, 15*wire/2, c.gsoMax)
	c.shrinkGSO(sizedRun(to, repeatSizes(2, 4128)...))
	require.Equal(t, wire, c.gsoMax, "half of two datagrams is one")
	c.shrinkGSO(sizedRun(to, repeatSizes(1, 4128)...))
	require.Equal(t, wire, c.gsoMax, "never below the refused buffer's first datagram")
	require.Equal(t, uint64(3), c.Stats().GSOShrinks)
	require.Equal(t, 1, c.runLength(sizedRun(to, repeatSizes(4, 4128)...), 4))

	now = now.Add(gsoRegrow - time.Nanosecond)
	c.growGSO()
	require.Equal(t, wire, c.gsoMax, "within gsoRegrow of the shrink")
	for want := 2 * wire; want < gsoWireMax; want *= 2 {
		now = now.Add(gsoRegrow)
		c.growGSO()
		require.Equal(t, want, c.gsoMax)
		c.growGSO()
		require.Equal(t, want, c.gsoMax, "once per gsoRegrow")
	}
	now = now.Add(gsoRegrow)
	c.growGSO()
	require.Equal(t, gsoWireMax, c.gsoMax)
	require.Equal(t, uint64(gsoWireMax), c.Stats().GSOLimit)
	now = now.Add(gsoRegrow)
	c.growGSO()
	require.Equal(t, gsoWireMax, c.gsoMax, "at most gsoWireMax")
}
