package requester

import (
	"github.com/gorxe/gorxe/internal/sge"
	"github.com/gorxe/gorxe/packet"
	"github.com/gorxe/gorxe/rxe/verbs"
)

// kind groups work request opcodes by how they are segmented and answered.
type kind uint8

const (
	kindSend        kind = iota // SEND, SEND_WITH_IMM, SEND_WITH_INV: segmented, ACKed
	kindWrite                   // RDMA_WRITE, RDMA_WRITE_WITH_IMM: segmented, ACKed
	kindRead                    // RDMA_READ: one request, N response packets
	kindAtomic                  // CMP_AND_SWP, FETCH_AND_ADD: ATOMIC_ACKNOWLEDGE
	kindAtomicWrite             // ATOMIC_WRITE: 8-byte payload, empty READ_RESPONSE_ONLY
)

// segmented reports whether messages of kind k are split by PMTU and
// completed by (cumulative) ACKs.
func (k kind) segmented() bool { return k <= kindWrite }

// rdAtomic reports whether WQEs of kind k need a max_rd_atomic slot.
func (k kind) rdAtomic() bool { return k >= kindRead }

// wqeState is where a WQE stands in the current round of transmission, as
// rxe's wqe_state_*: a go-back-N retry returns sent WQEs to wqePosted.
type wqeState uint8

const (
	wqePosted     wqeState = iota // no packet sent in this round
	wqeProcessing                 // some packets sent in this round
	wqePending                    // all packets sent, awaiting the response
	wqeErrored                    // a local error; completed with status
)

// wqe is one send queue entry. Its SGE list and inline data live in the
// Requester's preallocated stores.
type wqe struct {
	// The work request.
	id         uint64
	op         verbs.WROpcode
	kind       kind
	flags      verbs.SendFlags
	imm        uint32
	invRKey    uint32
	rkey       uint32
	remote     uint64
	compareAdd uint64
	swap       uint64
	sges       []verbs.SGE
	inline     []byte
	isInline   bool
	length     uint32
	ssn        uint32 // send sequence number, for end-to-end credits

	// Requester state.
	state       wqeState
	started     bool // a packet of this WQE has been sent (in any round)
	sentAll     bool // every PSN of this WQE has been sent at least once
	hasRdAtomic bool // holds a max_rd_atomic slot
	firstPSN    packet.PSN
	lastPSN     packet.PSN
	origFirst   packet.PSN // READ: the PSN of response byte 0
	off         uint32     // bytes segmented so far
	snd         sge.Cursor // send cursor in sges
	// READ: the packets per READ request part (readChunk), 0 for one
	// request for all; decided when the READ is first asked for
	// (partsSet), kept for its resends.
	parts    uint32
	partsSet bool

	// Completer state (READ data, atomic result).
	rcvd  uint32     // bytes placed
	place sge.Cursor // placement cursor in sges
	// READ under go-back-N (readahead.go): all its responses were placed
	// while an earlier READ was repaired (aheadDone); a re-read of its
	// rest was asked for since its responses last made progress
	// (rereadAsked) and waits to be sent (rereadDue). As the oldest WQE
	// asked in parts: one more than the part its latest re-read started
	// in, 0 for none (rereadPart, readparts.go).
	aheadDone, rereadAsked, rereadDue bool
	rereadPart                        uint32
	status                            verbs.WCStatus
	vendor                            uint32 // WC.VendorErr: the AETH syndrome of a NAK
}

// resetCursors rewinds the send and placement cursors to the start of the
// message.
func (w *wqe) resetCursors() {
	w.off, w.snd = 0, sge.Cursor{}
	w.rcvd, w.place = 0, sge.Cursor{}
	w.aheadDone, w.rereadAsked, w.rereadDue = false, false, false
	w.rereadPart = 0
}

// seek moves the send cursor to byte off of the message.
func (w *wqe) seek(off uint32) {
	w.off = off
	w.snd.Seek(w.sges, off)
}

// kindOf classifies a work request opcode; ok is false for opcodes an RC
// requester does not send.
func kindOf(op verbs.WROpcode) (kind, bool) {
	switch op {
	case verbs.WRSend, verbs.WRSendWithImm, verbs.WRSendWithInv:
		return kindSend, true
	case verbs.WRRDMAWrite, verbs.WRRDMAWriteWithImm:
		return kindWrite, true
	case verbs.WRRDMARead:
		return kindRead, true
	case verbs.WRAtomicCmpAndSwp, verbs.WRAtomicFetchAndAdd:
		return kindAtomic, true
	case verbs.WRAtomicWrite:
		return kindAtomicWrite, true
	}
	return 0, false
}

// Check validates a send work request for an RC send queue of maxSGE
// SGEs and maxInline inline bytes without posting it: the checks of rxe's
// validate_send_wr and init_send_wr, a supported opcode, at most maxSGE
// SGEs, at most maxInline inline bytes (SEND and RDMA WRITE only), at most
// 2^31 bytes, exactly 8 local bytes and an 8-byte aligned remote address
// for atomics. The owner uses it where there is no Requester to post to (a
// QP in ERR that never reached RTS, whose work requests rxe_post_send still
// validates before they are flushed).
func Check(wr *verbs.SendWR, maxSGE, maxInline int) error {
	_, _, err := check(wr, maxSGE, maxInline)
	return err
}

// check is Check, returning the WR's kind and message length too.
func check(wr *verbs.SendWR, maxSGE, maxInline int) (kind, uint64, error) {
	k, ok := kindOf(wr.Opcode)
	if !ok {
		return 0, 0, ErrUnsupportedOpcode
	}
	var length uint64
	if wr.Flags&verbs.SendInline != 0 {
		if k == kindRead || k == kindAtomic {
			return 0, 0, ErrInlineNotAllowed
		}
		if len(wr.InlineData) > maxInline {
			return 0, 0, ErrInlineTooLong
		}
		length = uint64(len(wr.InlineData))
	} else {
		if len(wr.SGList) > maxSGE {
			return 0, 0, ErrTooManySGE
		}
		length = wr.Length()
	}
	if length > MaxMessage {
		return 0, 0, ErrMessageTooLong
	}
	if k == kindAtomic || k == kindAtomicWrite {
		if length != 8 {
			return 0, 0, ErrAtomicLength
		}
		if k == kindAtomic && wr.RemoteAddr&7 != 0 {
			return 0, 0, ErrAtomicAlign
		}
	}
	return k, length, nil
}

// Post validates a send work request and copies it, with its SGE list and
// inline data, into the next free slot of the send queue. It does not
// check L_Keys: a bad one fails the WQE with LOC_PROT_ERR when its data is
// copied (rxe copy_data). The checks are Check's, then those that need
// the QP's attributes (a READ's PSN span at the path MTU, max_rd_atomic
// above 0); as in rxe post_one_send, a malformed work request is refused
// as such even when the send queue is full, and only a valid one gets
// ErrQueueFull.
//
// Posting to a failed or flushed requester is allowed (verbs allow posting
// in the error state); the WQE waits for the owner's next Flush.
func (r *Requester) Post(wr *verbs.SendWR) error {
	k, length, err := check(wr, r.cfg.MaxSGE, r.cfg.MaxInline)
	if err != nil {
		return err
	}
	if k == kindRead && (length+uint64(r.cfg.PMTU)-1)/uint64(r.cfg.PMTU) >= maxReadPSNs {
		return ErrReadPSNSpan
	}
	if k.rdAtomic() && r.cfg.MaxRdAtomic <= 0 {
		return ErrNoRdAtomic
	}
	if r.sq.Free() == 0 {
		return ErrQueueFull
	}
	inline := wr.Flags&verbs.SendInline != 0
	w := r.sq.Push() // not nil: checked above
	sges, inl := w.sges[:0], w.inline[:0]
	*w = wqe{
		id:         wr.ID,
		op:         wr.Opcode,
		kind:       k,
		flags:      wr.Flags,
		imm:        wr.Imm,
		invRKey:    wr.InvalidateRKey,
		rkey:       wr.RKey,
		remote:     wr.RemoteAddr,
		compareAdd: wr.CompareAdd,
		swap:       wr.Swap,
		isInline:   inline,
		length:     uint32(length),
		ssn:        r.ssn,
	}
	if inline {
		w.inline = append(inl, wr.InlineData...)
		w.sges = sges
	} else {
		w.sges = append(sges, wr.SGList...)
		w.inline = inl
	}
	r.ssn = (r.ssn + 1) & packet.PSNMask
	r.tail++
	return nil
}
