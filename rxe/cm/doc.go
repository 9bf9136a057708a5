// Package cm is gorxe's InfiniBand communication manager (IBA chapter 12):
// the state machines that set up and tear down connections by exchanging
// CM MADs (REQ, MRA, REJ, REP, RTU, DREQ, DREP) over QP1, and resolve UD
// services with SIDR_REQ and SIDR_REP.
//
// It is sans-IO, like the engines: an Agent takes the MADs that arrived
// (Receive), the consumer's decisions (Connect, Accept, ConfirmREP, Reject,
// Disconnect, Abort) and the passing of time (Tick), those that start or
// stop a timer with an explicit now; it returns what to send (Poll) and
// what happened (NextEvent), and tells when it next needs the time
// (Deadline). The rxe package owns the socket,
// the QP1 datagrams and the timer that drive it. A decision that does not
// fit the state fails with ErrState (ErrUnknownID for an ID the agent does
// not track), and one whose private data or REQ fields do not fit the wire
// with ErrInvalid; either way nothing is sent.
//
// One connection, active side on the left (IBA 12.6, 12.9):
//
//	active                         passive
//	Connect  ── REQ ──────────────▶ EventREQ   (Accept or Reject)
//	         ◀─────────────── MRA ─  (duplicate REQ while the consumer decides)
//	EventREP ◀─────────────── REP ─  Accept
//	ConfirmREP ── RTU ────────────▶ EventEstablished
//	Disconnect ── DREQ ───────────▶ EventDisconnect
//	EventDisconnected ◀────── DREP ─
//
// Timeouts and retries follow the REQ: the active side waits for a REP for
// 4.096 µs · 2^RemoteCMResponseTimeout plus twice the packet life time, and
// resends the REQ up to MaxCMRetries times; the passive side waits for the
// RTU for the active side's LocalCMResponseTimeout plus twice the packet
// life time and resends the REP as often; a DREQ is resent the same way.
// The peer's first MRA for a REQ or REP stretches each of its remaining
// waits to the MRA's service timeout plus the packet life time; later
// MRAs for it change nothing (kernel cm_mra_handler). A timeout exponent
// taken from the peer (its REQ's response and local ACK timeouts, its MRA's
// service timeout) counts for at most Config.MaxPeerTimeout (24, about
// 69 s), so that a peer announcing the wire's 31 (about 2.4 h per wait)
// and dying holds nothing for days.
// When retries run out, the side that timed out sends a REJ with reason
// Timeout and reports EventTimeout; for a DREQ it gives up, enters
// time-wait and reports EventDisconnected with Reason RejTimeout.
//
// Duplicates and late MADs are handled as IBA 12.9 and kernel ib_cm do: a
// duplicate REQ is answered with an MRA while the consumer decides and
// dropped once the REP is out (the REP's timer resends it); a duplicate REP
// with the RTU; a DREQ for a connection in time-wait, or one this agent
// does not know, with a DREP (one that names a connection but not its QP is
// dropped, kernel cm_dreq_handler); a REP for an
// unknown connection with a REJ (invalid communication ID); a REQ for a
// service nobody listens on with a REJ (invalid service ID); a duplicate REQ
// for a connection in time-wait with a REJ (stale connection); a REQ or REP
// from a peer QP (CA GUID and QPN) that another connection not yet in
// time-wait has, with a REJ (stale connection), that other connection, if
// established, getting a DREQ (IBA 12.9.8.4; kernel cm_match_req and
// cm_rep_handler): the peer lost it, typically by restarting. A REJ ends
// only the connection both its IDs name (a REJ of a REQ, which names ours
// only, only one that has no remote ID yet), as kernel ib_cm matches them
// (cm_acquire_rejected_id). Anything else that does not fit the state is
// dropped and counted.
//
// Service ID resolution (IBA 12.11) is the UD exchange: ResolveSIDR sends a
// SIDR_REQ and resends it on its own timer until the SIDR_REP
// (EventSIDRREP) or the end of its retries (EventTimeout); a SIDR_REQ for
// a service ListenSIDR took is EventSIDRREQ, answered with AnswerSIDR. A
// SIDR_REQ for any other service is answered with a SIDR_REP of status
// "service ID not supported" (kernel cm_sidr_req_handler with no
// listener); a duplicate of one the consumer has not answered is dropped,
// and a SIDR_REP that names no pending resolution too. See sidr.go.
//
// Transaction IDs follow kernel ib_cm's layout, so a capture of gorxe reads
// like one of the kernel: the high 32 bits are the agent's number
// (Config.TIDHigh), the low 32 bits the sender's local communication ID in
// little-endian byte order. Replies (MRA, REJ, REP, RTU for a REQ; DREP for
// a DREQ) carry the transaction ID of the message they answer.
package cm
