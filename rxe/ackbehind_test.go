package rxe

import (
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/gorxe/gorxe/netdev"
	"github.com/stretchr/testify/require"
)

// TestAckBehind checks which steps ackBehind reorders: a lone responder
// packet no longer than the requester's equal-size packets, all within
// one GSO send, goes last; everything else keeps its order.
func TestAckBehind(t *testing.T) {
	const ack, write2 = 20, 36 // an ACK; a 2-byte inline WRITE's datagram
	tests := []struct {
		name  string
		sizes []int // the step's packets, the responder's first
		nr    int   // how many are the responder's
		moved bool
	}{
		{"ACK and a WRITE", []int{ack, write2}, 1, true},
		{"ACK and a run of equal requests", []int{ack, 4124, 4124, 4124}, 1, true},
		{"ACK as long as the requests", []int{ack, ack}, 1, true},
		{"ACK longer than the request", []int{ack, 16}, 1, false},
		{"requests of two sizes", []int{ack, 4124, 1000}, 1, false},
		{"two responder packets", []int{ack, ack, write2}, 2, false},
		{"responder packets only", []int{ack}, 1, false},
		{"requester packets only", []int{write2, write2}, 0, false},
		{"beyond the GSO segment bound", append([]int{ack}, slices.Repeat([]int{write2}, netdev.GSOMaxSegments)...), 1, false},
		{"at the GSO segment bound", append([]int{ack}, slices.Repeat([]int{write2}, netdev.GSOMaxSegments-1)...), 1, true},
		{"beyond the GSO byte bound", []int{ack, netdev.GSOMaxBytes - ack/2}, 1, false},
		{"within the GSO byte bound", append([]int{ack}, slices.Repeat([]int{4124}, (netdev.GSOMaxBytes-ack)/4124)...), 1, true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			ms := make([]netdev.Message, len(tt.sizes))
			for i, n := range tt.sizes {
				ms[i] = netdev.Message{Buf: []byte(fmt.Sprint(i)), N: n}
			}
			ackBehind(ms, tt.nr)
			order := make([]string, len(ms))
			for i := range ms {
				order[i] = string(ms[i].Buf)
			}
			want := make([]string, len(ms))
			for i := range want {
				want[i] = fmt.Sprint(i)
			}
			if tt.moved {
				want = append(want[1:], want[0])
			}
			require.Equal(t, want, order)
		})
	}
}

// TestWritePingPongAckInGSO runs a 2-byte inline WRITE ping-pong over
// loopback UDP in which both ends busy-poll, as write-lat does: each end
// sends its WRITE with the ACK of the peer's last one, and ackBehind lets
// the two leave as one GSO buffer (a 36-byte WRITE, then the 20-byte
// ACK). Every packet verifies at the other end (StrictICRC: the ACK's
// ICRC covers the IPv4 ID the kernel gives it as a GSO segment).
func TestWritePingPongAckInGSO(t *testing.T) {
	// A long recovery floor: a stall of the race detector is no loss.
	a, z, conns := udpPair(t, Options{StrictICRC: true, Recovery: RecoveryConfig{Floor: time.Second}})
	const rounds = 200
	wcs := make([]WC, 4)
	// send WRITEs byte i into the peer's buffer at offset 64.
	send := func(from, to *end, i int) {
		from.buf[0] = byte(i)
		_, err := from.qp.PostSend(SendWR{Opcode: WRRDMAWrite, Flags: SendSignaled | SendInline,
			InlineData: from.buf[:2], RemoteAddr: to.mr.Addr() + 64, RKey: to.mr.RKey()})
		require.NoError(t, err)
	}
	// await busy-polls e until the peer's WRITE i has landed (seen as
	// write-lat sees it, by the responder's expected PSN, whose QP lock
	// orders the landing before the read of the byte) and e's own WRITE
	// has completed.
	pending := map[*end]int{}
	base := map[*end]uint32{a: a.qp.Query().RQPSN, z: z.qp.Query().RQPSN}
	await := func(e *end, i int) {
		deadline := time.Now().Add(busyTimeout)
		for (e.qp.Query().RQPSN-base[e])&0xFFFFFF < uint32(i) || pending[e] > 0 {
			require.False(t, time.Now().After(deadline), "round %d", i)
			for _, wc := range wcs[:e.cq.BusyPoll(wcs)] {
				require.Equal(t, WCSuccess, wc.Status)
				pending[e]--
			}
		}
		require.Equal(t, byte(i), e.buf[64], "round %d", i)
	}
	gso0 := conns[0].Stats().GSOBuffers + conns[1].Stats().GSOBuffers
	for i := 1; i <= rounds; i++ {
		send(a, z, i)
		pending[a]++
		await(z, i)
		send(z, a, i)
		pending[z]++
		await(a, i)
	}
	gso := conns[0].Stats().GSOBuffers + conns[1].Stats().GSOBuffers - gso0
	t.Logf("%d round trips: %d GSO buffers", rounds, gso)
	for _, e := range []*end{a, z} {
		require.Zero(t, e.dev.Counters().BadICRC, "every GSO segment verifies")
		require.Zero(t, e.qp.Counters().Requester.Retransmits)
	}
	require.GreaterOrEqual(t, gso, uint64(rounds/2), "the WRITEs carry the peer's ACK in their GSO buffer")
}
