//go:build linux

package rxe

import (
	"encoding/binary"
	"fmt"
	"runtime"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// TestBusyPollMcastPingPong checks a UD multicast ping-pong in which both
// sides busy-poll, as rxectl's send-lat -g does: a and z, on two devices,
// are attached to one group with BlockSelfMcastLoopback, and each sends
// its sequence number to the group when it has received the other's.
// With one processor for the whole process (GOMAXPROCS 1), where the
// goroutines that read the group's sockets run only when a spinner
// yields, every round trip completes, each QP gets exactly one copy of
// each of the other's datagrams (in order, and none of its own), and the
// spinners read group datagrams themselves (Counters.PolledPkts: the
// devices' unicast sockets receive nothing in this test). Once it is
// over, an empty BusyPoll, which reads the group's socket too, allocates
// nothing.
func TestBusyPollMcastPingPong(t *testing.T) {
	da, dz := mcastDevices(t)
	defer runtime.GOMAXPROCS(runtime.GOMAXPROCS(1))
	const qkey, rounds = 0x6007, 200
	gid := mcastGID()
	var ends [2]*end
	for i, d := range []*Device{da, dz} {
		e := blockSelfEnd(t, d)
		readyUD(t, e, qkey)
		require.NoError(t, e.qp.AttachMcast(gid, 0))
		ends[i] = e
	}
	a, z := ends[0], ends[1]
	ahs := make(map[*end]*AddrHandle)
	for _, e := range ends {
		ah, err := e.pd.CreateAH(AH{DGID: gid, UDPPort: da.Addr().Port()})
		require.NoError(t, err)
		ahs[e] = ah
	}
	// Each end's receive buffer is at 0 (GRH area, then 4 bytes), its
	// send buffer at 256.
	recv := func(e *end) error {
		_, err := e.qp.PostRecv(RecvWR{SGList: []SGE{e.mr.SGE(0, GRHSize+4)}})
		return err
	}
	send := func(e *end, seq uint32) error {
		binary.BigEndian.PutUint32(e.buf[256:], seq)
		_, err := e.qp.PostSend(SendWR{Opcode: WRSend, Flags: SendSignaled, AH: ahs[e], RemoteQKey: qkey, SGList: []SGE{e.mr.SGE(256, 4)}})
		return err
	}
	// await busy-polls e's CQ until the receive of the other end's
	// datagram seq, taking the send completions on the way.
	await := func(e, from *end, seq uint32) error {
		wcs := make([]WC, 1)
		for {
			if _, err := busyWait(e.cq, wcs); err != nil {
				return err
			}
			wc := wcs[0]
			if wc.Status != WCSuccess {
				return fmt.Errorf("QP %#x: completion %v of %v", e.qp.QPN(), wc.Status, wc.Opcode)
			}
			if wc.Opcode != WCRecv {
				continue
			}
			e.qp.Query() // orders the test with the device's writes
			if got := binary.BigEndian.Uint32(e.buf[GRHSize:]); wc.SrcQP != from.qp.QPN() || wc.ByteLen != GRHSize+4 || got != seq {
				return fmt.Errorf("QP %#x: received %d bytes from QP %#x, sequence %d; want %d from %#x", e.qp.QPN(), wc.ByteLen, wc.SrcQP, got, seq, from.qp.QPN())
			}
			return recv(e)
		}
	}
	require.NoError(t, recv(a))
	require.NoError(t, recv(z))
	echo := make(chan error, 1)
	go func() {
		for i := range uint32(rounds) {
			if err := await(z, a, i); err != nil {
				echo <- fmt.Errorf("round %d: %w", i, err)
				return
			}
			if err := send(z, i); err != nil {
				echo <- err
				return
			}
		}
		echo <- nil
	}()
	for i := range uint32(rounds) {
		require.NoError(t, send(a, i))
		require.NoError(t, await(a, z, i), "round %d", i)
	}
	require.NoError(t, <-echo)
	wc := waitWC(t, z.cq)
	require.Equal(t, WCSend, wc.Opcode, "z's last send")
	require.Equal(t, WCSuccess, wc.Status)
	for _, e := range ends {
		noWC(t, e.cq, 20*time.Millisecond) // no second copy
		require.Equal(t, uint64(rounds), e.qp.Counters().RcvdPkts, "QP %#x: one copy of each of the other's datagrams", e.qp.QPN())
	}
	for _, d := range []*Device{da, dz} {
		c := d.Counters()
		require.Equal(t, uint64(2*rounds), c.McastRcvd, "%s: the other's datagrams and its own (not delivered to its QP)", d.Name())
		require.Zero(t, c.McastDropped)
		require.Positive(t, c.PolledPkts, "%s: the spinner read no group datagram", d.Name())
	}
	// A poll that finds the CQ, the device's socket and the group's
	// socket empty allocates nothing.
	wcs := make([]WC, 1)
	allocs := testing.AllocsPerRun(100, func() {
		if a.cq.BusyPoll(wcs) != 0 {
			t.Error("a completion after the ping-pong")
		}
	})
	if !benchRaceEnabled { // allocation counts are not meaningful under the race detector
		require.Zero(t, allocs, "allocations per empty BusyPoll with a group joined")
	}
}
