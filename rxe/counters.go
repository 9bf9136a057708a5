package rxe

// NamedCounter is one counter under the name kernel rxe gives it in
// /sys/class/infiniband/rxe0/ports/1/hw_counters (rxe_hw_counters.c), or,
// for gorxe's own counters, a name in the same style.
type NamedCounter struct {
	Name  string
	Value uint64
}

// Named lists the QP's counters under rxe's names, in rxe's order, then
// gorxe's own (local drops and back-off, end-to-end credits).
func (c QPCounters) Named() []NamedCounter {
	rq, rs := &c.Requester, &c.Responder
	return []NamedCounter{
		{"sent_pkts", c.SentPkts},
		{"rcvd_pkts", c.RcvdPkts},
		{"duplicate_request", rs.DuplicateRequest},
		{"out_of_seq_request", rs.OutOfSeqRequest},
		{"rcvd_rnr_err", rq.RcvdRNRErr},
		{"send_rnr_err", rs.SendRNRErr},
		{"rcvd_seq_err", rq.RcvdSeqErr},
		{"retry_exceeded_err", rq.RetryExceededErr},
		{"rnr_retry_exceeded_err", rq.RNRRetryExceededErr},
		{"completer_retry_err", rq.CompleterRetryErr},
		{"rdma_recvs", rs.RDMARecvs},
		// gorxe's own.
		{"retransmitted_pkts", rq.Retransmits},
		{"ack_timeouts", rq.Timeouts},
		{"acks_coalesced", rs.AcksCoalesced},
		{"local_drops", c.LocalDrops},
		{"local_drop_retries", c.DropRetries},
		{"backoff_delay_ns", uint64(c.BackoffDelay.Nanoseconds())},
		{"bad_source_pkts", c.BadSource},
		{"bad_state_pkts", c.BadState},
		{"credit_stalls", rq.CreditStalls},
		{"credit_probes", rq.CreditProbes},
		{"credit_updates_rcvd", rq.CreditUpdates},
		{"credit_updates_sent", rs.CreditUpdates},
		// Loss recovery (docs/recovery.md).
		{"srtt_us", uint64(rq.Recovery.SRTT.Microseconds())},
		{"rto_expiries", rq.Recovery.RTOExpiries},
		{"ib_timeouts", rq.Timeouts},
		{"tail_probes", rq.Recovery.TailProbes},
		{"window_pkts", uint64(rq.Recovery.Window)},
		{"window_decreases", rq.Recovery.WindowDecr},
	}
}

// Named lists the device's counters under rxe's names where rxe has one
// (sent_pkts, rcvd_pkts, send_err), then gorxe's own.
func (c Counters) Named() []NamedCounter {
	return []NamedCounter{
		{"sent_pkts", c.SentPkts},
		{"rcvd_pkts", c.RcvdPkts},
		{"send_err", c.SendErr},
		{"bad_icrc", c.BadICRC},
		{"icrc_recovered", c.ICRCRecovered},
		{"malformed_pkts", c.Malformed},
		{"unknown_qp_pkts", c.UnknownQP},
		{"cnp_pkts", c.CNPs},
		{"local_drops", c.LocalDrops},
		{"qp_errors", c.QPErrors},
		{"events_dropped", c.EventsDropped},
		{"notify_dropped", c.NotifyDropped},
		{"receive_errors", c.ReceiveErrors},
	}
}
