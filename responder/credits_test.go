package responder

import (
	"testing"

	"github.com/gorxe/gorxe/packet"
	"github.com/stretchr/testify/require"
)

// TestCreditsInProgress: the receive WQE taken by a SEND in progress still
// counts, since the MSN does not count its message yet (IBA 9.7.7.2.5:
// LSN = MSN + credits must cover it).
func TestCreditsInProgress(t *testing.T) {
	h := newHarness(t, func(c *Config) { c.Credits = true })
	for i := range 3 {
		h.postRecv(uint64(i), 4096)
	}
	h.rx(packet.RCSendFirst, 100, pattern(1024, 0), ackReq)
	out := h.drain()
	require.Len(t, out, 1)
	expect(t, out[0], psnIs(100), aeth(packet.ACKSyndrome(3), 0))
	h.rx(packet.RCSendLast, 101, pattern(10, 0), ackReq)
	out = h.drain()
	require.Len(t, out, 1)
	expect(t, out[0], psnIs(101), aeth(packet.ACKSyndrome(2), 1))
}

// TestCreditUpdate covers the unsolicited ACK that tells a requester
// blocked by credits of newly posted receive WQEs.
func TestCreditUpdate(t *testing.T) {
	for _, tc := range []struct {
		name     string
		credits  bool
		srq      bool
		before   int  // WQEs posted before the messages
		msgs     int  // one-packet SENDs received (each with AckReq)
		rnr      bool // then one more SEND, which finds no WQE
		drain    bool // the ACKs are sent before the post
		dup      bool // then the last SEND again, whose ACK stays queued
		posted   int  // WQEs posted afterwards
		want     bool // CreditUpdate queues an ACK
		wantACKs []packet.Syndrome
		wantMSN  uint32
	}{
		{name: "credits off", credits: false, before: 2, msgs: 2, drain: true, posted: 4,
			want: false},
		{name: "srq", credits: true, srq: true, before: 2, msgs: 2, drain: true, posted: 4,
			want: false},
		{name: "nothing advertised yet", credits: true, before: 0, msgs: 0, posted: 4,
			want: false},
		{name: "requester still has credits", credits: true, before: 4, msgs: 2, drain: true, posted: 4,
			want: false},
		{name: "requester has one credit left", credits: true, before: 3, msgs: 2, drain: true, posted: 4,
			want: false},
		{name: "ACK of a duplicate still queued", credits: true, before: 2, msgs: 2, drain: true, dup: true, posted: 4,
			want: false, wantACKs: []packet.Syndrome{packet.ACKSyndrome(packet.CreditCode(4))}, wantMSN: 2},
		{name: "exhausted, nothing posted", credits: true, before: 2, msgs: 2, drain: true, posted: 0,
			want: false},
		{name: "exhausted", credits: true, before: 2, msgs: 2, drain: true, posted: 4,
			want: true, wantACKs: []packet.Syndrome{packet.ACKSyndrome(4)}, wantMSN: 2},
		{name: "too few for the next code", credits: true, before: 5, msgs: 5, drain: true, posted: 0,
			want: false},
		{name: "after an RNR NAK", credits: true, before: 1, msgs: 1, rnr: true, drain: true, posted: 6,
			want: true, wantACKs: []packet.Syndrome{packet.ACKSyndrome(packet.CreditCode(6))}, wantMSN: 1},
		{name: "ACK still queued", credits: true, before: 2, msgs: 2, drain: false, posted: 8,
			want: false, wantACKs: []packet.Syndrome{packet.ACKSyndrome(packet.CreditCode(8))}, wantMSN: 2},
	} {
		t.Run(tc.name, func(t *testing.T) {
			h := newHarness(t, func(c *Config) { c.Credits, c.SRQ = tc.credits, tc.srq })
			id := uint64(0)
			post := func(n int) {
				for range n {
					h.postRecv(id, 64)
					id++
				}
			}
			post(tc.before)
			psn := packet.PSN(100)
			for range tc.msgs {
				psn = h.message(sendOps, psn, pattern(8, 0))
			}
			if tc.rnr {
				h.rx(packet.RCSendOnly, psn, pattern(8, 0), ackReq)
			}
			if tc.drain {
				h.drain()
			}
			if tc.dup {
				h.rx(packet.RCSendOnly, psn.Add(-1), pattern(8, 0), ackReq)
			}
			post(tc.posted)
			require.Equal(t, tc.want, h.r.CreditUpdate())
			out := h.drain()
			require.Len(t, out, len(tc.wantACKs))
			for i, syn := range tc.wantACKs {
				// The acknowledgement of the last PSN received (repeated
				// if it was sent before).
				expect(t, out[i], opcode(packet.RCAcknowledge), psnIs(psn.Add(-1)), aeth(syn, tc.wantMSN))
			}
			require.Equal(t, tc.want, h.r.Counters().CreditUpdates == 1)
			require.False(t, h.r.CreditUpdate(), "nothing new to advertise")
		})
	}
}

// TestCreditUpdateAfterFailure: a responder that failed (and then a flushed
// one) sends nothing more, so WQEs posted then draw no credit update: after
// its error NAK the QP is in ERR (IBA 9.7.5.2.1, rxe sends nothing from
// the error state).
func TestCreditUpdateAfterFailure(t *testing.T) {
	h := newHarness(t, func(c *Config) { c.Credits = true })
	h.postRecv(0, 64)
	h.postRecv(1, 64)
	psn := h.message(sendOps, 100, pattern(8, 0))
	psn = h.message(sendOps, psn, pattern(8, 0))
	// One coalesced ACK, advertising 0 credits; then a MIDDLE without a
	// FIRST, a class C error.
	require.Len(t, h.drain(), 1)
	h.rx(packet.RCSendMiddle, psn, pattern(1024, 0))
	out := h.drain()
	require.Len(t, out, 1)
	expect(t, out[0], syndrome(packet.NAKSyndrome(packet.NAKInvalidRequest)))
	_, failed := h.r.Failed()
	require.True(t, failed)
	for i := range 4 {
		h.postRecv(uint64(2+i), 64)
	}
	require.False(t, h.r.CreditUpdate(), "failed")
	require.Empty(t, h.drain())
	h.r.Flush()
	h.postRecv(9, 64)
	require.False(t, h.r.CreditUpdate(), "flushed")
	require.Empty(t, h.drain())
	require.Zero(t, h.r.Counters().CreditUpdates)
}
