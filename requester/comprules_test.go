package requester

import (
	"testing"

	"github.com/gorxe/gorxe/packet"
	"github.com/gorxe/gorxe/rxe/verbs"
	"github.com/stretchr/testify/require"
)

// An RNR NAK at the LAST packet of a WRITE WITH IMMEDIATE (the packet that
// consumes the receive WQE, rxe check_resource) implicitly acknowledges the
// packets before it: after the RNR wait only the LAST is sent again.
func TestRNRNAKAtWriteWithImmLastResendsOnlyLast(t *testing.T) {
	const pmtu, p0 = 1024, 0x40
	h := newHarness(t, baseConfig(pmtu, p0))
	h.mem.add(lkeyA, baseA, 1<<16, verbs.AccessLocalWrite, 1)
	h.post(&verbs.SendWR{ID: 1, Opcode: verbs.WRRDMAWriteWithImm, Flags: verbs.SendSignaled, RemoteAddr: rbase, RKey: rkey, Imm: 7,
		SGList: []verbs.SGE{{Addr: baseA, Length: 3 * pmtu, LKey: lkeyA}}})
	first := h.drain()
	require.Len(t, first, 3)
	h.recv(rnr(p0+2, 1))
	require.Empty(t, h.cq.wcs)
	h.now = h.r.Deadline()
	h.r.OnTimeout(h.now)
	again := h.drain()
	require.Len(t, again, 1, "only the refused LAST goes again")
	require.Equal(t, first[2], again[0])
	h.recv(ack(p0 + 2))
	require.Equal(t, []uint64{1}, h.cq.ids())
}

// A second RNR NAK for a request sent before the RNR retry under way (a
// duplicate, or one the responder sent for a later request) starts no
// retry of its own and spends no rnr_retry: the counter counts retries
// (IBA 9.7.5.2.8), and the retry has not been sent yet.
func TestLateRNRNAKSpendsNoRNRRetry(t *testing.T) {
	const p0 = 0x10
	cfg := baseConfig(1024, p0)
	cfg.RNRRetry = 1
	h := newHarness(t, cfg)
	h.mem.add(lkeyA, baseA, 1<<16, verbs.AccessLocalWrite, 1)
	h.post(&verbs.SendWR{ID: 1, Opcode: verbs.WRSend, Flags: verbs.SendSignaled, SGList: []verbs.SGE{{Addr: baseA, Length: 100, LKey: lkeyA}}})
	require.Len(t, h.drain(), 1)
	h.recv(rnr(p0, 1))
	wait := h.r.RNRWait()
	require.False(t, wait.IsZero())
	h.recv(rnr(p0, 1)) // the same RNR NAK again, during the wait
	_, failed := h.r.Failed()
	require.False(t, failed, "the late RNR NAK spends no rnr_retry")
	require.Equal(t, wait, h.r.RNRWait(), "nor restarts the wait")
	h.now = wait
	h.r.OnTimeout(h.now)
	require.Len(t, h.drain(), 1)
	h.recv(ack(p0))
	require.Equal(t, []uint64{1}, h.cq.ids())
	require.Equal(t, verbs.WCSuccess, h.cq.wcs[0].Status)
}

// A response for the oldest WQE before any packet of it was sent is
// stale (rxe get_wqe: a posted WQE takes no response), even a fatal NAK
// whose PSN is the first the WQE will get.
func TestResponseBeforeFirstPacketIgnored(t *testing.T) {
	h := newHarness(t, baseConfig(1024, 0))
	h.mem.add(lkeyA, baseA, 1<<16, verbs.AccessLocalWrite, 1)
	h.post(&verbs.SendWR{ID: 1, Opcode: verbs.WRSend, Flags: verbs.SendSignaled, SGList: []verbs.SGE{{Addr: baseA, Length: 10, LKey: lkeyA}}})
	h.recv(nak(0, packet.NAKRemoteAccess))
	_, failed := h.r.Failed()
	require.False(t, failed)
	require.Empty(t, h.cq.wcs)
	require.Equal(t, uint64(1), h.r.Counters().ResponsesDropped)
	require.Len(t, h.drain(), 1)
	h.recv(ack(0))
	require.Equal(t, []uint64{1}, h.cq.ids())
}

// A completion the CQ refuses fails the requester, and a cumulative ACK
// that covers later WQEs completes none of them after it: they are
// flushed with WR_FLUSH_ERR.
func TestCQOverflowLeavesLaterWQEsToFlush(t *testing.T) {
	h := newHarness(t, baseConfig(1024, 0))
	for i := range 3 {
		h.post(&verbs.SendWR{ID: uint64(i + 1), Opcode: verbs.WRSend, Flags: verbs.SendSignaled})
	}
	require.Len(t, h.drain(), 3)
	h.cq.full = true
	h.recv(ack(2))
	st, failed := h.r.Failed()
	require.True(t, failed)
	require.Equal(t, verbs.WCFatalErr, st)
	require.Equal(t, uint64(1), h.r.Counters().CQOverflow)
	require.Equal(t, 2, h.r.Outstanding())
	h.cq.full = false
	h.r.Flush()
	require.Equal(t, []uint64{2, 3}, h.cq.ids())
	require.Equal(t, verbs.WCWRFlushErr, h.cq.wcs[0].Status)
	require.Equal(t, verbs.WCWRFlushErr, h.cq.wcs[1].Status)
}

// READ responses out of the opcode sequence or of the wrong size fail the
// READ with BAD_RESP_ERR: a train starts with FIRST or ONLY (rxe check_ack),
// FIRST and MIDDLE carry exactly one path MTU with more to come, and LAST
// and ONLY the rest, at most one path MTU (IBA 9.7.5.1).
func TestBadReadResponseSequenceAndLength(t *testing.T) {
	const pmtu = 1024
	full := make([]byte, pmtu)
	for _, tc := range []struct {
		name   string
		length uint32
		resps  [][]byte // the last one is the bad one
	}{
		{"middle-without-first", 3 * pmtu, [][]byte{
			resp(packet.RCRDMAReadResponseMiddle, 0, packet.SyndromeACKUnlimited, 0, full)}},
		{"last-without-first", 2 * pmtu, [][]byte{
			resp(packet.RCRDMAReadResponseLast, 0, packet.SyndromeACKUnlimited, 0, full)}},
		{"middle-carrying-the-last-bytes", 2 * pmtu, [][]byte{
			resp(packet.RCRDMAReadResponseFirst, 0, packet.SyndromeACKUnlimited, 0, full),
			resp(packet.RCRDMAReadResponseMiddle, 1, packet.SyndromeACKUnlimited, 0, full)}},
		{"only-longer-than-pmtu", 2 * pmtu, [][]byte{
			resp(packet.RCRDMAReadResponseOnly, 0, packet.SyndromeACKUnlimited, 0, make([]byte, 2*pmtu))}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			h := newHarness(t, baseConfig(pmtu, 0))
			h.mem.add(lkeyA, baseA, 1<<16, verbs.AccessLocalWrite, 1)
			h.post(&verbs.SendWR{ID: 1, Opcode: verbs.WRRDMARead, RemoteAddr: rbase, RKey: rkey, SGList: []verbs.SGE{{Addr: baseA, Length: tc.length, LKey: lkeyA}}})
			require.Len(t, h.drain(), 1)
			for _, b := range tc.resps {
				h.recv(b)
			}
			h.requireFailedWith(verbs.WCBadRespErr)
		})
	}
}

// rdma_sends counts the SEND WQEs completed, in error too, but not those
// flushed (rxe do_complete counts, flush_send_wqe does not).
func TestFlushedSendsNotCountedAsRDMASends(t *testing.T) {
	h := newHarness(t, baseConfig(1024, 0))
	for i := range 3 {
		h.post(&verbs.SendWR{ID: uint64(i + 1), Opcode: verbs.WRSend, Flags: verbs.SendSignaled})
	}
	require.Len(t, h.drain(), 3)
	h.recv(ack(0))
	h.recv(nak(1, packet.NAKRemoteOperation))
	h.r.Flush()
	require.Equal(t, []verbs.WCStatus{verbs.WCSuccess, verbs.WCRemOpErr, verbs.WCWRFlushErr},
		[]verbs.WCStatus{h.cq.wcs[0].Status, h.cq.wcs[1].Status, h.cq.wcs[2].Status})
	require.Equal(t, uint64(2), h.r.Counters().RDMASends)
}

// With Config.AckReqEvery below an eighth of the window, AckReq goes on
// every AckReqEvery-th packet and on the last of the message (rxe
// init_req_packet's RXE_MAX_PKT_PER_ACK rule, at the configured period).
func TestAckReqEveryNthPacket(t *testing.T) {
	cfg := baseConfig(256, 0)
	cfg.AckReqEvery = 5
	h := newHarness(t, cfg)
	h.mem.add(lkeyA, baseA, 1<<16, verbs.AccessLocalWrite, 1)
	h.post(&verbs.SendWR{ID: 1, Opcode: verbs.WRRDMAWrite, RemoteAddr: rbase, RKey: rkey, SGList: []verbs.SGE{{Addr: baseA, Length: 12 * 256, LKey: lkeyA}}})
	var acked []int
	for i, b := range h.drain() {
		if parse(t, b).AckReq() {
			acked = append(acked, i)
		}
	}
	require.Equal(t, []int{4, 9, 11}, acked)
}

// After a go-back-N retry of a READ asked for in parts, a response of the
// round before to the part at the send cursor (not asked for again yet)
// is dropped: it is no gap of this round, and starts no retry that would
// spend retry_cnt while the peer is answering.
func TestOldRoundReadResponseAtSendCursorStartsNoRetry(t *testing.T) {
	const pmtu, p0 = 256, packet.PSN(100)
	cfg := baseConfig(pmtu, p0)
	cfg.MaxReadPkts = 2
	h := newHarness(t, cfg)
	h.mem.add(lkeyA, baseA, 6*pmtu, verbs.AccessLocalWrite, 1)
	h.post(&verbs.SendWR{ID: 1, Opcode: verbs.WRRDMARead, Flags: verbs.SendSignaled, RemoteAddr: rbase, RKey: rkey,
		SGList: []verbs.SGE{{Addr: baseA, Length: 6 * pmtu, LKey: lkeyA}}})
	require.Len(t, h.drain(), 3, "three parts of two packets")
	h.now = h.r.retrans.When()
	h.r.OnTimeout(h.now)
	require.Equal(t, p0, parse(t, h.next()).PSN(), "the retry asks for part 0 again")
	require.Equal(t, p0.Add(2), h.r.SQPSN())
	before := h.r.Counters()
	h.recv(resp(packet.RCRDMAReadResponseFirst, p0.Add(2), packet.SyndromeACKUnlimited, 1, make([]byte, pmtu)))
	c := h.r.Counters()
	require.Equal(t, before.CompleterRetryErr, c.CompleterRetryErr)
	require.Equal(t, before.ReadGaps, c.ReadGaps)
	require.Equal(t, before.ResponsesDropped+1, c.ResponsesDropped)
}

// Sending arms the retransmit timer only if it is not pending (rxe
// update_state): later packets do not push it back, so the oldest
// unacknowledged packet times out one local ACK timeout after the
// timer was armed, however long the sender goes on sending.
func TestRetransmitTimerNotPushedBySends(t *testing.T) {
	cfg := baseConfig(1024, 0)
	cfg.Recovery.Off = true // the IB timer alone
	h := newHarness(t, cfg)
	h.mem.add(lkeyA, baseA, 1<<16, verbs.AccessLocalWrite, 1)
	T := h.r.ack
	for i := range 3 {
		h.post(&verbs.SendWR{ID: uint64(i + 1), Opcode: verbs.WRSend, SGList: []verbs.SGE{{Addr: baseA, Length: 10, LKey: lkeyA}}})
		require.NotNil(t, h.next())
		require.Equal(t, t0.Add(T), h.r.Deadline())
		h.now = h.now.Add(T / 4)
	}
}

// Only an ACK's AETH carries credits (IBA 9.7.7.2.5): the timer code of an
// RNR NAK and the code of a NAK, read as credit counts, would lift the
// limit (RNR timer 31 reads as the invalid credit code: no limit).
func TestCreditsOnlyFromACKs(t *testing.T) {
	for _, tc := range []struct {
		name string
		syn  packet.Syndrome
	}{
		{"rnr-nak-timer-31", packet.RNRSyndrome(31)},
		{"rnr-nak-timer-8", packet.RNRSyndrome(8)},
		{"nak-remote-operation", packet.NAKSyndrome(packet.NAKRemoteOperation)},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cfg := baseConfig(1024, 0)
			cfg.Credits = true
			h := newHarness(t, cfg)
			h.mem.add(lkeyA, baseA, 1<<16, verbs.AccessLocalWrite, 1)
			h.recv(resp(packet.RCAcknowledge, packet.PSNMask, packet.ACKSyndrome(0), 0, nil)) // LSN 0
			h.post(&verbs.SendWR{ID: 1, Opcode: verbs.WRSend, SGList: []verbs.SGE{{Addr: baseA, Length: 8, LKey: lkeyA}}})
			require.Empty(t, h.drain(), "SSN 1 waits to probe")
			h.recv(resp(packet.RCAcknowledge, packet.PSNMask, tc.syn, 5, nil)) // stale: completes nothing
			require.Empty(t, h.drain(), "still no credit")
			require.Equal(t, uint64(1), h.r.Counters().CreditUpdates)
		})
	}
}

// Flush, when the QP enters the error state for any reason (a Modify to
// ERR, not only a failure of the requester's own), stops the requester:
// WQEs posted afterwards are not sent and wait for the next Flush, and
// responses are dropped (rxe_requester flushes in ERR and sends nothing).
func TestFlushStopsRequester(t *testing.T) {
	h := newHarness(t, baseConfig(1024, 0))
	h.post(&verbs.SendWR{ID: 1, Opcode: verbs.WRSend, Flags: verbs.SendSignaled})
	require.Len(t, h.drain(), 1)
	h.r.Flush()
	require.Equal(t, []uint64{1}, h.cq.ids())
	require.Equal(t, verbs.WCWRFlushErr, h.cq.wcs[0].Status)
	require.True(t, h.r.Deadline().IsZero())
	h.post(&verbs.SendWR{ID: 2, Opcode: verbs.WRSend, Flags: verbs.SendSignaled})
	require.False(t, h.r.Pending())
	require.Nil(t, h.next())
	h.recv(ack(0))
	require.Equal(t, uint64(1), h.r.Counters().ResponsesDropped)
	h.r.Flush()
	require.Equal(t, []uint64{1, 2}, h.cq.ids())
	require.Equal(t, verbs.WCWRFlushErr, h.cq.wcs[1].Status)
}

// The response to an ATOMIC_WRITE is an empty READ_RESPONSE_ONLY; one
// carrying data is malformed and fails the WQE with BAD_RESP_ERR.
func TestAtomicWriteResponseWithDataIsBadResponse(t *testing.T) {
	h := newHarness(t, baseConfig(1024, 0))
	h.mem.add(lkeyA, baseA, 1<<16, verbs.AccessLocalWrite, 1)
	h.post(&verbs.SendWR{ID: 1, Opcode: verbs.WRAtomicWrite, RemoteAddr: rbase, RKey: rkey, SGList: []verbs.SGE{{Addr: baseA, Length: 8, LKey: lkeyA}}})
	require.Len(t, h.drain(), 1)
	h.recv(resp(packet.RCRDMAReadResponseOnly, 0, packet.SyndromeACKUnlimited, 1, make([]byte, 8)))
	h.requireFailedWith(verbs.WCBadRespErr)
}

// Under go-back-N a response of a READ after the oldest one, arriving
// while the oldest one's responses are missing, is placed ahead only if it
// is the one that READ expects next, well formed: a train starts with
// FIRST or ONLY, FIRST carries one path MTU, and its AETH is an ACK (the
// checks doRead makes for the oldest READ). Any other is not placed.
func TestReadResponseAheadChecked(t *testing.T) {
	const pmtu, p0 = 1024, packet.PSN(0x300)
	full := make([]byte, pmtu)
	for i := range full {
		full[i] = 0xAB
	}
	for _, tc := range []struct {
		name   string
		resp   []byte
		placed bool
	}{
		{"first", resp(packet.RCRDMAReadResponseFirst, p0+2, packet.SyndromeACKUnlimited, 2, full), true},
		{"middle-without-first", resp(packet.RCRDMAReadResponseMiddle, p0+2, packet.SyndromeACKUnlimited, 2, full), false},
		{"short-first", resp(packet.RCRDMAReadResponseFirst, p0+2, packet.SyndromeACKUnlimited, 2, full[:100]), false},
		{"first-with-rnr-syndrome", resp(packet.RCRDMAReadResponseFirst, p0+2, packet.RNRSyndrome(1), 2, full), false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			h := newHarness(t, baseConfig(pmtu, p0))
			dst := h.mem.add(lkeyA, baseA, 4*pmtu, verbs.AccessLocalWrite, 0)
			for i := range 2 {
				h.post(&verbs.SendWR{ID: uint64(i + 1), Opcode: verbs.WRRDMARead, Flags: verbs.SendSignaled,
					RemoteAddr: rbase + uint64(i*2*pmtu), RKey: rkey,
					SGList: []verbs.SGE{{Addr: baseA + uint64(i*2*pmtu), Length: 2 * pmtu, LKey: lkeyA}}})
			}
			require.Len(t, h.drain(), 2)
			before := append([]byte(nil), dst.buf...)
			h.recv(tc.resp) // the first READ's responses are lost
			if tc.placed {
				require.Equal(t, uint64(1), h.r.Counters().ReadResponsesAhead)
				require.Equal(t, full, dst.buf[2*pmtu:3*pmtu])
				return
			}
			require.Zero(t, h.r.Counters().ReadResponsesAhead)
			require.Equal(t, before, dst.buf)
			_, failed := h.r.Failed()
			require.False(t, failed)
		})
	}
}
