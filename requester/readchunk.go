package requester

// readChunk returns what the next READ request of w asks for, from its
// request cursor w.off: the length in bytes, the response packets (PSNs)
// it covers and whether it reaches the end of the message. Without
// Config.MaxReadPkts that is the whole rest; with it, a READ whose
// responses would not fit in the requester's receive buffer is asked for
// in parts of up to MaxReadPkts packets (a partial READ is an ordinary READ
// request for a sub-range, IBA 9.4.3, as rxe's req_retry sends after a
// loss).
//
// Responses placed in order since a rewind (catchUp moved the send cursor
// past them) are not asked for again: the cursor starts no earlier than
// the bytes received.
func (r *Requester) readChunk(w *wqe) (n, pkts uint32, end bool) {
	w.off = max(w.off, w.rcvd)
	rest := w.length - w.off
	pkts = r.pkts(rest)
	if m := uint32(r.cfg.MaxReadPkts); m > 0 {
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

// readFits reports whether the next READ request of w fits in the PSN
// window: with MaxReadPkts, a READ part starts only when the responses
// outstanding plus its own stay within the window (or nothing is
// outstanding), so the responses in flight never exceed the window the
// receive buffer allows. Other work requests always fit.
func (r *Requester) readFits(w *wqe) bool {
	if w.kind != kindRead || r.cfg.MaxReadPkts <= 0 {
		return true
	}
	out := r.inFlight()
	_, k, _ := r.readChunk(w)
	return out == 0 || out+int(k) <= r.sendWindow()
}

// chunkEnd reports whether a READ_RESPONSE_LAST or ONLY carrying n bytes,
// with resid bytes of the message still to come, ends a READ part rather
// than the message: parts are whole packets, so it carries a full PMTU
// and more remains.
func (r *Requester) chunkEnd(n, resid uint32) bool {
	return r.cfg.MaxReadPkts > 0 && n == r.pmtu && resid > r.pmtu
}

// readInParts reports whether w is a READ asked in parts: its responses
// may start again (FIRST or ONLY) at the PSN of any part, which checkPSN
// has already matched with the oldest unacknowledged PSN.
func (r *Requester) readInParts(w *wqe) bool {
	return w.kind == kindRead && r.cfg.MaxReadPkts > 0
}
