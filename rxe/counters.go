package rxe

import "sync/atomic"

// NamedCounter is one counter under the name kernel rxe gives it in
// /sys/class/infiniband/rxe0/ports/1/hw_counters (rxe_hw_counters.c), or,
// for gorxe's own counters, a name in the same style.
type NamedCounter struct {
	Name  string
	Value uint64
}

// Named lists the QP's counters under rxe's names, in rxe's order, then
// gorxe's own (local drops and back-off, end-to-end credits, the receive
// side of a UC or UD QP, loss recovery).
func (c QPCounters) Named() []NamedCounter {
	rq, rs := &c.Requester, &c.Responder
	n := []NamedCounter{
		{"sent_pkts", c.SentPkts},
		{"rcvd_pkts", c.RcvdPkts},
		{"duplicate_request", rs.DuplicateRequest},
		{"out_of_seq_request", rs.OutOfSeqRequest},
		{"rcvd_rnr_err", rq.RcvdRNRErr},
		{"send_rnr_err", rs.SendRNRErr},
		{"rcvd_seq_err", rq.RcvdSeqErr},
		{"retry_exceeded_err", rq.RetryExceededErr},
		{"retry_rnr_exceeded_err", rq.RNRRetryExceededErr},
		{"completer_retry_err", rq.CompleterRetryErr},
		{"rdma_sends", rq.RDMASends},
		{"rdma_recvs", rs.RDMARecvs + c.Unreliable.RDMARecvs}, // RC's or a UC/UD QP's
		// gorxe's own.
		{"retransmitted_pkts", rq.Retransmits},
		{"ack_timeouts", rq.Timeouts},
		{"acks_coalesced", rs.AcksCoalesced},
		{"local_drops", c.LocalDrops},
		{"local_drop_retries", c.DropRetries},
		{"held_dropped", c.HeldDropped},
		{"backoff_delay_ns", uint64(c.BackoffDelay.Nanoseconds())},
		{"bad_source_pkts", c.BadSource},
		{"bad_state_pkts", c.BadState},
		{"credit_stalls", rq.CreditStalls},
		{"credit_probes", rq.CreditProbes},
		{"credit_updates_rcvd", rq.CreditUpdates},
		{"credit_updates_sent", rs.CreditUpdates},
		// The receive side of a UC or UD QP.
		{"uc_out_of_seq", c.Unreliable.OutOfSeq},
		{"uc_msgs_dropped", c.Unreliable.MessagesDropped},
		{"uc_length_err", c.Unreliable.LengthErr},
		{"uc_access_err", c.Unreliable.AccessErr},
		{"ud_qkey_mismatch", c.Unreliable.QKeyMismatch},
		{"ucud_no_recv_wqe", c.Unreliable.NoWQE},
		{"ucud_too_long", c.Unreliable.TooLong},
		{"ucud_cq_overflow", c.Unreliable.CQOverflow},
		{"ucud_dropped", c.Unreliable.Dropped},
	}
	// Loss recovery and selective repeat (docs/recovery.md).
	n = append(n, c.Loss().named()...)
	return append(n,
		NamedCounter{"window_pkts", uint64(rq.Recovery.Window)},
		NamedCounter{"window_decreases", rq.Recovery.WindowDecr})
}

// Named lists the device's counters under rxe's names where rxe has one
// (sent_pkts, rcvd_pkts, send_err), then gorxe's own, then the totals of
// its QPs' loss-recovery and selective-repeat counters.
func (c Counters) Named() []NamedCounter {
	return append([]NamedCounter{
		{"sent_pkts", c.SentPkts},
		{"rcvd_pkts", c.RcvdPkts},
		{"send_err", c.SendErr},
		{"bad_icrc", c.BadICRC},
		{"icrc_recovered", c.ICRCRecovered},
		{"malformed_pkts", c.Malformed},
		{"unknown_qp_pkts", c.UnknownQP},
		{"cnp_pkts", c.CNPs},
		{"local_drops", c.LocalDrops},
		{"held_dropped", c.HeldDropped},
		{"qp_errors", c.QPErrors},
		{"events_dropped", c.EventsDropped},
		{"notify_dropped", c.NotifyDropped},
		{"receive_errors", c.ReceiveErrors},
		{"pin_errors", c.PinErrors},
		{"polled_pkts", c.PolledPkts},
		{"spin_pkts", c.SpinPkts},
		{"mcast_rcvd_pkts", c.McastRcvd},
		{"mcast_dropped_pkts", c.McastDropped},
		{"mcast_ignored_pkts", c.McastIgnored},
	}, c.Loss.named()...)
}

// Counters are device-wide counters; the names follow rxe's hw counters
// (rxe_hw_counters.c) where one exists.
type Counters struct {
	SentPkts uint64 // sent_pkts
	// RcvdPkts is rcvd_pkts: the packets accepted and handed to a QP, a
	// multicast datagram once for all the QPs of its group (McastRcvd),
	// as rxe_rcv counts every packet it accepts before dispatch.
	RcvdPkts      uint64
	BadICRC       uint64 // packets dropped for a bad ICRC
	ICRCRecovered uint64 // IPv4 packets verified after recovering a non-zero IP ID
	Malformed     uint64 // packets packet.Parse rejected
	UnknownQP     uint64 // packets for no QP of ours
	CNPs          uint64 // congestion notifications received (ignored)
	SendErr       uint64 // send_err: datagrams the netdev refused for good
	LocalDrops    uint64 // datagrams refused by the local host (see Options.LocalDropMode)
	HeldDropped   uint64 // datagrams taken back after local drops and then forgotten (QPCounters.HeldDropped)
	QPErrors      uint64 // QPs moved to ERR by an engine error
	EventsDropped uint64 // async events lost because nobody read Events
	NotifyDropped uint64 // CQ notifications lost to a full CompChannel
	ReceiveErrors uint64 // netdev read errors
	PinErrors     uint64 // vector goroutines that could not be pinned (Options.PinVectors)
	// PolledPkts counts the received datagrams read without waiting,
	// outside the receive goroutine's blocking read: by busy-polling
	// callers (CQ.BusyPoll), which handle them on their own goroutine, by
	// a QP that reads its socket before it acts on a timer, and by the
	// goroutine that held the socket when one of those found it taken and
	// left the reading to it; and the datagrams busy-polling callers read
	// from the sockets of the device's multicast groups. A spinning
	// latency loop that reads its socket itself shows here; the receive
	// goroutines read the rest.
	PolledPkts uint64
	// SpinPkts counts the received datagrams a receive goroutine read
	// while it spun after a batch instead of blocking (Options.ReceiveSpin).
	SpinPkts uint64
	// McastRcvd counts the datagrams received for a multicast group and
	// handed to its attached QPs (each QP counts its copy in its own
	// QPCounters); McastDropped those dropped: no QP attached, or a
	// destination QP other than MulticastQPN (mcast.go).
	McastRcvd, McastDropped uint64
	// McastIgnored counts the datagrams to a multicast group (destination
	// QP MulticastQPN, destination address a group's) that came on the
	// device's own sockets and were not delivered from there. Only a
	// device bound to the wildcard address gets them (Linux gives a
	// group's datagrams to every socket of the port bound to the group's
	// address or the wildcard): those of a group the device has not
	// joined (another socket of the host joined it on the interface),
	// and, with a socket per vector, the copies the kernel gives the
	// sockets other than the first, which alone delivers (mcast.go).
	McastIgnored uint64
	// Loss sums the loss-recovery and selective-repeat counters of the
	// device's QPs, those destroyed or reset included (srtt_us and
	// ooo_buffered count live QPs only).
	Loss LossCounters
}

type deviceCounters struct {
	badICRC, icrcRecovered                  atomic.Uint64
	malformed, unknownQP, cnps, sendErr     atomic.Uint64
	localDrops, qpErrors, eventsDropped     atomic.Uint64
	heldDropped                             atomic.Uint64
	notifyDropped, receiveErrors, pinErrors atomic.Uint64

	// System calls (ReadBatch and WriteBatch calls), for the benchmarks'
	// datagrams-per-call figures; not exported.
	readBatches, writeBatches atomic.Uint64
}

// Counters returns a snapshot of the device counters.
func (d *Device) Counters() Counters {
	c := &d.counters
	var sent, rcvd, spun uint64
	polled := d.mcast.polled.Load() // the multicast groups' sockets (pollMcast)
	var seen *connReader
	for _, v := range d.vecs {
		sent += v.sentPkts.Load()
		rcvd += v.rcvdPkts.Load()
		// A reader serves all vectors or one (OpenConns): count each once.
		if r := v.reader; r != nil && r != seen {
			polled += r.polledPkts.Load()
			spun += r.spinPkts.Load()
			seen = r
		}
	}
	mrcvd := d.mcast.rcvd.Load()
	return Counters{
		SentPkts: sent, RcvdPkts: rcvd + mrcvd, BadICRC: c.badICRC.Load(),
		ICRCRecovered: c.icrcRecovered.Load(), Malformed: c.malformed.Load(), UnknownQP: c.unknownQP.Load(),
		CNPs: c.cnps.Load(), SendErr: c.sendErr.Load(), LocalDrops: c.localDrops.Load(), HeldDropped: c.heldDropped.Load(),
		QPErrors: c.qpErrors.Load(), EventsDropped: c.eventsDropped.Load(), NotifyDropped: c.notifyDropped.Load(),
		ReceiveErrors: c.receiveErrors.Load(), PinErrors: c.pinErrors.Load(), PolledPkts: polled, SpinPkts: spun,
		McastRcvd: mrcvd, McastDropped: d.mcast.dropped.Load(), McastIgnored: d.mcast.ignored.Load(), Loss: d.lossTotals(),
	}
}
