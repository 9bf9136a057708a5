package responder

import (
	"encoding/binary"
	"net/netip"
	"time"

	"github.com/gorxe/gorxe/internal/sge"
	"github.com/gorxe/gorxe/packet"
	"github.com/gorxe/gorxe/rxe/verbs"
)

// GRHSize is the size of the area at the start of every UD receive buffer
// that holds the Global Route Header of the datagram (IBA 11.4.1.1); on
// RoCEv2 over IPv4 its last 20 bytes are the IPv4 header and the first 20
// are zero, as libibverbs applications expect.
const GRHSize = 40

// UConfig is the receive side's view of an unreliable QP: UC (IBA 9.8.3)
// or UD (IBA 9.8.4).
type UConfig struct {
	// UD selects datagram service; false is UC.
	UD bool
	// QPN is the local QP number.
	QPN uint32
	// PMTU is the path MTU in bytes. UC packets must keep to it (rxe
	// rxe_resp_check_length); a UD datagram is held to its receive buffer
	// only (receiveUD).
	PMTU int
	// RQPSN is the first expected PSN (UC).
	RQPSN packet.PSN
	// QKey is the UD QP's Q_Key: datagrams with another one are dropped
	// (IBA 9.6.1.1; rxe check_keys).
	QKey uint32
	// Access is the QP's remote access flags (UC RDMA WRITE).
	Access verbs.AccessFlags
	// SRQ says the receive queue is a shared receive queue. A message that
	// took a receive WQE and then breaks a length rule (or, a UC RDMA WRITE
	// with immediate, fails its R_Key check) completes that WQE in error
	// and the QP goes on: IBA class E, as rxe_resp.c's RESPST_ERR_LENGTH and
	// RESPST_ERR_RKEY_VIOLATION do for UC and UD QPs with an SRQ. Without
	// an SRQ the message is dropped and the WQE stays for the next one
	// (class D, rxe drop_msg).
	SRQ bool
}

// UCounters are the statistics of an unreliable receive side. On a QP with
// an SRQ, a TooLong, LengthErr or AccessErr message that had taken a
// receive WQE also completes that WQE in error (class E, UConfig.SRQ); it
// is counted the same either way.
type UCounters struct {
	RDMARecvs       uint64 // successful receive completions (rdma_recvs)
	BytesPlaced     uint64 // payload bytes written to memory
	OutOfSeq        uint64 // UC packets dropped after a PSN gap or out of sequence
	MessagesDropped uint64 // UC messages abandoned part-way
	QKeyMismatch    uint64 // UD datagrams with another Q_Key, dropped
	NoWQE           uint64 // SENDs dropped for want of a receive WQE
	TooLong         uint64 // messages longer than their receive buffer, dropped
	AccessErr       uint64 // UC RDMA WRITEs whose R_Key or range failed, dropped
	LengthErr       uint64 // UC packets that break the length rules, their message dropped
	CQOverflow      uint64 // receive completions the CQ had no room for; the QP fails
	Dropped         uint64 // packets of the wrong transport or opcode, or after Flush
}

// Unreliable is the receive side of a UC or UD QP (rxe_resp.c for those QP
// types). It sends nothing: no ACK, no NAK. UC places SENDs and RDMA
// WRITEs and, on a lost or out-of-sequence packet, drops the rest of that
// message silently and resynchronises on the next FIRST or ONLY packet
// (rxe check_psn, check_op_seq); UD places each datagram, behind its GRH
// area, into the next receive WQE. A message too long for its receive
// buffer or that breaks a length or R_Key rule is dropped; if it took a
// receive WQE of an SRQ, that WQE completes in error (IBA class E,
// UConfig.SRQ). A receive WQE whose SGE cannot be written completes with
// LOC_QP_OP_ERR and fails the receive side (class A, Failed). It is
// sans-IO and not safe for concurrent use.
type Unreliable struct {
	cfg  UConfig
	env  Env
	epsn packet.PSN

	drop  bool          // UC: dropping until the next FIRST/ONLY
	inMsg packet.Opcode // UC: the FIRST/MIDDLE just accepted, 0 between messages
	off   uint32        // UC: bytes of the message placed so far
	va    uint64        // UC WRITE: next remote address
	rkey  uint32        // UC WRITE: the message's R_Key
	wlen  uint32        // UC WRITE: the DMA length

	// held: with an SRQ, a receive WQE that peek took from the shared
	// queue and pop has not completed; it belongs to this QP (a UC SEND
	// abandoned part-way leaves it for the next message) and Flush
	// completes it.
	held bool

	wc         verbs.WC
	c          UCounters
	flushed    bool
	failed     bool           // a malformed receive WQE, or a completion found the CQ full
	failStatus verbs.WCStatus // why, for Failed
}

// NewUnreliable returns the receive side of a UC or UD QP.
func NewUnreliable(cfg UConfig, env Env) *Unreliable {
	return &Unreliable{cfg: cfg, env: env, epsn: cfg.RQPSN & packet.PSNMask}
}

// Counters returns the receive statistics.
func (u *Unreliable) Counters() UCounters { return u.c }

// EPSN returns the next expected PSN (UC).
func (u *Unreliable) EPSN() packet.PSN { return u.epsn }

// SetAccess changes the QP's remote access flags (Modify in RTS).
func (u *Unreliable) SetAccess(a verbs.AccessFlags) { u.cfg.Access = a }

// SetQKey changes the UD QP's Q_Key (Modify in RTS).
func (u *Unreliable) SetQKey(q uint32) { u.cfg.QKey = q }

// Flush stops the receive side (the QP entered ERR): later packets are
// dropped. The owner flushes a receive queue of its own; of an SRQ, Flush
// completes with WR_FLUSH_ERR the one WQE this QP took and did not
// complete (held), which no other QP can take any more.
func (u *Unreliable) Flush() {
	u.flushed = true
	if !u.held {
		return
	}
	wr, _ := u.peek()
	id := wr.ID
	u.pop()
	u.wc = verbs.WC{ID: id, Status: verbs.WCWRFlushErr, Opcode: verbs.WCRecv, QPNum: u.cfg.QPN}
	u.post(false)
}

// peek returns the receive WQE at the head of the queue (Env.RQ.Peek).
func (u *Unreliable) peek() (*verbs.RecvWR, bool) {
	wr, ok := u.env.RQ.Peek()
	if ok && u.cfg.SRQ {
		u.held = true
	}
	return wr, ok
}

// pop removes the WQE peek returned (Env.RQ.Pop).
func (u *Unreliable) pop() {
	u.env.RQ.Pop()
	u.held = false
}

// Failed reports whether the receive side has failed, and the status that
// describes it: WCLocQPOpErr for a receive WQE whose SGE could not be
// written (rxe RESPST_ERR_MALFORMED_WQE, class A for every QP type; the
// WQE was completed with that status), WCGeneralErr for a receive
// completion that found the CQ full (rxe do_complete: RESPST_ERR_CQ_OVERFLOW).
// The first failure wins. The owner moves the QP to ERR; the receive side
// drops every later packet.
func (u *Unreliable) Failed() (verbs.WCStatus, bool) { return u.failStatus, u.failed }

// fail stops the receive side with status, unless it already failed.
func (u *Unreliable) fail(status verbs.WCStatus) {
	if u.failed {
		return
	}
	u.failed, u.flushed, u.failStatus = true, true, status
}

// IPHeader is what is known of the IP header a datagram arrived in: its
// addresses and, where the socket reports them, its traffic class and TTL.
// A UD receive writes it into the receive buffer's GRH area, where kernel
// rxe copies the received IP header (rxe_resp.c execute).
type IPHeader struct {
	Src, Dst netip.AddrPort
	TOS      uint8 // IPv4 TOS or IPv6 traffic class; 0 if not reported
	TTL      uint8 // IPv4 TTL or IPv6 hop limit; 0 if not reported (the GRH area then says 64)
}

// Receive handles one packet addressed to this QP; h is the datagram's IP
// header as far as it is known (for the UD GRH area and completion).
func (u *Unreliable) Receive(now time.Time, p packet.Packet, h IPHeader) {
	want := packet.TransportUC
	if u.cfg.UD {
		want = packet.TransportUD
	}
	if u.flushed || p.Opcode().Transport() != want || p.Mask()&packet.MaskReq == 0 {
		u.c.Dropped++
		return
	}
	if u.cfg.UD {
		u.receiveUD(p, &h)
		return
	}
	u.receiveUC(p)
}

// receiveUD places one datagram (rxe_resp.c for IB_QPT_UD: check_keys,
// then send_data_in of the GRH and the payload).
func (u *Unreliable) receiveUD(p packet.Packet, h *IPHeader) {
	if p.DETH().QKey() != u.cfg.QKey {
		u.c.QKeyMismatch++
		return
	}
	pay := p.Payload()
	wr, ok := u.peek()
	if !ok {
		u.c.NoWQE++
		return
	}
	// rxe rxe_resp_check_length for UD and GSI: the GRH area and the
	// payload must fit the WQE's buffer, else RESPST_ERR_LENGTH (class E
	// with an SRQ, else D). The path MTU is not checked (its rules are
	// RC's and UC's), so a datagram from a peer whose MTU is larger than
	// ours is received when its buffer holds it.
	if uint64(GRHSize+len(pay)) > wr.Length() {
		u.c.TooLong++
		u.classE(p, verbs.WCRemInvReqErr)
		return
	}
	var grh [GRHSize]byte
	fillGRH(&grh, h, p.Len())
	if !u.place(p, wr, 0, grh[:]) || !u.place(p, wr, GRHSize, pay) {
		return
	}
	id := wr.ID
	u.pop()
	u.wc = verbs.WC{ID: id, Status: verbs.WCSuccess, Opcode: verbs.WCRecv, ByteLen: uint32(GRHSize + len(pay)),
		QPNum: u.cfg.QPN, SrcQP: p.DETH().SrcQP(), Flags: verbs.WCFlagGRH, Src: h.Src}
	if p.Mask()&packet.MaskImmDt != 0 {
		u.wc.Flags |= verbs.WCFlagWithImm
		u.wc.Imm = p.ImmDt().Imm()
	}
	u.c.BytesPlaced += uint64(len(pay))
	u.post(p.BTH().SE())
}

// fillGRH writes the GRH area of a RoCEv2 datagram of pktLen bytes (BTH
// through ICRC) that arrived in the IP header h: for IPv4, 20 zero bytes
// and the IPv4 header (h's TOS and TTL, DF, UDP, a valid checksum); for
// IPv6, the IPv6 header (h's traffic class and hop limit, flow label 0). A
// TTL not reported (0) is written as 64, the Linux default. What a UDP
// socket does not report (the IPv4 ID, an IPv6 flow label) is 0.
func fillGRH(g *[GRHSize]byte, h *IPHeader, pktLen int) {
	*g = [GRHSize]byte{}
	udpLen := packet.UDPHeaderSize + pktLen
	ttl := h.TTL
	if ttl == 0 {
		ttl = 64
	}
	src, dst := h.Src.Addr(), h.Dst.Addr()
	if src.Unmap().Is4() {
		ip := g[20:]
		ip[0], ip[1] = 0x45, h.TOS
		binary.BigEndian.PutUint16(ip[2:], uint16(20+udpLen))
		binary.BigEndian.PutUint16(ip[6:], 0x4000) // DF
		ip[8], ip[9] = ttl, 17
		s := src.Unmap().As4()
		copy(ip[12:16], s[:])
		if d := dst.Unmap(); d.Is4() {
			// Only an IPv4 destination fits; any other (an IPv6 device
			// address on a netdev bound to IPv4, or none known) is left
			// zero: As4 panics on it, and a datagram must not crash the
			// process whatever the configuration.
			d4 := d.As4()
			copy(ip[16:20], d4[:])
		}
		binary.BigEndian.PutUint16(ip[10:], packet.IPv4HeaderChecksum(ip[:20]))
		return
	}
	g[0], g[1] = 0x60|h.TOS>>4, h.TOS<<4
	binary.BigEndian.PutUint16(g[4:], uint16(udpLen))
	g[6], g[7] = 17, ttl
	s, d := src.As16(), dst.As16()
	copy(g[8:24], s[:])
	copy(g[24:40], d[:])
}

// placement is what scatterAt did, as rxe send_data_in sorts copy_data's
// errors.
type placement uint8

const (
	placed      placement = iota
	placeNoRoom           // the buffer is too short, a length error (place); nothing written
	placeBadSGE           // an SGE's L_Key, rights or range failed (RESPST_ERR_MALFORMED_WQE)
)

// scatterAt writes data into the buffer of receive WQE wr, starting off
// bytes into it. A buffer too short for the data is found before anything
// is written; an SGE that fails stops the copy there.
func (u *Unreliable) scatterAt(wr *verbs.RecvWR, off uint32, data []byte) placement {
	if uint64(off)+uint64(len(data)) > wr.Length() {
		return placeNoRoom
	}
	sges := wr.SGList
	for i := 0; len(data) > 0; i++ {
		s := &sges[i]
		if off >= s.Length {
			off -= s.Length
			continue
		}
		n := min(uint32(len(data)), s.Length-off)
		mem, ok := u.env.Mem.Local(s.LKey, s.Addr+uint64(off), n, verbs.AccessLocalWrite)
		if !ok {
			return placeBadSGE
		}
		sge.Copy(mem, data[:n])
		data, off = data[n:], 0
	}
	return placed
}

// place writes data into receive WQE wr at off for packet p and reports
// whether it did. A buffer too short is a length error (counted TooLong;
// class E with an SRQ, else class D), as send_data_in means to sort it
// (-ENOSPC is RESPST_ERR_LENGTH); an SGE that fails is a malformed WQE
// (class A: the WQE completes with LOC_QP_OP_ERR and the receive side
// fails). Kernel rxe's copy_data returns -EINVAL for a buffer too short as
// well, so a UC SEND that overruns its buffer there fails the QP as a
// malformed WQE; gorxe keeps the length error, and the QP receives on.
func (u *Unreliable) place(p packet.Packet, wr *verbs.RecvWR, off uint32, data []byte) bool {
	switch u.scatterAt(wr, off, data) {
	case placeNoRoom:
		u.c.TooLong++
		u.classE(p, verbs.WCRemInvReqErr)
		return false
	case placeBadSGE:
		u.classA(p)
		return false
	}
	return true
}

// classE handles a length or R_Key error of packet p, whose message took
// the receive WQE at the head of the queue (a SEND, a UD datagram, a UC
// RDMA WRITE with immediate's last packet). With an SRQ (IBA class E;
// rxe_responder's RESPST_ERR_LENGTH and RESPST_ERR_RKEY_VIOLATION for UC
// and UD) the WQE completes with status and the QP goes on. Without one
// (class D, rxe drop_msg) nothing completes and the WQE stays for the next
// message. Either way the caller drops the rest of the message.
func (u *Unreliable) classE(p packet.Packet, status verbs.WCStatus) {
	if u.cfg.SRQ {
		u.completeErr(p, status)
	}
}

// classA handles a malformed receive WQE (rxe RESPST_ERR_MALFORMED_WQE,
// class A for every QP type: do_class_ac_error, COMPLETE, then ERROR):
// the WQE completes with LOC_QP_OP_ERR and the receive side fails
// (Failed), so that the owner moves the QP to ERR.
func (u *Unreliable) classA(p packet.Packet) {
	u.completeErr(p, verbs.WCLocQPOpErr)
	u.fail(verbs.WCLocQPOpErr)
}

// completeErr completes the receive WQE at the head of the queue, the one
// packet p's message took, with an error status; with none posted it does
// nothing. As in rxe do_complete for an error status, only the WR ID,
// status and QP number mean anything (the opcode is set as for success).
func (u *Unreliable) completeErr(p packet.Packet, status verbs.WCStatus) {
	wr, ok := u.peek()
	if !ok {
		return
	}
	id := wr.ID
	u.pop()
	u.wc = verbs.WC{ID: id, Status: status, Opcode: verbs.WCRecv, QPNum: u.cfg.QPN}
	if p.Mask()&packet.MaskWrite != 0 {
		u.wc.Opcode = verbs.WCRecvRDMAWithImm
	}
	u.post(p.BTH().SE())
}

// post delivers the completion in u.wc; RDMARecvs counts the successful
// ones (rxe do_complete). A full CQ fails the receive side (Failed): the
// WQE is consumed and its completion lost, as in rxe.
func (u *Unreliable) post(solicited bool) {
	var ok bool
	if sc, isSC := u.env.CQ.(SolicitedCompletions); isSC {
		ok = sc.CompleteSolicited(&u.wc, solicited)
	} else {
		ok = u.env.CQ.Complete(&u.wc)
	}
	if !ok {
		u.c.CQOverflow++
		u.fail(verbs.WCGeneralErr)
		return
	}
	if u.wc.Status == verbs.WCSuccess {
		u.c.RDMARecvs++
	}
}

// receiveUC handles one UC packet: the PSN and opcode-sequence checks of
// rxe check_psn and check_op_seq for UC, then the SEND or WRITE.
//
// After a PSN gap, the rest of the message is dropped and a FIRST or ONLY
// starts a new one, whatever the message in progress was. Kernel rxe
// compares that FIRST with the opcode of the last packet it placed, which
// the gap left inside a message, and drops it too
// (RESPST_ERR_MISSING_OPCODE_LAST_D1E), so there a lost LAST costs the
// message after it as well; gorxe receives the new message, as the
// comment in rxe's do_class_d1e_error says it may be valid.
func (u *Unreliable) receiveUC(p packet.Packet) {
	m := p.Mask()
	start := m&packet.MaskStart != 0
	if u.drop || p.PSN() != u.epsn {
		if !start {
			u.c.OutOfSeq++
			u.abandon()
			return
		}
		u.abandon() // a FIRST/ONLY resynchronises
	} else if (u.inMsg != 0) == start || u.inMsg != 0 && !sameOp(u.inMsg, p.Opcode()) {
		// A FIRST/ONLY inside a message, or a MIDDLE/LAST outside one or
		// of another operation: the packet and the message in progress
		// are dropped (rxe check_op_seq). A SEND in progress that took a
		// receive WQE of an SRQ completes it with REM_INV_REQ_ERR (rxe
		// do_class_d1e_error, class E); without an SRQ the WQE stays, to
		// be filled from its start by the next message (class D1).
		if u.inMsg != 0 && u.cfg.SRQ && u.held {
			u.completeErr(p, verbs.WCRemInvReqErr)
		}
		u.c.OutOfSeq++
		u.abandon()
		return
	}
	u.epsn = p.PSN().Next()
	// rxe check_length (RESPST_ERR_LENGTH); the message is then dropped.
	// A SEND took its receive WQE at its first packet, a WRITE with
	// immediate takes one at its last (rxe check_resource runs first):
	// with an SRQ that WQE completes with REM_INV_REQ_ERR (class E),
	// without one it stays for the next message (class D).
	if !lengthFits(p, p.PayloadLen(), u.cfg.PMTU) {
		u.c.LengthErr++
		if m&(packet.MaskSend|packet.MaskRWR) != 0 {
			u.classE(p, verbs.WCRemInvReqErr)
		}
		u.abandon()
		return
	}
	var ok bool
	if m&packet.MaskSend != 0 {
		ok = u.ucSend(p, start)
	} else {
		ok = u.ucWrite(p, start)
	}
	if !ok {
		u.abandon()
		return
	}
	if m&packet.MaskEnd != 0 {
		u.inMsg, u.off = 0, 0
	} else {
		u.inMsg = p.Opcode()
	}
}

// sameOp reports whether b continues the message a began (SEND after
// SEND, WRITE after WRITE).
func sameOp(a, b packet.Opcode) bool {
	return a.Info().Mask&packet.MaskSend == b.Info().Mask&packet.MaskSend
}

// abandon drops the rest of the current message until the next FIRST or
// ONLY packet (rxe drop_msg).
func (u *Unreliable) abandon() {
	if u.inMsg != 0 || !u.drop {
		u.c.MessagesDropped++
	}
	u.drop, u.inMsg, u.off = true, 0, 0
}

// ucSend places a SEND packet into the receive WQE at the head of the
// queue, which is consumed only when the message completes or fails with
// an error that completes it (place): a message abandoned otherwise
// leaves it for the next one (rxe takes the WQE in do_complete). The
// payload is within the path MTU (lengthFits).
func (u *Unreliable) ucSend(p packet.Packet, start bool) bool {
	wr, ok := u.peek()
	if !ok {
		u.c.NoWQE++
		return false
	}
	pay := p.Payload()
	if !u.place(p, wr, u.off, pay) {
		return false
	}
	u.drop = false
	u.off += uint32(len(pay))
	u.c.BytesPlaced += uint64(len(pay))
	if p.Mask()&packet.MaskEnd != 0 {
		u.finish(p, wr.ID, u.off)
	}
	return true
}

// ucWrite places an RDMA WRITE packet; a LAST/ONLY with immediate data
// consumes a receive WQE for its completion.
func (u *Unreliable) ucWrite(p packet.Packet, start bool) bool {
	if start {
		r := p.RETH()
		u.va, u.rkey, u.wlen, u.off = r.VA(), r.RKey(), r.DMALen(), 0
	}
	pay := p.Payload()
	// rxe check_op_valid: without remote write access the message is
	// dropped before a receive WQE is taken.
	if u.cfg.Access&verbs.AccessRemoteWrite == 0 {
		u.c.AccessErr++
		return false
	}
	// A LAST or ONLY with immediate data takes a receive WQE before its
	// length and R_Key are checked (rxe check_resource): with none posted
	// it places nothing (class D for UC); its length and R_Key errors are
	// class E with an SRQ.
	rwr := p.Mask()&packet.MaskRWR != 0
	if rwr {
		if _, ok := u.peek(); !ok {
			u.c.NoWQE++
			return false
		}
	}
	// rxe check_rkey's resid test, and a LAST that ends the message at its
	// DMA length (the completion of a WRITE with immediate reports that
	// length); a zero-length WRITE carries nothing (C9-88).
	if u.wlen == 0 && len(pay) != 0 ||
		u.wlen > 0 && !writeFits(u.cfg.PMTU, uint64(u.wlen-u.off), len(pay), p.PadCnt(), p.Mask()&packet.MaskEnd != 0) {
		u.c.LengthErr++
		if rwr {
			u.classE(p, verbs.WCRemInvReqErr)
		}
		return false
	}
	// rxe check_rkey: on every packet the R_Key must grant the whole rest
	// of the message's range, so a WRITE whose range runs past its region
	// places nothing (and the RC responder's checkWriteRKey does the same).
	if rest := u.wlen - u.off; rest > 0 {
		mem, ok := u.env.Mem.Remote(u.rkey, u.va+uint64(u.off), rest, verbs.AccessRemoteWrite)
		if !ok || len(mem) != int(rest) {
			u.c.AccessErr++
			if rwr {
				u.classE(p, verbs.WCRemAccessErr) // rxe RESPST_ERR_RKEY_VIOLATION
			}
			return false
		}
		sge.Copy(mem[:len(pay)], pay) // len(pay) <= rest: writeFits
	}
	u.off += uint32(len(pay))
	u.c.BytesPlaced += uint64(len(pay))
	u.drop = false
	if rwr {
		wr, _ := u.peek() // taken above
		u.finish(p, wr.ID, u.wlen)
	}
	return true
}

// finish completes the receive WQE at the head of the queue for the
// message whose last packet is p.
func (u *Unreliable) finish(p packet.Packet, id uint64, n uint32) {
	u.pop()
	u.wc = verbs.WC{ID: id, Status: verbs.WCSuccess, Opcode: verbs.WCRecv, ByteLen: n, QPNum: u.cfg.QPN}
	if p.Mask()&packet.MaskWrite != 0 {
		u.wc.Opcode = verbs.WCRecvRDMAWithImm
	}
	if p.Mask()&packet.MaskImmDt != 0 {
		u.wc.Flags |= verbs.WCFlagWithImm
		u.wc.Imm = p.ImmDt().Imm()
	}
	u.post(p.BTH().SE())
}
