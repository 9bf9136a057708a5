package rxe

import (
	"sync"
	"time"
)

// LossCounters are the loss-recovery and selective-repeat counters
// (docs/recovery.md): a QP's (QPCounters.Loss) or the sum over a
// device's QPs, destroyed and reset ones included (Counters.Loss).
type LossCounters struct {
	// SRTT is the smoothed round-trip time (srtt_us); for a device the
	// largest of its QPs'.
	SRTT time.Duration
	// RTOExpiries counts recovery timer expiries (rto_expiries), IBTimeouts
	// IB local ACK timeouts (ib_timeouts, the retry_cnt budget) and
	// TailProbes the tail-loss probes sent (tail_probes).
	RTOExpiries, IBTimeouts, TailProbes uint64
	// RTODeferred counts late recovery-timer expiries timed again instead
	// of probing (rto_deferred); RTOSpurious the expiries whose probe was
	// answered, sooner than a round trip, for packets sent before it
	// (rto_spurious; retry.RecoveryTimer).
	RTODeferred, RTOSpurious uint64
	// Requester side of selective repeat.
	SRHolesReceived    uint64 // sr_holes_received: hole reports received
	SRPacketsResent    uint64 // sr_packets_resent: packets resent for them (READ re-reads included)
	SRHolesIgnored     uint64 // sr_holes_ignored: hole reports naming PSNs never sent, or with none outstanding
	SRResendsLost      uint64 // sr_resends_lost: resends found lost and sent again: still unacknowledged an interval later, named missing again by a report that shows later packets received, or an extra-stream re-read's response still missing once later re-reads, later PSNs of it or requests sent after it were answered
	ReadHoleRereads    uint64 // read_holes_rereads: READ requests re-reading a missing range
	ReadRereadsLost    uint64 // read_rereads_lost: go-back-N retries of a READ hole whose answer was found lost, asked for again at once
	RetryDoubled       uint64 // retry_doubled: go-back-N retries (after a sequence NAK) whose first packet went twice, so that one lost copy costs no timer
	SRProgressReceived uint64 // sr_progress_received: progress reports taken (how far the responder has received)
	SRReadRequestsLost uint64 // sr_read_requests_lost: READ parts re-read because none of their responses followed those of the requests before them
	SRReadRequestsSlow uint64 // sr_read_requests_slow: of those, the re-reads answered sooner than a round trip (the request was only slow)
	// Responder side, both modes.
	ReadResponsesResent uint64 // read_responses_resent: READ response packets sent again for duplicate READs (replays, re-reads, rewound trains)
	// Responder side of selective repeat.
	SRHolesReported   uint64 // sr_holes_reported: hole reports sent, re-reports included
	SRHolesFilled     uint64 // sr_holes_filled: hole reports withdrawn because the hole filled before they left
	SRProgressReports uint64 // sr_progress_reports: progress reports sent while a hole persisted
	SRHolePSNs        uint64 // sr_hole_psns: PSNs first seen missing (packets lost)
	OOODuplicates     uint64 // ooo_duplicates: out-of-order requests dropped as copies of held ones
	OOOHeld           uint64 // ooo_held: out-of-order requests copied into the buffer to wait for a hole
	OOOPlaced         uint64 // ooo_placed: of those, requests whose payload was placed on arrival and held without it
	OOOBuffered       uint64 // ooo_buffered: out-of-order requests held now
	OOOPeak           uint64 // ooo_peak: the most held at once (for a device, the largest QP peak)
	OOOBytesPeak      uint64 // ooo_bytes_peak: the most bytes held at once (likewise)
	OOODropped        uint64 // ooo_dropped: out-of-order requests dropped
}

// Loss returns the QP's loss-recovery and selective-repeat counters.
func (c QPCounters) Loss() LossCounters {
	rq, rs := &c.Requester, &c.Responder
	l := LossCounters{
		SRTT: rq.Recovery.SRTT, RTOExpiries: rq.Recovery.RTOExpiries, IBTimeouts: rq.Timeouts,
		TailProbes:  rq.Recovery.TailProbes,
		RTODeferred: rq.Recovery.RTODeferred, RTOSpurious: rq.Recovery.RTOSpurious,
		SRHolesReceived: rq.SRHolesReceived, SRPacketsResent: rq.SRPacketsResent, ReadHoleRereads: rq.ReadHoleRereads,
		ReadRereadsLost: rq.ReadRereadsLost, RetryDoubled: rq.RetryDoubled,
		SRHolesIgnored: rq.SRHolesIgnored, SRResendsLost: rq.SRResendsLost,
		SRHolesReported: rs.SRHolesReported, SRHolesFilled: rs.SRHolesFilled, SRHolePSNs: rs.SRHolePSNs,
		OOOBuffered: rs.OOOBuffered, OOOPeak: rs.OOOPeak, OOOBytesPeak: rs.OOOBytesPeak, OOODropped: rs.OOODropped,
		OOODuplicates: rs.OOODuplicates, OOOHeld: rs.OOOHeld, OOOPlaced: rs.OOOPlaced,
		SRProgressReceived: rq.SRProgressReceived, SRProgressReports: rs.SRProgressReports,
		SRReadRequestsLost: rq.SRReadRequestsLost, SRReadRequestsSlow: rq.SRReadRequestsSlow,
		ReadResponsesResent: rs.ReadResponsesResent,
	}
	return l
}

// Add sums o into l: counts add up; SRTT and the peaks keep the largest
// (the rule of the device totals, Counters.Loss).
func (l *LossCounters) Add(o LossCounters) {
	l.SRTT = max(l.SRTT, o.SRTT)
	l.RTOExpiries += o.RTOExpiries
	l.IBTimeouts += o.IBTimeouts
	l.TailProbes += o.TailProbes
	l.RTODeferred += o.RTODeferred
	l.RTOSpurious += o.RTOSpurious
	l.SRHolesIgnored += o.SRHolesIgnored
	l.SRResendsLost += o.SRResendsLost
	l.SRHolesFilled += o.SRHolesFilled
	l.OOODuplicates += o.OOODuplicates
	l.OOOHeld += o.OOOHeld
	l.OOOPlaced += o.OOOPlaced
	l.SRHolesReceived += o.SRHolesReceived
	l.SRPacketsResent += o.SRPacketsResent
	l.ReadHoleRereads += o.ReadHoleRereads
	l.ReadRereadsLost += o.ReadRereadsLost
	l.RetryDoubled += o.RetryDoubled
	l.SRHolesReported += o.SRHolesReported
	l.SRHolePSNs += o.SRHolePSNs
	l.OOOBuffered += o.OOOBuffered
	l.OOOPeak = max(l.OOOPeak, o.OOOPeak)
	l.OOOBytesPeak = max(l.OOOBytesPeak, o.OOOBytesPeak)
	l.OOODropped += o.OOODropped
	l.SRProgressReceived += o.SRProgressReceived
	l.SRProgressReports += o.SRProgressReports
	l.SRReadRequestsLost += o.SRReadRequestsLost
	l.SRReadRequestsSlow += o.SRReadRequestsSlow
	l.ReadResponsesResent += o.ReadResponsesResent
}

// named lists the counters under their names, for Named.
func (l LossCounters) named() []NamedCounter {
	return []NamedCounter{
		{"srtt_us", uint64(l.SRTT.Microseconds())},
		{"rto_expiries", l.RTOExpiries},
		{"ib_timeouts", l.IBTimeouts},
		{"tail_probes", l.TailProbes},
		{"rto_deferred", l.RTODeferred},
		{"rto_spurious", l.RTOSpurious},
		{"sr_holes_received", l.SRHolesReceived},
		{"sr_packets_resent", l.SRPacketsResent},
		{"read_holes_rereads", l.ReadHoleRereads},
		{"read_rereads_lost", l.ReadRereadsLost},
		{"retry_doubled", l.RetryDoubled},
		{"sr_holes_ignored", l.SRHolesIgnored},
		{"sr_resends_lost", l.SRResendsLost},
		{"sr_holes_reported", l.SRHolesReported},
		{"sr_holes_filled", l.SRHolesFilled},
		{"sr_hole_psns", l.SRHolePSNs},
		{"ooo_buffered", l.OOOBuffered},
		{"ooo_peak", l.OOOPeak},
		{"ooo_bytes_peak", l.OOOBytesPeak},
		{"ooo_dropped", l.OOODropped},
		{"ooo_duplicates", l.OOODuplicates},
		{"ooo_held", l.OOOHeld},
		{"ooo_placed", l.OOOPlaced},
		{"sr_progress_received", l.SRProgressReceived},
		{"sr_progress_reports", l.SRProgressReports},
		{"sr_read_requests_lost", l.SRReadRequestsLost},
		{"sr_read_requests_slow", l.SRReadRequestsSlow},
		{"read_responses_resent", l.ReadResponsesResent},
	}
}

// retiredLoss keeps the loss counters of engines that are gone (a QP
// destroyed or reset), so that the device's totals do not go backwards.
type retiredLoss struct {
	mu sync.Mutex
	l  LossCounters
}

// retireEngines adds the counters of the QP's RC engines to the device's
// retired totals before they are dropped (caller holds qp.mu).
func (qp *QP) retireEngines() {
	qp.setWindowBound(false) // the requester goes: its window no longer asks for the spin
	if qp.req == nil && qp.resp == nil {
		return
	}
	var c QPCounters
	if qp.req != nil {
		c.Requester = qp.req.Counters()
	}
	if qp.resp != nil {
		c.Responder = qp.resp.Counters()
	}
	l := c.Loss()
	l.SRTT, l.OOOBuffered = 0, 0 // not a total: only live QPs count
	r := &qp.dev.retired
	r.mu.Lock()
	r.l.Add(l)
	r.mu.Unlock()
}

// lossTotals sums the loss counters of the device's QPs, live and retired.
func (d *Device) lossTotals() LossCounters {
	d.retired.mu.Lock()
	t := d.retired.l
	d.retired.mu.Unlock()
	d.qps.each(func(qp *QP) { t.Add(qp.Counters().Loss()) })
	return t
}
