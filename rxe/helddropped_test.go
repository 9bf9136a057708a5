package rxe

import (
	"testing"
	"time"

	"github.com/gorxe/gorxe/netdev"
	"github.com/gorxe/gorxe/packet"
	"github.com/stretchr/testify/require"
)

// TestHeldDropped: the datagrams a QP takes back after local drops and
// then forgets instead of sending are counted in held_dropped, per QP and
// per device (QPCounters.HeldDropped, Counters.HeldDropped): an RC QP in
// ERR keeps only its ACK and NAK packets, of those it held (stepHeld,
// takeBack) and of those handed back to it in ERR (takeBack); a reset or
// destroyed QP, or a UC or UD QP in ERR, keeps none (reset and Destroy,
// flushUnreliable, takeBack). Each case holds a batch taken back before
// the failure, then, with second, is handed a batch built before it and
// refused after it, and then steps once its back-off is over. The counter
// equals the datagrams neither held nor sent.
func TestHeldDropped(t *testing.T) {
	// mixed has 5 datagrams that are not ACK or NAK packets and 2 that are.
	mixed := []packet.Opcode{packet.RCRDMAWriteFirst, packet.RCAcknowledge, packet.RCRDMAReadResponseFirst,
		packet.RCAtomicAcknowledge, packet.RCAcknowledge, packet.RCSendOnly, packet.RCRDMAReadRequest}
	rc := func(t *testing.T, da, _ *Device) *QP { return initQP(t, da) }
	ud := func(t *testing.T, da, _ *Device) *QP {
		e := newTypedEnd(t, da, QPTypeUD)
		readyUD(t, e, 0x11)
		return e.qp
	}
	uc := func(t *testing.T, da, db *Device) *QP {
		a, b := newTypedEnd(t, da, QPTypeUC), newTypedEnd(t, db, QPTypeUC)
		connectUC(t, a, b)
		return a.qp
	}
	toErr := func(t *testing.T, qp *QP) {
		require.NoError(t, qp.Modify(&QPAttr{State: QPSErr}, QPAttrState))
	}
	for _, tc := range []struct {
		name      string
		qp        func(t *testing.T, da, db *Device) *QP
		fail      func(t *testing.T, qp *QP)
		second    bool
		forgotten uint64 // held_dropped at the end
		sent      int    // datagrams the step sends
	}{
		{name: "rc-err-step", qp: rc, fail: toErr, forgotten: 5, sent: 2},
		{name: "rc-err-takeback", qp: rc, fail: toErr, second: true, forgotten: 10, sent: 4},
		{name: "rc-reset", qp: rc, second: true, forgotten: 14, fail: func(t *testing.T, qp *QP) {
			require.NoError(t, qp.Modify(&QPAttr{State: QPSReset}, QPAttrState))
		}},
		{name: "rc-destroy", qp: rc, second: true, forgotten: 14, fail: func(t *testing.T, qp *QP) {
			require.NoError(t, qp.Destroy())
		}},
		{name: "ud-err", qp: ud, fail: toErr, forgotten: 7},
		{name: "ud-err-takeback", qp: ud, fail: toErr, second: true, forgotten: 14},
		{name: "uc-err-takeback", qp: uc, fail: toErr, second: true, forgotten: 14},
	} {
		t.Run(tc.name, func(t *testing.T) {
			da, db := newDevices(t, "pipe")
			qp := tc.qp(t, da, db)
			v := qp.vec
			// The test is the vector's transmit pass: it holds txMu, as
			// step and takeBack's callers do, so the transmit goroutine
			// stays out.
			v.txMu.Lock()
			defer v.txMu.Unlock()

			qp.mu.Lock()
			gen := qp.gen
			qp.mu.Unlock()
			batch := func() ([]netdev.Message, []*QP, []uint32) {
				msgs := make([]netdev.Message, len(mixed))
				owners := make([]*QP, len(mixed))
				gens := make([]uint32, len(mixed))
				for i, op := range mixed {
					msgs[i] = netdev.Message{Buf: make([]byte, maxPacket), N: 64}
					packet.BTH(msgs[i].Buf).SetOpcode(op)
					owners[i], gens[i] = qp, gen
				}
				return msgs, owners, gens
			}
			qp.takeBack(batch())
			require.Equal(t, len(mixed), heldCount(qp), "held before the failure")
			require.Zero(t, qp.Counters().HeldDropped)

			tc.fail(t, qp)
			if tc.second {
				rest, _, _ := qp.takeBack(batch())
				require.Empty(t, rest, "the batch had only the QP's datagrams")
			}
			qp.mu.Lock()
			qp.localDrop.until = time.Time{} // the back-off is over
			qp.mu.Unlock()
			out := make([]netdev.Message, 2*len(mixed))
			for i := range out {
				out[i].Buf = make([]byte, maxPacket)
			}
			k, _ := qp.step(out, make([]*QP, len(out)), 0)
			require.Equal(t, tc.sent, k, "datagrams sent")
			require.Zero(t, heldCount(qp), "still held")

			require.Equal(t, tc.forgotten, qp.Counters().HeldDropped, "the QP's held_dropped")
			require.Equal(t, tc.forgotten, da.Counters().HeldDropped, "the device's held_dropped")
			require.Contains(t, qp.Counters().Named(), NamedCounter{"held_dropped", tc.forgotten})
			require.Contains(t, da.Counters().Named(), NamedCounter{"held_dropped", tc.forgotten})
		})
	}
}

// TestHeldDroppedCountsWhatIsLeft: held_dropped counts only the held
// datagrams not yet sent again, and counts a single one. An RC QP holds
// the datagrams of a batch taken back after a local drop, sends part of
// them once its back-off is over (the rest wait for the next pass), and
// is then reset: the rest are forgotten, not those that left. A QP in
// ERR that holds a single request forgets that one.
func TestHeldDroppedCountsWhatIsLeft(t *testing.T) {
	for _, tc := range []struct {
		name      string
		ops       []packet.Opcode
		room      int // datagrams the step may send
		fail      QPState
		forgotten uint64
	}{
		{name: "reset-after-part-sent", ops: []packet.Opcode{packet.RCRDMAWriteFirst, packet.RCRDMAWriteMiddle,
			packet.RCRDMAWriteMiddle, packet.RCRDMAWriteMiddle, packet.RCRDMAWriteLast}, room: 2, fail: QPSReset, forgotten: 3},
		{name: "one-in-err", ops: []packet.Opcode{packet.RCSendOnly}, room: 4, fail: QPSErr, forgotten: 1},
	} {
		t.Run(tc.name, func(t *testing.T) {
			da, _ := newDevices(t, "pipe")
			qp := initQP(t, da)
			v := qp.vec
			v.txMu.Lock() // the test is the vector's transmit pass
			defer v.txMu.Unlock()
			qp.mu.Lock()
			gen := qp.gen
			qp.mu.Unlock()
			msgs := make([]netdev.Message, len(tc.ops))
			owners := make([]*QP, len(tc.ops))
			gens := make([]uint32, len(tc.ops))
			for i, op := range tc.ops {
				msgs[i] = netdev.Message{Buf: make([]byte, maxPacket), N: 64}
				packet.BTH(msgs[i].Buf).SetOpcode(op)
				owners[i], gens[i] = qp, gen
			}
			qp.takeBack(msgs, owners, gens)
			require.Equal(t, len(tc.ops), heldCount(qp))
			qp.mu.Lock()
			qp.localDrop.until = time.Time{} // the back-off is over
			qp.mu.Unlock()
			out := make([]netdev.Message, tc.room)
			for i := range out {
				out[i].Buf = make([]byte, maxPacket)
			}
			sent := 0
			if tc.fail != QPSErr {
				sent, _ = qp.step(out, make([]*QP, len(out)), 0)
				require.Equal(t, tc.room, sent, "datagrams sent before the failure")
			}
			require.NoError(t, qp.Modify(&QPAttr{State: tc.fail}, QPAttrState))
			if tc.fail == QPSErr {
				k, _ := qp.step(out, make([]*QP, len(out)), 0)
				require.Zero(t, k, "a QP in ERR sends no held request")
			}
			require.Zero(t, heldCount(qp), "still held")
			require.Equal(t, tc.forgotten, qp.Counters().HeldDropped, "the QP's held_dropped")
			require.Equal(t, tc.forgotten, da.Counters().HeldDropped, "the device's held_dropped")
		})
	}
}
