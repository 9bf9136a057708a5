package responder

import "github.com/gorxe/gorxe/packet"

// oooOverhead is the room an out-of-order slot keeps beyond the path MTU
// (packet.OOOSlotOverhead).
const oooOverhead = packet.OOOSlotOverhead

// The out-of-order window in PSNs: a power of two, at least oooMinWindow
// (a requester's window is 128 PSNs by default) and twice the slot count,
// at most oooMaxWindow (the wire contract's bound, 2^22).
const (
	oooMinWindow = 1024
	oooMaxWindow = 1 << 22
)

// oooSlot is one buffered request: a copy of the packet as it arrived, or,
// for a request whose payload was placed on arrival (placeAhead), a copy
// of its headers, pad and ICRC only, with placed the payload length.
type oooSlot struct {
	buf    []byte // slotSize bytes, allocated when the slot is first used
	n      int    // bytes held
	placed int    // payload bytes placed on arrival, not held; 0: none
	psn    packet.PSN
	used   bool
}

// oooBuf is the out-of-order buffer of selective repeat: the requests with
// ePSN < PSN < ePSN + window, copied in as they arrive, in slots of PMTU +
// oooOverhead bytes. It holds at most maxSlots packets, so that the slot
// memory never exceeds Config.OOOLimit. Nothing is allocated until the first
// out-of-order packet; slots are allocated one at a time and reused, so a
// flood of future PSNs finds the buffer full and is dropped, and a steady
// loss rate allocates nothing once the peak is reached.
type oooBuf struct {
	slotSize int
	maxSlots int
	window   int // PSNs, a power of two

	index []int32   // PSN & (window-1) -> slot number + 1; 0: none
	slots []oooSlot // the slots allocated so far (at most maxSlots)
	free  []int32   // slot numbers not in use
	n     int       // packets held
	bytes int       // bytes held

	// base is the expected PSN the index was last purged at: no held
	// packet has a PSN before it.
	base packet.PSN
	// next is the PSN just past the PSN span of the highest request held
	// (a READ spans as many PSNs as its responses); valid while n > 0.
	next packet.PSN
	// since counts the out-of-order arrivals since the hole at sinceAt (the
	// expected PSN then) was last reported.
	since   int
	sinceAt packet.PSN
	// sinceProgress counts the out-of-order requests held since the last
	// progress report.
	sinceProgress int
	// reorderSent says that the progress report for SRReorderPackets
	// requests past the hole at sinceAt was queued.
	reorderSent bool
	// The SEND in progress as far as the held packets show it
	// (Responder.sendRun), computed while ePSN was sendRunBase: every PSN
	// from sendRunBase to before sendRunNext is known to be a SEND MIDDLE
	// of that message. sendRunOn is false until it is computed, and again
	// when the buffer is emptied.
	sendRunBase, sendRunNext packet.PSN
	sendRunOn                bool
	// The SEND after the one in progress (nextRun), computed while ePSN
	// was nextRunBase: its FIRST is held at nextRunFirst, and
	// nextRunFull says it carries a full PMTU; if so, every PSN after it
	// up to before nextRunNext is known to be a SEND MIDDLE of that
	// message. nextRunOn is false until it is computed, and again when
	// the buffer is emptied. Once nextRunChecked, nextRunApart says
	// whether the next WQE's buffers and those of the WQE in use are
	// apart (sge.Apart).
	nextRunBase, nextRunFirst, nextRunNext packet.PSN
	nextRunOn, nextRunFull                 bool
	nextRunChecked, nextRunApart           bool
}

// isSendCont reports whether the held packet in slot s continues a SEND: a
// SEND MIDDLE or LAST, after which the PSN before it cannot have ended a
// message (a message's last packet is followed by a FIRST or ONLY, IBA
// 9.7.5.1.2).
func (o *oooBuf) isSendCont(s int) bool {
	switch packet.Opcode(o.slots[s].buf[0]) {
	case packet.RCSendMiddle, packet.RCSendLast, packet.RCSendLastWithImmediate, packet.RCSendLastWithInvalidate:
		return true
	}
	return false
}

// isSendLast reports whether the held packet in slot s is the last packet
// of a SEND of several (LAST, with immediate or with invalidate).
func (o *oooBuf) isSendLast(s int) bool {
	switch packet.Opcode(o.slots[s].buf[0]) {
	case packet.RCSendLast, packet.RCSendLastWithImmediate, packet.RCSendLastWithInvalidate:
		return true
	}
	return false
}

// middleRun returns the first PSN from x on, x included, not known to be
// a SEND MIDDLE of the SEND that the PSN before x is part of (FIRST or
// MIDDLE) as far as the held packets show it, within the window from
// epsn: a PSN is known to be one if it is held as a SEND MIDDLE, or is
// missing and followed by a held SEND MIDDLE or LAST (isSendCont: it did
// not end the message, and since the PSN before it did not either, it is
// a MIDDLE).
func (o *oooBuf) middleRun(x, epsn packet.PSN) packet.PSN {
	for ; int(x.Diff(epsn)) < o.window; x = x.Next() {
		if s := o.lookup(x); s >= 0 {
			if packet.Opcode(o.slots[s].buf[0]) != packet.RCSendMiddle {
				break
			}
		} else if s := o.lookup(x.Next()); s < 0 || !o.isSendCont(s) {
			break
		}
	}
	return x
}

// nextRun returns the first PSN after first not known to be a SEND
// MIDDLE of the SEND whose FIRST is held at first, with ePSN at epsn
// (middleRun), if that FIRST carries a full PMTU of mtu bytes; ok is
// false if first is not held as such a FIRST. What it finds for one ePSN
// and FIRST it keeps and extends as packets arrive, as sendRun does: a
// held packet stays until ePSN moves or the buffer is emptied, so each
// PSN is looked at about once per ePSN.
func (o *oooBuf) nextRun(first, epsn packet.PSN, mtu int) (next packet.PSN, ok bool) {
	if !o.nextRunOn || o.nextRunBase != epsn || o.nextRunFirst != first {
		s := o.lookup(first)
		if s < 0 {
			return 0, false // not cached: the FIRST may arrive later
		}
		b := o.slots[s].buf[:o.slots[s].n]
		// A SEND FIRST has no header but the BTH.
		n := len(b) - packet.BTHSize - packet.BTH(b).PadCnt() - packet.ICRCSize
		o.nextRunOn, o.nextRunBase, o.nextRunFirst = true, epsn, first
		o.nextRunFull = packet.Opcode(b[0]) == packet.RCSendFirst && n == mtu
		o.nextRunNext, o.nextRunChecked = first.Next(), false
	}
	if !o.nextRunFull {
		return 0, false
	}
	o.nextRunNext = o.middleRun(o.nextRunNext, epsn)
	return o.nextRunNext, true
}

// init sets the bounds for a path MTU and a byte limit (0: DefaultOOOLimit).
// It allocates nothing.
func (o *oooBuf) init(pmtu, limit int) {
	if limit <= 0 {
		limit = DefaultOOOLimit
	}
	o.slotSize = pmtu + oooOverhead
	o.maxSlots = packet.OOOPackets(limit, pmtu)
	w := oooMinWindow
	for w < 2*o.maxSlots && w < oooMaxWindow {
		w <<= 1
	}
	o.window = w
}

// key returns the index position of psn. The PSN space (2^24) is a multiple
// of the window, so the mapping holds across the wrap.
func (o *oooBuf) key(psn packet.PSN) uint32 { return uint32(psn) & uint32(o.window-1) }

// lookup returns the slot holding psn, or -1.
func (o *oooBuf) lookup(psn packet.PSN) int {
	if o.n == 0 {
		return -1
	}
	s := int(o.index[o.key(psn)]) - 1
	if s < 0 || !o.slots[s].used || o.slots[s].psn != psn {
		return -1
	}
	return s
}

// holdResult says what hold did with a packet.
type holdResult uint8

const (
	holdKept       holdResult = iota // copied into a slot
	holdDuplicate                    // that PSN is held already
	holdNoRoom                       // every slot is in use
	holdOutOfRange                   // PSN too far ahead, or packet too large
)

// hold copies packet b with PSN psn (ePSN < psn) into a free slot. The
// caller has purged the index at the current ePSN. span is the number of
// PSNs the request uses (at most the window).
func (o *oooBuf) hold(b []byte, psn, epsn packet.PSN, span int) holdResult {
	return o.holdParts(b, nil, 0, psn, epsn, span)
}

// holdParts is hold for a packet held in two parts, head and then tail,
// whose payload of placed bytes (0: none) is not among them: it was
// placed on arrival (placeAhead).
func (o *oooBuf) holdParts(head, tail []byte, placed int, psn, epsn packet.PSN, span int) holdResult {
	if int(psn.Diff(epsn)) >= o.window || len(head)+len(tail) > o.slotSize {
		return holdOutOfRange
	}
	if o.lookup(psn) >= 0 {
		return holdDuplicate
	}
	s := o.alloc()
	if s < 0 {
		return holdNoRoom
	}
	if o.index == nil {
		o.index = make([]int32, o.window)
	}
	sl := &o.slots[s]
	sl.n = copy(sl.buf, head)
	sl.n += copy(sl.buf[sl.n:], tail)
	sl.psn, sl.used, sl.placed = psn, true, placed
	o.index[o.key(psn)] = int32(s + 1)
	end := psn.Add(span)
	if o.n == 0 || end.After(o.next) {
		o.next = end
	}
	if o.n == 0 {
		o.base = epsn
	}
	o.n++
	o.bytes += sl.n
	return holdKept
}

// alloc returns a free slot number, allocating a new slot while fewer than
// maxSlots exist, or -1.
func (o *oooBuf) alloc() int {
	if k := len(o.free); k > 0 {
		s := o.free[k-1]
		o.free = o.free[:k-1]
		return int(s)
	}
	if len(o.slots) >= o.maxSlots {
		return -1
	}
	o.slots = append(o.slots, oooSlot{buf: make([]byte, o.slotSize)})
	return len(o.slots) - 1
}

// take removes slot s from the index; its bytes stay valid until release.
// placed is the payload length placed on arrival (holdParts), 0 if the
// bytes are the whole packet.
func (o *oooBuf) take(s int) (b []byte, placed int) {
	sl := &o.slots[s]
	o.index[o.key(sl.psn)] = 0
	sl.used = false
	o.n--
	o.bytes -= sl.n
	return sl.buf[:sl.n], sl.placed
}

// release returns a taken slot to the free list.
func (o *oooBuf) release(s int) { o.free = append(o.free, int32(s)) }

// purge drops the held packets whose PSN is before epsn: packets the
// responder has passed (executed from another copy, or inside the PSN span
// of a READ). It returns how many it dropped.
func (o *oooBuf) purge(epsn packet.PSN) int {
	if o.n == 0 {
		o.base = epsn
		return 0
	}
	d := int(epsn.Diff(o.base))
	if d <= 0 {
		return 0
	}
	dropped := 0
	if d >= o.window {
		dropped = o.clear()
	} else {
		for k := range d {
			if s := o.lookup(o.base.Add(k)); s >= 0 {
				o.take(s)
				o.release(s)
				dropped++
			}
		}
	}
	o.base = epsn
	return dropped
}

// clear drops every held packet and returns how many there were. The slots
// stay allocated for reuse.
func (o *oooBuf) clear() int {
	n := o.n
	o.sendRunOn, o.nextRunOn = false, false
	for s := range o.slots {
		if o.slots[s].used {
			o.take(s)
			o.release(s)
		}
	}
	return n
}

// firstHeldAfter returns the lowest held PSN after psn, searching up to
// next (past every held PSN); ok is false if none is held.
func (o *oooBuf) firstHeldAfter(psn packet.PSN) (packet.PSN, bool) {
	if o.n == 0 {
		return 0, false
	}
	for q := psn.Next(); q.Before(o.next) && q.Diff(psn) < int32(o.window); q = q.Next() {
		if o.lookup(q) >= 0 {
			return q, true
		}
	}
	return 0, false
}

// allocated returns the bytes of slot memory allocated (at most
// maxSlots × slotSize ≤ the limit).
func (o *oooBuf) allocated() int { return len(o.slots) * o.slotSize }

// reset drops everything and frees the memory.
func (o *oooBuf) reset() {
	o.index, o.slots, o.free = nil, nil, nil
	o.n, o.bytes, o.since, o.reorderSent = 0, 0, 0, false
	o.sendRunOn, o.nextRunOn = false, false
}
