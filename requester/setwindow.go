package requester

import "github.com/gorxe/gorxe/packet"

// SetWindow changes Config.Window and Config.MaxReadPkts of a running
// requester, as the owner's receive-buffer share changes (rxe's
// QP.bufferLimits, recomputed when QPs sharing a socket connect or
// leave). The values are taken as New takes them: a window of 0 or less
// is DefaultWindow, and under selective repeat READ parts stay within the
// tracked PSNs.
//
// What is outstanding stays as it is: nothing already sent is dropped or
// sent again. A window below the packets outstanding (in flight, under
// selective repeat) sends nothing new until the acknowledgements bring
// them below it (windowFull, readFits); a larger one lets new packets go
// up to it at the next NextPacket, so the owner runs the requester after
// the change. The adaptive window keeps its loss history within the new
// bounds (retry.Window.SetBounds): a window no loss holds back moves to
// the new size. The smallest adaptive window, the AckReq spacing and the
// span past the last executed request under selective repeat follow the
// new window as New derives them; an AckReqEvery that the old window
// capped (equal to it) is capped anew from DefaultAckReqEvery. A READ
// already asked for in parts keeps its part size; READs started later use
// the new MaxReadPkts.
func (r *Requester) SetWindow(window, maxReadPkts int) {
	c := &r.cfg
	if window <= 0 {
		window = DefaultWindow
	}
	window = min(window, packet.PSNWindow-1)
	if c.AckReqEvery >= c.Window {
		c.AckReqEvery = DefaultAckReqEvery
	}
	c.Window = window
	c.AckReqEvery = min(c.AckReqEvery, window)
	c.MaxReadPkts = max(maxReadPkts, 0)
	if c.SelectiveRepeat && c.MaxReadPkts >= srTrack {
		c.MaxReadPkts = srTrack - 1
	}
	r.rec.win.SetBounds(window, minWindow(c))
	r.sr.span = srSendSpan(c)
}

// Limits returns the window and READ part size in effect
// (Config.Window and Config.MaxReadPkts after New's or SetWindow's
// defaults; the adaptive window may be smaller, RecoveryCounters.Window).
func (r *Requester) Limits() (window, maxReadPkts int) {
	return r.cfg.Window, r.cfg.MaxReadPkts
}
