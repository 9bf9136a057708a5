package rxe

import (
	"context"
	"fmt"
	"math/rand/v2"
	"net/netip"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/gorxe/gorxe/netdev"
)

// udpPair opens two devices on loopback UDP sockets (127.0.0.1 and
// 127.0.0.2) made as Listen makes them, with opts, and connects an RC QP
// pair at PMTU 4096.
func udpPair(t testing.TB, opts Options) (*end, *end, [2]*netdev.UDPConn) {
	t.Helper()
	return udpPairWith(t, opts, ConnectOptions{MTU: MTU4096})
}

// udpPairWith is udpPair with the connection's options (co) given.
func udpPairWith(t testing.TB, opts Options, co ConnectOptions) (*end, *end, [2]*netdev.UDPConn) {
	t.Helper()
	var conns [2]*netdev.UDPConn
	var devs [2]*Device
	for i, addr := range []string{"127.0.0.1:0", "127.0.0.2:0"} {
		c, err := netdev.ListenUDP(netip.MustParseAddrPort(addr), SocketOptions(opts))
		require.NoError(t, err)
		o := opts
		o.Name, o.LinkMTU, o.OwnConn = fmt.Sprintf("rxe-%d", i), 9000, true
		d, err := Open(c, o)
		require.NoError(t, err)
		t.Cleanup(func() { d.Close() })
		conns[i], devs[i] = c, d
	}
	a, b := newEnd(t, devs[0], testBufSize), newEnd(t, devs[1], testBufSize)
	ia, ib := a.qp.Info(rand.Uint32()), b.qp.Info(rand.Uint32())
	require.NoError(t, a.qp.Connect(ia, ib, co))
	require.NoError(t, b.qp.Connect(ib, ia, co))
	return a, b, conns
}

// TestDataPathAllocsUDP is TestDataPathAllocs over UDP sockets, with and
// without GSO/GRO: a 64 KiB RDMA WRITE or READ allocates nothing, so no
// packet does. It also checks that the GSO runs went out as GSO buffers
// and came in as GRO buffers, and that with StrictICRC on both ends every
// packet verifies (the segments' ICRCs match the IDs the kernel gave them).
func TestDataPathAllocsUDP(t *testing.T) {
	if benchRaceEnabled {
		t.Skip("allocation counts are not meaningful under the race detector")
	}
	for _, noGSO := range []bool{false, true} {
		for _, op := range []WROpcode{WRRDMAWrite, WRRDMARead} {
			t.Run(fmt.Sprintf("nogso=%v/%v", noGSO, op), func(t *testing.T) {
				a, z, conns := udpPair(t, Options{NoGSO: noGSO, StrictICRC: true})
				ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
				defer cancel()
				require.NoError(t, newStreamer(ctx, a, z, op, benchMsg, benchDepth, benchSignal).run(4*benchDepth))
				one := newStreamer(ctx, a, z, op, benchMsg, 1, 1)
				var err error
				allocs := testing.AllocsPerRun(100, func() {
					if e := one.run(1); e != nil && err == nil {
						err = e
					}
				})
				require.NoError(t, err)
				sent := a.dev.Counters().SentPkts + z.dev.Counters().SentPkts
				t.Logf("%v 64 KiB over UDP (GSO off: %v): %.1f allocations per operation; %d packets; GSO buffers %d, GRO buffers %d",
					op, noGSO, allocs, sent, conns[0].Stats().GSOBuffers+conns[1].Stats().GSOBuffers,
					conns[0].Stats().GROBuffers+conns[1].Stats().GROBuffers)
				require.Zero(t, allocs, "allocations per 64 KiB %v over UDP", op)
				for _, d := range []*Device{a.dev, z.dev} {
					c := d.Counters()
					require.Zero(t, c.BadICRC, "StrictICRC accepts every GSO segment")
				}
				gso := conns[0].Stats().GSOBuffers + conns[1].Stats().GSOBuffers
				gro := conns[0].Stats().GROBuffers + conns[1].Stats().GROBuffers
				if noGSO {
					require.Zero(t, gso)
					require.Zero(t, gro)
				} else {
					require.Positive(t, gso, "the data packets of a 64 KiB message go out in GSO buffers")
					require.Positive(t, gro)
				}
			})
		}
	}
}
