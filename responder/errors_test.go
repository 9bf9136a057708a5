package responder

import (
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/gorxe/gorxe/packet"
	"github.com/gorxe/gorxe/rxe/verbs"
)

// TestErrors has one row per fatal error path of rxe_resp.c (protocol
// notes §3.4 step 10): the NAK on the wire, the receive completions, the
// status Failed reports and the ERR_* state taken.
func TestErrors(t *testing.T) {
	const mtu = 1024
	var (
		invReq    = packet.NAKSyndrome(packet.NAKInvalidRequest)
		remAccess = packet.NAKSyndrome(packet.NAKRemoteAccess)
		remOp     = packet.NAKSyndrome(packet.NAKRemoteOperation)
	)
	access := func(a verbs.AccessFlags) cfgMod { return func(c *Config) { c.Access = a } }
	post := func(lens ...uint32) func(*harness) {
		return func(h *harness) { h.postRecv(1, lens...) }
	}
	for _, tc := range []struct {
		name  string
		mods  []cfgMod
		setup func(*harness)
		send  func(*harness)
		// Expected last packet: a NAK with nak at nakPSN; or a plain ACK
		// (ack); or nothing at all (none).
		nak    packet.Syndrome
		nakPSN packet.PSN
		ack    bool
		none   bool
		wcs    []verbs.WCStatus
		fail   verbs.WCStatus
		state  State
	}{
		{name: "missing_first_send", send: func(h *harness) { h.rx(packet.RCSendMiddle, 100, pattern(mtu, 0)) },
			nak: invReq, nakPSN: 100, fail: verbs.WCRemInvReqErr, state: StateErrMissingOpcodeFirst},
		{name: "missing_first_write", send: func(h *harness) { h.rx(packet.RCRDMAWriteLast, 100, pattern(10, 0)) },
			nak: invReq, nakPSN: 100, fail: verbs.WCRemInvReqErr, state: StateErrMissingOpcodeFirst},
		{name: "missing_last_send", setup: post(4096), send: func(h *harness) {
			h.rx(packet.RCSendFirst, 100, pattern(mtu, 0))
			h.rx(packet.RCSendOnly, 101, pattern(1, 0), ackReq)
		}, nak: invReq, nakPSN: 101, wcs: []verbs.WCStatus{verbs.WCRemInvReqErr}, fail: verbs.WCRemInvReqErr, state: StateErrMissingOpcodeLastC},
		{name: "missing_last_write", send: func(h *harness) {
			h.rx(packet.RCRDMAWriteFirst, 100, pattern(mtu, 0), reth(rva, rkey, 2*mtu))
			h.rx(packet.RCRDMAReadRequest, 101, nil, reth(rva, rkey, 8))
		}, nak: invReq, nakPSN: 101, fail: verbs.WCRemInvReqErr, state: StateErrMissingOpcodeLastC},
		{name: "missing_last_write_new_write", send: func(h *harness) {
			h.rx(packet.RCRDMAWriteFirst, 100, pattern(mtu, 0), reth(rva, rkey, 2*mtu))
			h.rx(packet.RCRDMAWriteOnly, 101, pattern(8, 0), reth(rva, rkey, 8), ackReq)
		}, nak: invReq, nakPSN: 101, fail: verbs.WCRemInvReqErr, state: StateErrMissingOpcodeLastC},
		{name: "qp_no_remote_read", mods: []cfgMod{access(verbs.AccessRemoteWrite | verbs.AccessRemoteAtomic)},
			send: func(h *harness) { h.rx(packet.RCRDMAReadRequest, 100, nil, reth(rva, rkey, 8)) },
			nak:  invReq, nakPSN: 100, fail: verbs.WCRemInvReqErr, state: StateErrUnsupportedOpcode},
		{name: "qp_no_remote_write", mods: []cfgMod{access(verbs.AccessRemoteRead)},
			send: func(h *harness) { h.rx(packet.RCRDMAWriteOnly, 100, pattern(8, 0), reth(rva, rkey, 8)) },
			nak:  invReq, nakPSN: 100, fail: verbs.WCRemInvReqErr, state: StateErrUnsupportedOpcode},
		{name: "qp_no_remote_write_atomic_write", mods: []cfgMod{access(verbs.AccessRemoteRead)},
			send: func(h *harness) { h.rx(packet.RCAtomicWrite, 100, pattern(8, 0), reth(rva, rkey, 8)) },
			nak:  invReq, nakPSN: 100, fail: verbs.WCRemInvReqErr, state: StateErrUnsupportedOpcode},
		{name: "qp_no_remote_atomic", mods: []cfgMod{access(verbs.AccessRemoteRead | verbs.AccessRemoteWrite)},
			send: func(h *harness) { h.rx(packet.RCFetchAdd, 100, nil, atomicETH(rva, rkey, 1, 0)) },
			nak:  invReq, nakPSN: 100, fail: verbs.WCRemInvReqErr, state: StateErrUnsupportedOpcode},
		{name: "qp_no_flush",
			send: func(h *harness) { h.rx(packet.RCFlush, 100, nil, feth(flushGlobal), reth(rva, rkey, 8)) },
			nak:  invReq, nakPSN: 100, fail: verbs.WCRemInvReqErr, state: StateErrUnsupportedOpcode},
		// A FLUSH needs every placement type it asks for (rxe
		// check_op_valid: IB_ACCESS_FLUSH_GLOBAL and _PERSISTENT each).
		{name: "qp_no_flush_persistent", mods: []cfgMod{access(verbs.AccessFlushGlobal)},
			send: func(h *harness) { h.rx(packet.RCFlush, 100, nil, feth(flushPersistent), reth(rva, rkey, 8)) },
			nak:  invReq, nakPSN: 100, fail: verbs.WCRemInvReqErr, state: StateErrUnsupportedOpcode},
		{name: "qp_flush_global_only_asked_both", mods: []cfgMod{access(verbs.AccessFlushGlobal)},
			send: func(h *harness) {
				h.rx(packet.RCFlush, 100, nil, feth(flushGlobal|flushPersistent), reth(rva, rkey, 8))
			},
			nak: invReq, nakPSN: 100, fail: verbs.WCRemInvReqErr, state: StateErrUnsupportedOpcode},
		{name: "no_responder_resources_read", mods: []cfgMod{func(c *Config) { c.MaxDestRdAtomic = 0 }},
			send: func(h *harness) { h.rx(packet.RCRDMAReadRequest, 100, nil, reth(rva, rkey, 8)) },
			nak:  invReq, nakPSN: 100, fail: verbs.WCRemInvReqErr, state: StateErrTooManyRDMAAtmReq},
		{name: "no_responder_resources_atomic", mods: []cfgMod{func(c *Config) { c.MaxDestRdAtomic = 0 }},
			send: func(h *harness) { h.rx(packet.RCCompareSwap, 100, nil, atomicETH(rva, rkey, 1, 0)) },
			nak:  invReq, nakPSN: 100, fail: verbs.WCRemInvReqErr, state: StateErrTooManyRDMAAtmReq},
		{name: "misaligned_atomic_va",
			send: func(h *harness) { h.rx(packet.RCFetchAdd, 100, nil, atomicETH(rva+4, rkey, 1, 0)) },
			nak:  invReq, nakPSN: 100, fail: verbs.WCRemInvReqErr, state: StateErrMisalignedAtomic},
		{name: "misaligned_atomic_host_address", setup: func(h *harness) {
			backing := make([]byte, 64)
			h.mem.mrs = append(h.mem.mrs, &fakeMR{key: 0x99, va: 0x20000, buf: backing[1:33], valid: true,
				access: verbs.AccessRemoteAtomic | verbs.AccessLocalWrite})
		}, send: func(h *harness) { h.rx(packet.RCFetchAdd, 100, nil, atomicETH(0x20000, 0x99, 1, 0)) },
			nak: invReq, nakPSN: 100, fail: verbs.WCRemInvReqErr, state: StateErrMisalignedAtomic},
		// The VA is checked itself (C9-123), not only the host address it
		// maps to: a region registered at an IOVA 4 bytes off its 8-byte
		// aligned buffer.
		{name: "misaligned_atomic_va_aligned_host", setup: func(h *harness) {
			h.mem.mrs = append(h.mem.mrs, &fakeMR{key: 0x99, va: 0x20004, buf: make([]byte, 64), valid: true,
				access: verbs.AccessRemoteAtomic | verbs.AccessLocalWrite})
		}, send: func(h *harness) { h.rx(packet.RCFetchAdd, 100, nil, atomicETH(0x20004, 0x99, 1, 0)) },
			nak: invReq, nakPSN: 100, fail: verbs.WCRemInvReqErr, state: StateErrMisalignedAtomic},
		{name: "misaligned_atomic_write_va_aligned_host", setup: func(h *harness) {
			h.mem.mrs = append(h.mem.mrs, &fakeMR{key: 0x99, va: 0x20004, buf: make([]byte, 64), valid: true,
				access: verbs.AccessRemoteWrite | verbs.AccessLocalWrite})
		}, send: func(h *harness) { h.rx(packet.RCAtomicWrite, 100, pattern(8, 0), reth(0x20004, 0x99, 8)) },
			nak: invReq, nakPSN: 100, fail: verbs.WCRemInvReqErr, state: StateErrMisalignedAtomic},
		{name: "misaligned_atomic_write",
			send: func(h *harness) { h.rx(packet.RCAtomicWrite, 100, pattern(8, 0), reth(rva+4, rkey, 8)) },
			nak:  invReq, nakPSN: 100, fail: verbs.WCRemInvReqErr, state: StateErrMisalignedAtomic},
		{name: "length_first_short", setup: post(4096),
			send: func(h *harness) { h.rx(packet.RCSendFirst, 100, pattern(100, 0)) },
			nak:  invReq, nakPSN: 100, wcs: []verbs.WCStatus{verbs.WCRemInvReqErr}, fail: verbs.WCRemInvReqErr, state: StateErrLength},
		{name: "length_middle_long", setup: post(4096), send: func(h *harness) {
			h.rx(packet.RCSendFirst, 100, pattern(mtu, 0))
			h.rx(packet.RCSendMiddle, 101, pattern(mtu+1, 0))
		}, nak: invReq, nakPSN: 101, wcs: []verbs.WCStatus{verbs.WCRemInvReqErr}, fail: verbs.WCRemInvReqErr, state: StateErrLength},
		{name: "length_last_empty", send: func(h *harness) {
			h.rx(packet.RCRDMAWriteFirst, 100, pattern(mtu, 0), reth(rva, rkey, 2*mtu))
			h.rx(packet.RCRDMAWriteLast, 101, nil)
		}, nak: invReq, nakPSN: 101, fail: verbs.WCRemInvReqErr, state: StateErrLength},
		{name: "length_write_ends_short", setup: post(4096), send: func(h *harness) {
			// A full-PMTU LAST with a PMTU still owed: the WRITE would end
			// short of its DMA length (kernel rxe takes it).
			h.rx(packet.RCRDMAWriteFirst, 100, pattern(mtu, 0), reth(rva, rkey, 3*mtu))
			h.rx(packet.RCRDMAWriteLastWithImm, 101, pattern(mtu, 0), imm(1))
		}, nak: invReq, nakPSN: 101, wcs: []verbs.WCStatus{verbs.WCRemInvReqErr}, fail: verbs.WCRemInvReqErr, state: StateErrLength},
		{name: "length_only_too_long", setup: post(4096),
			send: func(h *harness) { h.rx(packet.RCSendOnly, 100, pattern(mtu+1, 0)) },
			nak:  invReq, nakPSN: 100, wcs: []verbs.WCStatus{verbs.WCRemInvReqErr}, fail: verbs.WCRemInvReqErr, state: StateErrLength},
		{name: "length_dma_over_2g",
			send: func(h *harness) { h.rx(packet.RCRDMAReadRequest, 100, nil, reth(rva, rkey, 1<<31+1)) },
			nak:  invReq, nakPSN: 100, fail: verbs.WCRemInvReqErr, state: StateErrLength},
		// A DMA length of exactly 2^31 is allowed (rxe check_length
		// refuses only more, C9-94): it fails on the R_Key's range.
		{name: "dma_2g_reaches_rkey_check",
			send: func(h *harness) { h.rx(packet.RCRDMAReadRequest, 100, nil, reth(rva, rkey, 1<<31)) },
			nak:  remAccess, nakPSN: 100, fail: verbs.WCRemAccessErr, state: StateErrRKeyViolation},
		// rxe check_rkey: a WRITE packet whose pad count is not the one
		// its payload needs is a length error.
		{name: "length_write_only_wrong_pad", send: func(h *harness) {
			h.r.Receive(t0, withPad(t, build(t, h.tx, packet.RCRDMAWriteOnly, 100, pattern(10, 0), reth(rva, rkey, 10)), 0))
		}, nak: invReq, nakPSN: 100, fail: verbs.WCRemInvReqErr, state: StateErrLength},
		{name: "length_write_first_padded", send: func(h *harness) {
			h.r.Receive(t0, withPad(t, build(t, h.tx, packet.RCRDMAWriteFirst, 100, pattern(mtu, 0), reth(rva, rkey, 2*mtu)), 1))
		}, nak: invReq, nakPSN: 100, fail: verbs.WCRemInvReqErr, state: StateErrLength},
		{name: "length_write_mismatch",
			send: func(h *harness) { h.rx(packet.RCRDMAWriteOnly, 100, pattern(10, 0), reth(rva, rkey, 20)) },
			nak:  invReq, nakPSN: 100, fail: verbs.WCRemInvReqErr, state: StateErrLength},
		{name: "length_zero_write_with_payload",
			send: func(h *harness) { h.rx(packet.RCRDMAWriteOnly, 100, pattern(10, 0), reth(rva, rkey, 0)) },
			nak:  invReq, nakPSN: 100, fail: verbs.WCRemInvReqErr, state: StateErrLength},
		{name: "recv_buffer_overflow", setup: post(10),
			send: func(h *harness) { h.rx(packet.RCSendOnly, 100, pattern(20, 0), ackReq) },
			nak:  invReq, nakPSN: 100, wcs: []verbs.WCStatus{verbs.WCLocLenErr}, fail: verbs.WCLocLenErr, state: StateErrLength},
		{name: "recv_buffer_overflow_by_one", setup: post(10),
			send: func(h *harness) { h.rx(packet.RCSendOnly, 100, pattern(11, 0), ackReq) },
			nak:  invReq, nakPSN: 100, wcs: []verbs.WCStatus{verbs.WCLocLenErr}, fail: verbs.WCLocLenErr, state: StateErrLength},
		{name: "recv_buffer_overflow_multi", setup: post(1500), send: func(h *harness) {
			h.rx(packet.RCSendFirst, 100, pattern(mtu, 0))
			h.rx(packet.RCSendLast, 101, pattern(1000, 0), ackReq)
		}, nak: invReq, nakPSN: 101, wcs: []verbs.WCStatus{verbs.WCLocLenErr}, fail: verbs.WCLocLenErr, state: StateErrLength},
		{name: "rkey_unknown_write",
			send: func(h *harness) { h.rx(packet.RCRDMAWriteOnly, 100, pattern(8, 0), reth(rva, 0xBAD, 8), ackReq) },
			nak:  remAccess, nakPSN: 100, fail: verbs.WCRemAccessErr, state: StateErrRKeyViolation},
		{name: "rkey_range_write",
			send: func(h *harness) { h.rx(packet.RCRDMAWriteOnly, 100, pattern(8, 0), reth(rva+rsize-4, rkey, 8)) },
			nak:  remAccess, nakPSN: 100, fail: verbs.WCRemAccessErr, state: StateErrRKeyViolation},
		{name: "rkey_range_multi_packet_write", send: func(h *harness) {
			h.rx(packet.RCRDMAWriteFirst, 100, pattern(mtu, 0), reth(rva+rsize-mtu, rkey, 2*mtu))
		}, nak: remAccess, nakPSN: 100, fail: verbs.WCRemAccessErr, state: StateErrRKeyViolation},
		{name: "rkey_range_read",
			send: func(h *harness) { h.rx(packet.RCRDMAReadRequest, 100, nil, reth(rva, rkey, rsize+1)) },
			nak:  remAccess, nakPSN: 100, fail: verbs.WCRemAccessErr, state: StateErrRKeyViolation},
		{name: "mr_without_remote_read", setup: func(h *harness) {
			h.mem.mrs = append(h.mem.mrs, &fakeMR{key: 0x55, va: 0x30000, buf: make([]byte, 64), valid: true,
				access: verbs.AccessLocalWrite | verbs.AccessRemoteWrite})
		}, send: func(h *harness) { h.rx(packet.RCRDMAReadRequest, 100, nil, reth(0x30000, 0x55, 8)) },
			nak: remAccess, nakPSN: 100, fail: verbs.WCRemAccessErr, state: StateErrRKeyViolation},
		{name: "mr_without_remote_write", setup: func(h *harness) {
			h.mem.mrs = append(h.mem.mrs, &fakeMR{key: 0x55, va: 0x30000, buf: make([]byte, 64), valid: true,
				access: verbs.AccessLocalWrite | verbs.AccessRemoteRead | verbs.AccessRemoteAtomic})
		}, send: func(h *harness) { h.rx(packet.RCRDMAWriteOnly, 100, pattern(8, 0), reth(0x30000, 0x55, 8), ackReq) },
			nak: remAccess, nakPSN: 100, fail: verbs.WCRemAccessErr, state: StateErrRKeyViolation},
		{name: "mr_without_remote_atomic", setup: func(h *harness) {
			h.mem.mrs = append(h.mem.mrs, &fakeMR{key: 0x55, va: 0x30000, buf: make([]byte, 64), valid: true,
				access: verbs.AccessLocalWrite | verbs.AccessRemoteRead | verbs.AccessRemoteWrite})
		}, send: func(h *harness) { h.rx(packet.RCFetchAdd, 100, nil, atomicETH(0x30000, 0x55, 1, 0)) },
			nak: remAccess, nakPSN: 100, fail: verbs.WCRemAccessErr, state: StateErrRKeyViolation},
		// A FLUSH of a memory range (selectivity level 0) needs the range
		// inside the region (rxe check_rkey's mr_check_range).
		{name: "rkey_range_flush", mods: []cfgMod{access(verbs.AccessFlushGlobal)},
			send: func(h *harness) { h.rx(packet.RCFlush, 100, nil, feth(flushGlobal), reth(rva+rsize-4, rkey, 8)) },
			nak:  remAccess, nakPSN: 100, fail: verbs.WCRemAccessErr, state: StateErrRKeyViolation},
		{name: "rkey_unknown_atomic",
			send: func(h *harness) { h.rx(packet.RCCompareSwap, 100, nil, atomicETH(rva, 0xBAD, 1, 0)) },
			nak:  remAccess, nakPSN: 100, fail: verbs.WCRemAccessErr, state: StateErrRKeyViolation},
		{name: "rkey_unknown_write_with_imm", setup: post(16), send: func(h *harness) {
			h.rx(packet.RCRDMAWriteOnlyWithImm, 100, pattern(8, 0), reth(rva, 0xBAD, 8), imm(1))
		}, nak: remAccess, nakPSN: 100, wcs: []verbs.WCStatus{verbs.WCRemAccessErr}, fail: verbs.WCRemAccessErr, state: StateErrRKeyViolation},
		{name: "malformed_wqe", setup: func(h *harness) {
			h.rq.post(verbs.RecvWR{ID: 1, SGList: []verbs.SGE{{Addr: lva, Length: 64, LKey: 0xBAD}}})
		}, send: func(h *harness) { h.rx(packet.RCSendOnly, 100, pattern(10, 0), ackReq) },
			nak: remOp, nakPSN: 100, wcs: []verbs.WCStatus{verbs.WCLocQPOpErr}, fail: verbs.WCLocQPOpErr, state: StateErrMalformedWQE},
		{name: "invalidate_fails", setup: post(64),
			send: func(h *harness) { h.rx(packet.RCSendOnlyWithInvalidate, 100, pattern(10, 0), ieth(0xBAD), ackReq) },
			ack:  true, wcs: []verbs.WCStatus{verbs.WCRemInvReqErr}, fail: verbs.WCRemInvReqErr, state: StateErrInvalidateRKey},
		{name: "cq_overflow", setup: func(h *harness) { h.cq.limit = -1; h.postRecv(1, 64) },
			send: func(h *harness) { h.rx(packet.RCSendOnly, 100, pattern(10, 0), ackReq) },
			none: true, fail: verbs.WCGeneralErr, state: StateErrCQOverflow},
	} {
		t.Run(tc.name, func(t *testing.T) {
			h := newHarness(t, append([]cfgMod{withPMTU(mtu)}, tc.mods...)...)
			if tc.setup != nil {
				tc.setup(h)
			}
			tc.send(h)
			out := h.drain()
			switch {
			case tc.none:
				require.Empty(t, out)
			case tc.ack:
				require.NotEmpty(t, out)
				expectACK(t, out[len(out)-1], 100, 0)
			default:
				require.NotEmpty(t, out)
				last := out[len(out)-1]
				expect(t, last, opcode(packet.RCAcknowledge), psnIs(tc.nakPSN), syndrome(tc.nak))
				for _, p := range out[:len(out)-1] {
					require.True(t, p.AETH() == nil || !p.AETH().Syndrome().IsNAK(), "one NAK, last")
				}
			}
			var got []verbs.WCStatus
			for _, wc := range h.cq.wcs {
				got = append(got, wc.Status)
				require.Equal(t, uint64(1), wc.ID)
				require.Equal(t, uint32(ourQPN), wc.QPNum)
			}
			require.Equal(t, tc.wcs, got)
			status, failed := h.r.Failed()
			require.True(t, failed)
			require.Equal(t, tc.fail, status)
			require.Equal(t, tc.state, h.r.FailState())
			require.True(t, h.seen(tc.state))
			require.True(t, h.seen(StateError))
			require.Equal(t, StateError, h.r.State())

			// A failed responder drops everything; Flush completes the
			// WQEs still posted.
			dropped := h.r.Counters().Dropped
			h.rx(packet.RCRDMAWriteOnly, h.r.EPSN(), pattern(8, 0), reth(rva, rkey, 8), ackReq)
			require.Empty(t, h.drain())
			require.Equal(t, dropped+1, h.r.Counters().Dropped)
			h.postRecv(2, 8)
			h.cq.limit = 0
			h.r.Flush()
			require.Zero(t, h.rq.Len())
			require.Equal(t, verbs.WCWRFlushErr, h.cq.wcs[len(h.cq.wcs)-1].Status)
		})
	}
}

// withPad returns a copy of request p whose data area is its payload
// followed by pad bytes of padding, with the BTH pad count set to pad: a
// packet a requester that pads wrongly would send (its ICRC is not
// recomputed; Receive does not check it).
func withPad(t testing.TB, p packet.Packet, pad int) packet.Packet {
	t.Helper()
	b := p.Bytes()
	end := len(b) - packet.ICRCSize - p.PadCnt() // end of the payload
	out := append(append(append([]byte(nil), b[:end]...), make([]byte, pad)...), b[len(b)-packet.ICRCSize:]...)
	out[1] = out[1]&^0x30 | byte(pad)<<4
	q, err := packet.Parse(out)
	require.NoError(t, err)
	require.Equal(t, p.PayloadLen(), q.PayloadLen())
	require.Equal(t, pad, q.PadCnt())
	return q
}
