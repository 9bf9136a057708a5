// Package retry is gorxe's time policy for the RC transport: how long to wait,
// how often to try again, and when to give up. It knows nothing about
// packets, sockets or goroutines; every function takes the current time (or a
// duration) as an argument, so the sans-IO requester and responder, and their
// tests, drive time by hand.
//
// What it holds:
//
//   - AckTimeout: the local ACK timeout of the QP attribute "timeout",
//     4.096 µs × 2^t with t = 0 meaning "never" (IBTA 9.7.6.1.3; rxe_qp.c,
//     qp->qp_timeout_jiffies).
//   - RNRDelay and RNRCode: the RNR NAK timer encoding, 5-bit code to minimum
//     wait and back (IBTA 9.7.5.2.8, table 45; rxe_comp.c, rnrnak_usec).
//   - RetryBudget and RNRBudget: the 3-bit retry_cnt and rnr_retry counters
//     and when each is exhausted (rxe_comp.c, COMPST_ERROR_RETRY and
//     COMPST_RNR_RETRY).
//   - Backoff: an adaptive delay estimator for re-sending a packet that the
//     local network stack refused (a full socket buffer), after the
//     read_retry_delay() idea of the 2023 rxe patch "RDMA-rxe: Allow retry
//     sends for rdma read responses", made timer-driven.
//   - RTT, RecoveryTimer and Window: loss recovery in round trips. RTT is an
//     RFC 6298 estimator (SRTT, RTTVAR, Karn's rule); RecoveryTimer turns
//     it into a probe/recovery timeout with a floor, never above the IB
//     local ACK timeout, which with retry_cnt stays the failure budget;
//     Window is the adaptive go-back-N window (halved after a loss at most
//     once per round trip, grown on clean round trips, bounded by the QP's
//     window). See docs/recovery.md.
//   - Deadline and Earliest: a tiny armed/stopped deadline value and a
//     minimum over deadlines, so a QP task can keep one real timer set to the
//     earliest of all its deadlines.
//
// The package is a leaf: it imports only the standard library. Nothing here
// allocates after construction, and nothing is safe for concurrent use by
// itself; each value belongs to one QP and is used only from that QP's
// step, which the device runs for one QP at a time (rxe's per-QP tasks).
package retry
