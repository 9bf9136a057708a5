// Package requester is the send side of a reliable connected (RC) queue
// pair: the work of the kernel rxe driver's requester (rxe_req.c) and
// completer (rxe_comp.c), without I/O.
//
// A Requester owns the send queue: a ring of work queue entries (WQEs),
// (package internal/ring), into which Post copies each work request (its
// SGE list and inline data); the ring grows by doubling, up to MaxWR, when
// more WQEs are outstanding than ever before, so an idle QP costs little
// memory. NextPacket segments the WQE at the send cursor by
// path MTU, assigns PSNs (IBA 9.7.1), picks the FIRST/MIDDLE/LAST/ONLY
// opcode, writes the headers (packet.Begin), copies the payload once from
// the memory regions into the caller's buffer (internal/sge, rxe
// copy_data), adds the ICRC (Frame.Seal) and returns the packet. Receive is the completer: it matches ACKs, NAKs, RNR
// NAKs, read responses and atomic acknowledgements to the oldest
// outstanding WQE (IBA 9.7), places read data and atomic results, and
// posts send completions in order through Completions.
//
// Reliability follows IBA 9.7 and rxe: a retransmit timer (local ACK
// timeout, 4.096 µs × 2^timeout) pushed forward by every response while
// PSNs are outstanding (rxe_completer, COMPST_EXIT); go-back-N from the
// oldest unacknowledged PSN after a timeout, a PSN sequence error NAK or an implied NAK, regenerating the packets from
// the WQE (rxe req_retry); an RNR timer after an RNR NAK; the retry_cnt and
// rnr_retry budgets of package retry; and fatal errors (remote NAKs,
// exhausted budgets, local protection errors) that the owner turns into
// the QP error state and Flush. On top of that, without changing the wire,
// it recovers losses in round trips (recovery.go: an RTT estimate, a
// recovery timer with a tail-loss probe, an adaptive window; readahead.go
// and readparts.go: READ gaps re-read without going back N), and with
// Config.SelectiveRepeat, negotiated with a gorxe peer, it resends only
// what the peer's hole reports name and never goes back N after a timeout
// (selective.go, srresend.go, srrecheck.go, srwatch.go); see
// docs/recovery.md, docs/sr-requester.md.
//
// There is no I/O, no goroutine and no real timer here: every call takes
// the current time, Deadline says when the caller's single timer should
// fire, and OnTimeout is called when it does. A Requester is not safe for
// concurrent use. Its owner (package rxe: the QP's step, qpstep.go) calls
// it for one QP at a time, under that QP's lock, as kernel rxe runs one
// requester and one completer task per QP: Post from the verbs call,
// Receive for each response, OnTimeout once Deadline has passed,
// NextPacket while Pending, and after each call it checks Failed (then
// moves the QP to ERR and calls Flush), Drained and Deadline. Modify QP
// changes reach it through the setters (SetTimeout, SetRetryCnt, SetRNRRetry,
// SetMaxRdAtomic, SetPath, SetDraining). Nothing allocates but the growth
// of the send queue ring.
//
// The completer's states mirror rxe_comp.c (GET_ACK, GET_WQE, CHECK_PSN,
// CHECK_ACK, READ, ATOMIC, WRITE_SEND, UPDATE_COMP, COMP_ACK, COMP_WQE,
// ERROR_RETRY, RNR_RETRY, ERROR, EXIT, DONE): see CompState and Trace.
//
// Where this package departs from kernel rxe, on purpose:
//
//   - retry_cnt = 7 means seven retries (IBA 9.7.6.1.3, package retry);
//     rxe treats it as infinite. rnr_retry = 7 is infinite in both.
//   - An RNR NAK implicitly acknowledges the PSNs before it, as a PSN
//     sequence error NAK does (the responder executes in order; rdmavt
//     treats it so), so the retry after the RNR wait starts at the RNR
//     NAK's PSN; rxe restarts from its oldest unacknowledged PSN and lets
//     the responder re-ACK the duplicates.
//   - A PSN sequence error NAK that moves the oldest unacknowledged PSN is
//     forward progress: it refills retry_cnt before spending one retry, so
//     steady loss on a long message cannot exhaust the budget while data
//     still gets through (rxe does not refill, relying on 7 = infinite).
//   - A cumulative ACK completes a SEND/WRITE WQE whose PSNs have all been
//     sent at least once even while a go-back-N retry is rewinding over it,
//     and the send cursor then skips ahead; rxe drops such ACKs until the
//     WQE has been re-sent.
//   - A plain ACK whose PSN falls inside an outstanding READ/atomic is
//     ignored (rxe can complete a one-packet READ on it).
//   - An ACK or NAK naming a PSN never sent is dropped (rxe takes it as
//     progress of the oldest WQE).
//   - The PSN window allows at most Window unacknowledged PSNs (rxe lets
//     one more through), and AckReq is set on every AckReqEvery-th packet
//     (rxe's counter sets it on every 66th), on the packet that fills the
//     window and at least every eighth of the window (forceAckReq).
//   - A sequence error or timeout during an RNR wait does not start a second
//     retry; PSN sequence error NAKs are counted whether or not they move
//     the oldest unacknowledged PSN.
//   - FENCE waits only for earlier READ/atomic WQEs (the IBA fence
//     indicator); rxe waits for every earlier WQE.
//   - Malformed or unexpected responses (wrong length, a MIDDLE without
//     FIRST, an atomic ACK for a non-atomic WQE) fail the WQE with
//     BAD_RESP_ERR; rxe fails the QP with whatever status the WQE had.
package requester
