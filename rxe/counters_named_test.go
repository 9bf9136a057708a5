package rxe

import (
	"testing"
	"time"

	"github.com/gorxe/gorxe/requester"
	"github.com/gorxe/gorxe/responder"
	"github.com/stretchr/testify/require"
)

func TestNamedCounters(t *testing.T) {
	c := QPCounters{SentPkts: 1, RcvdPkts: 2, LocalDrops: 3, HeldDropped: 29, BackoffDelay: 5 * time.Microsecond,
		Requester: requester.Counters{RcvdSeqErr: 4, RetryExceededErr: 6, Retransmits: 7, CreditStalls: 13, CreditProbes: 14, CreditUpdates: 15,
			RNRRetryExceededErr: 27, RDMASends: 28},
		Responder: responder.Counters{DuplicateRequest: 8, SendRNRErr: 9, CreditUpdates: 16},
		Unreliable: responder.UCounters{RDMARecvs: 17, OutOfSeq: 18, MessagesDropped: 19, LengthErr: 20, AccessErr: 21,
			QKeyMismatch: 22, NoWQE: 23, TooLong: 24, CQOverflow: 25, Dropped: 26}}
	got := map[string]uint64{}
	for _, n := range c.Named() {
		_, dup := got[n.Name]
		require.False(t, dup, n.Name)
		got[n.Name] = n.Value
	}
	want := map[string]uint64{"sent_pkts": 1, "rcvd_pkts": 2, "local_drops": 3, "backoff_delay_ns": 5000,
		"rcvd_seq_err": 4, "retry_exceeded_err": 6, "retransmitted_pkts": 7, "duplicate_request": 8, "send_rnr_err": 9,
		"credit_stalls": 13, "credit_probes": 14, "credit_updates_rcvd": 15, "credit_updates_sent": 16,
		"rdma_recvs": 17, "uc_out_of_seq": 18, "uc_msgs_dropped": 19, "uc_length_err": 20, "uc_access_err": 21,
		"ud_qkey_mismatch": 22, "ucud_no_recv_wqe": 23, "ucud_too_long": 24, "ucud_cq_overflow": 25, "ucud_dropped": 26,
		"retry_rnr_exceeded_err": 27, "rdma_sends": 28, "held_dropped": 29}
	for k, v := range want {
		require.Equal(t, v, got[k], k)
	}
	d := Counters{SentPkts: 10, SendErr: 11, BadICRC: 12}.Named()
	require.Equal(t, NamedCounter{"sent_pkts", 10}, d[0])
	require.Equal(t, NamedCounter{"send_err", 11}, d[2])
	require.Equal(t, NamedCounter{"bad_icrc", 12}, d[3])
	got = map[string]uint64{}
	for _, n := range (Counters{PinErrors: 13, PolledPkts: 14}).Named() {
		got[n.Name] = n.Value
	}
	require.Equal(t, uint64(13), got["pin_errors"])
	require.Equal(t, uint64(14), got["polled_pkts"])
}

// TestNamedLossCounters: the loss-recovery and selective-repeat counters
// appear under their names, per QP and per device.
func TestNamedLossCounters(t *testing.T) {
	c := QPCounters{
		Requester: requester.Counters{Timeouts: 2, SRHolesReceived: 11, SRPacketsResent: 12, ReadHoleRereads: 13, SRHolesIgnored: 14, SRResendsLost: 19,
			Recovery: requester.RecoveryCounters{SRTT: 1500 * time.Microsecond, RTOExpiries: 3, TailProbes: 4, RTODeferred: 15, RTOSpurious: 16}},
		Responder: responder.Counters{SRHolesReported: 5, SRHolePSNs: 6, OOOBuffered: 7, OOOPeak: 8, OOOBytesPeak: 9, OOODropped: 10,
			SRHolesFilled: 17, OOODuplicates: 18, OOOHeld: 20, OOOPlaced: 21},
	}
	want := map[string]uint64{"srtt_us": 1500, "ib_timeouts": 2, "rto_expiries": 3, "tail_probes": 4,
		"sr_holes_reported": 5, "sr_hole_psns": 6, "ooo_buffered": 7, "ooo_peak": 8, "ooo_bytes_peak": 9, "ooo_dropped": 10,
		"sr_holes_received": 11, "sr_packets_resent": 12, "read_holes_rereads": 13, "sr_holes_ignored": 14, "sr_resends_lost": 19,
		"rto_deferred": 15, "rto_spurious": 16, "sr_holes_filled": 17, "ooo_duplicates": 18, "ooo_held": 20, "ooo_placed": 21}
	for _, named := range [][]NamedCounter{c.Named(), Counters{Loss: c.Loss()}.Named()} {
		got := map[string]uint64{}
		for _, n := range named {
			_, dup := got[n.Name]
			require.False(t, dup, n.Name)
			got[n.Name] = n.Value
		}
		for k, v := range want {
			require.Equal(t, v, got[k], k)
		}
	}
	// Totals add counts and keep the largest SRTT and peaks.
	var l LossCounters
	l.Add(c.Loss())
	l.Add(LossCounters{SRTT: time.Millisecond, OOOPeak: 20, OOOBytesPeak: 1, SRHolePSNs: 1})
	require.Equal(t, LossCounters{SRTT: 1500 * time.Microsecond, RTOExpiries: 3, IBTimeouts: 2, TailProbes: 4, RTODeferred: 15, RTOSpurious: 16,
		SRHolesReceived: 11, SRPacketsResent: 12, ReadHoleRereads: 13, SRHolesIgnored: 14, SRResendsLost: 19, SRHolesReported: 5, SRHolesFilled: 17, SRHolePSNs: 7,
		OOOBuffered: 7, OOOPeak: 20, OOOBytesPeak: 9, OOODropped: 10, OOODuplicates: 18, OOOHeld: 20, OOOPlaced: 21}, l)
}
