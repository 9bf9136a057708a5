package requester

// readChunk returns what the next READ request of w asks for, from its
// request cursor w.off: the length in bytes, the response packets (PSNs)
// it covers and whether it reaches the end of the message: the whole rest,
// or, for a READ asked for in parts (readParts: Config.MaxReadPkts, when
// the READ's responses would not fit in the requester's receive buffer,
// or the smallest adaptive window after a loss), the rest of the current
// part (a partial READ is an ordinary READ request for a sub-range, IBA
// 9.4.3, as rxe's req_retry sends after a loss).
//
// Responses placed in order since a rewind (catchUp moved the send cursor
// past them) are not asked for again: the cursor starts no earlier than
// the bytes received.
func (r *Requester) readChunk(w *wqe) (n, pkts uint32, end bool) {
	w.off = max(w.off, w.rcvd)
	if d := r.psn.Diff(w.origFirst); w.started && d >= 0 && r.psn != w.origFirst.Add(int(w.off/r.pmtu)) {
		// PSNs are stable across rounds: the request at the cursor's PSN
		// asks from the byte that PSN carries. Responses placed since a
		// go-back-N rewind reset this READ (selective repeat places them
		// in order, srPlace) must not move its offset past its PSN.
		w.off = uint32(d) * r.pmtu
	}
	rest := w.length - w.off
	pkts = r.pkts(rest)
	if !w.partsSet {
		w.parts, w.partsSet = r.readParts(), true
		if w.parts > 0 {
			r.partsWQEs++ // until finish
		}
	}
	if m := w.parts; m > 0 {
		// Parts end at multiples of m packets from the start of the
		// message, so a re-read from inside a part never reaches into the
		// next: the responder finds it within the READ it served (rxe
		// duplicate_request looks the resource up by PSN).
		k := m - w.off/r.pmtu%m
		if pkts > k {
			return k * r.pmtu, k, false
		}
	}
	return rest, pkts, true
}

// readParts returns the part size, in packets, for a READ asked for now:
// Config.MaxReadPkts if set; under go-back-N with the adaptive window, the
// smallest window while the window is below its largest (after a loss) or
// fewer than partsHold READs have completed since a READ repair
// (readAgain, which does not shrink the window); else 0, the whole READ
// in one request. A READ asked as one request has
// all its responses in flight whatever the window, and a response lost
// among them costs the rest of the READ again; in parts the window bounds
// the responses in flight, and so what a loss costs, as it does for SEND
// and WRITE packets (docs/recovery.md, "Adaptive window"). Without a loss
// READs stay whole, so a loss-free stream keeps its deeper pipeline.
func (r *Requester) readParts() uint32 {
	if m := r.cfg.MaxReadPkts; m > 0 {
		return uint32(m)
	}
	rec := r.rec.cfg
	if r.cfg.SelectiveRepeat || rec.Off || rec.FixedWindow ||
		r.rec.win.Size() >= r.cfg.Window && r.readsSinceRepair >= partsHold {
		return 0
	}
	return uint32(r.rec.win.Config().Min)
}

// maxReadPSNs bounds the PSNs from the oldest outstanding one to the last
// response of a READ: below half the 24-bit PSN space.
const maxReadPSNs = 1 << 23

// readFits reports whether the next READ request of w fits in the PSN
// window: for a READ in parts, a part starts only when the responses
// outstanding plus its own stay within the window (or nothing is
// outstanding), so the responses in flight never exceed the window (the
// one the receive buffer allows, or the adaptive one). No READ starts
// whose last response PSN would be maxReadPSNs or more past the oldest
// outstanding PSN. Other work requests always fit.
func (r *Requester) readFits(w *wqe) bool {
	if w.kind != kindRead {
		return true
	}
	_, k, _ := r.readChunk(w)
	if int(r.psn.Diff(r.compPSN))+int(k) >= maxReadPSNs {
		// Its last response PSN would be half the PSN space or more
		// past the oldest outstanding one, where PSN comparison fails:
		// it waits until enough of the rest completes (Post refuses a
		// READ too long to fit alone).
		return false
	}
	if w.parts == 0 {
		return true
	}
	out := r.inFlight()
	ahead := int(r.psn.Diff(r.compPSN)) + int(k)
	if r.cfg.SelectiveRepeat && ahead >= srTrack {
		return false // its responses would fall outside the tracked range
	}
	if !r.cfg.SelectiveRepeat && r.sr.ngot > 0 && r.psn != r.compPSN && ahead > min(r.cfg.Window, int(w.parts)*max(r.cfg.MaxRdAtomic, 1)) {
		// Responses placed ahead of a hole (readparts.go) leave the
		// window, but the parts asked for stay within the largest window
		// and the peer's READ resources, so that the part with the hole
		// can still be re-read (rxe duplicate_request drops a READ whose
		// resource was reused).
		return false
	}
	return out == 0 || out+int(k) <= r.sendWindow()
}

// chunkEnd reports whether a READ_RESPONSE_LAST or ONLY carrying n bytes,
// with resid bytes of the message still to come, ends a READ part rather
// than the message: parts are whole packets, so it carries a full PMTU
// and more remains.
func (r *Requester) chunkEnd(w *wqe, n, resid uint32) bool {
	return w.parts > 0 && n == r.pmtu && resid > r.pmtu
}

// readInParts reports whether w is a READ asked in parts: its responses
// may start again (FIRST or ONLY) at the PSN of any part, which checkPSN
// has already matched with the oldest unacknowledged PSN.
func (r *Requester) readInParts(w *wqe) bool {
	return w.kind == kindRead && w.parts > 0
}

// rdRequests returns how many READ and atomic requests may hold a
// resource at the responder: one per WQE holding a max_rd_atomic slot,
// except that a READ asked for in parts counts one per part asked for in
// this round (up to the send cursor) whose responses have not all been
// placed in order. It walks the WQEs up to the send cursor only while
// some READ is asked for in parts (partsWQEs); else it is rdInUse.
func (r *Requester) rdRequests() int {
	n := r.rdInUse
	if r.partsWQEs == 0 {
		return n
	}
	for i := r.head; i != r.tail && i <= r.cur; i++ {
		w := r.slot(i)
		if !w.hasRdAtomic || w.kind != kindRead || w.parts == 0 || w.state == wqePosted {
			continue
		}
		asked := (r.pkts(w.off) + w.parts - 1) / w.parts
		if w.off == 0 {
			asked = 1
		}
		done := min(w.rcvd/r.pmtu/w.parts, asked)
		n += int(asked-done) - 1 // in place of the slot's one
	}
	return n
}
