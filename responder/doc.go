// Package responder is gorxe's RC receive side: the responder half of an RC
// queue pair, as the Linux kernel's rxe driver implements it in rxe_resp.c
// (IBA chapter 9.7, "reliable service").
//
// It is sans-IO. The device hands it one request packet at a time through
// Receive (already ICRC-checked and addressed to this QP), and pulls the
// packets it wants to send — ACKs, NAKs, RDMA READ responses and ATOMIC
// ACKs, ICRC included — through NextPacket. Memory, the receive queue and
// the completion queue are reached through the small interfaces of Env. It
// has no goroutines, no timers and does no I/O; the current time is passed
// in (the responder does not read it; it is there for pacing).
//
// Receive runs a state machine whose states carry rxe's RESPST_* names
// (GET_REQ, CHK_PSN, CHK_OP_SEQ, CHK_OP_VALID, CHK_RESOURCE, CHK_LENGTH,
// CHK_RKEY, EXECUTE, READ_REPLY, ATOMIC_REPLY, COMPLETE, ACKNOWLEDGE,
// CLEANUP, DUPLICATE_REQUEST, the ERR_* states, ERROR, DONE), one method
// per state, so that a trace reads like the kernel's pr_debug output.
//
// Two things differ in shape from rxe, not on the wire:
//
//   - rxe sends a READ's whole response train before it looks at the next
//     request. Here the read is accepted at once (the expected PSN moves past
//     the read's PSNs and the train is queued), and later requests are
//     processed while the device is still pulling the train; responses leave
//     in PSN order because the output queue is ordered. The receive
//     completions of those later requests wait in the output queue behind
//     the train and are posted once it has gone; if the READ faults first
//     their receive WQEs are flushed, as in rxe, which never ran them. A
//     duplicate READ's stream that faults completes only those received
//     after the duplicate that way, since rxe ran the ones before it
//     (readFault). Their data is placed, and an atomic among them
//     executes, on arrival (hold, in execute.go, says why and what a
//     consumer can see of it).
//   - Consecutive plain ACKs waiting in the output queue collapse into the
//     newest one (ACKs are cumulative, IBA 9.7.5.1.1).
//
// Memory placement: SEND payload goes into the receive WQE's SGEs
// (Memory.Local), RDMA WRITE payload into Memory.Remote; RDMA READ responses
// are copied from Memory.Remote straight into the caller's packet buffer.
// Atomics operate with sync/atomic on the 64-bit word in native byte order.
//
// Steady-state Receive and NextPacket do not allocate: the responder
// resources are allocated by New (and again by SetMaxDestRdAtomic), and the output queue (internal/ring),
// the receive WQE's SGE copy and the slots of the out-of-order buffer grow
// only when they must hold more than ever before. Every response is built in place by emit with packet.Begin and
// Frame.Seal, the builder the requester uses too.
//
// Selective repeat (Config.SelectiveRepeat, negotiated between two gorxe
// ends; docs/sr-responder.md): a request after the expected PSN is copied
// into a bounded per-QP out-of-order buffer instead of drawing a PSN
// Sequence Error NAK, and runs through the same state machine once the
// hole before it is filled; holes are reported with the reserved NAK code
// packet.NAKSelectiveRepeat; a duplicate READ is served as an extra stream
// of just its range. Without it the wire is go-back-N as above, byte for
// byte.
//
// A Responder is not safe for concurrent use. Its owner (package rxe: the
// QP's step, qpstep.go) calls it for one QP at a time, under that QP's
// lock, as kernel rxe runs one responder task per QP: Receive for each
// request, NextPacket while Pending, CreditUpdate after receive WQEs are
// posted, and after each call it checks Failed (then, once the error NAK
// is out, moves the QP to ERR and calls Flush). Modify QP changes reach it
// through the setters (SetMinRNRTimer, SetAccess, SetMaxDestRdAtomic, SetPath).
package responder
