package requester

import (
	"errors"
	"fmt"
	"net/netip"
	"time"

	"github.com/gorxe/gorxe/internal/sge"
	"github.com/gorxe/gorxe/packet"
	"github.com/gorxe/gorxe/rxe/verbs"
)

// UConfig describes the send side of an unreliable QP: UC (IBA 9.8.3) or
// UD (IBA 9.8.4).
type UConfig struct {
	// UD selects datagram service; false is UC.
	UD bool
	// QPN is this QP's number; DestQPN the UC peer's (UD takes it from
	// each work request).
	QPN, DestQPN uint32
	// Dest is where a UC QP's packets go (UD: each work request's AH).
	Dest netip.AddrPort
	// PMTU is the path MTU in bytes; a UD message may not exceed it.
	PMTU int
	// SQPSN is the first PSN to send.
	SQPSN packet.PSN
	// PKey is the partition key of every BTH.
	PKey uint16
	// QKey is a UD QP's own Q_Key, sent in place of a work request's
	// controlled Q_Key (high-order bit set; IBA 10.2.5).
	QKey uint32
	// Pseudo is the ICRC pseudo-header of the packets this QP sends; for
	// UD its destination is replaced by each work request's.
	Pseudo packet.PseudoHeader
	// SigAll completes every work request, signaled or not.
	SigAll bool
	// MaxWR, MaxSGE and MaxInline size the send queue.
	MaxWR, MaxSGE, MaxInline int
}

// Errors returned by Unreliable.Post.
var (
	// ErrUDTooLong: a UD message longer than the path MTU. IBA C10-93.1.1
	// has the CI send nothing for it and report no error (kernel rxe
	// completes such a work request with success and sends nothing);
	// gorxe refuses it at Post instead, so that the mistake is not silent.
	ErrUDTooLong = errors.New("requester: UD message longer than the path MTU")
	// ErrNoAH: a UD work request without an address handle.
	ErrNoAH = errors.New("requester: UD work request without an address handle")
)

// uwqe is one posted work request of an unreliable send queue.
type uwqe struct {
	id       uint64
	op       verbs.WROpcode
	flags    verbs.SendFlags
	imm      uint32
	remote   uint64
	rkey     uint32
	length   uint32
	sent     uint32 // payload bytes already put in packets
	started  bool
	unsent   uint32         // packets built that the owner has not reported gone (Sent, Unsent)
	st       verbs.WCStatus // the status it completes with, once built, failed or flushed
	sges     []verbs.SGE
	inline   []byte
	isInline bool
	dest     netip.AddrPort // UD: the address handle's (UC sends to the QP's, Config.Dest)
	destQPN  uint32
	qkey     uint32
	tclass   uint8 // UD: the address handle's traffic class
}

// Unreliable is the send side of a UC or UD QP (rxe_req.c for those QP
// types): it segments each work request into packets of the path MTU.
// Nothing is acknowledged or retransmitted. A work request completes once
// the owner reports its last packet gone (Sent), as rxe_xmit_packet
// marks a UC or UD WQE done only once its last packet is handed to the IP
// layer; one whose packets never leave completes with WR_FLUSH_ERR
// (Unsent). Work requests complete in posting order. It is sans-IO and not
// safe for concurrent use.
type Unreliable struct {
	cfg  UConfig
	mem  Memory
	cq   Completions
	ring []uwqe
	done uint64 // oldest WQE not completed: [done, head) are built, failed or flushed
	head uint64 // oldest WQE not fully built (being sent)
	tail uint64 // next free slot
	psn  packet.PSN
	hdr  packet.Headers
	wc   verbs.WC
	c    Counters

	failed     bool
	failStatus verbs.WCStatus
	draining   bool // SQD: start no new work request
}

// NewUnreliable returns the send side of a UC or UD QP.
func NewUnreliable(cfg UConfig, mem Memory, cq Completions) *Unreliable {
	cfg.MaxWR, cfg.MaxSGE = max(cfg.MaxWR, 1), max(cfg.MaxSGE, 1)
	return &Unreliable{cfg: cfg, mem: mem, cq: cq, ring: make([]uwqe, cfg.MaxWR), psn: cfg.SQPSN & packet.PSNMask}
}

// SQPSN returns the next PSN to send.
func (u *Unreliable) SQPSN() packet.PSN { return u.psn }

// SetQKey changes the UD QP's own Q_Key (Modify in RTS), which work
// requests posted from now on with a controlled Q_Key are sent with.
func (u *Unreliable) SetQKey(q uint32) { u.cfg.QKey = q }

// Counters returns the send statistics (the fields a UC/UD send side has).
func (u *Unreliable) Counters() Counters { return u.c }

// Failed reports a local error or a send CQ overflow that stopped the send
// queue, and its status.
func (u *Unreliable) Failed() (verbs.WCStatus, bool) { return u.failStatus, u.failed }

// Pending reports whether a work request waits to be sent and may be:
// while draining, only the rest of a message already started.
func (u *Unreliable) Pending() bool {
	return !u.failed && u.head != u.tail && (!u.draining || u.headStarted())
}

// headStarted reports whether the oldest work request (the queue is not
// empty) has sent a packet: a UC message under way.
func (u *Unreliable) headStarted() bool { return u.ring[u.head%uint64(len(u.ring))].started }

// SetDraining starts (RTS→SQD) or ends (SQD→RTS) a drain of the send
// queue: while it lasts, a UC message already started is finished and no
// other work request is started, as rxe req_next_wqe takes only a WQE in
// processing in QP_STATE_DRAIN. A UD message is one packet: nothing is
// ever under way.
func (u *Unreliable) SetDraining(on bool) { u.draining = on }

// Drained reports whether the send queue is draining, no message is under
// way and every work request built has completed (the moment rxe raises
// IB_EVENT_SQ_DRAINED: req_next_wqe waits in QP_STATE_DRAIN until the
// completer has retired every WQE before the next one).
func (u *Unreliable) Drained() bool {
	return u.draining && u.done == u.head && (u.head == u.tail || !u.headStarted())
}

// SetDest changes a UC QP's destination and ICRC pseudo-header (a new
// address vector, SQD→SQD): the packets built from now on go there, those
// of work requests already posted too.
func (u *Unreliable) SetDest(dest netip.AddrPort, ph packet.PseudoHeader) {
	u.cfg.Dest, u.cfg.Pseudo = dest, ph
}

// Deadline returns the zero time: an unreliable QP has no timer.
func (u *Unreliable) Deadline() time.Time { return time.Time{} }

// CheckUnreliable validates a send work request for a UC (ud false) or UD
// send queue of maxSGE SGEs and maxInline inline bytes, and for UD a path
// MTU of pmtu bytes, without posting it: Post's checks but the room in
// the queue. The owner uses it where there is no send queue to post to (a
// QP in ERR that never reached RTS, whose work requests rxe_post_send still
// validates before they are flushed).
func CheckUnreliable(wr *verbs.SendWR, ud bool, maxSGE, maxInline, pmtu int) error {
	_, err := checkUnreliable(wr, ud, maxSGE, maxInline, pmtu)
	return err
}

// checkUnreliable is CheckUnreliable, returning the message length too.
func checkUnreliable(wr *verbs.SendWR, ud bool, maxSGE, maxInline, pmtu int) (uint64, error) {
	switch wr.Opcode {
	case verbs.WRSend, verbs.WRSendWithImm:
	case verbs.WRRDMAWrite, verbs.WRRDMAWriteWithImm:
		if ud {
			return 0, fmt.Errorf("%w: a UD QP sends SEND only, with or without immediate data", ErrUnsupportedOpcode)
		}
	default:
		if ud {
			return 0, fmt.Errorf("%w: a UD QP sends SEND only, with or without immediate data", ErrUnsupportedOpcode)
		}
		return 0, fmt.Errorf("%w: a UC QP sends SEND and RDMA WRITE, with or without immediate data", ErrUnsupportedOpcode)
	}
	inline := wr.Flags&verbs.SendInline != 0
	if inline && len(wr.InlineData) > maxInline {
		return 0, ErrInlineTooLong
	}
	if !inline && len(wr.SGList) > maxSGE {
		return 0, ErrTooManySGE
	}
	length := wr.Length()
	if length > MaxMessage {
		return 0, ErrMessageTooLong
	}
	if ud {
		if length > uint64(pmtu) {
			return 0, ErrUDTooLong
		}
		if wr.AH == nil {
			return 0, ErrNoAH
		}
	}
	return length, nil
}

// Post validates a send work request and queues a copy (rxe_post_send's
// checks for UC and UD): UC sends SEND and RDMA WRITE with or without
// immediate data, UD only SEND with or without immediate data, no longer
// than the path MTU, to an address handle. As in rxe post_one_send, a
// malformed work request is refused as such even when the send queue is
// full; only a valid one gets ErrQueueFull. A work request holds its slot
// until it completes (rxe frees a send WQE in its completer).
func (u *Unreliable) Post(wr *verbs.SendWR) error {
	length, err := checkUnreliable(wr, u.cfg.UD, u.cfg.MaxSGE, u.cfg.MaxInline, u.cfg.PMTU)
	if err != nil {
		return err
	}
	if u.tail-u.done >= uint64(len(u.ring)) {
		return ErrQueueFull
	}
	inline := wr.Flags&verbs.SendInline != 0
	w := &u.ring[u.tail%uint64(len(u.ring))]
	*w = uwqe{id: wr.ID, op: wr.Opcode, flags: wr.Flags, imm: wr.Imm, remote: wr.RemoteAddr, rkey: wr.RKey,
		length: uint32(length), isInline: inline, sges: w.sges[:0], inline: w.inline[:0],
		destQPN: u.cfg.DestQPN}
	if inline {
		w.inline = append(w.inline, wr.InlineData...)
	} else {
		w.sges = append(w.sges, wr.SGList...)
	}
	if u.cfg.UD {
		w.dest, w.destQPN, w.qkey, w.tclass = wr.AH.Dest(), wr.RemoteQPN&packet.QPNMask, wr.RemoteQKey, wr.AH.TrafficClass()
		if w.qkey&packet.QKeyControlled != 0 {
			w.qkey = u.cfg.QKey
		}
	}
	u.tail++
	return nil
}

// NextPacket builds the next packet into buf and returns its length,
// destination and IP traffic class (a UD work request's address
// handle's; 0 for UC and for the device's); 0 when nothing waits. buf
// must hold a packet of the path MTU. The owner reports every packet it
// took, in order, as gone (Sent) or never sent (Unsent). A work request
// whose memory cannot be read fails with LOC_PROT_ERR and stops the queue
// (Failed); it completes after the work requests before it.
func (u *Unreliable) NextPacket(now time.Time, buf []byte) (int, netip.AddrPort, uint8) {
	if !u.Pending() {
		return 0, netip.AddrPort{}, 0
	}
	w := &u.ring[u.head%uint64(len(u.ring))]
	n := min(w.length-w.sent, uint32(u.cfg.PMTU))
	start, end := !w.started, w.sent+n == w.length
	op := u.opcode(w.op, start, end)
	h := &u.hdr
	*h = packet.Headers{}
	h.BTH = packet.BTHFields{Opcode: op, PKey: u.cfg.PKey, DestQP: w.destQPN, PSN: u.psn,
		SE: end && w.flags&verbs.SendSolicited != 0 && (w.op == verbs.WRSend || w.op == verbs.WRSendWithImm || w.op == verbs.WRRDMAWriteWithImm)}
	h.BTH.PadCnt = uint8(packet.PadLen(int(n)))
	h.DETH = packet.DETHFields{QKey: w.qkey, SrcQP: u.cfg.QPN}
	h.RETH = packet.RETHFields{VA: w.remote, RKey: w.rkey, DMALen: w.length}
	h.Imm = w.imm
	total := packet.PacketLen(op, int(n))
	off, err := h.Encode(buf)
	if err != nil || total > len(buf) {
		u.fail(w, verbs.WCLocLenErr)
		return 0, netip.AddrPort{}, 0
	}
	if !u.gather(w, buf[off:off+int(n)]) {
		u.fail(w, verbs.WCLocProtErr)
		return 0, netip.AddrPort{}, 0
	}
	clear(buf[off+int(n) : total-packet.ICRCSize])
	ph, dest := u.cfg.Pseudo, u.cfg.Dest // UC: the QP's address vector
	if u.cfg.UD {
		dest = w.dest // UD: the work request's address handle
		ph.Dst, ph.DstPort = dest.Addr().Unmap(), dest.Port()
	}
	if ph.SetICRC(buf[:total]) != nil {
		u.fail(w, verbs.WCLocQPOpErr)
		return 0, netip.AddrPort{}, 0
	}
	u.psn = u.psn.Add(1)
	w.started, w.sent = true, w.sent+n
	w.unsent++
	u.c.PacketsSent++
	u.c.BytesSent += uint64(total)
	u.c.PayloadSent += uint64(n)
	if end {
		w.st = verbs.WCSuccess
		u.head++
	}
	return total, dest, w.tclass
}

// Sent reports that the oldest n packets NextPacket built and not yet
// reported have left (the owner wrote them, or dropped them past its
// control); the work requests whose packets have all left complete, in
// posting order (rxe_xmit_packet: a UC or UD WQE is done once its last
// packet is handed to IP). Packets beyond those built are ignored: a
// flush by Unsent has settled them already.
func (u *Unreliable) Sent(n int) {
	for i := u.done; n > 0 && i != u.tail; i++ {
		w := &u.ring[i%uint64(len(u.ring))]
		take := min(w.unsent, uint32(n))
		w.unsent -= take
		n -= int(take)
	}
	u.retire()
}

// Unsent reports that no packet built and not yet reported will leave
// (the owner dropped them: a QP in ERR or a closing device). Their work
// requests complete with WR_FLUSH_ERR unless they failed, in posting
// order, as rxe's completer flushes the WQEs its requester never finished
// once the QP is in ERR (flush_send_queue). The owner calls it only when
// its QP builds nothing more (in ERR, or on a closing device), so no packet
// is built after.
func (u *Unreliable) Unsent() {
	for i := u.done; i != u.tail; i++ {
		w := &u.ring[i%uint64(len(u.ring))]
		if w.unsent == 0 {
			continue
		}
		w.unsent = 0
		if w.st == verbs.WCSuccess {
			w.st = verbs.WCWRFlushErr
		}
	}
	u.retire()
}

// retire completes, in posting order, the work requests that are built,
// failed or flushed and have no packet left to report.
func (u *Unreliable) retire() {
	for u.done != u.head {
		w := &u.ring[u.done%uint64(len(u.ring))]
		if w.unsent > 0 {
			return
		}
		u.complete(w, w.st)
		u.done++
	}
}

// opcode returns the UC or UD opcode of a packet (rxe next_opcode_uc,
// next_opcode_ud).
func (u *Unreliable) opcode(op verbs.WROpcode, start, end bool) packet.Opcode {
	imm := op == verbs.WRSendWithImm || op == verbs.WRRDMAWriteWithImm
	if u.cfg.UD {
		if imm {
			return packet.UDSendOnlyWithImmediate
		}
		return packet.UDSendOnly
	}
	send := op == verbs.WRSend || op == verbs.WRSendWithImm
	switch {
	case send && start && end && imm:
		return packet.UCSendOnlyWithImmediate
	case send && start && end:
		return packet.UCSendOnly
	case send && start:
		return packet.UCSendFirst
	case send && end && imm:
		return packet.UCSendLastWithImmediate
	case send && end:
		return packet.UCSendLast
	case send:
		return packet.UCSendMiddle
	case start && end && imm:
		return packet.UCRDMAWriteOnlyWithImm
	case start && end:
		return packet.UCRDMAWriteOnly
	case start:
		return packet.UCRDMAWriteFirst
	case end && imm:
		return packet.UCRDMAWriteLastWithImm
	case end:
		return packet.UCRDMAWriteLast
	}
	return packet.UCRDMAWriteMiddle
}

// gather copies the next len(dst) payload bytes of w into dst.
func (u *Unreliable) gather(w *uwqe, dst []byte) bool {
	if w.isInline {
		copy(dst, w.inline[w.sent:])
		return true
	}
	skip := w.sent
	for i := range w.sges {
		s := &w.sges[i]
		if skip >= s.Length {
			skip -= s.Length
			continue
		}
		take := min(s.Length-skip, uint32(len(dst)))
		src, ok := u.mem.Local(s.LKey, s.Addr+uint64(skip), take, 0)
		if !ok {
			return false
		}
		dst = dst[sge.Copy(dst, src):]
		skip = 0
		if len(dst) == 0 {
			break
		}
	}
	return len(dst) == 0
}

func (u *Unreliable) complete(w *uwqe, st verbs.WCStatus) {
	if st != verbs.WCWRFlushErr && (w.op == verbs.WRSend || w.op == verbs.WRSendWithImm || w.op == verbs.WRSendWithInv) {
		u.c.RDMASends++ // rxe do_complete counts a completed SEND WQE; flush_send_wqe does not
	}
	if st == verbs.WCSuccess && !u.cfg.SigAll && w.flags&verbs.SendSignaled == 0 {
		return
	}
	u.wc = verbs.WC{ID: w.id, Status: st, Opcode: verbs.WCOpcodeOf(w.op), QPNum: u.cfg.QPN}
	if st == verbs.WCSuccess {
		// rxe make_send_cqe, which completes UC and UD WQEs as RC ones:
		// the message length, and IBV_WC_WITH_IMM for the WITH_IMM opcodes.
		u.wc.ByteLen = w.length
		if w.op == verbs.WRSendWithImm || w.op == verbs.WRRDMAWriteWithImm {
			u.wc.Flags = verbs.WCFlagWithImm
		}
	}
	u.c.Completions++
	if !u.cq.Complete(&u.wc) {
		// A send CQ overflow fails the QP, as the RC requester's does
		// (Requester.finish): the owner moves it to ERR, whose Flush
		// completes the rest.
		u.c.CQOverflow++
		if !u.failed {
			u.failed, u.failStatus = true, verbs.WCFatalErr
		}
	}
}

// fail gives w a local error and stops the queue: w completes once the
// work requests before it have; the QP's owner moves the QP to ERR, whose
// Flush completes the rest.
func (u *Unreliable) fail(w *uwqe, st verbs.WCStatus) {
	u.c.LocalErrors++
	w.st = st
	u.head++
	u.failed, u.failStatus = true, st
	u.retire()
}

// Flush completes every work request not yet built with WR_FLUSH_ERR (the
// QP is in ERR), after the ones built before them: those complete as
// their packets are reported (Sent, Unsent).
func (u *Unreliable) Flush() {
	for ; u.head != u.tail; u.head++ {
		u.ring[u.head%uint64(len(u.ring))].st = verbs.WCWRFlushErr
	}
	u.retire()
	u.failed = true
	if u.failStatus == 0 {
		u.failStatus = verbs.WCWRFlushErr
	}
}
