package responder

import (
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/gorxe/gorxe/packet"
	"github.com/gorxe/gorxe/rxe/verbs"
)

// TestFailureBehindReadTrainCompletions: a SEND that fails (its receive
// buffer overflows) while the response train of an earlier READ is still
// queued reports its receive WQE only once the train has gone. If the
// READ's region goes before that, the READ's fault fails the QP and the
// SEND's WQE is flushed (WR_FLUSH_ERR), as in kernel rxe, which sends a
// READ's whole train (read_reply) before it looks at the next request and
// so never executed the SEND; and so it is if the QP is flushed before the
// train has gone. Otherwise the WQE completes with the SEND's own error.
func TestFailureBehindReadTrainCompletions(t *testing.T) {
	const mtu = 1024
	overflowOnly := func(h *harness) {
		h.rx(packet.RCSendOnly, 102, pattern(20, 0), ackReq)
	}
	overflowLast := func(h *harness) {
		h.rx(packet.RCSendFirst, 102, pattern(mtu, 0))
		h.rx(packet.RCSendLast, 103, pattern(1000, 0), ackReq)
	}
	tests := []struct {
		name      string
		recvLen   uint32
		send      func(*harness)
		regionGo  bool // the READ's region is deregistered before the train is sent
		flushNow  bool // the QP is flushed before the train is sent
		nak       packet.NAKCode
		nakPSN    packet.PSN
		fail      verbs.WCStatus
		wantWC    verbs.WCStatus
		responses int // READ response packets sent before the NAK
	}{
		{name: "region_stays", recvLen: 10, send: overflowOnly,
			nak: packet.NAKInvalidRequest, nakPSN: 102, fail: verbs.WCLocLenErr, wantWC: verbs.WCLocLenErr, responses: 2},
		{name: "region_goes", recvLen: 10, send: overflowOnly, regionGo: true,
			nak: packet.NAKRemoteAccess, nakPSN: 100, fail: verbs.WCRemAccessErr, wantWC: verbs.WCWRFlushErr},
		{name: "region_goes_message_begun", recvLen: 1500, send: overflowLast, regionGo: true,
			nak: packet.NAKRemoteAccess, nakPSN: 100, fail: verbs.WCRemAccessErr, wantWC: verbs.WCWRFlushErr},
		{name: "flushed_before_train", recvLen: 10, send: overflowOnly, flushNow: true,
			fail: verbs.WCLocLenErr, wantWC: verbs.WCWRFlushErr},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			h := newHarness(t)
			h.postRecv(7, tc.recvLen)
			h.rx(packet.RCRDMAReadRequest, 100, nil, reth(rva, rkey, 2*mtu))
			tc.send(h)
			_, failed := h.r.Failed()
			require.True(t, failed)
			if tc.regionGo {
				h.remote.valid = false
			}
			var out []packet.Packet
			if tc.flushNow {
				h.r.Flush()
			} else {
				out = h.drain()
				require.Len(t, out, tc.responses+1, "READ responses, then the NAK")
				expect(t, out[len(out)-1], opcode(packet.RCAcknowledge), psnIs(tc.nakPSN), syndrome(packet.NAKSyndrome(tc.nak)))
				h.r.Flush()
			}
			status, _ := h.r.Failed()
			require.Equal(t, tc.fail, status)
			require.Len(t, h.cq.wcs, 1, "one completion of the receive WQE")
			require.Equal(t, uint64(7), h.cq.wcs[0].ID)
			require.Equal(t, tc.wantWC, h.cq.wcs[0].Status)
			// rxe do_complete counts rdma_recvs for a successful
			// completion only.
			require.Zero(t, h.r.Counters().RDMARecvs, "an error completion is no rdma_recv")
		})
	}
}

// TestCompletionsBehindReadTrain: requests that arrive while an earlier
// READ's response train is still queued complete only once the train has
// gone, in order: the first ones when the READ's LAST response is taken,
// each later one once the responses queued ahead of it have gone (as rxe
// completes a request after it acknowledged the one before); if the READ's
// region goes before that, the READ fails the QP (Remote Access NAK for
// the READ's PSN), nothing queued behind the train is sent, and their
// receive WQEs are flushed with WR_FLUSH_ERR, as they are if the QP is
// flushed before the train has gone. Kernel rxe sends a READ's whole train
// (read_reply) before it takes the next request, so a fault of the train
// moves the QP to ERR before the requests behind it run.
func TestCompletionsBehindReadTrain(t *testing.T) {
	const mtu = 1024
	type wantWC struct {
		id     uint64
		opcode verbs.WCOpcode
		flags  verbs.WCFlags
		imm    uint32
		n      uint32
	}
	tests := []struct {
		name   string
		behind func(h *harness) packet.PSN // queues the requests from PSN 102, returns the last PSN
		wcs    []wantWC                    // their receive completions, in order
		atLast int                         // how many are posted as the READ's LAST response is taken
		last   packet.Opcode               // the response to the last request
	}{
		{name: "send", behind: func(h *harness) packet.PSN {
			h.rx(packet.RCSendOnly, 102, pattern(20, 0), ackReq)
			return 102
		}, wcs: []wantWC{{id: 7, opcode: verbs.WCRecv, n: 20}}, atLast: 1, last: packet.RCAcknowledge},
		{name: "send_imm_solicited", behind: func(h *harness) packet.PSN {
			h.rx(packet.RCSendOnlyWithImmediate, 102, pattern(30, 0), imm(5), se, ackReq)
			return 102
		}, wcs: []wantWC{{id: 7, opcode: verbs.WCRecv, flags: verbs.WCFlagWithImm, imm: 5, n: 30}}, atLast: 1, last: packet.RCAcknowledge},
		{name: "send_two_packets", behind: func(h *harness) packet.PSN {
			h.rx(packet.RCSendFirst, 102, pattern(mtu, 0))
			h.rx(packet.RCSendLast, 103, pattern(10, 0), ackReq)
			return 103
		}, wcs: []wantWC{{id: 7, opcode: verbs.WCRecv, n: mtu + 10}}, atLast: 1, last: packet.RCAcknowledge},
		{name: "write_imm", behind: func(h *harness) packet.PSN {
			h.rx(packet.RCRDMAWriteOnlyWithImm, 102, pattern(16, 0), reth(rva+8192, rkey, 16), imm(9), ackReq)
			return 102
		}, wcs: []wantWC{{id: 7, opcode: verbs.WCRecvRDMAWithImm, flags: verbs.WCFlagWithImm, imm: 9, n: 16}}, atLast: 1, last: packet.RCAcknowledge},
		{name: "atomic", behind: func(h *harness) packet.PSN {
			h.rx(packet.RCFetchAdd, 102, nil, atomicETH(rva+4096, rkey, 1, 0))
			return 102
		}, last: packet.RCAtomicAcknowledge},
		{name: "write_then_send", behind: func(h *harness) packet.PSN {
			// The SEND's completion waits behind the train and the
			// WRITE's ACK after it, as rxe completes the SEND after it
			// acknowledged the WRITE.
			h.rx(packet.RCRDMAWriteOnly, 102, pattern(8, 0), reth(rva+8192, rkey, 8), ackReq)
			h.rx(packet.RCSendOnly, 103, pattern(20, 0), ackReq)
			return 103
		}, wcs: []wantWC{{id: 7, opcode: verbs.WCRecv, n: 20}}, atLast: 0, last: packet.RCAcknowledge},
		{name: "send_then_first", behind: func(h *harness) packet.PSN {
			// A SEND completes behind the train while the next one,
			// begun, holds the second receive WQE: a flush completes
			// the first before the second.
			h.rx(packet.RCSendOnly, 102, pattern(20, 0), ackReq)
			h.rx(packet.RCSendFirst, 103, pattern(mtu, 0), ackReq)
			return 103
		}, wcs: []wantWC{{id: 7, opcode: verbs.WCRecv, n: 20}}, atLast: 1, last: packet.RCAcknowledge},
		{name: "mixed", behind: func(h *harness) packet.PSN {
			h.rx(packet.RCSendOnly, 102, pattern(20, 0), ackReq)
			h.rx(packet.RCRDMAWriteOnly, 103, pattern(8, 0), reth(rva+8192, rkey, 8))
			h.rx(packet.RCFetchAdd, 104, nil, atomicETH(rva+4096, rkey, 1, 0))
			h.rx(packet.RCRDMAWriteOnlyWithImm, 105, pattern(16, 0), reth(rva+8192, rkey, 16), imm(9), ackReq)
			h.rx(packet.RCSendOnlyWithImmediate, 106, pattern(30, 0), imm(5), se, ackReq)
			return 106
		}, wcs: []wantWC{
			{id: 7, opcode: verbs.WCRecv, n: 20},
			{id: 8, opcode: verbs.WCRecvRDMAWithImm, flags: verbs.WCFlagWithImm, imm: 9, n: 16},
			{id: 9, opcode: verbs.WCRecv, flags: verbs.WCFlagWithImm, imm: 5, n: 30},
		}, atLast: 1, last: packet.RCAcknowledge},
	}
	for _, tc := range tests {
		for _, outcome := range []string{"train_sent", "read_faults", "flushed"} {
			t.Run(tc.name+"/"+outcome, func(t *testing.T) {
				h := newHarness(t)
				for id := uint64(7); id < 11; id++ {
					h.postRecv(id, 2*mtu)
				}
				h.rx(packet.RCRDMAReadRequest, 100, nil, reth(rva, rkey, 2*mtu))
				last := tc.behind(h)
				require.Equal(t, last.Next(), h.r.EPSN())
				require.Empty(t, h.cq.wcs, "nothing completes while the READ's train is queued")

				n := h.r.NextPacket(t0, h.rxbuf)
				require.NotZero(t, n)
				p, err := packet.Parse(h.rxbuf[:n])
				require.NoError(t, err)
				expect(t, p, opcode(packet.RCRDMAReadResponseFirst), psnIs(100))
				require.Empty(t, h.cq.wcs, "nothing completes while the READ's train is queued")

				if outcome == "flushed" {
					// The QP enters ERR (e.g. the consumer's Modify QP)
					// before the train has gone.
					h.r.Flush()
					require.Zero(t, h.r.q.reads, "no READ response stream counted after the flush")
					require.Empty(t, h.drain())
					require.Len(t, h.cq.wcs, 4, "every WQE flushed, the ones behind the train first")
					for i, wc := range h.cq.wcs {
						require.Equal(t, uint64(7+i), wc.ID)
						require.Equal(t, verbs.WCWRFlushErr, wc.Status)
					}
					return
				}
				if outcome == "read_faults" {
					h.remote.valid = false
					out := h.drain()
					require.Len(t, out, 1, "the NAK only: nothing queued behind the train")
					expect(t, out[0], opcode(packet.RCAcknowledge), psnIs(100),
						syndrome(packet.NAKSyndrome(packet.NAKRemoteAccess)))
					require.Empty(t, h.cq.wcs, "no completion before the QP is flushed")
					require.Zero(t, h.r.q.reads, "no READ response stream counted after the fault")
					status, failed := h.r.Failed()
					require.True(t, failed)
					require.Equal(t, verbs.WCRemAccessErr, status)
					h.r.Flush()
					require.Len(t, h.cq.wcs, 4, "every WQE flushed, the ones behind the train first")
					for i, wc := range h.cq.wcs {
						require.Equal(t, uint64(7+i), wc.ID)
						require.Equal(t, verbs.WCWRFlushErr, wc.Status)
					}
					require.Zero(t, h.r.Counters().RDMARecvs)
					return
				}

				n = h.r.NextPacket(t0, h.rxbuf)
				require.NotZero(t, n)
				p, err = packet.Parse(h.rxbuf[:n])
				require.NoError(t, err)
				expect(t, p, opcode(packet.RCRDMAReadResponseLast), psnIs(101))
				require.Len(t, h.cq.wcs, tc.atLast, "the completions behind the train, once its LAST response is taken")
				out := h.drain()
				require.NotEmpty(t, out)
				expect(t, out[len(out)-1], opcode(tc.last), psnIs(last))
				require.Len(t, h.cq.wcs, len(tc.wcs))
				for i, w := range tc.wcs {
					wc := h.cq.wcs[i]
					require.Equal(t, w.id, wc.ID)
					require.Equal(t, verbs.WCSuccess, wc.Status)
					require.Equal(t, w.opcode, wc.Opcode)
					require.Equal(t, w.flags, wc.Flags)
					require.Equal(t, w.imm, wc.Imm)
					require.Equal(t, w.n, wc.ByteLen)
					require.Equal(t, uint32(ourQPN), wc.QPNum)
					require.Equal(t, uint32(peerQPN), wc.SrcQP)
				}
				require.Equal(t, uint64(len(tc.wcs)), h.r.Counters().RDMARecvs)
				_, failed := h.r.Failed()
				require.False(t, failed)
			})
		}
	}
}

// TestHeldCompletionsCQOverflow: a receive CQ that overflows as the
// completions held behind a READ's train are posted fails the QP there,
// as rxe's do_complete would have on that request (class G, no NAK):
// what was queued behind the train is not sent, except the ACK of the
// requests before the one that overflowed, which rxe had sent.
func TestHeldCompletionsCQOverflow(t *testing.T) {
	const mtu = 1024
	tests := []struct {
		name    string
		limit   int // fakeCQ.limit
		wcs     int // completions posted
		ack     bool
		ackPSN  packet.PSN
		ackMSN  uint32
		recvs   uint64
		flushed []uint64 // WQEs flushed afterwards: those still held
	}{
		{name: "first_overflows", limit: -1, flushed: []uint64{8}},
		{name: "second_overflows", limit: 1, wcs: 1, ack: true, ackPSN: 103, ackMSN: 3, recvs: 1},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			h := newHarness(t)
			for id := uint64(7); id < 9; id++ {
				h.postRecv(id, 64)
			}
			h.cq.limit = tc.limit
			h.rx(packet.RCRDMAReadRequest, 100, nil, reth(rva, rkey, 2*mtu))
			h.rx(packet.RCSendOnly, 102, pattern(20, 0), ackReq)
			h.rx(packet.RCRDMAWriteOnly, 103, pattern(8, 0), reth(rva+8192, rkey, 8))
			h.rx(packet.RCSendOnly, 104, pattern(20, 0), ackReq)
			_, failed := h.r.Failed()
			require.False(t, failed)
			out := h.drain()
			want := 2
			if tc.ack {
				want++
			}
			require.Len(t, out, want)
			expect(t, out[0], opcode(packet.RCRDMAReadResponseFirst), psnIs(100))
			expect(t, out[1], opcode(packet.RCRDMAReadResponseLast), psnIs(101))
			if tc.ack {
				expectACK(t, out[2], tc.ackPSN, tc.ackMSN)
			}
			require.Zero(t, h.r.q.reads, "no READ response stream counted after the overflow")
			status, failed := h.r.Failed()
			require.True(t, failed)
			require.Equal(t, verbs.WCGeneralErr, status)
			require.Equal(t, StateErrCQOverflow, h.r.FailState())
			require.Len(t, h.cq.wcs, tc.wcs)
			require.Equal(t, tc.recvs, h.r.Counters().RDMARecvs)
			h.cq.limit = 0
			h.r.Flush()
			// The WQE whose completion overflowed is not completed again.
			require.Len(t, h.cq.wcs, tc.wcs+len(tc.flushed))
			for i, id := range tc.flushed {
				require.Equal(t, id, h.cq.wcs[tc.wcs+i].ID)
				require.Equal(t, verbs.WCWRFlushErr, h.cq.wcs[tc.wcs+i].Status)
			}
		})
	}
}

// TestHeldCompletionSolicited: a completion held behind a READ's train
// keeps its request's SE bit for solicited-only notification.
func TestHeldCompletionSolicited(t *testing.T) {
	h, cq := seHarness(t)
	h.rx(packet.RCRDMAReadRequest, 100, nil, reth(rva, rkey, 8))
	h.rx(packet.RCSendOnly, 101, []byte{1}, se, ackReq)
	h.rx(packet.RCSendOnly, 102, []byte{1}, ackReq)
	require.Empty(t, cq.se)
	require.Len(t, h.drain(), 2, "the READ response, then one ACK")
	require.Equal(t, []bool{true, false}, cq.se)
}

// TestHeldCompletionRoom: while a READ response stream is queued, a
// request that may post a receive completion needs room in the output
// queue for its held completion's place as well as for its response;
// without it the request is dropped before it changes anything, like a
// request that finds the queue full. One that completes nothing still
// fits in the last slot.
func TestHeldCompletionRoom(t *testing.T) {
	h := newHarness(t, func(c *Config) { c.MaxDestRdAtomic = 1 })
	h.postRecv(7, 64)
	h.rx(packet.RCRDMAReadRequest, 100, nil, reth(rva, rkey, 8))
	psn := fillWithAtomics(t, h, 101)
	h.rx(packet.RCSendOnly, psn, pattern(20, 0), ackReq)
	require.Equal(t, uint64(1), h.r.Counters().Dropped)
	require.Equal(t, psn, h.r.EPSN())
	require.Equal(t, 1, h.rq.Len(), "the receive WQE is still posted")
	h.rx(packet.RCRDMAWriteOnly, psn, pattern(8, 0), reth(rva+8192, rkey, 8), ackReq)
	require.Equal(t, psn.Next(), h.r.EPSN())
	psn = psn.Next()
	require.Zero(t, h.r.q.Free())
	out := h.drain()
	expectACK(t, out[len(out)-1], psn.Add(-1), h.r.MSN())
	h.rx(packet.RCSendOnly, psn, pattern(20, 0), ackReq)
	require.Len(t, h.cq.wcs, 1)
	require.Equal(t, verbs.WCSuccess, h.cq.wcs[0].Status)
}

// fillWithAtomics sends FETCH_ADDs from psn on until one slot of h's
// output queue is left, each queuing its ATOMIC ACKNOWLEDGE, and returns
// the next PSN.
func fillWithAtomics(t *testing.T, h *harness, psn packet.PSN) packet.PSN {
	t.Helper()
	for i := 0; h.r.q.Free() > 1; i++ {
		require.Less(t, i, 100, "the output queue never filled")
		h.rx(packet.RCFetchAdd, psn, nil, atomicETH(rva+4096, rkey, 1, 0))
		psn = psn.Next()
	}
	return psn
}

// TestHeldCompletionsKeepOrder: once a READ's train has gone, a
// completion still held behind the responses queued after the train (an
// ATOMIC ACKNOWLEDGE here) is not overtaken by the completion of a request
// that arrives meanwhile: receive WQEs complete in the order they were
// taken.
func TestHeldCompletionsKeepOrder(t *testing.T) {
	const mtu = 1024
	h := newHarness(t)
	for id := uint64(7); id < 10; id++ {
		h.postRecv(id, 64)
	}
	h.rx(packet.RCRDMAReadRequest, 100, nil, reth(rva, rkey, 2*mtu))
	h.rx(packet.RCSendOnly, 102, pattern(20, 0), ackReq)
	h.rx(packet.RCFetchAdd, 103, nil, atomicETH(rva+4096, rkey, 1, 0))
	h.rx(packet.RCSendOnly, 104, pattern(20, 0), ackReq)
	for range 2 {
		require.NotZero(t, h.r.NextPacket(t0, h.rxbuf))
	}
	require.Len(t, h.cq.wcs, 1, "the completion before the ATOMIC ACKNOWLEDGE")
	h.rx(packet.RCSendOnly, 105, pattern(20, 0), ackReq)
	out := h.drain()
	require.Len(t, out, 3, "ACK, ATOMIC ACKNOWLEDGE, ACK")
	expectACK(t, out[2], 105, 5)
	require.Len(t, h.cq.wcs, 3)
	for i, wc := range h.cq.wcs {
		require.Equal(t, uint64(7+i), wc.ID)
		require.Equal(t, verbs.WCSuccess, wc.Status)
	}
}

// TestHeldCQOverflowBeforeLaterFailure: a receive CQ that overflows as
// the completion of a request behind a READ's train is posted is the
// failure reported, even if a request after it had failed the responder
// already: kernel rxe, which sends the train before it takes the next
// request, fails in do_complete on the first one (class G) and never runs
// the second. The second's NAK is not sent and its receive WQE, never
// executed as far as rxe's order goes, is flushed.
func TestHeldCQOverflowBeforeLaterFailure(t *testing.T) {
	const mtu = 1024
	h := newHarness(t)
	h.postRecv(7, 64)
	h.postRecv(8, 10)
	h.cq.limit = -1
	h.rx(packet.RCRDMAReadRequest, 100, nil, reth(rva, rkey, 2*mtu))
	h.rx(packet.RCSendOnly, 102, pattern(20, 0), ackReq)
	h.rx(packet.RCSendOnly, 103, pattern(20, 0), ackReq) // overflows WQE 8
	status, failed := h.r.Failed()
	require.True(t, failed)
	require.Equal(t, verbs.WCLocLenErr, status)
	out := h.drain()
	require.Len(t, out, 2, "the train only")
	expect(t, out[0], opcode(packet.RCRDMAReadResponseFirst), psnIs(100))
	expect(t, out[1], opcode(packet.RCRDMAReadResponseLast), psnIs(101))
	status, failed = h.r.Failed()
	require.True(t, failed)
	require.Equal(t, verbs.WCGeneralErr, status)
	require.Equal(t, StateErrCQOverflow, h.r.FailState())
	require.Empty(t, h.cq.wcs)
	h.cq.limit = 0
	h.r.Flush()
	require.Len(t, h.cq.wcs, 1, "WQE 8 flushed; WQE 7's completion was refused")
	require.Equal(t, uint64(8), h.cq.wcs[0].ID)
	require.Equal(t, verbs.WCWRFlushErr, h.cq.wcs[0].Status)
}

// TestHeldCompletionRoomWQEInUse: while a READ response stream is queued
// and a receive WQE is in use (a SEND begun), any request may complete
// that WQE (its LAST, or an error), so it needs room for the held
// completion's place as well as for its response; without it the request
// is dropped before it changes anything. With no READ response stream
// queued and nothing held, a request that takes a receive WQE still fits
// in the last slot: its completion is posted at once.
func TestHeldCompletionRoomWQEInUse(t *testing.T) {
	const mtu = 1024
	t.Run("behind_train", func(t *testing.T) {
		h := newHarness(t, func(c *Config) { c.MaxDestRdAtomic = 1 })
		h.postRecv(7, 2*mtu)
		h.rx(packet.RCRDMAReadRequest, 100, nil, reth(rva, rkey, 8))
		h.rx(packet.RCFetchAdd, 101, nil, atomicETH(rva+4096, rkey, 1, 0))
		h.rx(packet.RCSendFirst, 102, pattern(mtu, 0))
		for i := 0; h.r.q.Free() > 1; i++ {
			require.Less(t, i, 100)
			// Duplicates of the atomic, each answered from its
			// resource with an ATOMIC ACKNOWLEDGE.
			h.rx(packet.RCFetchAdd, 101, nil, atomicETH(rva+4096, rkey, 1, 0))
		}
		h.rx(packet.RCSendLast, 103, pattern(20, 0), ackReq)
		require.Equal(t, uint64(1), h.r.Counters().Dropped)
		require.Equal(t, packet.PSN(103), h.r.EPSN())
		require.Equal(t, 1, h.r.q.Free())
		h.drain()
		require.Empty(t, h.cq.wcs)
		h.rx(packet.RCSendLast, 103, pattern(20, 0), ackReq)
		require.Len(t, h.cq.wcs, 1)
		require.Equal(t, verbs.WCSuccess, h.cq.wcs[0].Status)
		require.Equal(t, uint32(mtu+20), h.cq.wcs[0].ByteLen)
	})
	t.Run("nothing_queued_ahead", func(t *testing.T) {
		h := newHarness(t, func(c *Config) { c.MaxDestRdAtomic = 1 })
		h.postRecv(7, 64)
		psn := fillWithAtomics(t, h, 100)
		h.rx(packet.RCSendOnly, psn, pattern(20, 0), ackReq)
		require.Zero(t, h.r.Counters().Dropped)
		require.Equal(t, psn.Next(), h.r.EPSN())
		require.Len(t, h.cq.wcs, 1)
		require.Equal(t, verbs.WCSuccess, h.cq.wcs[0].Status)
	})
}

// TestBuildErrorDropsReadStream: a response that cannot be built (here
// every one: the configured pseudo-header is not valid) is dropped and
// counted; a READ response stream dropped so is no longer queued, so a
// request after it completes at once instead of waiting behind it.
func TestBuildErrorDropsReadStream(t *testing.T) {
	h := newHarness(t, func(c *Config) { c.Pseudo = packet.PseudoHeader{} })
	h.postRecv(7, 64)
	h.rx(packet.RCRDMAReadRequest, 100, nil, reth(rva, rkey, 8))
	require.Equal(t, StateReadReply, h.r.State())
	require.Zero(t, h.r.NextPacket(t0, h.rxbuf))
	require.Equal(t, uint64(1), h.r.Counters().BuildErrors)
	require.False(t, h.r.Pending())
	require.Equal(t, StateGetReq, h.r.State())
	h.rx(packet.RCSendOnly, 101, pattern(20, 0), ackReq)
	require.Len(t, h.cq.wcs, 1, "completed at once: no READ response stream ahead")
	require.Equal(t, verbs.WCSuccess, h.cq.wcs[0].Status)
}

// TestRDMARecvsCountsDelivered: RDMARecvs counts the successful receive
// completions the CQ took. A SEND whose completion a full CQ refuses fails
// the QP (class G) and is not counted, whether it completed in order or
// behind a READ's train (hold), as a UC or UD receive whose completion is
// refused is not (Unreliable).
func TestRDMARecvsCountsDelivered(t *testing.T) {
	for _, behind := range []bool{false, true} {
		t.Run(map[bool]string{false: "in_order", true: "behind_train"}[behind], func(t *testing.T) {
			h := newHarness(t)
			h.postRecv(7, 64)
			h.postRecv(8, 64)
			psn := packet.PSN(100)
			send := func() {
				if behind {
					h.rx(packet.RCRDMAReadRequest, psn, nil, reth(rva, rkey, 8))
					psn = psn.Next()
				}
				h.rx(packet.RCSendOnly, psn, pattern(20, 0), ackReq)
				psn = psn.Next()
				h.drain()
			}
			send()
			require.Len(t, h.cq.wcs, 1)
			require.Equal(t, uint64(1), h.r.Counters().RDMARecvs)
			h.cq.limit = -1
			send()
			status, failed := h.r.Failed()
			require.True(t, failed)
			require.Equal(t, verbs.WCGeneralErr, status)
			require.Equal(t, uint64(1), h.r.Counters().RDMARecvs, "the refused completion is not counted")
		})
	}
}

// TestReplayFaultCompletions: without selective repeat, a duplicate READ
// answered by a train rewound to it (restartTrain) or by a replay queued
// behind the other responses fails the QP when its region has gone, and
// the receive WQEs complete as kernel rxe completes them: rxe sent the
// READ's whole train before it took the next request, so the requests
// received before the duplicate ran and completed (SEND 102 here), a
// message in progress when it came completes with IBV_WC_REM_ACCESS_ERR
// (the class C error's do_complete), and the rest is flushed.
func TestReplayFaultCompletions(t *testing.T) {
	const mtu = 1024
	tests := []struct {
		name   string
		sent   int              // READ responses taken before the rest
		reqs   func(h *harness) // from PSN 102, the duplicate of READ 100 among them
		status []verbs.WCStatus // of WQEs 1, 2, ... when the duplicate's stream faults
	}{
		{name: "train_rewound", sent: 1, reqs: func(h *harness) {
			h.rx(packet.RCSendOnly, 102, pattern(20, 0), ackReq)
			h.rx(packet.RCRDMAReadRequest, 100, nil, reth(rva, rkey, 2*mtu))
		}, status: []verbs.WCStatus{verbs.WCSuccess}},
		{name: "replay_mid_message", sent: 2, reqs: func(h *harness) {
			h.rx(packet.RCSendFirst, 102, pattern(mtu, 0))
			h.rx(packet.RCRDMAReadRequest, 100, nil, reth(rva, rkey, 2*mtu))
		}, status: []verbs.WCStatus{verbs.WCRemAccessErr}},
		{name: "replay_mid_message_ended", sent: 2, reqs: func(h *harness) {
			h.rx(packet.RCSendFirst, 102, pattern(mtu, 0))
			h.rx(packet.RCRDMAReadRequest, 100, nil, reth(rva, rkey, 2*mtu))
			h.rx(packet.RCSendLast, 103, pattern(10, 0), ackReq)
		}, status: []verbs.WCStatus{verbs.WCRemAccessErr}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			h := newHarness(t)
			const wqes = 3
			for id := range uint64(wqes) {
				h.postRecv(id+1, 2*mtu)
			}
			h.rx(packet.RCRDMAReadRequest, 100, nil, reth(rva, rkey, 2*mtu))
			for range tc.sent {
				require.NotZero(t, h.r.NextPacket(t0, h.rxbuf))
			}
			tc.reqs(h)
			h.remote.valid = false
			out := h.drain()
			require.NotEmpty(t, out)
			expect(t, out[len(out)-1], opcode(packet.RCAcknowledge), psnIs(100),
				syndrome(packet.NAKSyndrome(packet.NAKRemoteAccess)))
			status, failed := h.r.Failed()
			require.True(t, failed)
			require.Equal(t, verbs.WCRemAccessErr, status)
			require.Len(t, h.cq.wcs, len(tc.status), "completed at the fault")
			for i, s := range tc.status {
				require.Equal(t, uint64(i+1), h.cq.wcs[i].ID)
				require.Equal(t, s, h.cq.wcs[i].Status)
			}
			h.r.Flush()
			require.Len(t, h.cq.wcs, wqes)
			for i, wc := range h.cq.wcs[len(tc.status):] {
				require.Equal(t, uint64(len(tc.status)+i+1), wc.ID)
				require.Equal(t, verbs.WCWRFlushErr, wc.Status)
			}
		})
	}
}
